"""The cost model's shared parts: what each kind of evaluation's cost (`Cost`, in its folder's
cost.py) is made of, and what `posenc.sweep.cost` estimates a grid of any kind with.

Work is counted by the one FLOPs formula, `run.model_settings.flops` (the effective depth of
a looped model, GELU-GLU's third matrix, a decoder's output layer). The study's kind
(`range`) measures the whole population along its curriculum (`measure_training`, through
the loop's own programs and dispatch) and one evaluation length, and scales by the work of
each length; the sequence kinds (`grid`, `lengths`: `sequence`) measure one member at a
reduced batch (8 sequences per step, 8 samples of the cell at the training size) and scale
to the config's batch and every evaluated group by the work of each, so that a paper-scale
model can be estimated on a small machine. Encodings are assumed to cost what the measured
one costs (relative attention costs somewhat more than none): an estimate, not a promise.
`compiled_cost` reads XLA's cost analysis of a program, for a kind's roofline.

Example:
  >>> figures = measure_training(run, steps=20)   # doctest: +SKIP
  >>> COST = sequence(probe, groups)   # a sequence kind's cost.py  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any, Callable

import jax
import numpy as np

from posenc import config as config_lib
from posenc import programs
from posenc.training import run as run_lib
from posenc.training import state as state_lib
from posenc.training import train


@dataclasses.dataclass(frozen=True)
class Cost:
  """What the cost model asks of one kind of evaluation (its folder's cost.py holds it).

  Attributes:
    estimate: (runs, names, steps) -> (measured, rows): the first run measured on this
      machine (a JSON-able dict), then every run's {'cell': its name, 'train_s', 'eval_s'}
      predicted from it, for all of the run's members (`names`: each run's cell name,
      `posenc.sweep.cell_name`).
    describe: measured -> the line that says what was measured and how it scales.
    per_member: the estimate lists each cell's time per model (few, expensive cells), not
      per task.
    roofline: (runs, names, device spec, progress) -> rows, each cell's seconds on an
      accelerator from XLA's cost analysis of its programs; None where the kind has none.
  """

  estimate: Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]]
  describe: Callable[[dict[str, Any]], str]
  per_member: bool = False
  roofline: Callable[..., list[dict[str, Any]]] | None = None


def tokens(task: Any, length: int, max_length: int, bucket_size: int) -> int:
  """Positions of a sequence of `length` inputs in its padded bucket (inputs + outputs)."""
  bucket = programs.data_width(length, max_length, bucket_size)
  return bucket + int(task.output_length(bucket))


def measure_training(
  run: run_lib.Run, steps: int, progress: Callable[[str], None] = lambda line: None
) -> dict[str, Any]:
  """Steady-state training speed of the run's population on its devices.

  The warm-up is a run's: its plan (`train.programs`), then every program of it compiled at
  once and called once (`train.compile_stages`, `train.Dispatch.warm_up`); then `steps`
  steps along the curriculum are timed, dispatched as the loop dispatches them. Returns the
  figures and, for callers that go on measuring, the final `state` and the timed `lengths`.
  """
  traces: collections.Counter = collections.Counter()
  t0 = time.time()
  stage = train.training_stage(run, traces)
  plan, lowered = programs.plan(stage, run.platform)
  todo = train.training_programs(run, stage, plan, traces)
  dispatch = train.Dispatch(
    run, plan, train.compile_stages(run, todo, lowered, traces, progress)['train']
  )
  state, start = dispatch.warm_up(state_lib.init_state(run), 0)
  jax.block_until_ready(state)
  compile_s = time.time() - t0
  lengths = [dispatch.length(s) for s in range(start, start + steps)]
  t0, step = time.time(), start
  while step < start + steps:
    state, step = dispatch(state, step, start + steps)
  jax.block_until_ready(state)
  seconds = time.time() - t0
  population = run.population
  return {
    'population': population.size,
    'steps': steps,
    'seconds': seconds,
    'steps_per_s': steps / seconds,
    'model_updates_per_s': steps * population.size / seconds,
    'warmup_compile_s': compile_s,
    'compiled_programs': traces['train'],
    'buckets': list(plan.widths),
    'plan': plan.to_json(),
    'steps_per_dispatch': dispatch.k,
    'state': state,
    'lengths': np.asarray(lengths),
  }


def time_once(fn: Callable[..., Any], *args: Any) -> float:
  """Seconds of one call of `fn(*args)` after a first call that compiles it."""
  jax.block_until_ready(fn(*args))
  t0 = time.time()
  jax.block_until_ready(fn(*args))
  return time.time() - t0


# ---------------------------------------------------------------------------------------
# The sequence kinds: one member measured at a reduced batch, scaled by decoder FLOPs.

# A probe: run -> (the evaluation program at the training size, its arguments after the
# parameters, its (prompt, answer) widths). Groups: run -> ([(tokens, count) of every
# evaluated group of sequences], the tokens of the probed program).
Probe = Callable[[run_lib.Run], tuple[Callable[..., Any], tuple[Any, ...], tuple[int, int]]]
Groups = Callable[[run_lib.Run], tuple[list[tuple[int, int]], int]]


def measure_sequence(
  run: run_lib.Run, probe: Probe, steps: int = 3, batch: int = 8, samples: int = 8
) -> dict[str, Any]:
  """One member of a sequence-task `config` (arithmetic, task hinting) timed on the local
  devices at a reduced batch: seconds per training step of `batch` sequences (training
  batches are padded to the widths at n), and seconds per generated example at n (the
  kind's `probe`)."""
  config = run.config
  samples = min(samples, run.eval_settings.samples_per_cell, run.eval_settings.batch_size)
  small = run_lib.build(
    config_lib.cell_config(
      config,
      {
        'seeds': config.seeds[:1],
        'learning_rates': config.learning_rates[:1],
        'train.batch_size': min(batch, run.train_settings.batch_size),
        'eval.samples_per_cell': samples,
        'eval.batch_size': samples,
        'eval.examples_per_length': samples,
      },
    ),
    run.protocol,
  )
  figures = measure_training(small, steps)
  evaluate, args, shape = probe(small)
  example_s = time_once(evaluate, figures['state'].params, *args) / samples
  return {
    'batch': small.train_settings.batch_size,
    'samples': samples,
    'step_s': figures['seconds'] / steps,
    'warmup_compile_s': figures['warmup_compile_s'],
    'example_s': example_s,
    'train_tokens': sum(_train_shape(small)),
    'eval_tokens': sum(shape),
  }


def _train_shape(run: run_lib.Run) -> tuple[int, int]:
  """(prompt width, answer width) of a sequence run's training batches."""
  return run.training.shape(run, run.train_settings.max_length)


def sequence_work(run: run_lib.Run, groups: Groups) -> tuple[float, float, float]:
  """(training FLOPs per step, evaluation FLOPs, FLOPs per example at n) of one member:
  training sequences padded to the widths at n; every evaluated group of sequences at its
  padded widths (the kind's `groups`: a grid's cells, the hinting study's test lengths)."""
  flops = lambda tokens: run.model_settings.flops(tokens, run.task.vocab_size)
  per_step = 3 * flops(sum(_train_shape(run))) * run.train_settings.batch_size
  evaluated, at_n = groups(run)
  per_eval = sum(flops(tokens) * count for tokens, count in evaluated)
  return per_step, per_eval, flops(at_n)


def _sequence_estimate(runs, names, steps, probe: Probe, groups: Groups):
  """The first cell measured by `measure_sequence`; training scaled by batch and FLOPs,
  evaluation by each cell's FLOPs (generation taken as FLOP-bound, as it is on this CPU for
  wide models)."""
  measured = measure_sequence(runs[0], probe, steps)
  base_step, _, base_example = sequence_work(runs[0], groups)
  step_s_per_flop = measured['step_s'] / (
    base_step / runs[0].train_settings.batch_size * measured['batch']
  )
  example_s_per_flop = measured['example_s'] / base_example
  rows = []
  for name, run in zip(names, runs):
    per_step, per_eval, _ = sequence_work(run, groups)
    members = run.population.size
    rows.append(
      {
        'cell': name,
        'train_s': members * run.train_settings.steps * per_step * step_s_per_flop,
        'eval_s': members * per_eval * example_s_per_flop,
      }
    )
  return measured, rows


def format_sequence_measurement(m: dict[str, Any]) -> str:
  return (
    f'{m["step_s"]:.2f} s per training step of {m["batch"]} sequences of '
    f'{m["train_tokens"]} tokens, {m["example_s"] * 1e3:.0f} ms per generated example '
    f'of {m["eval_tokens"]} tokens (one member; scaled to the config\'s batch and '
    'samples by FLOPs)'
  )


def sequence(probe: Probe, groups: Groups) -> Cost:
  """The cost of a sequence kind from its probe and its evaluated groups."""
  return Cost(
    estimate=lambda runs, names, steps: _sequence_estimate(runs, names, steps, probe, groups),
    describe=format_sequence_measurement,
    per_member=True,
  )


def compiled_cost(fn: Any, *args: Any) -> tuple[float, float]:
  """(FLOPs, bytes accessed) of XLA's cost analysis of `fn` compiled for `args`."""
  analysis = fn.lower(*args).compile().cost_analysis()
  if isinstance(analysis, (list, tuple)):  # one entry per program in older JAX versions
    analysis = analysis[0]
  return float(analysis['flops']), float(analysis['bytes accessed'])
