"""What a range run costs (`posenc.training.cost_model`): the whole population measured on this machine,
every cell scaled by the encoder's FLOP model; and on an accelerator, from XLA's cost
analysis of its programs (a roofline).

Training time of a cell = steps * mean over the curriculum of c_train * flops(T_bucket(L));
evaluation time = sum over evaluated lengths of c_eval * examples * flops(T_bucket(L)); the
constants c_* come from the measurement: the population's steps along the curriculum, one
evaluation length past training. Tasks differ through T = L + O(L) (e.g. duplicate_string
has O(L) = 2L).

Example:
  >>> measured, rows = COST.estimate(runs, names, 20)   # doctest: +SKIP
  >>> rows[0]['train_s'], measured['model_updates_per_s']  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc.programs import devices
from posenc.training import cost_model
from posenc.training import run as run_lib
from posenc.training import update
from posenc.kinds.range import protocol
import tasks

# Token counts the per-program costs are measured at (reverse_string: T = 2 x bucket); other
# token counts come from the quadratic through them (exact for FLOPs: the dense layers are
# linear in T, attention quadratic).
_FIT_TRAIN_BUCKETS = (10, 20, 40)
_FIT_EVAL_BUCKETS = (64, 256, 512)


def _work(run: run_lib.Run, lengths: Any, train: bool = True) -> float:
  """The encoder's FLOPs over a sequence of each of `lengths`, padded as training (or the
  evaluation) pads it, summed."""
  settings = run.train_settings if train else run.eval_settings
  return sum(
    run.model_settings.flops(
      cost_model.tokens(run.task, int(l), settings.max_length, settings.bucket_size)
    )
    for l in lengths
  )


def cell_work(run: run_lib.Run) -> tuple[float, float]:
  """(training FLOP units per step, evaluation FLOP units per run) of one cell."""
  n = run.train_settings.max_length
  per_step = _work(run, range(1, n + 1)) / n * run.train_settings.batch_size
  lengths = config_lib.eval_lengths(run.config)
  per_eval = _work(run, lengths, train=False) * run.eval_settings.examples_per_length
  return float(per_step), float(per_eval)


def measure(run: run_lib.Run, steps: int) -> dict[str, float]:
  """Measured seconds per population step and per evaluated example-FLOP of the run."""
  population, settings = run.population, run.eval_settings
  figures = cost_model.measure_training(run, steps)
  step_s = figures['seconds'] / steps
  lengths = figures['lengths']
  measured_work = _work(run, lengths) / len(lengths) * run.train_settings.batch_size
  length = min(settings.max_length, max(1, run.train_settings.max_length + 1))
  evaluate = protocol.make_eval_fn(run, protocol.eval_bucket(run, length))
  eval_s = cost_model.time_once(
    evaluate, figures['state'].params, jnp.int32(length), population.eval_keys
  )
  eval_work = _work(run, [length], train=False) * settings.examples_per_length
  return {
    'step_s': step_s,
    'train_s_per_unit': step_s / measured_work,
    'eval_s_per_unit': eval_s / eval_work,
    'population': figures['population'],
    'model_updates_per_s': population.size / step_s,
  }


def estimate(
  runs: Sequence[run_lib.Run], names: Sequence[str], steps: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  """The first run measured (`measure`), every cell predicted by its FLOPs (`cell_work`)."""
  measured = measure(runs[0], steps)
  rows = []
  for name, run in zip(names, runs):
    per_step, per_eval = cell_work(run)
    rows.append(
      {
        'cell': name,
        'train_s': run.train_settings.steps * per_step * measured['train_s_per_unit'],
        'eval_s': per_eval * measured['eval_s_per_unit'],
      }
    )
  return measured, rows


def describe(measured: dict[str, Any]) -> str:
  return (
    f'{measured["population"]} members: {1 / measured["step_s"]:.2f} population steps/s = '
    f'{measured["model_updates_per_s"]:.1f} model-updates/s'
  )


# ---------------------------------------------------------------------------------------
# The roofline.


def program_costs(config: ml_collections.ConfigDict) -> dict[str, np.ndarray]:
  """Quadratics in T of one member's accelerator programs: {'train', 'eval'} -> [2, 3]
  (rows: FLOPs, bytes; columns: polyfit coefficients, highest power first).

  'train' is one training step of batch_size sequences of T tokens; 'eval' one evaluation
  sub-batch. The programs are those an accelerator runs (xla_fused attention, no CPU
  blocking), compiled by this machine's XLA: its fusion decides the bytes.
  """
  run = run_lib.build(
    config_lib.cell_config(
      config, {'task': 'reverse_string', 'seeds': [0], 'learning_rates': [1e-4]}
    ),
    protocol.PROTOCOL,
    platform='gpu',
  )
  config, task, population, state = run.config, run.task, run.population, run.abstract_state
  length = jax.ShapeDtypeStruct((), jnp.int32)
  # The evaluation's programs at one sub-batch per length.
  one_batch = run_lib.build(
    config_lib.cell_config(config, {'eval.examples_per_length': run.eval_settings.batch_size}),
    protocol.PROTOCOL,
    platform='gpu',
  )
  points = {'train': [], 'eval': []}
  for bucket in _FIT_TRAIN_BUCKETS:
    fn = update.make_update_fn(run, bucket)
    points['train'].append(
      (
        cost_model.tokens(task, bucket, bucket, 1),
        *cost_model.compiled_cost(
          fn, state, length, population.learning_rates, population.train_keys
        ),
      )
    )
  for bucket in _FIT_EVAL_BUCKETS:
    fn = protocol.make_eval_fn(one_batch, bucket)
    points['eval'].append(
      (
        cost_model.tokens(task, bucket, bucket, 1),
        *cost_model.compiled_cost(fn, state.params, length, population.eval_keys),
      )
    )
  fits = {}
  for kind, rows in points.items():
    t, flops, nbytes = (np.array(c, np.float64) for c in zip(*rows))
    fits[kind] = np.stack([np.polyfit(t, flops, 2), np.polyfit(t, nbytes, 2)])
  return fits


def _check_roofline(run: run_lib.Run, name: str) -> None:
  """ConfigError (one line) for a cell whose programs the fit cannot stand for."""
  if run.family.generates:
    # XLA's cost analysis counts a loop's body once, and generation is a loop of unknown
    # trip count: the estimate would leave out most of the evaluation.
    raise config_lib.ConfigError(
      f'--device estimates cover model.family=encoder only, not {run.family.name!r}'
    )
  # The fit compiles reverse_string programs up to the longest bucket, which an encoding
  # whose positions stop at max_position cannot encode.
  longest = cost_model.tokens(
    tasks.get('reverse_string'), _FIT_EVAL_BUCKETS[-1], _FIT_EVAL_BUCKETS[-1], 1
  )
  max_position = run.model_settings.max_position
  if run.encoding.bounded and max_position < longest:
    raise config_lib.ConfigError(
      f'--device: the roofline fits programs of up to {longest} tokens, beyond '
      f'model.max_position={max_position} of encoding {run.config.encoding!r} '
      f'(cell {name}); raise --config.model.max_position to '
      f'{longest}, or leave out --device to measure this machine'
    )


def roofline(
  runs: Sequence[run_lib.Run],
  names: Sequence[str],
  spec: devices.Device,
  progress: Any,
) -> list[dict[str, Any]]:
  """Each cell's seconds on the device `spec` (`posenc.sweep.cost.roofline`): its training steps along
  the curriculum and its evaluation sub-batches at every length, each program at max(FLOPs
  / peak, bytes / bandwidth) of the fitted quadratics (`program_costs`, one fit per encoding
  and dtype), for every member."""
  for name, run in zip(names, runs):
    _check_roofline(run, name)
  fits = {}
  rows = []
  for name, run in zip(names, runs):
    config, task, dtype = run.config, run.task, run.model_settings.dtype
    key = (config.encoding, dtype)
    if key not in fits:
      progress(f'cost analysis of {config.encoding} ({dtype}) programs')
      fits[key] = program_costs(config)
    peak = spec.peak_flops[dtype]

    def seconds(kind, t):
      flops, nbytes = (max(0.0, float(np.polyval(c, t))) for c in fits[key][kind])
      return max(flops / peak, nbytes / spec.bandwidth)

    n, m = run.train_settings.max_length, run.eval_settings.max_length
    step = np.mean(
      [
        seconds('train', cost_model.tokens(task, l, n, run.train_settings.bucket_size))
        for l in range(1, n + 1)
      ]
    )
    sub_batches = run.eval_settings.examples_per_length // run.eval_settings.batch_size
    evaluation = sum(
      sub_batches * seconds('eval', cost_model.tokens(task, l, m, run.eval_settings.bucket_size))
      for l in config_lib.eval_lengths(config)
    )
    members = run.population.size
    rows.append(
      {
        'cell': name,
        'train_s': members * run.train_settings.steps * step,
        'eval_s': members * evaluation,
      }
    )
  return rows


COST = cost_model.Cost(estimate=estimate, describe=describe, roofline=roofline)
