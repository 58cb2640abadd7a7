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
from posenc import encodings
from posenc import sweep as sweep_lib
from posenc import train
import tasks


def forward_flops(tokens: int, config: ml_collections.ConfigDict) -> float:
  """FLOPs of one forward pass of one sequence of `tokens` tokens (matmuls only)."""
  d, f = config.model.d_model, config.model.ffn_size
  return 2.0 * config.model.num_layers * (tokens * (4 * d * d + 2 * d * f) + 2 * tokens**2 * d)


def _tokens(task: Any, length: int, max_length: int, bucket_size: int) -> int:
  bucket = config_lib.bucket_of(length, max_length, bucket_size)
  return bucket + int(task.output_length(bucket))


def cell_work(config: ml_collections.ConfigDict) -> tuple[float, float]:
  """(training FLOP units per step, evaluation FLOP units per run) of one cell."""
  task = tasks.get(config.task)
  n, m = config.train.max_length, config.eval.max_length
  per_step = np.mean([forward_flops(_tokens(task, l, n, config.train.bucket_size), config)
                      for l in range(1, n + 1)]) * config.train.batch_size
  per_eval = sum(forward_flops(_tokens(task, l, m, config.eval.bucket_size), config)
                 for l in config_lib.eval_lengths(config)) * config.eval.examples_per_length
  return float(per_step), float(per_eval)


def measure(config: ml_collections.ConfigDict, steps: int) -> dict[str, float]:
  """Measured seconds per population step and per evaluated example-FLOP of `config`."""
  task = tasks.get(config.task)
  figures = train.time_training(config, steps)
  step_s = figures['seconds'] / steps
  n, size = config.train.max_length, config.train.bucket_size
  measured_work = np.mean([forward_flops(_tokens(task, int(l), n, size), config)
                           for l in figures['lengths']]) * config.train.batch_size
  model = train.make_model(config, task)
  population = train.Population(config)
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
  eval_work = (forward_flops(_tokens(task, length, config.eval.max_length,
                                     config.eval.bucket_size), config)
               * config.eval.examples_per_length)
  return {'step_s': step_s, 'train_s_per_unit': step_s / measured_work,
          'eval_s_per_unit': eval_s / eval_work, 'population': figures['population'],
          'model_updates_per_s': population.size / step_s}


_CALLS_PER_TIMING = 4


def dense_products(tokens: int, config: ml_collections.ConfigDict) -> list[tuple[int, int, int]]:
  """The (m, k, n) matrix products of one training step's dense layers, per layer.

  Each weight W [k, n] (q, k, v, out projections [d, d]; FFN [d, F] and [F, d]) costs
  three products over the step's `tokens` rows: forward x @ W [tokens, k] x [k, n],
  input gradient g @ W^T [tokens, n] x [n, k], weight gradient x^T @ g [k, tokens] x
  [tokens, n]. Attention, normalisation, dropout and the optimiser are not included.

  Example: d = 2, F = 4, tokens = 3 -> the first triple is (3, 2, 2), (3, 2, 2), (2, 3, 2).
  """
  d, f = config.model.d_model, config.model.ffn_size
  out = []
  for k, n in [(d, d)] * 4 + [(d, f), (f, d)]:
    out += [(tokens, k, n), (tokens, n, k), (k, tokens, n)]
  return out


