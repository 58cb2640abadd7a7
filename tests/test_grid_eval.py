"""The two-dimensional evaluation's bookkeeping: cells, regions, region means."""

import types

import pytest

from posenc import config as config_lib
from posenc.kinds.grid import protocol as grid_eval
from posenc.training import settings


def small(m=5, stride=1, beyond=(7,), n=2):
  """What the grid's bookkeeping reads of a run: its settings."""
  config = config_lib.base_config()
  config.train.max_length = n
  config.eval.grid_max, config.eval.grid_stride, config.eval.beyond = m, stride, list(beyond)
  return types.SimpleNamespace(
    train_settings=settings.TrainSettings.of(config, 'cpu'),
    eval_settings=settings.EvalSettings.of(config),
  )


def test_cells_row_major_with_stride_then_the_diagonal_beyond():
  assert grid_eval.cells(small(m=5, stride=2)) == [
    (1, 1),
    (1, 3),
    (1, 5),
    (3, 1),
    (3, 3),
    (3, 5),
    (5, 1),
    (5, 3),
    (5, 5),
    (7, 7),
  ]
  assert len(grid_eval.cells(small(m=4, beyond=()))) == 16


@pytest.mark.parametrize(
  'cell, region',
  [
    ((1, 1), 'id'),
    ((2, 2), 'id'),
    ((2, 3), 'ood'),
    ((5, 1), 'ood'),
    ((5, 5), 'ood'),
    ((7, 7), 'beyond'),
    ((6, 1), 'beyond'),
  ],
)
def test_region(cell, region):
  assert grid_eval.region(*cell, n=2, m=5) == region


def test_region_means_on_a_fabricated_grid():
  config = small(m=3, beyond=(5,), n=1)
  by_cell = {}
  for a, b in grid_eval.cells(config):
    value = {'id': 1.0, 'ood': 0.5, 'beyond': 0.0}[grid_eval.region(a, b, 1, 3)]
    by_cell[(a, b)] = {'exact_match': [value, value / 2], 'accuracy': [1.0, 1.0]}
  by_cell[(3, 3)]['exact_match'] = [0.0, 0.0]  # one ood cell of eight differs
  means = grid_eval.region_means(by_cell, config)
  assert means[0] == {'id': 1.0, 'ood': pytest.approx(0.5 * 7 / 8), 'beyond': 0.0}
  assert means[1]['id'] == 0.5 and means[1]['ood'] == pytest.approx(0.25 * 7 / 8)
  assert grid_eval.region_means(by_cell, config, 'accuracy')[0]['ood'] == 1.0
  no_beyond = {c: v for c, v in by_cell.items() if c != (5, 5)}
  assert grid_eval.region_means(no_beyond, config)[0]['beyond'] is None
