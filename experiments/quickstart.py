"""The README's main job: the study's effect in minutes on a laptop CPU.

  python -m launch.sweep --config=experiments/quickstart.py --workdir=runs/quickstart

Two cells of one task -- a standard positional encoding and its randomized version --
trained on short sequences and tested on longer ones, then a per-length table, Table 1
and a Figure 4 plot in runs/quickstart/report/.

Args: task=NAME, standard=ENCODING, randomized=ENCODING, and the bare flag `tiny`.
"""

from posenc import config as config_lib


def cpu_scale(config):
  """The study's protocol shrunk to minutes on a CPU: 3 layers, 2,000 steps at batch 64 on
  lengths 1-16, tested up to 64; 2 seeds at learning rate 1e-3."""
  config.seeds = [0, 1]
  config.learning_rates = [1e-3]
  config.checkpoint_every = 500
  config.train.steps = 2000
  config.train.batch_size = 64
  config.train.max_length = 16
  config.train.log_every = 100
  config.train.bucket_size = 8
  config.eval.max_length = 64
  config.eval.examples_per_length = 128
  config.eval.stride = 3
  config.eval.bucket_size = 16
  config.model.num_layers = 3
  config.model.max_position = 256
  return config


def get_config(arg=None):
  arg = config_lib.parse_arg(
    arg, task='even_pairs', standard='rotary', randomized='randomized_rotary', tiny=False
  )
  config = cpu_scale(config_lib.base_config())
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
