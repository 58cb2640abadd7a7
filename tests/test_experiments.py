"""Every experiment file builds a valid config and grid; the quickstart's tiny mode runs."""

import glob
import importlib
import os

import pytest

from posenc import setup
from posenc.training import train
from posenc import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(
  os.path.basename(p)[:-3]
  for p in glob.glob(os.path.join(ROOT, 'experiments', '*.py'))
  if not p.endswith('__init__.py')
)


@pytest.mark.parametrize('name', FILES)
def test_experiment_configs_validate(name):
  module = importlib.import_module(f'experiments.{name}')
  for arg in ('', 'tiny'):
    config = module.get_config(arg if name != 'sweep_tiny' else None)
    setup.build(config)
    if hasattr(module, 'grid'):
      from posenc import sweep

      for cell in module.grid():
        setup.build(config_lib.cell_config(config, cell))


def test_rpe_table1_is_the_study_protocol():
  from experiments import rpe_table1

  c = rpe_table1.get_config('task=missing_duplicate_string,encoding=randomized_relative')
  assert (c.task, c.encoding) == ('missing_duplicate_string', 'randomized_relative')
  assert len(c.seeds) == 10 and list(c.learning_rates) == [1e-4, 3e-4, 5e-4]
  assert (c.train.steps, c.train.batch_size, c.train.max_length) == (2_000_000, 128, 40)
  assert (c.eval.max_length, c.eval.examples_per_length, c.model.max_position) == (500, 512, 2048)


def test_quickstart_tiny_runs_end_to_end(tmp_path):
  from experiments import quickstart

  for cell in quickstart.grid('tiny'):
    config = quickstart.get_config('tiny')
    config.task, config.encoding = cell['task'], cell['encoding']
    results = train.train_and_evaluate(setup.build(config), str(tmp_path / cell['encoding']))
    assert all(m['score'] is not None for m in results['members'])
