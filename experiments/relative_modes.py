"""Randomized relative encodings: the method as published against the released code.

  python -m launch.sweep --config=experiments/relative_modes.py --workdir=runs/relative_modes

Ruoss et al. describe randomized relative positions as a random distance r_d for every
offset ±d (`relative_mode=symmetric`). The code behind their published tables clamps the
index into the sinusoid table, so every key at or right of the query shares one encoding
and only left keys see a randomized distance (`relative_mode=reference`). This grid trains
randomized_relative in both modes on three tasks, at the quickstart's CPU scale (3 layers,
2,000 steps, lengths 1-16, tested to 64), 3 seeds each; the report puts the two modes in
separate columns. With `study`, the model, batch and training lengths are the study's
(5 layers, batch 128, lengths 1-40), trained for 2,000 steps and tested to length 100.
docs/relative_modes.md gives the measured tables.

  python -m launch.sweep --config=experiments/relative_modes.py:study,tasks=even_pairs \
      --workdir=runs/relative_modes_study

Args: tasks=NAME/NAME/... (a '/'-separated list), and the bare flags `study` and `tiny`.
"""

from experiments import quickstart
from experiments import rpe_table1
from posenc import config as config_lib

MODES = ('reference', 'symmetric')
DEFAULT_TASKS = 'even_pairs/reverse_string/missing_duplicate_string'


def _arg(arg):
  return config_lib.parse_arg(arg, tasks=DEFAULT_TASKS, study=False, tiny=False)


def get_config(arg=None):
  parsed = _arg(arg)
  if parsed.study:
    config = rpe_table1.get_config('tiny' if parsed.tiny else None)
    if not parsed.tiny:
      config.learning_rates = [1e-3]
      config.checkpoint_every = 500
      config.train.steps = 2000
      config.eval.max_length = 100
      config.eval.stride = 10
      config.eval.examples_per_length = 256
  else:
    config = quickstart.get_config('tiny' if parsed.tiny else None)
  config.task = parsed.tasks.split('/')[0]
  config.encoding = 'randomized_relative'
  config.encoding_options.relative_mode = 'reference'
  if not parsed.tiny:
    config.seeds = [0, 1, 2]
  return config


def grid(arg=None):
  """Every task in both modes: [{'task', 'encoding', 'encoding_options.relative_mode'}]."""
  parsed = _arg(arg)
  return [
    {'task': task, 'encoding': 'randomized_relative', 'encoding_options.relative_mode': mode}
    for task in parsed.tasks.split('/')
    for mode in MODES
  ]
