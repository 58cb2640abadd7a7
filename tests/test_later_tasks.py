"""tasks/later.py: flip_flop, associative_recall and copy against independent oracles (Python
ints and loops, written from the papers' definitions), padding, determinism, the masks,
options and bad input, sampling laws, and a tiny decoder run of each.

Statistical tests use fixed keys and reject at p < 1e-4 (chi-square), as tests/test_tasks.py.
"""

import collections
import functools

import chex
import jax
import numpy as np
import pytest
from scipy import stats

from experiments import later_tasks
from experiments import rpe_decoder
from posenc import config as config_lib
from posenc import report
from posenc import setup
from posenc.training import train
import tasks

P_MIN = 1e-4
NUM_SAMPLES = 500
W, R, I = 2, 3, 4  # flip_flop's instructions


# ============================================================================ oracles
def flip_flop(x):
  """The bit of the most recent write, after checking that `x` is a flip-flop string up to
  its last read (reads carry the register's bit)."""
  assert len(x) % 2 == 1 and x[-1] == R, x
  if len(x) == 1:
    return [0]
  register = None
  for instruction, bit in zip(x[0:-1:2], x[1:-1:2]):
    assert instruction in (W, R, I) and bit in (0, 1), x
    if register is None:
      assert instruction == W, x
    if instruction == W:
      register = bit
    elif instruction == R:
      assert bit == register, x
  return [register]


def associative_recall(x, num_keys=256, queries='all'):
  """The class of each queried key's value, after checking the layout: n pairs of distinct
  keys and values, then every key once in some order ('all') or one of them ('one')."""
  if len(x) < 3:
    assert x == [0] * len(x)
    return [0]
  n = len(x) // 3 if queries == 'all' else (len(x) - 1) // 2
  keys, values, asked = x[0 : 2 * n : 2], x[1 : 2 * n : 2], x[2 * n :]
  assert len(x) == 2 * n + (n if queries == 'all' else 1), x
  assert all(k < num_keys for k in keys) and all(v >= num_keys for v in values), x
  assert len(set(keys)) == n and len(set(values)) == n and set(asked) <= set(keys), x
  assert queries == 'one' or sorted(asked) == sorted(keys), x
  table = dict(zip(keys, values))
  return [table[q] - num_keys for q in asked]


def copy(x):
  return list(x)


# The cases: a task, or a task and its options after a colon.
ORACLES = {
  'flip_flop': flip_flop,
  'associative_recall': associative_recall,
  'associative_recall:one': functools.partial(associative_recall, queries='one'),
  'copy': copy,
}
CASES = tuple(ORACLES)
NAMES = ('flip_flop', 'associative_recall', 'copy')


def task_of(case):
  name, _, queries = case.partition(':')
  return tasks.get(name, {'queries': queries} if queries else None)


@functools.lru_cache(maxsize=None)
def padded_sample(case, length, max_length, seed=0, batch=NUM_SAMPLES):
  batch = task_of(case).sample_padded(jax.random.key(seed), batch, length, max_length)
  return jax.tree.map(np.asarray, batch)


@functools.lru_cache(maxsize=None)
def exact_sample(case, length, seed=0, batch=NUM_SAMPLES):
  return jax.tree.map(np.asarray, task_of(case).sample(jax.random.key(seed), batch, length))


def _check(case, batch, length):
  """The batch's shapes, padding and masks, and its targets against the oracle."""
  task = task_of(case)
  l_in = int(batch['length'])
  assert l_in == task.input_length(length) <= length
  out_len = task.output_length(l_in)
  assert int(batch['output_length']) == out_len
  assert not batch['inputs'][:, l_in:].any()
  for key in ('targets', 'mask', 'output_valid'):
    assert not batch[key][:, out_len:].any(), key
  # No terminator: the accuracy mask and the loss mask are both the real outputs.
  assert (batch['mask'][:, :out_len] == 1).all() and (batch['output_valid'][:, :out_len] == 1).all()
  x, y = batch['inputs'][:, :l_in], batch['targets'][:, :out_len]
  assert 0 <= x.min() and x.max() < task.vocab_size
  assert 0 <= y.min() and y.max() < task.num_classes
  for row, want in zip(x.tolist(), y.tolist()):
    assert ORACLES[case](row) == want, (row, want)


