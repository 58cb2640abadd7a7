"""Training throughput: `python -m launch.speed train [--steps=200] [--out=speed_train.json]`.

The study's model on reverse_string with randomized relative positions, batch 128,
lengths U{1..40}: time to the first update (a fresh run: init + first compile + step),
steady-state model-updates/s for populations of 1 and 30 members (all length buckets
compiled first, then `--steps` steps timed along the curriculum), the number of compiled
training programs, and the dense-product floor of a step (`posenc.speed.floor`) with the
share of it each population reaches (P members' floor is P times one member's).
`--dtype=bfloat16` computes in bfloat16; with it, `--fused_implementation=cudnn` asks for
cuDNN's flash attention (NVIDIA GPUs); `--compile_threads=N` compiles the programs in N
threads (0: one per CPU core, as a run does). `launch.speed profile` shows where the rest of
the time goes.
"""

from absl import flags
import jax

from experiments import rpe_table1
from launch import common
from launch.speed import opening
from posenc import setup
from posenc.speed import floor as floor_lib
from posenc.speed import timing

_STEPS = flags.DEFINE_integer('steps', 100, 'Timed steps per population size.')
_POPULATIONS = flags.DEFINE_list('populations', ['1', '30'], 'Population sizes to time.')
_OPENING = opening.Opening('train', cell='rpe_table1 arg of the cell to time.')
_SKIP_FIRST = flags.DEFINE_bool('skip_first_update', False, 'Do not time a fresh run.')
_FLOOR = flags.DEFINE_bool('floor', True, 'Measure the dense-product floor of a step.')
_DISPATCH = flags.DEFINE_integer(
  'steps_per_dispatch', 0, 'Training steps per compiled call (0: by platform, 1 on CPU).'
)
_IMPL = flags.DEFINE_string('attention_impl', 'auto', 'The attention backend.')
_DTYPE = flags.DEFINE_string('dtype', 'float32', 'model.dtype: float32 or bfloat16.')
_FUSED = flags.DEFINE_string(
  'fused_implementation', 'xla', "model.fused_implementation: xla, or cudnn (with bfloat16)."
)
_THREADS = flags.DEFINE_integer(
  'compile_threads', 0, 'Threads compiling the programs at once (0: one per CPU core).'
)


def population_config(size: int):
  config = rpe_table1.get_config(_OPENING.cell)
  config.train.steps_per_dispatch = _DISPATCH.value
  config.model.attention_impl = _IMPL.value
  config.model.dtype = _DTYPE.value
  config.model.fused_implementation = _FUSED.value
  config.compile_threads = _THREADS.value
  return opening.with_members(config, size)


def main(argv):
  common.run(_main, argv)


def _main(argv):
  _OPENING.start(argv)
  common.at_least(_STEPS.value, '--steps')
  common.at_least(_DISPATCH.value, '--steps_per_dispatch', 0)
  common.at_least(_THREADS.value, '--compile_threads', 0)
  one = opening.build(population_config(1))
  populations = common.positive_ints(_POPULATIONS.value, '--populations')
  out = {
    'devices': [str(d) for d in jax.local_devices()],
    'cell': _OPENING.cell,
    'dtype': _DTYPE.value,
    'fused_implementation': _FUSED.value,
    'compile_threads': _THREADS.value,
  }
  if not _SKIP_FIRST.value:
    out['first_update_s'] = timing.first_update_seconds(population_config(1))
    print(f'time to first update (fresh run, P=1): {out["first_update_s"]:.1f} s', flush=True)
  if _FLOOR.value:
    floor = floor_lib.training_floor(one)
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
    r = timing.steady_state(setup.build(population_config(size)), _STEPS.value)
    out['populations'].append(r)
    print(
      f'P={r["population"]:3d}: {r["steps_per_s"]:.2f} steps/s = '
      f'{r["model_updates_per_s"]:.1f} model-updates/s '
      f'(each member {r["steps_per_s"]:.2f} updates/s); '
      f'{r["compiled_programs"]} compiled programs {r["buckets"]}; '
      f'warm-up compile {r["warmup_compile_s"]:.1f} s',
      flush=True,
    )
    if _FLOOR.value:  # P members' floor is P times one member's
      floor = out['dense_product_floor']
      r['fraction_of_floor'] = r['model_updates_per_s'] / floor['max_updates_per_s']
      print(
        f'P={r["population"]:3d}: {100 * r["fraction_of_floor"]:.0f}% of the dense-product floor'
      )
  _OPENING.finish(out)
