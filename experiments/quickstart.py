"""The README's main job: the study's effect in minutes on a laptop CPU.

  python -m launch.sweep --config=experiments/quickstart.py --workdir=runs/quickstart

Two cells of one task -- a standard positional encoding and its randomized version --
trained on short sequences and tested on longer ones (`config.SCALES['cpu']`: 3 layers,
2,000 steps at batch 64 on lengths 1-16, tested up to 64; 2 seeds at learning rate 1e-3),
then a per-length table, Table 1 and a Figure 4 plot in runs/quickstart/report/.

Args: task=NAME, standard=ENCODING, randomized=ENCODING, and the bare flag `tiny`.
"""

from posenc import config as config_lib


def get_config(arg=None):
  arg = config_lib.parse_arg(
    arg, task='even_pairs', standard='rotary', randomized='randomized_rotary', tiny=False
  )
  config = config_lib.scale(config_lib.base_config(), 'cpu')
  config.task = arg.task
  config.encoding = arg.standard
  if arg.tiny:
    config_lib.shrink_to_tiny(config)
  return config


def grid(arg=None):
  arg = config_lib.parse_arg(
    arg, task='even_pairs', standard='rotary', randomized='randomized_rotary', tiny=False
  )
  return [{'task': arg.task, 'encoding': e} for e in (arg.standard, arg.randomized)]
