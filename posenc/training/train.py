"""Training and evaluation of a whole seed x learning-rate population at once.

`train_and_evaluate(run, workdir)` is the one loop over a run built once by `posenc.setup`,
read top to bottom in named steps: `restore` (the newest checkpoint, or scratch),
`compile_programs` (the plan of its programs, every one compiled at once), `train`, the
protocol's evaluation (`run.protocol.evaluate`), `record` (results.json);
`launch/train.py` is its absl entry point:

  python -m launch.train --config=experiments/rpe_table1.py:task=reverse_string,tiny \
      --workdir=/tmp/run

The population (`population.py`: members, keys, devices; `state.py`: its state and optimizer)
is trained by the compiled update of its step's width (`update.py`), handed the steps by
`Dispatch`; checkpoints are `checkpoint.py`'s, `Preempted` and `LeaseLost` (what stops a run
early) `posenc.storage.lease`'s.

Resume precedence: 1. the latest checkpoint in `workdir/checkpoints`, 2. scratch. A run
killed at any moment and restarted with the same command ends bit for bit where the
uninterrupted run ends: the state (parameters, optimizer, divergence flags and the
metric sums of the current log interval) is checkpointed, and every random draw is a
function of the step. Checkpoints hold the real members only, so a run may resume on
another number of devices (results.json records the device history; parameters then
agree with an unmoved run to float rounding). `should_stop` (SIGTERM in the launchers)
makes the run checkpoint at the next step boundary and raise `Preempted`.

The work directory:
  lock            held while a process runs here: a second process is refused
  config.json     the resolved config (a rerun with a different config is refused)
  plan.json       the programs it compiles (`posenc.programs`), kept when it resumes
  metrics.jsonl   one line per logged step: step, per-member loss / accuracy, steps/s
  checkpoints/    orbax, periodic and final
  eval.jsonl      per-length accuracies as they are measured (resumable evaluation)
  results.json    the summary, written atomically at the end
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import os
import time
from typing import Any, Callable

from absl import logging
import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp

from posenc.training import checkpoint
from posenc import config as config_lib
from posenc.training import protocol as protocol_lib
from posenc.storage import io
from posenc.storage import lease
from posenc import programs
from posenc.programs import compiling
from posenc import results as results_lib
from posenc.training import run as run_lib
from posenc.training import state as state_lib
from posenc.training import log as log_lib
from posenc.training import update

# ---------------------------------------------------------------------------------------
# The work directory.


def prepare_workdir(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Creates `workdir` with config.json, or checks a rerun asks for the same run
  (`config.config_changes`: equal but for the resumable fields)."""
  path = os.path.join(workdir, 'config.json')
  new = config_lib.as_json(config)
  if io.exists(path):
    changes = config_lib.config_changes(io.read_json(path), new)
    if changes:
      raise config_lib.ConfigError(
        f'workdir {workdir} holds a run with a different config '
        f'({config_lib.describe_changes(changes)}); use a new --workdir or the same config'
      )
  io.makedirs(workdir)
  io.write_json_atomic(path, new)


def versions() -> dict[str, Any]:
  device = jax.local_devices()[0]
  return {
    'jax': jax.__version__,
    'flax': flax.__version__,
    'optax': optax.__version__,
    'orbax_checkpoint': getattr(ocp, '__version__', 'unknown'),
    'device_kind': device.device_kind,
    'platform': device.platform,
    'local_device_count': jax.local_device_count(),
  }


