"""A benchmark suite's population throughput, setting against setting:
`python -m launch.speed population [--suite=cpu-v1 --task=even_pairs --populations=1,3,8,16
--settings=default,devices=2]`.

The suite's cell (its config, built by `posenc.setup.build` as `launch.benchmark` builds
it) with P = seeds 0..P-1 members, for each setting of `--settings`
(`posenc.speed.population`: 'default' is the suite's config on one device; KEY=VALUE pairs
joined by '+' change it, with loop=map|vmap, optimizer=member|batched, devices=N,
dispatch=K, attention=IMPL). For each population size every setting is built and compiled,
then timed for `--steps` steps per round over `--rounds` rounds that alternate the
settings; it prints the median model-updates/s of each, the share of the dense-product
floor it reaches (P members' floor is P times one member's), and the training programs each
compiled (one per length bucket, or one with dispatch > 1: a run compiles no more).
`--eval` also times the cell's range evaluation of the population (every evaluated length
once per round, its programs compiled first), for a card's split between training and
evaluation.

The process starts JAX's CPU backend with the most devices any setting names; a setting
without devices=N runs on one of them.

  python -m launch.speed population --populations=8 --settings=default,devices=2 --rounds=5
"""

from absl import flags
import jax
import numpy as np

from experiments import benchmarks
from launch import common
from launch.speed import opening
from posenc import config as config_lib
from posenc import setup
from posenc.speed import floor as floor_lib
from posenc.speed import population as population_lib

_SUITE = flags.DEFINE_string('suite', 'cpu-v1', 'The benchmark suite whose cell is timed.')
_TASK = flags.DEFINE_string('task', 'even_pairs', "The suite's task.")
_ENCODING = flags.DEFINE_string('encoding', 'rotary', 'The encoding of the cell.')
_POPULATIONS = flags.DEFINE_list('populations', ['1', '3', '8', '16'], 'Population sizes.')
_SETTINGS = flags.DEFINE_list(
  'settings',
  ['default', 'devices=2'],
  "Settings to compare: 'default' or KEY=VALUE joined by '+' (loop, optimizer, devices, dispatch, "
  'attention).',
)
_STEPS = flags.DEFINE_integer('steps', 100, 'Timed training steps per setting and round.')
_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Rounds over the settings (alternating).')
_FLOOR = flags.DEFINE_bool('floor', True, 'Measure the dense-product floor of a step.')
_EVAL = flags.DEFINE_bool('eval', False, "Also time the cell's range evaluation.")
_OPENING = opening.Opening('population')


def main(argv):
  common.run(_main, argv)


def _main(argv):
  _OPENING.start(argv)
  common.at_least(_STEPS.value, '--steps')
  common.at_least(_ROUNDS.value, '--rounds')
  sizes = common.positive_ints(_POPULATIONS.value, '--populations')
  try:
    suite = benchmarks.get(_SUITE.value)
    settings = [population_lib.parse_setting(s) for s in _SETTINGS.value]
  except ValueError as e:
    common.fail(e)
  if _TASK.value not in suite.tasks:
    common.fail(
      f'--task={_TASK.value} is not a task of {suite.name}; valid: {", ".join(suite.tasks)}'
    )
  cell = suite.cell_config(_TASK.value, _ENCODING.value)
  configs = [population_lib.setting_config(cell, s, n) for s in settings for n in sizes]
  common.cpu_devices(configs)  # before anything runs JAX
  try:
    for config in configs:
      run = setup.build(config)
      if _EVAL.value and run.protocol.name != 'range':
        common.fail(
          f'--eval times range evaluations; {suite.name} {_TASK.value} is {run.protocol.name!r}'
        )
  except config_lib.ConfigError as e:
    common.fail(f'{suite.name} {_TASK.value} with {_ENCODING.value}: {e}')
  out = {
    'suite': suite.name,
    'task': _TASK.value,
    'encoding': _ENCODING.value,
    'devices': [str(d) for d in jax.local_devices()],
    'steps': _STEPS.value,
    'rounds': _ROUNDS.value,
    'rows': [],
  }
  floor = None
  if _FLOOR.value:
    floor = floor_lib.training_floor(setup.build(population_lib.setting_config(cell, {}, 1)))
    out['dense_product_floor'] = floor
    print(
      f'dense-product floor of one member: {floor["mean_step_ms"]:.2f} ms per step over the '
      f'curriculum at {floor["gflops_per_s"]:.0f} GFLOP/s: at most '
      f'{floor["max_updates_per_s"]:.0f} model-updates/s',
      flush=True,
    )
  for size in sizes:
    _time_size(cell, size, floor, out)
  _summary(out, sizes)
  _OPENING.finish(out)


def _time_size(cell, size, floor, out):
  """Builds and compiles every setting at `size` members, then times them in rounds."""
  rows = []
  for text, setting in zip(_SETTINGS.value, map(population_lib.parse_setting, _SETTINGS.value)):
    run = setup.build(population_lib.setting_config(cell, setting, size))
    trainer = population_lib.Trainer(run)
    evaluator = population_lib.Evaluator(run, trainer.params) if _EVAL.value else None
    rows.append(
      {
        'setting': text,
        'population': size,
        'devices': run.population.num_devices,
        'compiled_programs': trainer.compiled,
        'warmup_compile_s': trainer.compile_s,
        'rates': [],
        'trainer': trainer,
        'evaluator': evaluator,
        **(
          {'eval_programs': evaluator.compiled, 'eval_compile_s': evaluator.compile_s, 'eval_s': []}
          if evaluator
          else {}
        ),
      }
    )
  for _ in range(_ROUNDS.value):
    for row in rows:
      row['rates'].append(row['trainer'].model_updates_per_s(_STEPS.value))
      if row['evaluator']:
        row['eval_s'].append(row['evaluator'].seconds(row['trainer'].params))
  for row in rows:
    del row['trainer'], row['evaluator']
    row['model_updates_per_s'] = float(np.median(row['rates']))
    line = (
      f'P={size:3d} {row["setting"]:>24s} ({row["devices"]} device{"s" * (row["devices"] > 1)}): '
      f'{row["model_updates_per_s"]:6.1f} model-updates/s (rounds: '
      + ', '.join(f'{r:.0f}' for r in row['rates'])
      + ')'
    )
    if floor:
      row['fraction_of_floor'] = row['model_updates_per_s'] / floor['max_updates_per_s']
      line += f', {100 * row["fraction_of_floor"]:.0f}% of the floor'
    line += (
      f'; {row["compiled_programs"]} training programs, compile {row["warmup_compile_s"]:.1f} s'
    )
    if 'eval_s' in row:
      row['eval_median_s'] = float(np.median(row['eval_s']))
      line += (
        f'; evaluation {row["eval_median_s"]:.2f} s per pass ({row["eval_programs"]} programs, '
        f'compile {row["eval_compile_s"]:.1f} s)'
      )
    print(line, flush=True)
    out['rows'].append(row)


def _summary(out, sizes):
  """One line per setting: its median model-updates/s at every population size."""
  print('model-updates/s (median over rounds):  ' + '  '.join(f'P={n:<5d}' for n in sizes))
  for text in _SETTINGS.value:
    rates = {r['population']: r['model_updates_per_s'] for r in out['rows'] if r['setting'] == text}
    print(f'  {text:>34s}  ' + '  '.join(f'{rates[n]:7.1f}' for n in sizes))
