"""The study's protocol shrunk: each scale a set of config fields (`SCALES`), applied to any
config by `scale`, e.g. the quickstart's `scale(config.base_config(), 'cpu')`; the
experiments' `tiny` mode is `config.shrink_to_tiny`.
"""

from __future__ import annotations

import copy

import ml_collections

# The study's protocol shrunk (`scale`), as dotted fields: 'cpu' runs in minutes on a CPU
# (the quickstart's: 3 layers, 2,000 steps at batch 64 on lengths 1..16, tested up to 64
# at every third length; 2 seeds at learning rate 1e-3); 'tiny' runs the same code path in
# seconds (the tests').
SCALES = {
  'cpu': {
    'seeds': [0, 1],
    'learning_rates': [1e-3],
    'checkpoint_every': 500,
    'train.steps': 2000,
    'train.batch_size': 64,
    'train.max_length': 16,
    'train.log_every': 100,
    'train.bucket_size': 8,
    'eval.max_length': 64,
    'eval.examples_per_length': 128,
    'eval.stride': 3,
    'eval.bucket_size': 16,
    'model.num_layers': 3,
    'model.max_position': 256,
  },
  'tiny': {
    'seeds': [0, 1],
    'learning_rates': [1e-3],
    'checkpoint_every': 10,
    'train.steps': 20,
    'train.batch_size': 8,
    'train.max_length': 8,
    'train.log_every': 5,
    'train.bucket_size': 4,
    'eval.max_length': 12,
    'eval.examples_per_length': 16,
    'eval.batch_size': 8,
    'eval.bucket_size': 6,
    'model.num_layers': 2,
    'model.d_model': 16,
    'model.num_heads': 2,
    'model.ffn_size': 32,
    'model.max_position': 64,
  },
}


def scale(c: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
  """`c` with the fields of the scale `name` (`SCALES`), in place; returns `c`.

  Example:
    >>> from posenc import config
    >>> c = scale(config.base_config(), 'cpu')
    >>> c.train.steps, c.model.num_layers, c.model.d_model
    (2000, 3, 64)
  """
  c.update_from_flattened_dict(copy.deepcopy(SCALES[name]))
  return c