# ============================================================================ registry
def test_registry_keeps_the_study_names_and_adds_the_later_ones():
  assert tasks.LATER == NAMES
  assert len(tasks.NAMES) == 15 and not set(tasks.NAMES) & set(tasks.LATER)
  for name in NAMES:
    task = tasks.get(name)
    assert task is tasks.REGISTRY[name] and task.name == name and task.level == 'later'
    assert task.protocol == 'range'
    hash(task)
  assert tasks.get('flip_flop').is_classification
  assert not tasks.get('associative_recall').is_classification
  assert (tasks.get('associative_recall').vocab_size, tasks.get('copy').num_classes) == (512, 26)


@pytest.mark.parametrize(
  'case, lengths',
  [
    ('flip_flop', {1: (1, 1), 2: (1, 1), 3: (3, 1), 8: (7, 1), 64: (63, 1)}),
    ('associative_recall', {1: (1, 1), 2: (2, 1), 3: (3, 1), 8: (6, 2), 64: (63, 21)}),
    ('associative_recall:one', {1: (1, 1), 2: (1, 1), 3: (3, 1), 8: (7, 1), 64: (63, 1)}),
    ('copy', {1: (1, 1), 2: (2, 2), 64: (64, 64)}),
  ],
)
def test_lengths_python_and_traced(case, lengths):
  task = task_of(case)
  for length, (l_in, out_len) in lengths.items():
    assert task.input_length(length) == l_in and isinstance(task.input_length(length), int)
    assert task.output_length(l_in) == out_len and isinstance(task.output_length(l_in), int)
    assert int(jax.jit(task.input_length)(length)) == l_in
    assert int(jax.jit(task.output_length)(l_in)) == out_len


# ============================================================================ examples
@pytest.mark.parametrize(
  'name, options, tokens, want',
  [
    ('flip_flop', None, [W, 1, I, 0, R, 1, W, 0, I, 1, R], [0]),
    ('flip_flop', None, [W, 1, I, 0, R], [1]),
    ('flip_flop', None, [R], [0]),
    (
      'associative_recall',
      {'num_keys': 4, 'num_values': 4},
      [2, 5, 0, 7, 3, 4, 0, 3, 2],
      [3, 0, 1],
    ),
    ('associative_recall', None, [0, 0], [0]),
    (
      'associative_recall',
      {'num_keys': 4, 'num_values': 4, 'queries': 'one'},
      [2, 5, 0, 7, 3, 4, 0],
      [3],
    ),
    ('copy', None, [3, 0, 25, 3], [3, 0, 25, 3]),
  ],
)
def test_worked_examples(name, options, tokens, want):
  """The docstrings' examples, through `task.target`."""
  targets, mask = tasks.get(name, options).target(np.asarray([tokens]))
  assert np.asarray(targets)[0].tolist() == want
  assert np.asarray(mask)[0].tolist() == [1] * len(want)


# ============================================================================ oracles
@pytest.mark.parametrize('case', CASES)
def test_sampler_and_target_match_the_oracle(case):
  """`sample` at several lengths (degenerate ones included), its targets and those of
  `task.target` on the same inputs, against the oracle."""
  task = task_of(case)
  for length in (1, 2, 3, 7, 16):
    batch = exact_sample(case, length)
    _check(case, batch, length)
    targets, mask = jax.jit(task.target)(batch['inputs'])
    np.testing.assert_array_equal(np.asarray(targets), batch['targets'])
    np.testing.assert_array_equal(np.asarray(mask), batch['mask'])


@pytest.mark.parametrize('case', CASES)
def test_padded_sampler_matches_the_oracle(case):
  """One padded program (buffer 41) at traced lengths, and one at a long buffer."""
  for length in (1, 2, 4, 5, 9, 17, 40, 41):
    _check(case, padded_sample(case, length, 41), length)
  _check(case, padded_sample(case, 100, 128, batch=64), 100)


# ============================================================================ padding
@pytest.mark.parametrize('case', CASES)
def test_padded_equals_exact_when_buffer_fits(case):
  """`sample` is `sample_padded` with max_length = L_in: same key, same batch."""
  task = task_of(case)
  for length in (7, 16):
    padded = task.sample_padded(jax.random.key(0), NUM_SAMPLES, length, task.input_length(length))
    chex.assert_trees_all_equal(exact_sample(case, length), jax.tree.map(np.asarray, padded))


