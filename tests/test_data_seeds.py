"""Data order as a population axis (`config.data_seeds`): a member is (seed, data seed,
learning rate), all trained in one compiled step."""

import json
import os
import pathlib

import numpy as np
import pytest

from experiments import rpe_table1
from posenc.storage import lease
from posenc import config as config_lib
from posenc.storage import io
from posenc.training import population as population_lib
from posenc import setup
from posenc.training import train

GOLDEN = pathlib.Path(__file__).resolve().parent / 'data' / 'golden_run.json'


def tiny_config(**fields):
  config = rpe_table1.get_config('task=parity_check,tiny')
  config.train.steps, config.train.log_every = 6, 2
  config.seeds, config.learning_rates = [0, 1], [1e-3]
  # One program per bucket, as the runs recorded in tests/data were trained (a merged plan
  # draws other dropout masks).
  config.train.programs = 'buckets'
  for key, value in fields.items():
    setattr(config, key, value)
  return config


def tiny_run(workdir, **fields):
  """Per member: the logged losses and the accuracy by length."""
  results = train.train_and_evaluate(setup.build(tiny_config(**fields)), str(workdir))
  rows = io.read_jsonl(os.path.join(workdir, 'metrics.jsonl'))
  return [
    {
      'member': {k: m[k] for k in ('seed', 'data_seed', 'learning_rate') if k in m},
      'loss': [r['loss'][i] for r in rows],
      'accuracy_by_length': m['accuracy_by_length'],
    }
    for i, m in enumerate(results['members'])
  ]


def test_members_are_seed_data_seed_learning_rate():
  config = tiny_config(data_seeds=[5, 6])
  assert config_lib.members(config) == [
    {'seed': s, 'data_seed': d, 'learning_rate': 1e-3} for s in (0, 1) for d in (5, 6)
  ]
  assert config_lib.members(tiny_config()) == [
    {'seed': 0, 'learning_rate': 1e-3},
    {'seed': 1, 'learning_rate': 1e-3},
  ]
  population = population_lib.Population(config)
  assert population.data_index.tolist() == [0, 1, 0, 1]
  _, keys, _ = population_lib.data_keys(config)
  assert keys.shape == (2,)


@pytest.mark.parametrize(
  'data_seeds, message',
  [
    ([0, 0], 'data_seeds [0, 0] has duplicates'),
    ([0, -1], 'data_seeds [0, -1]: -1 is not an integer in 0..2^32-1'),
    ([0, 'a'], "data_seeds [0, 'a']: 'a' is not an integer"),
  ],
)
def test_bad_data_seeds_are_one_line(data_seeds, message):
  with pytest.raises(
    config_lib.ConfigError,
    match=message.replace('[', r'\[').replace(']', r'\]').replace('^', r'\^'),
  ):
    setup.build(tiny_config(data_seeds=data_seeds))


def test_a_recorded_config_without_data_seeds_is_the_same_run():
  recorded = config_lib.as_json(tiny_config())
  del recorded['data_seeds']
  assert config_lib.config_changes(recorded, config_lib.as_json(tiny_config())) == []
  assert config_lib.config_changes(
    recorded, config_lib.as_json(tiny_config(data_seeds=[0, 1]))
  ) == [('data_seeds', [], [0, 1])]


def test_the_default_reproduces_the_run_before_data_seeds(tmp_path):
  """tests/data/golden_run.json: `tiny_run` of the default config, as the code before data
  seeds trained it (same machine: equal bit for bit; here to float rounding, as another
  CPU may round differently)."""
  golden = json.loads(GOLDEN.read_text())
  now = tiny_run(tmp_path)
  assert [m['member'] for m in now] == [m['member'] for m in golden]
  for a, b in zip(now, golden):
    np.testing.assert_allclose(a['loss'], b['loss'], rtol=1e-6)
    assert a['accuracy_by_length'].keys() == b['accuracy_by_length'].keys()
    np.testing.assert_allclose(
      list(a['accuracy_by_length'].values()), list(b['accuracy_by_length'].values()), rtol=1e-6
    )


def test_data_seed_members_are_the_runs_of_that_data_order(tmp_path):
  plain = tiny_run(tmp_path / 'plain')
  both = tiny_run(tmp_path / 'both', data_seeds=[0, 7])
  only7 = tiny_run(tmp_path / 'only7', data_seeds=[7])
  by = lambda runs: {(m['member']['seed'], m['member'].get('data_seed', 0)): m for m in runs}
  plain, both, only7 = by(plain), by(both), by(only7)
  for seed in (0, 1):
    # The data seed equal to data_seed is the run without data_seeds, bit for bit; a data
    # seed's members are the same in any population that holds them.
    assert both[seed, 0]['loss'] == plain[seed, 0]['loss']
    assert both[seed, 0]['accuracy_by_length'] == plain[seed, 0]['accuracy_by_length']
    assert both[seed, 7]['loss'] == only7[seed, 7]['loss']
    # Another data seed: the same initialisation on other batches.
    assert both[seed, 7]['loss'][0] != both[seed, 0]['loss'][0]


def test_results_record_each_member_s_data_seed(tmp_path):
  results = train.train_and_evaluate(setup.build(tiny_config(data_seeds=[3, 4])), str(tmp_path))
  assert [(m['seed'], m['data_seed']) for m in results['members']] == [
    (0, 3),
    (0, 4),
    (1, 3),
    (1, 4),
  ]
  assert list(results['members'][0])[:3] == ['seed', 'data_seed', 'learning_rate']


def test_a_data_seed_population_resumes_bit_for_bit(tmp_path):
  straight = tiny_run(tmp_path / 'straight', data_seeds=[0, 7])
  config = tiny_config(data_seeds=[0, 7], checkpoint_every=2)
  written = []
  with pytest.raises(lease.Preempted):
    train.train_and_evaluate(
      setup.build(config),
      str(tmp_path / 'stopped'),
      should_stop=lambda: bool(written),
      checkpointed=written.append,
    )
  assert written == [2]
  results = train.train_and_evaluate(setup.build(config), str(tmp_path / 'stopped'))
  rows = io.read_jsonl(os.path.join(tmp_path / 'stopped', 'metrics.jsonl'))
  for i, member in enumerate(results['members']):
    assert [r['loss'][i] for r in rows] == straight[i]['loss']
    assert member['accuracy_by_length'] == straight[i]['accuracy_by_length']
