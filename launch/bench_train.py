"""Training throughput: `python -m launch.bench train [--steps=200] [--out=bench_train.json]`.

The study's model on reverse_string with randomized relative positions, batch 128,
lengths U{1..40}: time to the first update (a fresh run: init + first compile + step),
steady-state model-updates/s for populations of 1 and 30 members (all length buckets
compiled first, then `--steps` steps timed along the curriculum), and the number of
compiled training programs.
"""

import tempfile
import time
from typing import Any

from absl import flags
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import rpe_table1
from launch import common
from posenc import config as config_lib
from posenc import cost
from posenc import evaluate
from posenc import io
from posenc import setup
from posenc import train
import tasks

_STEPS = flags.DEFINE_integer('steps', 100, 'Timed steps per population size.')
_POPULATIONS = flags.DEFINE_list('populations', ['1', '30'], 'Population sizes to time.')
_CELL = flags.DEFINE_string(
  'cell', 'task=reverse_string,encoding=randomized_relative', 'rpe_table1 arg of the cell to time.'
)
_OUT = flags.DEFINE_string('out', 'bench_train.json', 'Where to write the figures.')
_SKIP_FIRST = flags.DEFINE_bool('skip_first_update', False, 'Do not time a fresh run.')
_FLOOR = flags.DEFINE_bool('floor', True, 'Measure the dense-product floor of a step.')
_DISPATCH = flags.DEFINE_integer('steps_per_dispatch', 1, 'Training steps per compiled call.')
_IMPL = flags.DEFINE_string('attention_impl', 'auto', 'The attention backend.')


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
  task = tasks.get(config.task, config.task_options.to_dict())
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

  per_length, bucket_s = [], {}  # (seconds, FLOPs) of each length 1..N's bucket
  for length in range(1, n + 1):
    rows = config.train.batch_size * cost.tokens(task, length, n, size)
    products = dense_products(rows, config)
    layers = config.model.num_layers
    per_length.append(
      (
        layers * sum(seconds(*p) for p in products),
        layers * sum(2.0 * np.prod(p) for p in products),
      )
    )
    bucket_s[config_lib.bucket_of(length, n, size)] = per_length[-1][0]
  mean_s, mean_flops = (float(x) for x in np.mean(per_length, axis=0))
  return {
    'bucket_ms': {b: 1e3 * t for b, t in sorted(bucket_s.items())},
    'mean_step_ms': 1e3 * mean_s,
    'max_updates_per_s': 1.0 / mean_s,
    'gflops_per_s': mean_flops / mean_s / 1e9,
  }


def population_config(size: int):
  config = rpe_table1.get_config(_CELL.value)
  config.train.steps_per_dispatch = _DISPATCH.value
  config.model.attention_impl = _IMPL.value
  seeds = max(1, size // len(config.learning_rates))
  config.seeds = list(range(seeds))
  config.learning_rates = list(config.learning_rates)[: size // seeds]
  return config


def first_update_seconds() -> float:
  config = population_config(1)
  config.train.steps = 1
  config.eval.lengths = [config.train.max_length + 1]  # one length, past training: scored
  config.eval.examples_per_length = config.eval.batch_size
  with tempfile.TemporaryDirectory() as workdir:
    return train.train_and_evaluate(config, workdir)['timing']['first_update_s']


def steady_state(size: int, steps: int) -> dict:
  figures = cost.measure_training(setup.build(population_config(size)), steps)
  return {k: v for k, v in figures.items() if k not in ('state', 'lengths')}


def main(argv):
  common.run(_main, argv)


def _main(argv):
  del argv
  common.check_output_file(_OUT.value, '--out')
  common.at_least(_STEPS.value, '--steps')
  common.at_least(_DISPATCH.value, '--steps_per_dispatch')
  common.cell_config(_CELL.value)
  try:
    evaluate.validate(population_config(1))
  except config_lib.ConfigError as e:
    common.fail(e)
  populations = common.positive_ints(_POPULATIONS.value, '--populations')
  out = {'devices': [str(d) for d in jax.local_devices()], 'cell': _CELL.value}
  if not _SKIP_FIRST.value:
    out['first_update_s'] = first_update_seconds()
    print(f'time to first update (fresh run, P=1): {out["first_update_s"]:.1f} s', flush=True)
  if _FLOOR.value:
    floor = dense_product_floor(population_config(1))
    out['dense_product_floor'] = floor
    print(
      f'dense-product floor (the step\'s matrix products alone, timed one by one): '
      f'{floor["mean_step_ms"]:.0f} ms per step over the curriculum at '
      f'{floor["gflops_per_s"]:.0f} GFLOP/s, i.e. at most '
      f'{floor["max_updates_per_s"]:.1f} model-updates/s at P=1; by bucket (ms): '
      + ', '.join(f'{b}: {t:.0f}' for b, t in floor['bucket_ms'].items()),
      flush=True,
    )
  out['populations'] = []
  for size in populations:
    r = steady_state(size, _STEPS.value)
    out['populations'].append(r)
    print(
      f'P={r["population"]:3d}: {r["steps_per_s"]:.2f} steps/s = '
      f'{r["model_updates_per_s"]:.1f} model-updates/s '
      f'(each member {r["steps_per_s"]:.2f} updates/s); '
      f'{r["compiled_programs"]} compiled programs {r["buckets"]}; '
      f'warm-up compile {r["warmup_compile_s"]:.1f} s',
      flush=True,
    )
  io.write_json_atomic(_OUT.value, out)
  print(f'wrote {_OUT.value}')
