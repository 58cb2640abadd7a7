"""Results that hold across seeds and data orders: the study's effect measured over a
population, not its best member (docs/robustness.md).

  python -m launch.sweep --config=experiments/robustness.py:cpu --workdir=runs/robustness
  python -m launch.report runs/robustness --scorecard --out=runs/robustness/report

Two tasks whose effect is seed-fragile in the study (even_pairs: max 90 against a mean of
67.7 ± 15.2 over seeds; reverse_string), each with a standard encoding and its randomized
version; every cell a population of seeds × data orders (`data_seeds`) at one learning
rate, trained in one compiled step. The scorecard (`launch.report --scorecard`) then gives
per cell the mean, spread, success rate and longest length generalized with their 95%
intervals, seed and data-order variance apart, and randomized against standard by a
permutation test of the difference of means, with the difference's interval.

Args: `cpu` (4 seeds × 4 data orders, minutes per cell on a CPU), `tiny` (for tests),
tasks=a+b, standard=ENCODING, randomized=ENCODING, seeds=K, data_seeds=K (K >= 1; `tiny`
keeps its 2 × 2). Without `cpu` or `tiny`, the study's scale (10 seeds × 10 data orders, 2M
steps).
"""

from posenc import config as config_lib

_DEFAULTS = dict(
  tasks='even_pairs+reverse_string',
  standard='rotary',
  randomized='randomized_rotary',
  seeds=0,
  data_seeds=0,
  cpu=False,
  tiny=False,
)
# Counts given in the arg string (0 above: the mode's own count).
_AT_LEAST = dict(seeds=1, data_seeds=1)


def get_config(arg=None):
  arg = config_lib.parse_arg(arg, at_least=_AT_LEAST, **_DEFAULTS)
  config = config_lib.base_config()
  config.task = arg.tasks.split('+')[0]
  config.encoding = arg.standard
  seeds, data_seeds = 10, 10
  if arg.cpu or arg.tiny:
    config_lib.scale(config, 'cpu')
    # 16 members per cell: the steps, batch and evaluation shrink to keep a cell in minutes.
    config.train.steps = 2000
    config.train.batch_size = 32
    config.model.num_layers = 2
    config.eval.examples_per_length = 64
    config.eval.stride = 4
    seeds, data_seeds = 4, 4
  config.learning_rates = [1e-3] if (arg.cpu or arg.tiny) else [3e-4]
  config.seeds = list(range(arg.seeds or seeds))
  config.data_seeds = list(range(arg.data_seeds or data_seeds))
  if arg.tiny:
    config_lib.shrink_to_tiny(config)
    config.seeds, config.data_seeds = [0, 1], [0, 1]
  return config


def grid(arg=None):
  arg = config_lib.parse_arg(arg, at_least=_AT_LEAST, **_DEFAULTS)
  return [
    {'task': t, 'encoding': e} for t in arg.tasks.split('+') for e in (arg.standard, arg.randomized)
  ]
