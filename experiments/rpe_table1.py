"""The randomized-positional-encoding study (Ruoss et al., ACL 2023): one Table 1 cell.

A cell is one (task, encoding): 10 seeds x learning rates {1e-4, 3e-4, 5e-4} = 30
members trained together for 2,000,000 steps at batch 128 on lengths U{1..40}, then
evaluated on every length 1..500 (512 examples each); the score averages 41..500.

  python -m launch.train \
      --config=experiments/rpe_table1.py:task=reverse_string,encoding=randomized_relative \
      --workdir=runs/reverse_string__randomized_relative

Args (comma-separated): task=NAME, encoding=NAME, relative_mode=reference|symmetric, and
the bare flag `tiny` (seconds on a CPU; what the tests run).

relative_mode (randomized_relative only) defaults to `reference`: the behaviour of the
released code that produced the paper's published numbers, where every key at or right
of the query shares one encoding. `symmetric` is the method as the paper describes it
(distance ±d -> ±r_d). docs/relative_modes.md measures both.

`grid()` lists the study's 15 x 13 cells for `launch.sweep`.
"""

from posenc import config as config_lib
from posenc import encodings
import tasks


def get_config(arg=None):
  arg = config_lib.parse_arg(
    arg,
    task='reverse_string',
    encoding='randomized_relative',
    relative_mode='reference',
    tiny=False,
  )
  config = config_lib.base_config()
  config.task = arg.task
  config.encoding = arg.encoding
  config.encoding_options.relative_mode = arg.relative_mode
  if arg.tiny:
    config_lib.shrink_to_tiny(config)
  return config


def grid(arg=None):
  """The study's cells as config overrides, task-major: [{'task': t, 'encoding': e}]."""
  del arg  # The grid is the same for every variant of the file.
  return [{'task': t, 'encoding': e} for t in tasks.NAMES for e in encodings.NAMES]