def _next_multiple(step: int, every: int) -> int:
  """The first multiple of `every` after `step`. Example: _next_multiple(10, 5) == 15."""
  return (step // every + 1) * every


# ---------------------------------------------------------------------------------------
# The loop: restore, train, evaluate, record.


def train_and_evaluate(
  run: run_lib.Run,
  workdir: str,
  progress: Callable[[str], None] = logging.info,
  should_stop: Callable[[], bool] = lambda: False,
  checkpointed: Callable[[int], None] = lambda step: None,
  lock: Callable[[str], Any] = lease.lock,
) -> dict[str, Any]:
  """Trains the run's population in `workdir` (resuming it) and evaluates it.

  Args:
    run: the run (`posenc.setup.build(config, devices)`).
    workdir: the run's directory; created if needed, resumed if it holds a run.
    progress: receives the human-readable progress lines.
    should_stop: polled at every step boundary and between evaluation cells; when it
      returns True the run writes a checkpoint (training) or keeps its measured cells
      (evaluation) and raises `Preempted`.
    checkpointed: called with the step of every checkpoint once it is written.
    lock: (workdir) -> the context manager that keeps `workdir` to this process
      (`lease.lock`: how long to wait for a holder, the lease's length). A lease lost while
      training (`lease.LeaseLost`) stops the run at the next step boundary or write.

  Returns:
    The contents of results.json (of a complete run, the file as it was written: rerunning
    it trains and writes nothing).

  Raises:
    ConfigError: `workdir` holds a run of another config.
    lease.DirectoryBusy: another live process is running in `workdir`; lease.LeaseLost, one
      kind of it, when this process lost its lease.
    Preempted: `should_stop` asked the run to stop.
  """
  io.makedirs(workdir)
  with contextlib.ExitStack() as stack:
    held = stack.enter_context(lock(workdir))
    should_stop = _unless_lost(held, should_stop)
    compiles = stack.enter_context(compiling.CompileStats())
    prepare_workdir(run.config, workdir)
    path = os.path.join(workdir, 'results.json')
    if io.exists(path):  # written last: the run is complete, its record (and timing) kept
      progress(f'{workdir} is complete: its results.json is kept as it was written')
      return io.read_json(path)
    manager = stack.enter_context(contextlib.closing(checkpoint.checkpoint_manager(workdir)))
    restored = restore(run, workdir, manager, progress)
    board = None
    if run.config.get('tensorboard', False):
      board = log_lib.Writer(workdir, run.population.members, restored.step)
      stack.enter_context(contextlib.closing(board))
    compiled = compile_programs(run, workdir, restored, progress)
    trained = train(
      run, workdir, restored, manager, board, progress, should_stop, checkpointed, compiled
    )
    ctx = protocol_lib.EvalContext(workdir, progress, should_stop, compiled.traces, compiled.eval)
    evaluation = run.protocol.evaluate(run, trained.state, ctx)
    if board:
      family = run.family.name
      board.evaluation(
        evaluation.metric_of(family), [evaluation.curve(m, family) for m in evaluation.members]
      )
    plans = {'train': compiled.dispatch.plan.to_json()}
    if compiled.eval is not None:
      plans['eval'] = compiled.eval.plan.to_json()
    results = record(run, restored, trained, evaluation, {**compiles.summary(), 'plans': plans})
    io.write_json_atomic(path, results)
    return results


def _unless_lost(held: Any, should_stop: Callable[[], bool]) -> Callable[[], bool]:
  """`should_stop`, polled at every step boundary, that first raises lease.LeaseLost once the
  lock `held` is no longer this process's: a fenced run stops there, not at its next write."""

  def stop() -> bool:
    held.check()
    return should_stop()

  return stop


# ---------------------------------------------------------------------------------------
# The programs: planned, recorded and compiled before the loop.

PLAN_FILE = 'plan.json'


def _update_args(run: run_lib.Run) -> tuple[Any, ...]:
  """The arguments an update is lowered for: (state, length, learning rates, keys)."""
  population = run.population
  length = jax.ShapeDtypeStruct((), jnp.int32)
  return run.abstract_state, length, population.learning_rates, population.train_keys


def training_stage(run: run_lib.Run, traces: collections.Counter | None) -> programs.Stage:
  """Training's programs by width, for the plan (`train.programs`): the curriculum draws
  lengths U{1..N}, so a data width gets the share of the steps whose length falls in it."""
  settings, training, population = run.train_settings, run.training, run.population
  n, k = settings.max_length, settings.steps_per_dispatch
  data = tuple(training.buckets(run))
  at = [programs.data_of(data, length) for length in range(1, n + 1)]
  args = _update_args(run)

  def make(width: int, served: tuple[int, ...], count: bool = True) -> compiling.Program:
    fn = update.make_update_fn(run, width, traces if count else None, served)
    return compiling.Program(f'train {width}', fn, args)

  return programs.Stage(
    name='train',
    # One program cannot serve several widths where the training cannot pad a batch wider.
    choice=settings.programs if training.widen is not None else 'buckets',
    data=data,
    calls=tuple(settings.steps * at.count(d) / n for d in data),
    work=lambda w: run.model_settings.flops(training.tokens(run, training.shape(run, w)), depth=1),
    make=make,
    repeats=population.padded_size // population.num_devices
    if settings.population_loop == 'map'
    else 1,
    # K steps per call are one program: its widths are branches, compiled together.
    threads=1 if k > 1 else settings.compile_threads,
    steps_per_call=k,
  )


def training_programs(
  run: run_lib.Run, stage: programs.Stage, plan: programs.Plan, traces: collections.Counter
) -> list[compiling.Program]:
  """Training's programs of `plan`: one per program width ('train W'), or the one K-step
  program ('train K-step') with `train.steps_per_dispatch` K > 1."""
  k = run.train_settings.steps_per_dispatch
  if k > 1:
    multi = update.make_multi_step_fn(run, traces, plan)
    return [compiling.Program(f'train {k}-step', multi, _update_args(run))]
  return [stage.make(w, plan.serves(w)) for w in plan.widths]


def compile_stages(
  run: run_lib.Run,
  todo: list[compiling.Program],
  lowered: dict[str, Any],
  traces: collections.Counter,
  progress: Callable[[str], None],
) -> dict[str, dict[int, Any]]:
  """`todo` compiled at once in the run's compile threads (`compiling.compile_all`), a plan's
  lowering reused where its program is among them (traced uncounted by the plan: counted
  here), as {stage: {program width: program}} ('train 40', 'eval 64'; the K-step program is
  width 0)."""
  names = {p.name for p in todo}
  lowered = {name: low for name, low in lowered.items() if name in names}
  for name in lowered:
    traces[name.split()[0]] += 1
  fns = compiling.compile_all(todo, progress, run.train_settings.compile_threads, lowered)
  out: dict[str, dict[int, Any]] = {'train': {}, 'eval': {}}
  for name, fn in fns.items():
    stage, width = name.split()
    out[stage][int(width) if width.isdigit() else 0] = fn
  return out


class Dispatch:
  """How steps reach a run's compiled training programs ({program width: program} of
  `plan`, or {0: the program of K steps}): the one step dispatch of the loop, the cost
  model's measurement and the speed tools.

  With K = 1 each call is one step, the program of its length's width, the lengths read from
  the curriculum (drawn on the device a log interval at a time: `update.curriculum_lengths`);
  with K > 1 (`train.steps_per_dispatch`) a call runs up to K steps on the device.

  Example:
    >>> dispatch = Dispatch(run, plan, fns)                 # doctest: +SKIP
    >>> state, step = dispatch(state, 0, stop=100)   # one call: to step 1, or up to K  # doctest: +SKIP
  """

  def __init__(self, run: run_lib.Run, plan: programs.Plan, fns: dict[int, Any]):
    self.run, self.plan, self.fns = run, plan, fns
    self.k = run.train_settings.steps_per_dispatch
    self.used: set[int] = set()
    self._members = (run.population.learning_rates, run.population.train_keys)
    self._lengths = (0, np.zeros(0, np.int32))  # (a step, the curriculum's lengths from it)

  def length(self, step: int) -> int:
    """The curriculum's length of `step`."""
    start, lengths = self._lengths
    if not start <= step < start + len(lengths):
      settings = self.run.train_settings
      count = max(settings.log_every, 1)
      lengths = np.asarray(
        update.curriculum_lengths(
          self.run.curriculum_key, jnp.int32(step), count, settings.max_length
        )
      )
      start, self._lengths = step, (step, lengths)
    return int(lengths[step - start])

  def __call__(self, state: Any, step: int, stop: int) -> tuple[Any, int]:
    """One call from `step`: the state after it, and the step it reached (at most `stop`)."""
    if self.k > 1:
      done = min(step + self.k, stop)
      return self.fns[0](state, jnp.int32(done - step), *self._members), done
    length = self.length(step)
    width = self.plan.program_for(length)
    self.used.add(width)
    return self.fns[width](state, jnp.int32(length), *self._members)[0], step + 1

  def warm_up(self, state: Any, step: int) -> tuple[Any, int]:
    """One call of every program (each width at its own length, or K steps), as a
    measurement starts: the state after them and the step reached."""
    if self.k > 1:
      return self(state, step, step + self.k)
    for width, fn in self.fns.items():
      state = fn(state, jnp.int32(width), *self._members)[0]
    return state, step + len(self.fns)

  @property
  def widths(self) -> list[int]:
    """The program widths training called (with K > 1 every width lives in one program)."""
    return sorted(self.used) if self.k == 1 else list(self.plan.widths)


@dataclasses.dataclass(frozen=True)
class Compiled:
  """A run's programs, compiled before the loop.

  Attributes:
    dispatch: training's programs (none when training is done) and its plan.
    eval: the evaluation's programs, or None where its kind compiles as it goes.
    traces: programs traced so far ('train', 'eval').
    t_start: when planning began (the run's timings count from there).
  """

  dispatch: Dispatch
  eval: compiling.Compiled | None
  traces: collections.Counter
  t_start: float


def plans(
  run: run_lib.Run,
  workdir: str,
  restored: Restored,
  stages: dict[str, programs.Stage],
) -> tuple[dict[str, programs.Plan], dict[str, Any]]:
  """The run's plans: those it recorded (`plan.json`), else chosen now and recorded, so a
  resumed run compiles the programs it started with. A run recorded without a plan (it
  trained or evaluated before plans were recorded) compiled one program per bucket.

  Returns the plans by stage and the lowerings made while choosing them, by program name.
  """
  path = os.path.join(workdir, PLAN_FILE)
  if io.exists(path):
    try:
      recorded = io.read_json(path)
      return {name: programs.Plan.from_json(recorded[name]) for name in stages}, {}
    except (ValueError, KeyError, TypeError) as e:
      raise config_lib.ConfigError(
        f'{path} is not the plan of this run ({type(e).__name__}: {e}); it holds the programs '
        'the run compiled: restore it, or remove it to resume with one program per bucket'
      ) from None
  chosen, lowered = {}, {}
  for name, stage in stages.items():
    if restored.step > 0:  # a checkpoint, and no plan: recorded before plans were
      chosen[name] = programs.Plan(name, 'buckets', stage.data, stage.data)
      continue
    chosen[name], reused = programs.plan(stage, run.platform)
    lowered.update(reused)
  io.write_json_atomic(path, {name: plan.to_json() for name, plan in chosen.items()})
  return chosen, lowered


def compile_programs(
  run: run_lib.Run, workdir: str, restored: Restored, progress: Callable[[str], None]
) -> Compiled:
  """Plans the run's programs (`plans`), says so, and compiles every one still needed
  (training's unless it is done, the evaluation's for the lengths not yet measured) at
  once, before the loop (`compile_stages`)."""
  t_start, traces = time.time(), collections.Counter()
  stages = {'train': training_stage(run, traces)}
  if run.protocol.programs is not None:
    stages['eval'] = run.protocol.programs(run, traces, workdir)
  chosen, lowered = plans(run, workdir, restored, stages)
  for plan in chosen.values():
    progress(plan.describe())
  todo: list[compiling.Program] = []
  if restored.step < run.train_settings.steps:
    todo += training_programs(run, stages['train'], chosen['train'], traces)
  eval_plan = chosen.get('eval')
  if eval_plan is not None:
    stage = stages['eval']
    needed = stage.data if stage.needed is None else stage.needed
    todo += [stage.make(w, eval_plan.serves(w)) for w in eval_plan.widths_for(needed)]
  fns = compile_stages(run, todo, lowered, traces, progress)
  return Compiled(
    Dispatch(run, chosen['train'], fns['train']),
    compiling.Compiled(eval_plan, fns['eval']) if eval_plan is not None else None,
    traces,
    t_start,
  )


@dataclasses.dataclass(frozen=True)
class Restored:
  """Where training starts: the population `state` at `step` and the devices `history`
  (one entry per move to another number of devices)."""

  state: Any
  step: int
  history: list[dict[str, Any]]


def restore(
  run: run_lib.Run, workdir: str, manager: Any, progress: Callable[[str], None]
) -> Restored:
  """1. The newest checkpoint that restores (damaged ones are set aside), else 2. scratch."""
  population = run.population
  here = {'devices': population.num_devices, 'platform': population.platform}
  latest, state, history, damaged = checkpoint.restore_newest(
    manager,
    run.abstract_state,
    population,
    functools.partial(checkpoint.set_aside_damaged, workdir),
  )
  if damaged:
    manager.reload()
    damaged = 'damaged: ' + '; '.join(damaged) + ', and '
  if latest is None:
    if damaged:
      progress(damaged + 'no other checkpoint: started from scratch')
    return Restored(state_lib.init_state(run), 0, [{'from_step': 0, **here}])
  moved = {k: history[-1][k] for k in here} != here
  if moved:
    history.append({'from_step': latest, **here})
  progress(
    (damaged or '')
    + f'resumed from the checkpoint at step {latest}'
    + (
      f' on {here["devices"]} {here["platform"]} devices (was {history[-2]["devices"]} '
      f'{history[-2]["platform"]}): parameters now agree with an unmoved run to float '
      'rounding, not bit for bit'
      if moved
      else ''
    )
  )
  return Restored(state, int(state.step), history)


@dataclasses.dataclass(frozen=True)
class Trained:
  """The end of training: the population `state`, the programs traced (`traces`: a Counter,
  'train' and later 'eval'), the buckets compiled, and the timings."""

  state: Any
  traces: collections.Counter
  buckets: list[int]
  first_update_s: float | None
  train_s: float


def train(
  run: run_lib.Run,
  workdir: str,
  restored: Restored,
  manager: Any,
  board: log_lib.Writer | None,
  progress: Callable[[str], None],
  should_stop: Callable[[], bool],
  checkpointed: Callable[[int], None],
  compiled: Compiled,
) -> Trained:
  """2. Trains from `restored` to `train.steps` with the programs compiled before the loop,
  dispatched a step or K steps per call (`Dispatch`); metrics logged every `train.log_every`
  steps, a checkpoint every `checkpoint_every`."""
  settings, population, dispatch = run.train_settings, run.population, compiled.dispatch
  state, step, steps = restored.state, restored.step, settings.steps
  log = log_lib.TrainLog(run, workdir, restored, board, progress)
  first_update_s = None
  while step < steps:
    if should_stop():
      if step > restored.step:  # The checkpoint at the start already exists.
        checkpoint.save_state(manager, step, state, population, restored.history)
        manager.wait_until_finished()
      raise lease.Preempted(step, f'preempted at step {step} of training: checkpoint written')
    # K steps in one call stop at the next log or checkpoint boundary.
    boundary = min(
      _next_multiple(step, settings.log_every),
      _next_multiple(step, settings.checkpoint_every),
      steps,
    )
    state, done = dispatch(state, step, boundary)
    if first_update_s is None:
      jax.block_until_ready(state.step)
      first_update_s = time.time() - compiled.t_start
      log.steady_from(done)  # the ETA counts steady-state steps only
    if done % settings.log_every == 0 or done == steps:
      state = log(state, done)
    if done % settings.checkpoint_every == 0 or done == steps:
      if board:  # Its curves up to the checkpoint survive a crash after it.
        board.flush()
      checkpoint.save_state(manager, done, state, population, restored.history)
      checkpointed(done)
    step = done
  manager.wait_until_finished()
  elapsed = time.time() - compiled.t_start
  return Trained(state, compiled.traces, dispatch.widths, first_update_s, elapsed)


def record(
  run: run_lib.Run,
  restored: Restored,
  trained: Trained,
  evaluation: Any,
  compiles: dict[str, Any],
) -> dict[str, Any]:
  """4. results.json's contents: the header, the protocol's evaluation record, the compiled
  programs (their count, plans and compile seconds), timing and the devices' history."""
  config, history = run.config, restored.history
  state = trained.state
  # Per member: the leading axis of every leaf is the population.
  num_params = int(sum(np.prod(x.shape[1:]) for x in jax.tree.leaves(state.params)))
  compiled = {
    'train': trained.traces['train'],
    'train_buckets': trained.buckets,
    'eval': trained.traces['eval'],
    **compiles,
  }
  return results_lib.Results(
    task=config.task,
    encoding=run.parsed.name,
    family=run.family.name,
    encoding_options=run.parsed.options,
    num_params=num_params,
    architecture=run.model_settings.architecture,
    train_steps=run.train_settings.steps,
    train_length=run.train_settings.max_length,
    evaluation=evaluation,
    versions=versions(),
    compiled_programs=compiled,
    timing={
      'first_update_s': trained.first_update_s,
      'train_s': trained.train_s,
      'resumed_from_step': restored.step,
    },
    devices={'history': history, 'count_changed': len({h['devices'] for h in history}) > 1},
    config=config_lib.as_json(config),
  ).to_json()
