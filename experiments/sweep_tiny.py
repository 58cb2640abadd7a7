"""A 2 x 2 grid in tiny mode: what the sweep tests (and a quick try of launch.sweep) run.

python -m launch.sweep --config=experiments/sweep_tiny.py --workdir=/tmp/sweep_tiny
"""

from experiments import rpe_table1
from posenc import config as config_lib


def get_config(arg=None):
  config_lib.parse_arg(arg)  # Takes no args: any is an error.
  config = rpe_table1.get_config('tiny')
  # One training and one evaluation program per cell: seconds per cell.
  config.train.steps = 10
  config.train.bucket_size = 8
  config.eval.bucket_size = 12
  return config


def grid(arg=None):
  config_lib.parse_arg(arg)
  return [
    {'task': t, 'encoding': e}
    for t in ('parity_check', 'reverse_string')
    for e in ('none', 'randomized_relative')
  ]
