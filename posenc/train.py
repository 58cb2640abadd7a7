"""Training and evaluation of a whole seed x learning-rate population at once.

`train_and_evaluate(run, workdir)` is the one loop over a run built once by `posenc.setup`,
read top to bottom in named steps: `restore` (the newest checkpoint, or scratch), `train`,
the protocol's evaluation (`run.protocol.evaluate`), `record` (results.json);
`launch/train.py` is its absl entry point:

  python -m launch.train --config=experiments/rpe_table1.py:task=reverse_string,tiny \
      --workdir=/tmp/run

The population (members, keys, devices, state, optimizer: `posenc.population`) is trained
by one compiled update; checkpoints and `Preempted` are `posenc.checkpoint`'s.

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

from posenc import checkpoint
from posenc import compile_stats
from posenc import config as config_lib
from posenc import evaluate
from posenc import io
from posenc import population as population_lib
from posenc import results as results_lib
from posenc import setup
from posenc import tensorboard
from posenc import train_log

P = population_lib.P
POP = population_lib.POP


# ---------------------------------------------------------------------------------------
# The curriculum.


@functools.partial(jax.jit, static_argnames=('count', 'max_length'))
def curriculum_lengths(key: jax.Array, start: jax.Array, count: int, max_length: int) -> jax.Array:
  """Lengths ~ U{1..max_length} of steps start..start+count-1, drawn on the device.

  The host reads them only to pick the compiled program of each step's length bucket.
  """
  steps = start + jnp.arange(count)
  return jax.vmap(lambda s: jax.random.randint(jax.random.fold_in(key, s), (), 1, max_length + 1))(
    steps
  )


# ---------------------------------------------------------------------------------------
# The update step.


def _member_gradients(run: setup.Run, objective: Any) -> Callable[..., Any]:
  """One member's loss and gradients on one batch.

  member_gradients(params, key, batch, step) -> (grads, loss, accuracy): the step's keys
  are folded from the member's key and the step; with `train.progressive_alpha` > 0 the
  loss of a looped model is (partly) the progressive loss of McLeish et al.
  """
  config = run.config
  r, alpha = config.model.recurrences, config.train.progressive_alpha

  def member_gradients(params, key, batch, step):
    member_step = jax.random.fold_in(key, step)
    dropout, noise = jax.random.split(member_step)
    rngs = {'dropout': dropout, 'noise': noise}

    def loss_fn(p):
      if alpha == 0:
        return objective.loss(p, batch, rngs)
      # The progressive loss: n recurrences without gradient, then k with.
      k_n, k_k = jax.random.split(jax.random.fold_in(member_step, population_lib.PROGRESSIVE))
      n = jax.random.randint(k_n, (), 0, r)
      k = jax.random.randint(k_k, (), 1, jnp.maximum(1, jnp.minimum(r - n, r // 2)) + 1)
      loss, accuracy = objective.loss(p, batch, rngs, window=(n, n + k))
      if alpha < 1:
        full, accuracy = objective.loss(p, batch, rngs)
        loss = (1 - alpha) * full + alpha * loss
      return loss, accuracy

    (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    if config.train.scale_block_gradients and 'block' in grads:
      grads = {**grads, 'block': jax.tree.map(lambda g: g / r, grads['block'])}
    return grads, loss, accuracy

  return member_gradients


def _member_apply(run: setup.Run) -> Callable[..., Any]:
  """One member's optimizer step.

  member_apply(params, opt, diverged, learning_rate, grads, loss, step) -> (params, opt,
  diverged): clipping, Adam(W) and the member's scheduled learning rate; a member whose
  loss is not finite is frozen and marked.
  """
  config = run.config
  tx = population_lib.optimizer(config)

  def member_apply(params, opt, diverged, learning_rate, grads, loss, step):
    updates, new_opt = tx.update(grads, opt, params)
    rate = learning_rate * population_lib.learning_rate_scale(config, step)
    new_params = jax.tree.map(lambda p, u: (p - rate * u).astype(p.dtype), params, updates)
    # A member whose loss is not finite is frozen and marked; the others go on.
    diverged = diverged | ~jnp.isfinite(loss)
    keep = lambda new, old: jnp.where(diverged, old, new)
    return jax.tree.map(keep, new_params, params), jax.tree.map(keep, new_opt, opt), diverged

  return member_apply


def _local_update(run: setup.Run, bucket: int, loop: str) -> Callable[..., Any]:
  """One step of a device's members on a batch padded to `bucket` input tokens.

  local_update(state, length, learning_rates [p], train_keys [p]) -> (state, {loss,
  accuracy} [p]), for the p members on this device; `length` is the step's real length
  (traced) and the batch is sampled from the step's key on the device. The run's batch key
  is one key, or one per data seed [D] (`data_seeds`): then the step draws D batches and
  each member trains on its data seed's.

  The members' gradients run in the population loop (`loop`: 'map', one member after
  another, or 'vmap'). Their optimizer steps run in the same loop, or with
  `train.optimizer_loop` 'batched' (and always under 'vmap') batched over the members after
  it: the optimizer is small elementwise work on every parameter leaf (with the loop's
  slicing and stacking of the state, more operations than a member's forward and backward
  pass at cpu-v1's scale, though a tenth of the time: docs/speed.md); batched, they are
  dispatched once per step instead of once per member. Batched and per member agree to
  float rounding, not bit for bit: XLA rewrites the division by Adam's bias corrections (a
  scalar per member, a [p] vector batched) differently.
  """
  training, data_index = run.training, run.population.data_index
  shape = training.shape(run, bucket)
  member_gradients = _member_gradients(run, training.objective(run, shape))
  member_apply = _member_apply(run)
  batched_optimizer = loop == 'vmap' or run.config.train.get('optimizer_loop') == 'batched'
  keys_per_seed = run.batch_key.reshape(-1)
  draw = lambda key, step, length: training.batch(
    run, jax.random.fold_in(key, step), step, length, shape
  )

  def local_update(state, length, learning_rates, keys):
    step = state['step']
    members = (state['params'], keys)
    if len(keys_per_seed) == 1:
      batch = draw(keys_per_seed[0], step, length)
      gradients = lambda m: member_gradients(*m, batch, step)
    else:
      batches = jax.vmap(draw, in_axes=(0, None, None))(keys_per_seed, step, length)
      # This device's members are rows axis_index * p ... of the population.
      p = learning_rates.shape[0]
      rows = jax.lax.axis_index(POP) * p + jnp.arange(p)
      members += (jnp.asarray(data_index)[rows],)
      gradients = lambda m: member_gradients(
        *m[:-1], jax.tree.map(lambda x: x[m[-1]], batches), step
      )
    optimizer = (state['opt'], state['diverged'], learning_rates)
    if batched_optimizer:
      grads, loss, accuracy = (
        jax.lax.map(gradients, members) if loop == 'map' else jax.vmap(gradients)(members)
      )
      params, opt, diverged = jax.vmap(member_apply, in_axes=(0, 0, 0, 0, 0, 0, None))(
        state['params'], *optimizer, grads, loss, step
      )
    else:

      def member_step(m):
        member, (opt, diverged, learning_rate) = m
        grads, loss, accuracy = gradients(member)
        params = member[0]
        return (
          *member_apply(params, opt, diverged, learning_rate, grads, loss, step),
          loss,
          accuracy,
        )

      params, opt, diverged, loss, accuracy = jax.lax.map(member_step, (members, optimizer))
    sums = {'loss': state['sums']['loss'] + loss, 'accuracy': state['sums']['accuracy'] + accuracy}
    new_state = {
      'params': params,
      'opt': opt,
      'diverged': diverged,
      'sums': sums,
      'count': state['count'] + 1,
      'step': state['step'] + 1,
    }
    return new_state, {'loss': loss, 'accuracy': accuracy}

  return local_update


def bucket_of(run: setup.Run, length: int) -> int:
  """The training bucket of a step of curriculum length `length`."""
  buckets = run.training.buckets(run)
  if len(buckets) == 1:
    return buckets[0]
  return config_lib.bucket_of(length, run.config.train.max_length, run.config.train.bucket_size)


def make_update_fn(
  run: setup.Run, bucket: int, traces: collections.Counter | None = None
) -> Callable[..., Any]:
  """The jitted update for batches padded to `bucket` input tokens.

  update(state, length, learning_rates [P], train_keys [P]) -> (state, {loss, accuracy} [P])
  `length` is the step's real length (traced); the batch is sampled inside the program
  from the step's key, so no data crosses from the host. `traces['train']` counts how
  often it is traced (= compiled).
  """
  local = _local_update(run, bucket, population_lib.population_loop(run.config, run.platform))

  def local_update(*args):
    if traces is not None:
      traces['train'] += 1
    return local(*args)

  state_specs = jax.tree.map(
    lambda s: P(POP) if s.ndim else P(),
    population_lib.init_state(run.config, run.model, run.population, abstract=True),
  )
  update = run.population.shard_map(
    local_update, in_specs=(state_specs, P(), P(POP), P(POP)), out_specs=(state_specs, P(POP))
  )
  return jax.jit(update, donate_argnums=0)


def make_multi_step_fn(
  run: setup.Run, traces: collections.Counter | None = None
) -> Callable[..., Any]:
  """The jitted update of up to K = `train.steps_per_dispatch` consecutive steps.

  update(state, num_steps, learning_rates [P], train_keys [P]) -> state after min(K,
  num_steps) steps (num_steps traced). A `lax.scan` over K steps draws each step's length
  on the device and runs the update of its length bucket (`lax.switch` over every bucket),
  so one program serves every chunk of steps and the host dispatches once per K steps.
  Step for step the same computation as `make_update_fn`'s programs.
  """
  config, curriculum_key = run.config, run.curriculum_key
  k, n, size = config.train.steps_per_dispatch, config.train.max_length, config.train.bucket_size
  loop = population_lib.population_loop(config, run.platform)
  buckets = run.training.buckets(run)
  branches = [_local_update(run, b, loop) for b in buckets]

  def local_multi(state, num_steps, learning_rates, keys):
    if traces is not None:
      traces['train'] += 1

    def one_step(state, i):
      length = jax.random.randint(jax.random.fold_in(curriculum_key, state['step']), (), 1, n + 1)
      index = jnp.minimum((length + size - 1) // size, len(buckets)) - 1
      step = lambda s: jax.lax.switch(
        index, [lambda s, b=b: b(s, length, learning_rates, keys)[0] for b in branches], s
      )
      return jax.lax.cond(i < num_steps, step, lambda s: s, state), None

    return jax.lax.scan(one_step, state, jnp.arange(k))[0]

  state_specs = jax.tree.map(
    lambda s: P(POP) if s.ndim else P(),
    population_lib.init_state(config, run.model, run.population, abstract=True),
  )
  update = run.population.shard_map(
    local_multi, in_specs=(state_specs, P(), P(POP), P(POP)), out_specs=state_specs
  )
  return jax.jit(update, donate_argnums=0)


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
  run: setup.Run,
  workdir: str,
  progress: Callable[[str], None] = logging.info,
  should_stop: Callable[[], bool] = lambda: False,
  checkpointed: Callable[[int], None] = lambda step: None,
  lock: Callable[[str], Any] = io.lock,
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
      (`io.lock`: how long to wait for a holder, the lease's length). A lease lost while
      training (`io.LeaseLost`) stops the run at the next step boundary or write.

  Returns:
    The contents of results.json.

  Raises:
    ConfigError: `workdir` holds a run of another config.
    io.DirectoryBusy: another live process is running in `workdir`; io.LeaseLost, one
      kind of it, when this process lost its lease.
    Preempted: `should_stop` asked the run to stop.
  """
  io.makedirs(workdir)
  with contextlib.ExitStack() as stack:
    held = stack.enter_context(lock(workdir))
    should_stop = _unless_lost(held, should_stop)
    compiles = stack.enter_context(compile_stats.CompileStats())
    prepare_workdir(run.config, workdir)
    manager = stack.enter_context(contextlib.closing(checkpoint.checkpoint_manager(workdir)))
    restored = restore(run, workdir, manager, progress)
    board = None
    if run.config.get('tensorboard', False):
      board = tensorboard.Writer(workdir, run.population.members, restored.step)
      stack.enter_context(contextlib.closing(board))
    trained = train(run, workdir, restored, manager, board, progress, should_stop, checkpointed)
    ctx = evaluate.EvalContext(workdir, progress, should_stop, trained.traces)
    evaluation = run.protocol.evaluate(run, trained.state, ctx)
    if board:
      family = run.family.name
      board.evaluation(
        evaluation.metric_of(family), [evaluation.curve(m, family) for m in evaluation.members]
      )
    results = record(run, restored, trained, evaluation, compiles.summary())
    io.write_json_atomic(os.path.join(workdir, 'results.json'), results)
    return results