@pytest.mark.parametrize('case', CASES)
def test_padded_valid_part_has_the_exact_law(case):
  """Two-sample chi-square tests per position, of input tokens and target classes: L = 7 in
  a buffer of 41 against the exact-shape sampler (independent keys)."""
  task = task_of(case)
  exact, padded = exact_sample(case, 7, seed=1, batch=2000), padded_sample(case, 7, 41, 2, 2000)
  l_in, out_len = int(exact['length']), int(exact['output_length'])
  for key, width, size in (
    ('inputs', l_in, task.vocab_size),
    ('targets', out_len, task.num_classes),
  ):
    for pos in range(width):
      a, b = exact[key][:, pos], padded[key][:, pos]
      table = np.stack([np.bincount(a, minlength=size), np.bincount(b, minlength=size)])
      table = table[:, table.sum(0) > 0]
      if table.shape[1] > 1:
        assert stats.chi2_contingency(table).pvalue > P_MIN / 100, (key, pos)


@pytest.mark.parametrize('case', CASES)
def test_determined_by_the_key(case):
  task = task_of(case)
  a = jax.tree.map(np.asarray, task.sample_padded(jax.random.key(5), 64, 13, 41))
  b = jax.tree.map(np.asarray, task.sample_padded(jax.random.key(5), 64, 13, 41))
  c = jax.tree.map(np.asarray, task.sample_padded(jax.random.key(6), 64, 13, 41))
  chex.assert_trees_all_equal(a, b)
  assert (a['inputs'] != c['inputs']).any()


# ============================================================================ options
def test_options_and_bad_input():
  assert tasks.get('flip_flop', {'ignore_probability': 0.98}).ignore_probability == 0.98
  recall = tasks.get('associative_recall', {'num_keys': 40, 'num_values': 30})
  assert (recall.vocab_size, recall.num_classes) == (70, 30)
  assert tasks.get('copy', {'num_symbols': 10}).vocab_size == 10
  with pytest.raises(ValueError, match=r"unknown option 'p' of task 'flip_flop'.*ignore_probab"):
    tasks.get('flip_flop', {'p': 0.5})
  with pytest.raises(ValueError, match=r'ignore_probability must be in \[0, 1\], got 1.5'):
    tasks.get('flip_flop', {'ignore_probability': 1.5})
  with pytest.raises(ValueError, match=r'num_keys must be an integer >= 1, got 0'):
    tasks.get('associative_recall', {'num_keys': 0})
  with pytest.raises(ValueError, match=r"unknown queries 'some'; valid: all, one"):
    tasks.get('associative_recall', {'queries': 'some'})
  with pytest.raises(ValueError, match=r'num_symbols must be an integer >= 2, got 1'):
    tasks.get('copy', {'num_symbols': 1})
  # A buffer longer than the distinct keys allow: one line naming both.
  small = tasks.get('associative_recall', {'num_keys': 4, 'num_values': 8})
  small.sample(jax.random.key(0), 2, 14)  # 4 pairs: fits
  with pytest.raises(ValueError, match=r'length 15 holds 5 key-value pairs.*num_keys=4.*up to 14'):
    small.sample(jax.random.key(0), 2, 15)
  one = tasks.get('associative_recall', {'num_keys': 4, 'num_values': 8, 'queries': 'one'})
  one.sample(jax.random.key(0), 2, 10)
  with pytest.raises(ValueError, match=r'length 11 holds 5 key-value pairs.*up to 10'):
    one.sample(jax.random.key(0), 2, 11)


def test_a_bad_option_is_a_config_error():
  config = rpe_decoder.get_config('task=associative_recall,encoding=none,tiny')
  config.task_options.num_key = 8
  with pytest.raises(config_lib.ConfigError, match=r"unknown option 'num_key'.*num_keys"):
    setup.build(config)


