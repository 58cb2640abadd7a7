"""Scale-out figures: `python -m launch.speed scale [--steps=5] [--cost_steps=5]`.

Model-updates/s of a 30-member population of the study's model (reverse_string,
randomized relative, batch 128, U{1..40}) on 1 CPU device and on 8 forced CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=8; on this 2-core machine the 8
"devices" share the same 2 cores, so this shows the sharding's overhead, not a
speed-up), then the cost model's estimate for the study's full 15 x 13 grid on this
machine's devices.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import flags

from experiments import rpe_table1
from launch import common
from launch.speed import opening
from posenc.sweep import cost

_STEPS = flags.DEFINE_integer('steps', 5, 'Timed steps per device setting.')
_COST_STEPS = flags.DEFINE_integer('cost_steps', 5, 'Steps the cost model times.')
_OPENING = opening.Opening('scale')


def _train_figures(devices: int) -> dict:
  env = dict(os.environ)
  if devices > 1:
    env['XLA_FLAGS'] = f'--xla_force_host_platform_device_count={devices}'
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, 'train.json')
    subprocess.run(
      [
        sys.executable,
        '-m',
        'launch.speed',
        'train',
        '--populations=30',
        f'--steps={_STEPS.value}',
        '--skip_first_update',
        f'--out={out}',
      ],
      env=env,
      check=True,
    )
    with open(out) as f:
      return json.load(f)['populations'][0]


def main(argv):
  common.run(_main, argv)


def _main(argv):
  _OPENING.start(argv)
  common.at_least(_STEPS.value, '--steps')
  common.at_least(_COST_STEPS.value, '--cost_steps')
  rows = {}
  for devices in (1, 8):
    r = _train_figures(devices)
    rows[devices] = r
    print(
      f'P=30 on {devices} device(s): {r["model_updates_per_s"]:.1f} model-updates/s '
      f'({r["steps_per_s"]:.3f} population steps/s)',
      flush=True,
    )
  est = cost.estimate(rpe_table1.get_config(), rpe_table1.grid(), _COST_STEPS.value)
  print(cost.format_estimate(est))
  _OPENING.finish({'train': {str(k): v for k, v in rows.items()}, 'cost': est})