def _unless_lost(held: Any, should_stop: Callable[[], bool]) -> Callable[[], bool]:
  """`should_stop`, polled at every step boundary, that first raises io.LeaseLost once the
  lock `held` is no longer this process's: a fenced run stops there, not at its next write."""

  def stop() -> bool:
    held.check()
    return should_stop()

  return stop


@dataclasses.dataclass(frozen=True)
class Restored:
  """Where training starts: the population `state` at `step` and the devices `history`
  (one entry per move to another number of devices)."""

  state: Any
  step: int
  history: list[dict[str, Any]]


def restore(
  run: setup.Run, workdir: str, manager: Any, progress: Callable[[str], None]
) -> Restored:
  """1. The newest checkpoint that restores (damaged ones are set aside), else 2. scratch."""
  population = run.population
  here = {'devices': population.num_devices, 'platform': population.platform}
  latest, state, history, damaged = checkpoint.restore_newest(
    manager,
    population_lib.init_state(run.config, run.model, population, abstract=True),
    population,
    functools.partial(checkpoint.set_aside_damaged, workdir),
  )
  if damaged:
    manager.reload()
    damaged = 'damaged: ' + '; '.join(damaged) + ', and '
  if latest is None:
    if damaged:
      progress(damaged + 'no other checkpoint: started from scratch')
    state = population_lib.init_state(run.config, run.model, population)
    return Restored(state, 0, [{'from_step': 0, **here}])
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
  return Restored(state, int(state['step']), history)


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
  run: setup.Run,
  workdir: str,
  restored: Restored,
  manager: Any,
  board: tensorboard.Writer | None,
  progress: Callable[[str], None],
  should_stop: Callable[[], bool],
  checkpointed: Callable[[int], None],
) -> Trained:
  """2. Trains from `restored` to `train.steps`: one program per length bucket (the host
  reads the curriculum to pick it), or K steps per call (`train.steps_per_dispatch`);
  metrics logged every `train.log_every` steps, a checkpoint every `checkpoint_every`."""
  config, population = run.config, run.population
  state, start = restored.state, restored.step
  log = train_log.TrainLog(run, workdir, restored, board, progress)
  steps, n = config.train.steps, config.train.max_length
  update_fns: dict[int, Callable[..., Any]] = {}
  traces: collections.Counter = collections.Counter()
  multi_step = make_multi_step_fn(run, traces) if config.train.steps_per_dispatch > 1 else None
  chunk = max(config.train.log_every, 1)
  lengths = np.zeros(0, np.int32)
  first_update_s = None
  step = start
  while step < steps:
    if should_stop():
      if step > start:  # The checkpoint at `start` already exists.
        checkpoint.save_state(manager, step, state, population, restored.history)
        manager.wait_until_finished()
      raise checkpoint.Preempted(step, f'preempted at step {step} of training: checkpoint written')
    if multi_step is None:
      offset = (step - start) % chunk
      if offset == 0:
        lengths = np.asarray(curriculum_lengths(run.curriculum_key, jnp.int32(step), chunk, n))
      length = int(lengths[offset])
      bucket = bucket_of(run, length)
      if bucket not in update_fns:
        update_fns[bucket] = make_update_fn(run, bucket, traces)
      state, _ = update_fns[bucket](
        state, jnp.int32(length), population.learning_rates, population.train_keys
      )
      done = step + 1
    else:
      # Up to K steps in one call, ending at the next log or checkpoint boundary.
      boundary = min(
        _next_multiple(step, config.train.log_every),
        _next_multiple(step, config.checkpoint_every),
        steps,
      )
      done = min(step + config.train.steps_per_dispatch, boundary)
      state = multi_step(
        state, jnp.int32(done - step), population.learning_rates, population.train_keys
      )
    if first_update_s is None:
      jax.block_until_ready(state['step'])
      first_update_s = time.time() - log.t_start
    if done % config.train.log_every == 0 or done == steps:
      state = log(state, done)
    if done % config.checkpoint_every == 0 or done == steps:
      if board:  # Its curves up to the checkpoint survive a crash after it.
        board.flush()
      checkpoint.save_state(manager, done, state, population, restored.history)
      checkpointed(done)
    step = done
  manager.wait_until_finished()
  # With steps_per_dispatch > 1 every bucket lives in one program.
  buckets = sorted(update_fns) if multi_step is None else run.training.buckets(run)
  return Trained(state, traces, buckets, first_update_s, time.time() - log.t_start)