# ============================================================================ laws
def test_flip_flop_laws():
  """Instructions after the first are i.i.d. (p_w, p_r, p_i); the bits after w and i uniform;
  the sparse variant's ignores are 98%."""
  for p in (0.8, 0.98, 0.1):
    x = tasks.get('flip_flop', {'ignore_probability': p}).sample(jax.random.key(3), 4000, 41)
    x = np.asarray(x['inputs'])
    assert (x[:, 0] == W).all() and (x[:, -1] == R).all()
    instructions, bits = x[:, 0:-1:2], x[:, 1:-1:2]
    observed = [(instructions[:, 1:] == t).sum() for t in (W, R, I)]
    expected = np.asarray([(1 - p) / 2, (1 - p) / 2, p]) * instructions[:, 1:].size
    assert stats.chisquare(observed, expected).pvalue > P_MIN, (p, observed, expected)
    bits = bits[instructions != R]
    assert abs(bits.mean() - 0.5) < 4.5 * 0.5 / np.sqrt(bits.size)


def test_associative_recall_laws():
  """Keys and values uniform without replacement; the query order a uniform permutation."""
  x = np.asarray(tasks.get('associative_recall').sample(jax.random.key(4), 6000, 9)['inputs'])
  keys, values, queries = x[:, 0:6:2], x[:, 1:6:2], x[:, 6:]
  assert all(len(set(row)) == 3 for row in keys.tolist())
  counts = np.bincount(keys.ravel(), minlength=256)
  assert stats.chisquare(counts).pvalue > P_MIN
  counts = np.bincount(values.ravel() - 256, minlength=256)
  assert stats.chisquare(counts).pvalue > P_MIN
  orders = collections.Counter(tuple(list(k).index(q) for q in qs) for k, qs in zip(keys, queries))
  assert len(orders) == 6 and stats.chisquare(list(orders.values())).pvalue > P_MIN
  # One query: a uniform one of the n keys.
  task = tasks.get('associative_recall', {'queries': 'one'})
  x = np.asarray(task.sample(jax.random.key(4), 6000, 9)['inputs'])
  asked = [list(row[0:8:2]).index(row[8]) for row in x]
  assert stats.chisquare(np.bincount(asked, minlength=4)).pvalue > P_MIN


def test_copy_symbols_are_uniform():
  x = np.asarray(tasks.get('copy').sample(jax.random.key(5), 2000, 16)['inputs'])
  assert stats.chisquare(np.bincount(x.ravel(), minlength=26)).pvalue > P_MIN


# ============================================================================ end to end
@pytest.mark.parametrize('name', NAMES)
def test_tiny_decoder_run(name, tmp_path):
  """rpe_decoder's tiny mode on the task, trained and evaluated end to end (one training
  bucket and two evaluated lengths, to keep the compiles few), then reported."""
  config = rpe_decoder.get_config(f'task={name},encoding=none,tiny')
  config.train.bucket_size = 8
  config.eval.lengths = [7, 12]
  config.eval.bucket_size = 12
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  assert all(m['score'] is not None for m in results['members'])
  # The range tables print the task's row, its level labelled.
  table = report.build_report([tmp_path], figures=False, metric='exact_match').texts['table1']
  assert f'| later | {name} | ' in table


def test_experiment_is_cpu_v1_with_the_later_tasks():
  from experiments.benchmarks import cpu_v1  # pylint: disable=import-outside-toplevel

  ours = later_tasks.get_config('task=copy,encoding=alibi,cpu,steps=600').to_dict()
  theirs = cpu_v1.config('even_pairs', 'alibi').to_dict()
  assert ours.pop('task') == 'copy' and theirs.pop('task') == 'even_pairs'
  assert ours == theirs
  cells = later_tasks.grid('cpu')
  assert [(c['task'], c['encoding']) for c in cells[:4]] == [
    ('flip_flop', e) for e in ('none', 'rotary', 'randomized_rotary', 'alibi')
  ]
  assert len(cells) == 12


# ============================================================================ slow
@pytest.mark.slow
@pytest.mark.parametrize('case', CASES)
def test_target_matches_the_oracle_at_many_lengths(case):
  """`task.target` (one compile per width) and the samplers at every length 1..24 and at the
  study's longer ones, 200 inputs each."""
  task = task_of(case)
  for length in list(range(1, 25)) + [40, 41, 64, 100, 257, 500]:
    batch = padded_sample(case, length, max(length, 64), seed=length, batch=200)
    _check(case, batch, length)
    l_in, out_len = int(batch['length']), int(batch['output_length'])
    targets, _ = task.target(batch['inputs'][:, :l_in])
    np.testing.assert_array_equal(np.asarray(targets), batch['targets'][:, :out_len])