def dense_product_floor(config: ml_collections.ConfigDict, repeats: int = 20) -> dict[str, Any]:
  """A measured lower bound on a training step: its dense matrix products alone.

  Every product of `dense_products` at each training bucket's shape (batch_size x
  T_bucket rows) is jitted and timed on its own (median of `repeats` timings); a step's
  floor is their sum times the number of layers, and the curriculum's floor is the mean
  over lengths 1..N of the floor of each length's bucket. A whole step also runs
  attention, normalisation, dropout and Adam, so it cannot be faster than this on these
  devices with XLA's matrix products.

  Returns:
    {'bucket_ms': {bucket: ms}, 'mean_step_ms', 'max_updates_per_s' (at P = 1),
     'gflops_per_s' (the products' achieved rate over the curriculum)}.
  """
  task = tasks.get(config.task)
  n, size = config.train.max_length, config.train.bucket_size
  timers: dict[tuple[int, int, int], float] = {}  # each shape is timed once

  def seconds(m, k, nn):
    if (m, k, nn) not in timers:
      a = jnp.ones((m, k), jnp.float32)
      b = jnp.ones((k, nn), jnp.float32)
      f = jax.jit(jnp.matmul)
      jax.block_until_ready(f(a, b))
      times = []
      for _ in range(repeats):  # a few calls in flight per timing: no host latency per call
        t0 = time.perf_counter()
        jax.block_until_ready([f(a, b) for _ in range(_CALLS_PER_TIMING)])
        times.append((time.perf_counter() - t0) / _CALLS_PER_TIMING)
      timers[(m, k, nn)] = float(np.median(times))
    return timers[(m, k, nn)]

  per_length, bucket_s = [], {}   # (seconds, FLOPs) of each length 1..N's bucket
  for length in range(1, n + 1):
    products = dense_products(config.train.batch_size * _tokens(task, length, n, size), config)
    layers = config.model.num_layers
    per_length.append((layers * sum(seconds(*p) for p in products),
                       layers * sum(2.0 * np.prod(p) for p in products)))
    bucket_s[config_lib.bucket_of(length, n, size)] = per_length[-1][0]
  mean_s, mean_flops = (float(x) for x in np.mean(per_length, axis=0))
  return {'bucket_ms': {b: 1e3 * t for b, t in sorted(bucket_s.items())},
          'mean_step_ms': 1e3 * mean_s, 'max_updates_per_s': 1.0 / mean_s,
          'gflops_per_s': mean_flops / mean_s / 1e9}


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


def geometric_floor(num_weights: float, block: tuple[int, int] = (250, 1024),
                    num_blocks: int = 64, repeats: int = 5) -> dict[str, float]:
  """A measured lower bound on geometric attention: its own per-weight work.

  Beyond the q·k and weights·v products every attention needs, `encodings.geometric_weights`
  computes for every weight exp(-|s|), log(1 + e) and a final exp, and a blocked prefix sum
  of its row (`encodings.blocked_cumsum`). Each of the two is jitted alone in a `lax.map` over
  `num_blocks` cache-resident [Q, T'] blocks (the layout of a forward pass at T = 1,000,
  buffers reused, the result reduced per row so no output is written), best of `repeats`;
  the floor is their summed rate times `num_weights`. A forward pass also makes the mirror,
  the two products and every non-attention layer, so it cannot be faster than this with
  XLA's elementwise math and matmuls on these devices.

  Example: num_weights = 512 examples · 5 layers · 8 heads · 1,000² (T = 1,000) = 2.05e10.

  Returns:
    {'chain_ns_per_weight', 'cumsum_ns_per_weight' (wall, all cores), 'floor_s'}.
  """
  x = jax.random.normal(jax.random.key(0), (num_blocks, *block), jnp.float32)

  def ns_per_weight(fn):
    f = jax.jit(lambda a: jax.lax.map(lambda b: fn(b).sum(-1), a))
    jax.block_until_ready(f(x))
    best = float('inf')
    for _ in range(repeats):
      t0 = time.perf_counter()
      jax.block_until_ready(f(x))
      best = min(best, time.perf_counter() - t0)
    return 1e9 * best / x.size

  chain = ns_per_weight(lambda s: jnp.exp(s + jnp.log(1.0 + jnp.exp(-jnp.abs(s)))))
  cumsum = ns_per_weight(encodings.blocked_cumsum)
  return {'chain_ns_per_weight': chain, 'cumsum_ns_per_weight': cumsum,
          'floor_s': 1e-9 * (chain + cumsum) * num_weights}
