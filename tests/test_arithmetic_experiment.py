"""The arithmetic study's experiment: its configs, grids and ablations (its tiny mode end to
end, killed and resumed: tests/test_kill_resume.py)."""

import pytest

from experiments import abacus_arithmetic
from posenc import config as config_lib
from posenc import setup
from posenc.kinds.grid import protocol as grid_eval


def test_grid_lists_the_papers_figures():
  cells = abacus_arithmetic.grid()
  # Figure 3: standard and standard_ii at depth 16; Figure 4: L x R at effective depth 16.
  shapes = {(c['model.num_layers'], c['model.recurrences'], c['model.injection']) for c in cells}
  assert shapes == {
    (16, 1, 'none'),
    (16, 1, 'layer'),
    (8, 2, 'layer'),
    (4, 4, 'layer'),
    (2, 8, 'layer'),
    (1, 16, 'layer'),
  }
  assert {c['encoding'] for c in cells} == set(abacus_arithmetic.ENCODINGS)
  assert {
    (c['model.num_layers'], c['model.recurrences']) for c in abacus_arithmetic.grid('task=sorting')
  } >= {(8, 1), (4, 2), (2, 4), (1, 8)}
  for arg in ('', 'cpu', 'tiny', 'task=sorting', 'task=multiplication,encoding=fire'):
    setup.build(abacus_arithmetic.get_config(arg))
  assert abacus_arithmetic.get_config('task=multiplication,encoding=fire').learning_rates == [6e-5]
  assert abacus_arithmetic.get_config('task=multiplication').model.recurrences == 4


@pytest.mark.slow
def test_ablations_train_and_evaluate(tmp_path):
  # Random padding in the training data (Fig. 20) and the loss on every token (Fig. 16).
  from posenc.training import train

  config = config_lib.cell_config(
    abacus_arithmetic.get_config('tiny,architecture=standard'),
    {
      'task_options.pad_probability': 0.3,
      'train.loss_on': 'all',
      'train.steps': 4,
      'seeds': [0],
      'eval.beyond': [],
    },
  )
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  member = results['members'][0]
  assert member['regions']['beyond'] is None and 0 <= member['regions']['ood'] <= 1
  # Evaluation prompts are not padded: one program per unpadded width of the cells.
  plain = abacus_arithmetic.get_config('tiny')
  task = setup.build(plain).task
  shapes = {
    grid_eval.widths(task, a, b, plain.eval.bucket_size)
    for a, b in grid_eval.cells(setup.build(config))
  }
  assert setup.build(config).task.max_prompt(5, 5) == 3 * task.max_prompt(5, 5)
  assert results['compiled_programs']['eval'] == len(shapes)