def record(
  run: setup.Run,
  restored: Restored,
  trained: Trained,
  evaluation: Any,
  compiles: dict[str, Any],
) -> dict[str, Any]:
  """4. results.json's contents: the header, the protocol's evaluation record, the compiled
  programs, timing and the devices' history."""
  config, history = run.config, restored.history
  state = trained.state
  # Per member: the leading axis of every leaf is the population.
  num_params = int(sum(np.prod(x.shape[1:]) for x in jax.tree.leaves(state['params'])))
  compiled = {
    'train': trained.traces['train'],
    'train_buckets': trained.buckets,
    'eval': trained.traces['eval'],
    **compiles,
  }
  return results_lib.Results(
    task=config.task,
    encoding=config.encoding,
    family=run.family.name,
    encoding_options=population_lib.encoding_options(config),
    num_params=num_params,
    architecture=architecture(config),
    train_steps=config.train.steps,
    train_length=config.train.max_length,
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


def architecture(config: ml_collections.ConfigDict) -> str:
  """'standard', 'standard_ii' (with input injection) or 'looped LxR' (McLeish et al.).

  Example: 8 layers, 2 recurrences -> 'looped 8x2'.
  """
  c = config.model
  if c.recurrences > 1 or c.loop:
    return f'looped {c.num_layers}x{c.recurrences}'
  return 'standard' if c.injection == 'none' else 'standard_ii'
