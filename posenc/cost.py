"""What a grid would cost on the current devices, from measured throughput.

`estimate` times the first cell's population on this machine (every training bucket
compiled first, then `steps` steps along the curriculum; one evaluation length), then
scales to every cell with a FLOP model of the encoder:

  flops(T) = layers * (T * (4 d^2 + 2 d F) + 2 T^2 d)     (forward, one sequence of T tokens)

Training time of a cell = steps * mean over the curriculum of c_train * flops(T_bucket(L));
evaluation time = sum over evaluated lengths of c_eval * examples * flops(T_bucket(L)); the
constants c_* come from the measurement. Tasks differ through T = L + O(L) (e.g.
duplicate_string has O(L) = 2L); encodings are assumed to cost what the measured one
costs (relative attention costs somewhat more than none) — an estimate, not a promise.

Example:
  >>> print(format_estimate(estimate(config, cells, steps=20)))  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc import sweep as sweep_lib
from posenc import train
import tasks


def forward_flops(tokens: int, config: ml_collections.ConfigDict) -> float:
  """FLOPs of one forward pass of one sequence of `tokens` tokens (matmuls only)."""
  d, f = config.model.d_model, config.model.ffn_size
  return 2.0 * config.model.num_layers * (tokens * (4 * d * d + 2 * d * f) + 2 * tokens**2 * d)


def tokens(task: Any, length: int, max_length: int, bucket_size: int) -> int:
  """Positions of a sequence of `length` inputs in its padded bucket (inputs + outputs)."""
  bucket = config_lib.bucket_of(length, max_length, bucket_size)
  return bucket + int(task.output_length(bucket))


def cell_work(config: ml_collections.ConfigDict) -> tuple[float, float]:
  """(training FLOP units per step, evaluation FLOP units per run) of one cell."""
  task = tasks.get(config.task)
  n, m = config.train.max_length, config.eval.max_length
  per_step = np.mean([forward_flops(tokens(task, l, n, config.train.bucket_size), config)
                      for l in range(1, n + 1)]) * config.train.batch_size
  per_eval = sum(forward_flops(tokens(task, l, m, config.eval.bucket_size), config)
                 for l in config_lib.eval_lengths(config)) * config.eval.examples_per_length
  return float(per_step), float(per_eval)


def measure_training(config: ml_collections.ConfigDict, steps: int) -> dict[str, Any]:
  """Steady-state training speed of `config`'s population on the local devices.

  Every length bucket is compiled first; then `steps` steps along the curriculum are
  timed. Returns the figures and, for callers that go on measuring, the final `state` and
  the timed `lengths`.
  """
  task = tasks.get(config.task)
  population = train.Population(config)
  model = train.make_model(config, task, population.platform)
  curriculum, batch_key, _ = train.data_keys(config)
  state = train.init_state(config, model, population)
  n, size = config.train.max_length, config.train.bucket_size
  buckets = train.train_buckets(config)
  traces: collections.Counter = collections.Counter()
  members = (population.learning_rates, population.train_keys)
  k = config.train.steps_per_dispatch
  if k > 1:  # One program of K steps: warm it up with one call, then time steps / K calls.
    multi = train.make_multi_step_fn(config, task, model, population, curriculum, batch_key,
                                     traces)
    t0 = time.time()
    state = jax.block_until_ready(multi(state, jnp.int32(k), *members))
    compile_s = time.time() - t0
    t0 = time.time()
    for start in range(0, steps, k):
      state = multi(state, jnp.int32(min(k, steps - start)), *members)
    jax.block_until_ready(state)
    seconds = time.time() - t0
    lengths = np.asarray(train.curriculum_lengths(curriculum, jnp.int32(k), steps, n))
  else:
    fns = {b: train.make_update_fn(config, task, model, population, b, batch_key, traces)
           for b in buckets}
    t0 = time.time()
    for b in buckets:
      state, _ = fns[b](state, jnp.int32(b), *members)
    jax.block_until_ready(state)
    compile_s = time.time() - t0
    lengths = np.asarray(train.curriculum_lengths(curriculum, jnp.int32(0), steps, n))
    t0 = time.time()
    for length in lengths:
      state, _ = fns[config_lib.bucket_of(int(length), n, size)](state, jnp.int32(length),
                                                                   *members)
    jax.block_until_ready(state)
    seconds = time.time() - t0
  return {'population': population.size, 'steps': steps, 'seconds': seconds,
          'steps_per_s': steps / seconds,
          'model_updates_per_s': steps * population.size / seconds,
          'warmup_compile_s': compile_s, 'compiled_programs': traces['train'],
          'buckets': buckets, 'steps_per_dispatch': k, 'state': state, 'lengths': lengths}


def measure(config: ml_collections.ConfigDict, steps: int) -> dict[str, float]:
  """Measured seconds per population step and per evaluated example-FLOP of `config`."""
  task = tasks.get(config.task)
  figures = measure_training(config, steps)
  step_s = figures['seconds'] / steps
  n, size = config.train.max_length, config.train.bucket_size
  measured_work = np.mean([forward_flops(tokens(task, int(l), n, size), config)
                           for l in figures['lengths']]) * config.train.batch_size
  population = train.Population(config)
  model = train.make_model(config, task, population.platform)
  _, _, eval_key = train.data_keys(config)
  state = figures['state']
  length = min(config.eval.max_length, max(1, n + 1))
  bucket = config_lib.bucket_of(length, config.eval.max_length, config.eval.bucket_size)
  evaluate = train.make_eval_fn(config, task, model, population, bucket, eval_key)
  args = (state['params'], jnp.int32(length), population.eval_keys)
  jax.block_until_ready(evaluate(*args))
  t0 = time.time()
  jax.block_until_ready(evaluate(*args))
  eval_s = time.time() - t0
  eval_work = (forward_flops(tokens(task, length, config.eval.max_length,
                                     config.eval.bucket_size), config)
               * config.eval.examples_per_length)
  return {'step_s': step_s, 'train_s_per_unit': step_s / measured_work,
          'eval_s_per_unit': eval_s / eval_work, 'population': figures['population'],
          'model_updates_per_s': population.size / step_s}


def estimate(base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]],
             steps: int = 20) -> dict[str, Any]:
  """Measures the first cell, then predicts every cell of `cells` on this machine."""
  configs = [sweep_lib.cell_config(base, c) for c in cells]
  for config in configs:
    config_lib.validate(config)
  measured = measure(configs[0], steps)
  rows = []
  for overrides, config in zip(cells, configs):
    per_step, per_eval = cell_work(config)
    train_s = config.train.steps * per_step * measured['train_s_per_unit']
    eval_s = per_eval * measured['eval_s_per_unit']
    rows.append({'cell': sweep_lib.cell_name(overrides), 'train_s': train_s, 'eval_s': eval_s})
  devices = jax.local_devices()
  wall = sum(r['train_s'] + r['eval_s'] for r in rows)
  return {'measured_cell': sweep_lib.cell_name(cells[0]), 'measured': measured,
          'devices': len(devices), 'device_kind': devices[0].device_kind,
          'cells': rows, 'wall_clock_s': wall, 'device_hours': wall * len(devices) / 3600,
          'members_per_cell': measured['population'],
          'train_steps': configs[0].train.steps}


def format_estimate(est: dict[str, Any]) -> str:
  m = est['measured']
  lines = [
      f'measured on {est["devices"]} x {est["device_kind"]}: cell {est["measured_cell"]}, '
      f'{est["members_per_cell"]} members: {1 / m["step_s"]:.2f} population steps/s = '
      f'{m["model_updates_per_s"]:.1f} model-updates/s',
      f'grid: {len(est["cells"])} cells x {est["members_per_cell"]} members x '
      f'{est["train_steps"]:,} steps, run one cell after another on all devices:']
  by_task = collections.defaultdict(lambda: [0.0, 0.0, 0])
  for row in est['cells']:
    task = row['cell'].split('__')[0]
    by_task[task][0] += row['train_s']
    by_task[task][1] += row['eval_s']
    by_task[task][2] += 1
  for task, (t, e, k) in by_task.items():
    lines.append(f'  {task:28s} {k:2d} cells  train {t / 3600:10.1f} h  eval {e / 3600:8.1f} h')
  wall = est['wall_clock_s']
  lines.append(f'total: wall-clock {wall / 3600:,.1f} h ({wall / 86400:,.1f} days), '
               f'{est["device_hours"]:,.1f} device-hours')
  return '\n'.join(lines)
