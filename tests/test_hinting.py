"""The task-hinting study: edit distance, the multi-task schedules and heads, the fixed
training set, the cosine schedule and bad input (the experiment's tiny mode end to end,
killed, resumed and reported: tests/test_kill_resume.py)."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import sorting_hints
from posenc import config as config_lib
from posenc.kinds.lengths import section as hint_report
from posenc.sections import load as report_load
from posenc.kinds.lengths import protocol as length_eval
from posenc.training import multitask
from posenc.training import population as population_lib
from posenc import results
from posenc.training import settings
from posenc.training import state as state_lib
from posenc import sweep as sweep_lib
from posenc.training import train
from posenc.training import update
from posenc import setup
from posenc.kinds.lengths import record as lengths_record


def _levenshtein(a, b):
  row = list(range(len(b) + 1))
  for i, x in enumerate(a, 1):
    prev, row[0] = row[0], i
    for j, y in enumerate(b, 1):
      prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
  return row[-1]


def _pad(rows, width):
  return jnp.array([list(r) + [0] * (width - len(r)) for r in rows], jnp.int32)


def test_edit_distance_on_known_pairs_and_against_the_textbook_recurrence():
  pairs = [
    ('kitten', 'sitting', 3),
    ('', 'abc', 3),
    ('abc', '', 3),
    ('abc', 'abc', 0),
    ('flaw', 'lawn', 2),
    ('intention', 'execution', 5),
  ]
  a = _pad([[ord(c) for c in x] for x, _, _ in pairs], 9)
  b = _pad([[ord(c) for c in y] for _, y, _ in pairs], 9)
  got = length_eval.edit_distance(
    a, b, jnp.array([len(x) for x, _, _ in pairs]), jnp.array([len(y) for _, y, _ in pairs])
  )
  assert got.tolist() == [d for _, _, d in pairs]
  rng = np.random.default_rng(0)
  xs = [rng.integers(0, 4, rng.integers(0, 12)).tolist() for _ in range(64)]
  ys = [rng.integers(0, 4, rng.integers(0, 12)).tolist() for _ in range(64)]
  got = jax.jit(length_eval.edit_distance)(
    _pad(xs, 12), _pad(ys, 12), jnp.array([len(x) for x in xs]), jnp.array([len(y) for y in ys])
  )
  assert got.tolist() == [_levenshtein(x, y) for x, y in zip(xs, ys)]


def _config(arg='tiny,hint=successor', **overrides):
  return config_lib.cell_config(sorting_hints.get_config(arg), overrides)


def _batch(config, step):
  task_list = multitask.tasks_of(config)
  shape = multitask.train_shape(task_list, config.train.max_length)
  return multitask.train_batch(
    settings.TrainSettings.of(config, 'cpu'),
    task_list,
    jax.random.key(step),
    population_lib.dataset_key(config),
    jnp.int32(step),
    shape,
  )


def test_alternating_steps_train_one_task_each_in_turn():
  config = _config('tiny,hint=all')
  heads = []
  for step in range(6):
    batch = _batch(config, step)
    assert len(set(batch['task'].tolist())) == 1
    heads.append(int(batch['task'][0]))
    answers = (batch['length'] - batch['prompt_length']).tolist()
    if heads[-1] in (1, 2):  # successor and count answer with one token
      assert set(answers) == {1}
  assert heads == [0, 1, 2, 3, 0, 1]


def test_mixed_batches_split_every_step_between_the_tasks():
  config = _config('tiny,hint=all,schedule=mixed')
  config.train.batch_size = 10
  batch = _batch(config, 3)
  assert batch['task'].tolist() == [0] * 3 + [1] * 3 + [2] * 2 + [3] * 2
  assert multitask.split_sizes(10, 3) == [4, 3, 3]


def test_a_fixed_training_set_repeats_its_examples():
  config = _config(**{'train.dataset_size': 2})  # one example per task
  rows = {tuple(r) for step in (0, 2, 4) for r in _batch(config, step)['tokens'].tolist()}
  assert len(rows) == 1
  config.train.dataset_size = 0
  rows = {tuple(r) for r in _batch(config, 0)['tokens'].tolist()}
  assert len(rows) > 1


def _head_kernel(state):
  return np.asarray(state.params['heads']['kernel'])  # [P, D, heads, V]


def test_an_alternate_step_updates_only_its_tasks_head():
  config = _config()
  config.seeds, config.train.schedule = [0], 'constant'  # (the cosine's first rate is 0)
  run = setup.build(config)
  population, model = run.population, run.model
  assert model.num_outputs == 2
  update_fn = update.make_update_fn(run, config.train.max_length)
  state = state_lib.init_state(run)
  before = _head_kernel(state)
  for step in range(2):
    state, _ = update_fn(state, jnp.int32(0), population.learning_rates, population.train_keys)
    after = _head_kernel(state)
    changed = [not np.array_equal(before[:, :, h], after[:, :, h]) for h in range(2)]
    # Step 0 trains the sorting head only; step 1 the successor head (Adam's momentum still
    # moves the sorting head a little: one optimizer state serves every head).
    assert changed == [True, False] if step == 0 else changed[1]
    before = after


def test_the_cosine_schedule_warms_up_then_decays_to_zero():
  config = config_lib.base_config()
  config.train.schedule, config.train.steps, config.train.warmup = 'cosine', 100, 0.1
  scale = [
    float(state_lib.learning_rate_scale(settings.TrainSettings.of(config, 'cpu'), jnp.int32(s)))
    for s in (0, 5, 10, 55, 100)
  ]
  np.testing.assert_allclose(scale, [0.0, 0.5, 1.0, 0.5, 0.0], atol=1e-6)


@pytest.mark.parametrize(
  'overrides, message',
  [
    (
      {'hints': ['carry']},
      "unknown hint 'carry' for task 'sorting_hinted'; valid hints: successor, count, fill",
    ),
    ({'model.temperature': 'fixed', 'model.temperature_beta': -0.5}, 'is negative'),
    ({'eval.distributions': ['zipf']}, "unknown eval.distributions entry 'zipf'"),
    ({'eval.lengths': [4, 60]}, 'eval.lengths'),  # rep2 at 60 needs 30 > 10 values
    ({'eval.lengths': []}, 'eval.lengths is empty'),
    ({'train.dataset_size': 1}, 'train.dataset_size=1'),
    ({'train.hint_schedule': 'random'}, "train.hint_schedule 'random'"),
    ({'task_options.num_values': 1}, 'num_values'),
    ({'task_options.colour': 1}, "unknown option 'colour'"),
    ({'model.family': 'encoder'}, 'model.family=decoder'),
    ({'encoding': 'learned', 'model.max_position': 12}, 'model.max_position=12'),
  ],
)
def test_bad_hinting_configs_are_one_line_errors(overrides, message):
  config = _config(**{k: v for k, v in overrides.items() if not k.startswith('task_options')})
  for key, value in overrides.items():
    if key.startswith('task_options.'):
      config.task_options[key.split('.', 1)[1]] = value
  with pytest.raises(config_lib.ConfigError, match=None) as e:
    setup.build(config)
  assert message in str(e.value) and '\n' not in str(e.value)


def test_hints_on_a_task_without_any_are_refused():
  config = config_lib.base_config()
  config.hints = ['successor']
  with pytest.raises(config_lib.ConfigError, match='need a task of the hinting study'):
    setup.build(config)


@pytest.mark.parametrize(
  'arg',
  [
    'tiny,hint=colour',
    'tiny,task=parity',
    'tiny,temperature=hot',
    'tiny,beta=-1,temperature=fixed',
    'tiny,encoding=abacus',
    'tiny,encoding=abacus+fire',
  ],
)
def test_bad_experiment_args_exit_2_with_one_line_and_write_nothing(cli, tmp_path, arg):
  workdir = tmp_path / 'run'
  proc = cli.run(
    ['launch.train', f'--config=experiments/sorting_hints.py:{arg}', f'--workdir={workdir}']
  )
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.count('\n') == 1 and proc.stderr.startswith('error: ')
  assert not workdir.exists()


def test_every_mode_of_the_experiment_validates():
  for arg in (
    '',
    'cpu',
    'tiny',
    'hint=all',
    'task=increment',
    'task=increment,hint=carry',
    'temperature=learned,beta=0.5',
    'modified,hint=successor',
    'schedule=mixed,hint=all',
    'task=increment,encoding=abacus',
  ):
    setup.build(sorting_hints.get_config(arg))
  cells = sorting_hints.grid()
  assert {tuple(c['hints']) for c in cells} == {
    (),
    ('successor',),
    ('count',),
    ('fill',),
    ('successor', 'count', 'fill'),
  }
  assert [c['hints'] for c in sorting_hints.grid('cpu')] == [[], ['successor']]


def test_the_multi_head_decoder_with_a_learned_temperature_exports_for_accelerators():
  config = _config('tiny,hint=successor,temperature=learned')
  shape = multitask.train_shape(multitask.tasks_of(config), config.train.max_length)
  batch = _batch(config, 1)
  for platform in ('cuda', 'tpu'):
    model = setup.build(config, platform='gpu' if platform == 'cuda' else 'tpu').model
    params = model.init(
      {'params': jax.random.key(0)}, jnp.zeros((1, 4), jnp.int32), jnp.int32(4), deterministic=True
    )['params']

    def loss(p, tokens, lengths, heads):
      logits, _ = model.apply({'params': p}, tokens, lengths, deterministic=True, task=heads)
      return jnp.mean(logits)

    exported = jax.export.export(jax.jit(jax.grad(loss)), platforms=[platform])(
      params, batch['tokens'][:, : sum(shape) - 1], batch['length'] - 1, batch['task']
    )
    assert exported.platforms == (platform,)
    assert 'temperature_beta' in str(params['layer_0']['attention'].keys())


@pytest.mark.parametrize(
  'arg, hints, distributions',
  [
    ('tiny,task=increment,hint=carry', ['carry'], ['uniform', 'nines']),
    pytest.param(
      'tiny,hint=all,schedule=mixed,temperature=learned,dataset=64',
      ['successor', 'count', 'fill'],
      ['uniform', 'rep2'],
      marks=pytest.mark.slow,
    ),
  ],
)
def test_other_variants_train_and_evaluate(tmp_path, arg, hints, distributions):
  config = sorting_hints.get_config(arg)
  config.seeds = [0]
  results = train.train_and_evaluate(setup.build(config), str(tmp_path), progress=lambda _: None)
  assert results['hints'] == hints and results['distributions'] == distributions
  member = results['members'][0]
  assert set(member['edit_distance_by_length']) == set(distributions)
  assert results['num_params'] > 0 and not member['diverged']


def test_the_report_pools_runs_of_one_variant():
  def run(seed_value, hints=()):
    member = lengths_record.LengthsMember(
      seed=0,
      learning_rate=1e-3,
      diverged=False,
      score=0.0,
      by_length={
        'exact_match': {'uniform': {10: seed_value, 30: 0.0}},
        'edit_distance': {'uniform': {10: 0.5, 30: 0.25}},
      },
    )
    record = results.Results(
      task='sorting_hinted',
      encoding='fire',
      family='decoder',
      encoding_options={},
      num_params=1,
      architecture='standard',
      train_steps=1,
      train_length=20,
      evaluation=lengths_record.LengthsResults(
        hints, 'alternate', (10, 30), ('uniform',), 'uniform', (30,), (member,)
      ),
    )
    return report_load.RunFile(pathlib.Path(f'run{seed_value}/results.json'), record)

  text = hint_report.table([run(0.5), run(1.0), run(0.25, ('successor',))])
  assert 'no hint · fire: 2/2, successor · fire: 1/1' in text
  assert '| 10 | 75.0 ± 35.4 | 25.0 |' in text  # sample sd of 50 and 100 and '| 30* |' in text
