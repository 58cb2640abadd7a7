"""The programs a cell compiles on each platform: `python -m launch.speed plan`.

For the study's cell (reverse_string, randomized relative positions, lengths U{1..40}, 2M
steps, evaluated at every length 1..500) at each population size and platform: the plan of
its training and evaluation programs (`posenc.programs`, `train.programs` /
`eval.programs` 'auto'), their counts, and the estimated seconds to compile and run them
under each plan. GPU and TPU programs are lowered here for those platforms (their
attention backend and population loop, as tests/test_export.py exports them); nothing is
compiled or run, so the figures are the cost model's, not measurements:

  python -m launch.speed plan [--platforms=cpu,gpu,tpu] [--populations=1,30]
      [--cell=task=reverse_string,encoding=randomized_relative] [--steps=N]

`--config=experiments/quickstart.py` plans another experiment's cell instead (its own
members unless --populations is given).
"""

from absl import flags

from experiments import rpe_table1
from launch import common
from launch.speed import opening
from posenc import config as config_lib
from posenc import programs
from posenc.programs import devices
from posenc import setup
from posenc.training import train

_OPENING = opening.Opening('plan', cell='rpe_table1 arg of the cell.')
_PLATFORMS = flags.DEFINE_list('platforms', ['cpu', 'gpu', 'tpu'], 'Platforms to plan for.')
_POPULATIONS = flags.DEFINE_list('populations', None, 'Population sizes (default 1,30).')
_CONFIG = flags.DEFINE_string(
  'config', None, 'An experiment file (PATH[:ARG]) whose cell to plan instead of --cell.'
)
_STEPS = flags.DEFINE_integer('steps', 0, 'Training steps (0: the cell\'s, 2M for the study).')


def cell_config(size: int | None):
  """The cell with `size` members (seeds x learning rates, the fewest seeds), or with its
  own members (None)."""
  if _CONFIG.value:
    config = common.check_experiment(_CONFIG.value)
  else:
    config = rpe_table1.get_config(_OPENING.cell)
  if _STEPS.value:
    config.train.steps = _STEPS.value
  return config if size is None else opening.with_members(config, size)


def plan_of(config, platform: str) -> dict:
  """The training and evaluation plans of `config` lowered for `platform`."""
  run = setup.build(config, platform=platform)
  out = {}
  stages = {'train': train.training_stage(run, None)}
  if run.protocol.programs is not None:
    stages['eval'] = run.protocol.programs(run)
  for name, stage in stages.items():
    plan, _ = programs.plan(stage, platform)
    out[name] = plan.to_json()
    k = run.train_settings.steps_per_dispatch if name == 'train' else 1
    # K steps per call are one program whatever the widths (its branches).
    out[name]['programs'] = 1 if k > 1 else len(plan.widths)
    out[name]['steps_per_dispatch'] = k
    out[name]['line'] = plan.describe()
  return out


def main(argv):
  common.run(_main, argv)


def _main(argv):
  _OPENING.start(argv)
  unknown = [p for p in _PLATFORMS.value if p not in devices.PLATFORMS]
  if unknown:
    common.fail(f'unknown --platforms {unknown}; valid: {", ".join(devices.PLATFORMS)}')
  if _STEPS.value < 0:
    common.fail(f'--steps={_STEPS.value} must be >= 0 (0: the cell\'s own)')
  if _POPULATIONS.value is not None:
    populations = common.positive_ints(_POPULATIONS.value, '--populations')
  else:
    populations = [None] if _CONFIG.value else [1, 30]
  rows = []
  for size in populations:
    try:
      config = cell_config(size)
      for platform in _PLATFORMS.value:
        plans = plan_of(config, platform)
        size = len(config_lib.members(config))
        rows.append({'platform': platform, 'population': size, **plans})
        for name in plans:
          k = plans[name]['steps_per_dispatch']
          dispatch = f', {k} steps per call: one program' if k > 1 else ''
          print(f'{platform} P={size}: {plans[name]["line"]}{dispatch}', flush=True)
    except config_lib.ConfigError as e:
      common.fail(e)
  _OPENING.finish({'cell': _CONFIG.value or _OPENING.cell, 'plans': rows})
