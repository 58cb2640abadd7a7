"""Training throughput: `python -m launch.bench train [--steps=200] [--out=bench_train.json]`.

The study's model on reverse_string with randomized relative positions, batch 128,
lengths U{1..40}: time to the first update (a fresh run: init + first compile + step),
steady-state model-updates/s for populations of 1 and 30 members (all length buckets
compiled first, then `--steps` steps timed along the curriculum), and the number of
compiled training programs.
"""

import collections
import json
import tempfile
import time

from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from experiments import rpe_table1
from launch import common
from posenc import config as config_lib
from posenc import train
import tasks

_STEPS = flags.DEFINE_integer('steps', 100, 'Timed steps per population size.')
_POPULATIONS = flags.DEFINE_list('populations', ['1', '30'], 'Population sizes to time.')
_CELL = flags.DEFINE_string('cell', 'task=reverse_string,encoding=randomized_relative',
                            'rpe_table1 arg of the cell to time.')
_OUT = flags.DEFINE_string('out', 'bench_train.json', 'Where to write the figures.')
_SKIP_FIRST = flags.DEFINE_bool('skip_first_update', False, 'Do not time a fresh run.')


def population_config(size: int):
  config = rpe_table1.get_config(_CELL.value)
  seeds = max(1, size // len(config.learning_rates))
  config.seeds = list(range(seeds))
  config.learning_rates = list(config.learning_rates)[:size // seeds]
  return config


def first_update_seconds() -> float:
  config = population_config(1)
  config.train.steps = 1
  config.eval.lengths = [1]
  config.eval.examples_per_length = config.eval.batch_size
  with tempfile.TemporaryDirectory() as workdir:
    return train.train_and_evaluate(config, workdir)['timing']['first_update_s']


def steady_state(size: int, steps: int) -> dict:
  config = population_config(size)
  task = tasks.get(config.task)
  model = train.make_model(config, task)
  population = train.Population(config)
  curriculum, batch_key, _ = train.data_keys(config)
  state = train.init_state(config, model, population)
  n, bucket_size = config.train.max_length, config.train.bucket_size
  buckets = sorted({config_lib.bucket_of(l, n, bucket_size) for l in range(1, n + 1)})
  traces = collections.Counter()
  fns = {b: train.make_update_fn(config, task, model, population, b, batch_key, traces)
         for b in buckets}
  t0 = time.time()
  for b in buckets:  # Compile every bucket before timing.
    state, _ = fns[b](state, jnp.int32(b), population.learning_rates, population.train_keys)
  jax.block_until_ready(state)
  compile_s = time.time() - t0
  lengths = np.asarray(train.curriculum_lengths(curriculum, jnp.int32(0), steps, n))
  t0 = time.time()
  for length in lengths:
    b = config_lib.bucket_of(int(length), n, bucket_size)
    state, _ = fns[b](state, jnp.int32(length), population.learning_rates,
                      population.train_keys)
  jax.block_until_ready(state)
  seconds = time.time() - t0
  return {'population': population.size, 'steps': steps, 'seconds': seconds,
          'steps_per_s': steps / seconds, 'model_updates_per_s': steps * population.size / seconds,
          'warmup_compile_s': compile_s,
          'compiled_programs': traces['train'],
          'buckets': buckets}


def main(argv):
  common.run(_main, argv)


def _main(argv):
  del argv
  out = {'devices': [str(d) for d in jax.local_devices()], 'cell': _CELL.value}
  if not _SKIP_FIRST.value:
    out['first_update_s'] = first_update_seconds()
    print(f'time to first update (fresh run, P=1): {out["first_update_s"]:.1f} s', flush=True)
  out['populations'] = []
  for size in map(int, _POPULATIONS.value):
    r = steady_state(size, _STEPS.value)
    out['populations'].append(r)
    print(f'P={r["population"]:3d}: {r["steps_per_s"]:.2f} steps/s = '
          f'{r["model_updates_per_s"]:.1f} model-updates/s '
          f'({r["model_updates_per_s"] / r["population"]:.2f} per member); '
          f'{r["compiled_programs"]} compiled programs {r["buckets"]}; '
          f'warm-up compile {r["warmup_compile_s"]:.1f} s', flush=True)
  with open(_OUT.value, 'w') as f:
    json.dump(out, f, indent=1)
  print(f'wrote {_OUT.value}')
