"""tasks/hinting.py: every sampler against pure-Python oracles, the sampling laws, bad input.

The oracles read the decoded text of a prompt, check that it is a well-formed prompt of its
task, and compute the answer with Python (`sorted`, `Counter`, integers). Statistical tests
use fixed keys and reject at p < 1e-4 (chi-square) or |z| > 4.5 (binomial), so a correct
sampler fails with negligible probability per key.

Programs are compiled once per (task, batch size, widths, distribution): the test laws share
the widths of length N_MAX and sample every length from that one program (n is traced).
"""

import collections
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import tasks
from tasks import hinting

P_MIN = 1e-4
Z_MAX = 4.5
BATCH = 64
N_MAX = 12
TRAIN_MAX = 10
CASES = [(name, d) for name, task in hinting.TASKS.items() for d in task.DISTRIBUTIONS]


# ============================================================================ helpers
def _widths(task, n=N_MAX):
  return task.max_prompt(n), task.max_answer(n)


def _texts(task, batch):
  """[(prompt tokens, answer tokens)] of a batch as decoded strings; checks the layout."""
  tokens, prompt_length, length = (
    np.asarray(batch[k]) for k in ('tokens', 'prompt_length', 'length')
  )
  assert tokens.dtype == prompt_length.dtype == length.dtype == np.int32
  out = []
  for row, p, l in zip(tokens, prompt_length, length):
    assert 0 < p < l <= row.shape[0]
    assert not row[l:].any(), row  # zeros past `length`
    assert row.max() < task.vocab_size and row.min() >= 0
    text = hinting.decode(task, row[:l]).split()
    out.append((text[:p], text[p:]))
  return out


def _values(task, tokens):
  values = [int(t) for t in tokens]  # '⊥', '⊤' and '_' fail here
  assert all(1 <= v <= task.num_values for v in values), values
  return values


# ============================================================================ oracles
# Each returns (input length n, the expected answer tokens) of a prompt.
def oracle_sorting_hinted(task, prompt):
  assert prompt[-1] == '⊥'
  values = _values(task, prompt[:-1])
  return len(values), [str(v) for v in sorted(values)]


def oracle_successor(task, prompt):
  assert prompt[-2] == '⊥'
  values = _values(task, prompt[:-2])
  (a,) = _values(task, prompt[-1:])
  assert a in values
  # The token after a's first occurrence in the sort: a again when a is duplicated.
  ordered = sorted(values)
  after = ordered.index(a) + 1
  if after == len(ordered):
    assert task.max_successor == 'token', f'unique maximum {a} of {values} asked'
    return len(values), ['⊤']
  return len(values), [str(ordered[after])]


def oracle_count(task, prompt):
  assert prompt[-1] == '⊥'
  counts = collections.Counter(_values(task, prompt[:-1]))
  assert len(counts) == 2, counts
  (rare, c_rare), (_, c_common) = sorted(counts.items(), key=lambda kv: kv[1])
  assert c_rare < c_common, counts
  return c_rare + c_common, [str(rare)]


def oracle_fill(task, prompt):
  n = prompt.index('⊥')
  values = _values(task, prompt[:n] + prompt[n + 1 :])
  assert len(set(values)) == 1 and len(values) - n < n, prompt
  return n, [str(values[0])] * (n - (len(values) - n))


def _number(prompt):
  """x and its digit count from `d d ... d ⊥`, most-significant first, no leading zero."""
  assert prompt[-1] == '⊥' and all(d.isdigit() for d in prompt[:-1]), prompt
  assert prompt[0] != '0', prompt
  return int(''.join(prompt[:-1])), len(prompt) - 1


def oracle_increment(task, prompt):
  x, n = _number(prompt)
  return n, list(str(x + 1)[::-1])


def oracle_carry(task, prompt):
  x, n = _number(prompt)
  out = []
  for i, digit in enumerate(str(x + 1)[::-1]):
    # Adding 1 carries out of position i when the low i + 1 digits are all 9s.
    carry = int(x % 10 ** (i + 1) + 1 == 10 ** (i + 1))
    out += [digit, '↑', str(carry)]
  return n, out


ORACLES = {name: globals()[f'oracle_{name}'] for name in tuple(hinting.TASKS)}


def _check(task, batch):
  """Every example against the oracle; returns [(n, prompt, answer)]."""
  out = []
  for prompt, answer in _texts(task, batch):
    n, want = ORACLES[task.name](task, prompt)
    assert answer == want, (task.name, prompt, answer, want)
    out.append((n, prompt, answer))
  return out


# ============================================================================ registry
def test_registry():
  assert tuple(hinting.TASKS) == (
    'sorting_hinted',
    'successor',
    'count',
    'fill',
    'increment',
    'carry',
  )
  assert tasks.HINTING == tuple(hinting.TASKS)
  for name in tuple(hinting.TASKS):
    task = tasks.get(name)
    assert task is tasks.REGISTRY[name] and task.name == name and task.level == 'hinting'
    hash(task)  # static argument of jit
    assert task.DISTRIBUTIONS[0] == 'uniform'
    for hint in task.HINTS:
      assert tasks.get(hint).family == task.family and not tasks.get(hint).HINTS
  assert tasks.get('sorting_hinted').HINTS == ('successor', 'count', 'fill')
  assert tasks.get('increment').HINTS == ('carry',)
  assert tasks.get('sorting_hinted').DISTRIBUTIONS == (
    'uniform',
    'rep2',
    'rep3',
    'rep4',
    'rep5',
    'distinct',
  )
  assert tasks.get('increment').DISTRIBUTIONS == ('uniform', 'nines')
  # The paper's q = 103; one vocabulary per family.
  for name in ('sorting_hinted', 'successor', 'count', 'fill'):
    task = tasks.get(name)
    assert (task.vocab_size, task.sep_id, task.top_id, task.family) == (103, 101, 102, 'sorting')
  for name in ('increment', 'carry'):
    task = tasks.get(name)
    assert (task.vocab_size, task.sep_id, task.up_id, task.family) == (12, 10, 11, 'increment')
  assert tasks.get('count', {'num_values': 7}).vocab_size == 10
  with pytest.raises(ValueError, match=r"unknown task 'nope'.*sorting_hinted.*carry"):
    tasks.get('nope')


def test_decode_encode_worked_examples():
  sort, inc = hinting.TASKS['sorting_hinted'], hinting.TASKS['increment']
  assert hinting.decode(sort, [17, 5, 101, 5, 17, 102, 0]) == '17 5 ⊥ 5 17 ⊤ _'
  assert hinting.decode(inc, [1, 2, 3, 10, 4, 11, 0]) == '1 2 3 ⊥ 4 ↑ 0'
  for task, text in ((sort, '17 5 92 5 ⊥ 5 5 17 92'), (inc, '1 2 3 ⊥ 4 ↑ 0 2 ↑ 0 1 ↑ 0')):
    assert hinting.decode(task, hinting.encode(task, text)) == text
  assert hinting.encode(sort, '100 ⊥ 100') == [100, 101, 100]
  with pytest.raises(ValueError, match='token id 103 is not in the vocabulary'):
    hinting.decode(sort, [103])
  with pytest.raises(ValueError, match="'↑' is not a token of sorting_hinted"):
    hinting.encode(sort, '1 ↑')
  # The paper's examples, through the oracles.
  assert oracle_increment(inc, '1 2 3 ⊥'.split()) == (3, '4 2 1'.split())
  assert oracle_carry(inc, '1 2 3 ⊥'.split()) == (3, '4 ↑ 0 2 ↑ 0 1 ↑ 0'.split())
  assert oracle_carry(inc, '1 9 9 ⊥'.split()) == (3, '0 ↑ 1 0 ↑ 1 2 ↑ 0'.split())
  assert oracle_carry(inc, '9 9 ⊥'.split()) == (2, '0 ↑ 1 0 ↑ 1 1 ↑ 0'.split())


# ============================================================================ oracles
@pytest.mark.parametrize('name,distribution', CASES)
def test_sample_matches_oracle(name, distribution):
  """Every length from the shortest to N_MAX, from one compiled program."""
  task = hinting.TASKS[name]
  width_p, width_a = _widths(task)
  for n in range(task.min_input_length, N_MAX + 1):
    batch = task.sample(jax.random.key(n), BATCH, n, width_p, width_a, distribution)
    assert batch['tokens'].shape == (BATCH, width_p + width_a)
    for got, prompt, answer in _check(task, batch):
      assert got == n
      assert len(prompt) <= task.max_prompt(n) and len(answer) <= task.max_answer(n)
      if distribution == 'nines':
        assert prompt[-2] == '9'


@pytest.mark.parametrize('name', tuple(hinting.TASKS))
def test_sample_train_matches_oracle(name):
  task = hinting.TASKS[name]
  width_p, width_a = _widths(task, TRAIN_MAX)
  batch = task.sample_train(jax.random.key(3), 256, TRAIN_MAX, width_p, width_a)
  lengths = {n for n, _, _ in _check(task, batch)}
  assert min(lengths) >= task.min_length and max(lengths) <= TRAIN_MAX
  # sample_train is sample_train_keys of the split key.
  keys = jax.random.split(jax.random.key(3), 256)
  same = task.sample_train_keys(keys, TRAIN_MAX, width_p, width_a)
  for k in batch:
    np.testing.assert_array_equal(batch[k], same[k])


def test_successor_edge_cases():
  """Duplicated maxima are their own successors; a unique maximum is asked only in 'token'
  mode, and answered ⊤."""
  exclude = hinting.Successor(num_values=3)
  token = hinting.Successor(num_values=3, max_successor='token')
  seen = collections.Counter()
  for task in (exclude, token):
    batch = task.sample(jax.random.key(0), 512, 4, *_widths(task, 4))
    for _, prompt, answer in _check(task, batch):
      values, a = [int(v) for v in prompt[:-2]], int(prompt[-1])
      if a == max(values):
        seen[task.max_successor, values.count(a) > 1, answer[0]] += 1
  assert seen['exclude', True, '⊤'] == 0 and seen['exclude', False, '⊤'] == 0
  assert min(seen['exclude', True, str(m)] for m in (2, 3)) > 0  # duplicated max -> itself
  assert seen['token', False, '⊤'] > 0 and seen['token', True, '⊤'] == 0
  # A single element can only be asked in 'token' mode, and has no successor.
  batch = token.sample(jax.random.key(1), 512, 1, *_widths(token, 4))
  assert {tuple(answer) for _, _, answer in _check(token, batch)} == {('⊤',)}


def test_increment_and_carry_edge_cases():
  inc = hinting.TASKS['increment']
  batch = inc.sample(jax.random.key(0), 64, 1, *_widths(inc, 3), distribution='nines')
  assert {' '.join(p + a) for _, p, a in _check(inc, batch)} == {'9 ⊥ 0 1'}
  batch = inc.sample(jax.random.key(1), 64, 3, *_widths(inc, 3), distribution='nines')
  assert '9 9 9 ⊥ 0 0 0 1' in {' '.join(p + a) for _, p, a in _check(inc, batch)}
  # Carry of 99 and 199: training numbers that all end in 9s.
  carry = hinting.Carry(min_length=2, short_max=3, nines_share=1.0)
  batch = carry.sample_train(jax.random.key(2), 256, 3, *_widths(carry, 3))
  seen = {' '.join(p + a) for _, p, a in _check(carry, batch)}
  assert '9 9 ⊥ 0 ↑ 1 0 ↑ 1 1 ↑ 0' in seen and '1 9 9 ⊥ 0 ↑ 1 0 ↑ 1 2 ↑ 0' in seen


# ============================================================================ jit
def test_traced_length_is_one_program():
  task = hinting.TASKS['sorting_hinted']
  width_p, width_a = _widths(task)
  before = hinting._sample_jit._cache_size()  # pylint: disable=protected-access
  for n in (2, 5, 9):
    task.sample(jax.random.key(n), 4, n, width_p, width_a)
  assert hinting._sample_jit._cache_size() - before <= 1  # pylint: disable=protected-access

  @jax.jit
  @chex.assert_max_traces(n=1)
  def sample(key, n):
    return task.sample(key, 4, n, width_p, width_a)

  for n in (1, 5, N_MAX):
    traced = sample(jax.random.key(n), jnp.int32(n))
    exact = task.sample(jax.random.key(n), 4, n, width_p, width_a)
    for k in exact:
      np.testing.assert_array_equal(traced[k], exact[k])
    np.testing.assert_array_equal(exact['length'], 2 * n + 1)
    np.testing.assert_array_equal(exact['prompt_length'], n + 1)


def test_example_is_one_row_of_sample():
  task = hinting.TASKS['fill']
  width_p, width_a = _widths(task)
  batch = task.sample(jax.random.key(4), BATCH, 7, width_p, width_a)
  key = jax.random.split(jax.random.key(4), BATCH)[2]
  tokens, prompt_length, length = task.example(key, 7, 'uniform', width_p, width_a)
  np.testing.assert_array_equal(tokens, batch['tokens'][2])
  assert (int(prompt_length), int(length)) == (batch['prompt_length'][2], batch['length'][2])


# ============================================================================ laws
def _chi2(observed, probabilities):
  observed = np.asarray(observed, float)
  expected = observed.sum() * np.asarray(probabilities, float)
  return stats.chisquare(observed, expected).pvalue


def _binomial_z(hits, total, p):
  return (hits - total * p) / math.sqrt(total * p * (1 - p))


@pytest.mark.parametrize(
  'name,max_length', [('sorting_hinted', 20), ('increment', 10), ('count', 20), ('fill', 4)]
)
def test_train_length_law(name, max_length):
  """80% uniform on min_length..short_max, 20% on short_max + 1..max_length; all of
  min_length..max_length when max_length <= short_max."""
  task = hinting.TASKS[name]
  batch = task.sample_train(jax.random.key(5), 4000, max_length, *_widths(task, max_length))
  n = np.argmax(np.asarray(batch['tokens']) == task.sep_id, axis=1)  # ⊥ ends the input
  lo, short, share = task.min_length, task.short_max, task.short_share
  law = {}
  for m in range(lo, max_length + 1):
    if max_length <= short:
      law[m] = 1 / (max_length - lo + 1)
    else:
      law[m] = share / (short - lo + 1) if m <= short else (1 - share) / (max_length - short)
  counts = collections.Counter(n.tolist())
  assert set(counts) <= set(law), counts
  assert _chi2([counts[m] for m in law], list(law.values())) > P_MIN


@pytest.mark.parametrize('n,r,num_values', [(10, 2, 5), (13, 3, 10), (11, 4, 10), (12, 5, 10)])
def test_repeated_values_law(n, r, num_values):
  """rep(n, r): floor(n / r) distinct r-blocks plus a remainder, each entry uniform, and the
  positions exchangeable (the shuffle)."""
  task = hinting.SortingHinted(num_values=num_values)
  batch = task.sample(jax.random.key(6), 2000, n, *_widths(task, n), f'rep{r}')
  inputs = np.asarray(batch['tokens'])[:, :n]
  assert (np.asarray(batch['tokens'])[:, n] == task.sep_id).all()
  blocks = n // r
  category = np.zeros(inputs.shape, int)  # per entry: is its value's count >= r?
  for row, cat in zip(inputs, category):
    counts = collections.Counter(row.tolist())
    # The sorted multiset splits into `blocks` distinct r-blocks and n - r * blocks others.
    assert sum(c >= r for c in counts.values()) >= blocks, (row, counts)
    assert sum(counts.values()) == n and min(row) >= 1 and max(row) <= num_values
    cat[:] = [counts[v] >= r for v in row]
  # One entry per example (entries of a row are dependent): uniform over 1..V.
  first = collections.Counter(inputs[:, 0].tolist())
  assert _chi2([first[v] for v in range(1, num_values + 1)], [1 / num_values] * num_values) > P_MIN
  # Shuffled: every position has the same law of "belongs to a block-sized value".
  table = np.array([[np.sum(category[:, p] == c) for c in (0, 1)] for p in range(n)])
  if table.sum(axis=0).all():  # (with no remainder, every entry is in a block)
    assert stats.chi2_contingency(table).pvalue > P_MIN, table
  if n // r == num_values:  # every value is used: the blocks are without replacement
    assert all(len(set(row)) == num_values for row in inputs.tolist())


def test_uniform_values_law():
  task = hinting.TASKS['sorting_hinted']
  batch = task.sample(jax.random.key(7), 512, 8, *_widths(task))
  values = collections.Counter(np.asarray(batch['tokens'])[:, :8].reshape(-1).tolist())
  assert _chi2([values[v] for v in range(1, 101)], [0.01] * 100) > P_MIN


@pytest.mark.parametrize('share', [0.0, 0.1, 0.5])
def test_repeat_share(share):
  """With n = 2 a repeated example is `v v`; a uniform one repeats with probability 1/V."""
  task = hinting.SortingHinted(repeat_share=share, min_length=2, short_max=2)
  batch = task.sample_train(jax.random.key(8), 4000, 2, *_widths(task, 2))
  pairs = np.asarray(batch['tokens'])[:, :2]
  hits = int(np.sum(pairs[:, 0] == pairs[:, 1]))
  p = share + (1 - share) / task.num_values
  assert abs(_binomial_z(hits, len(pairs), p)) < Z_MAX, (hits, p)


@pytest.mark.parametrize('n', [3, 10])
def test_training_repeats_law(n):
  """A training repeat is rep(n, r), r uniform in 2..min(5, n): with V = 1000 the blocks'
  count r is the largest count (up to remainder collisions, of probability < 0.5%)."""
  task = hinting.SortingHinted(num_values=1000, repeat_share=1.0, min_length=n, short_max=n)
  batch = task.sample_train(jax.random.key(14), 2000, n, *_widths(task, n))
  r = collections.Counter(
    max(collections.Counter(row).values()) for row in np.asarray(batch['tokens'])[:, :n].tolist()
  )
  rs = range(2, min(5, n) + 1)
  assert set(r) <= set(rs) | {max(rs) + 1}
  assert _chi2([r[k] for k in rs], [1 / len(rs)] * len(rs)) > P_MIN


@pytest.mark.parametrize('share', [0.1, 0.6])
def test_nines_share(share):
  """Training numbers of 3 digits end in 9 with probability share + (1 - share) / 10."""
  task = hinting.Increment(nines_share=share, min_length=3, short_max=3)
  batch = task.sample_train(jax.random.key(9), 4000, 3, *_widths(task, 3))
  hits = int(np.sum(np.asarray(batch['tokens'])[:, 2] == 9))
  p = share + (1 - share) / 10
  assert abs(_binomial_z(hits, 4000, p)) < Z_MAX, (hits, p)


def test_nines_run_law():
  """'nines' at n = 4: run k uniform in 1..4, the digits above it keep their own law."""
  n = 4
  task = hinting.TASKS['increment']
  batch = task.sample(jax.random.key(10), 4000, n, *_widths(task, n), 'nines')
  digits = np.asarray(batch['tokens'])[:, :n][:, ::-1]  # little-endian
  runs = np.argmin(np.concatenate([digits == 9, np.zeros((4000, 1), bool)], axis=1), axis=1)
  law = np.zeros(n + 1)
  for k in range(1, n + 1):  # P(run = l | drawn k): 9s continue at random
    p_stay = 1.0
    for l in range(k, n + 1):
      p_nine = 0 if l == n else (1 / 9 if l == n - 1 else 1 / 10)
      law[l] += p_stay * (1 - p_nine) / n
      p_stay *= p_nine
  counts = np.bincount(runs, minlength=n + 1)
  assert counts[0] == 0
  assert _chi2(counts[1:], law[1:]) > P_MIN


def test_count_law():
  """c is never n/2, and min(c, n - c) is uniform over 1..n/2 - 1 for even n."""
  task = hinting.TASKS['count']
  batch = task.sample(jax.random.key(11), 2000, 6, *_widths(task))
  rarer, at = [], []
  for _, prompt, answer in _check(task, batch):
    counts = collections.Counter(prompt[:-1])
    rarer.append(counts[answer[0]])
    assert sorted(counts.values()) != [3, 3]
    at.append([v == answer[0] for v in prompt[:-1]])
  counts = collections.Counter(rarer)
  assert set(counts) == {1, 2} and _chi2([counts[1], counts[2]], [0.5, 0.5]) > P_MIN
  # Shuffled: the rarer value is equally likely at every position.
  at = np.array(at)
  table = np.stack([at.sum(axis=0), (~at).sum(axis=0)], axis=1)
  assert stats.chi2_contingency(table).pvalue > P_MIN, table


@pytest.mark.parametrize('mode', ['exclude', 'token'])
def test_successor_query_law(mode):
  """With distinct values, a's rank is uniform over the askable ranks."""
  n = 5
  task = hinting.Successor(max_successor=mode, num_values=1000)
  batch = task.sample(jax.random.key(12), 2000, n, *_widths(task, n))
  ranks, places = [], []
  for _, prompt, _ in _check(task, batch):
    values = [int(v) for v in prompt[:-2]]
    if len(set(values)) == n:
      ranks.append(sorted(values).index(int(prompt[-1])))
      places.append(values.index(int(prompt[-1])))
  askable = n - 1 if mode == 'exclude' else n
  counts = collections.Counter(ranks)
  assert set(counts) == set(range(askable))
  assert _chi2([counts[k] for k in range(askable)], [1 / askable] * askable) > P_MIN
  # Its position is uniform too: the unique maximum's position is itself uniform.
  counts = collections.Counter(places)
  assert _chi2([counts[p] for p in range(n)], [1 / n] * n) > P_MIN


def test_fill_prefix_law():
  n = 6
  task = hinting.TASKS['fill']
  batch = task.sample(jax.random.key(13), 2000, n, *_widths(task, n))
  prefix = collections.Counter((np.asarray(batch['prompt_length']) - n - 1).tolist())
  assert set(prefix) == set(range(n))
  assert _chi2([prefix[j] for j in range(n)], [1 / n] * n) > P_MIN


# ============================================================================ bad input
@pytest.mark.parametrize(
  'name,options,match',
  [
    ('sorting_hinted', {'num_values': 1}, 'num_values must be >= 2, got 1'),
    ('count', {'min_length': 2}, r'need 3 <= min_length <= short_max, got min_length=2'),
    ('successor', {'min_length': 1}, r'need 2 <= min_length'),
    ('successor', {'max_successor': 'wrap'}, r"unknown max_successor 'wrap'; valid: exclude"),
    ('fill', {'short_max': 1}, r'min_length <= short_max, got min_length=2, short_max=1'),
    ('increment', {'short_share': 1.5}, r'short_share must be in \[0, 1\], got 1.5'),
    ('carry', {'nines_share': -0.1}, r'nines_share must be in \[0, 1\], got -0.1'),
    ('sorting_hinted', {'repeat_share': 2}, r'repeat_share must be in \[0, 1\], got 2'),
    ('fill', {'repeat_share': 0.1}, r"unknown option 'repeat_share' of task 'fill'"),
  ],
)
def test_bad_options(name, options, match):
  with pytest.raises(ValueError, match=match):
    tasks.get(name, options)


def test_bad_lengths_and_widths():
  sort, count = hinting.TASKS['sorting_hinted'], hinting.TASKS['count']
  succ, inc = hinting.TASKS['successor'], hinting.TASKS['increment']
  key = jax.random.key(0)
  with pytest.raises(ValueError, match=r'count: length 2 is too short; valid lengths: n >= 3'):
    count.sample(key, 2, 2, 10, 10)
  with pytest.raises(ValueError, match=r'successor: length 1 is too short.*n >= 2'):
    succ.check_length(1)
  with pytest.raises(ValueError, match=r'increment: length 0 is too short.*n >= 1'):
    inc.check_length(0, 'nines')
  with pytest.raises(
    ValueError,
    match=r'rep2 at length 202 needs 101 distinct values, more '
    r'than num_values=100; valid lengths for rep2: n <= 201',
  ):
    sort.check_length(202, 'rep2')
  sort.check_length(201, 'rep2')
  with pytest.raises(
    ValueError,
    match=r"unknown distribution 'rep6'; valid distributions: "
    r'uniform, rep2, rep3, rep4, rep5',
  ):
    sort.sample(key, 2, 5, 6, 5, 'rep6')
  with pytest.raises(ValueError, match=r"unknown distribution 'nines'.*: uniform"):
    hinting.TASKS['carry'].check_length(3, 'nines')
  with pytest.raises(
    ValueError,
    match=r'length 5 needs prompt_width >= 6 and answer_width '
    r'>= 5, got 6 and 4',
  ):
    sort.sample(key, 2, 5, 6, 4)
  with pytest.raises(ValueError, match=r'length 20 needs prompt_width >= 40'):
    hinting.TASKS['fill'].sample_train(key, 2, 20, 39, 20)
  with pytest.raises(
    ValueError,
    match=r'max_length 2 is below min_length=3; valid: '
    r'max_length >= 3',
  ):
    count.sample_train(key, 2, 2, 10, 10)
  small = hinting.SortingHinted(num_values=4, repeat_share=0.1)
  with pytest.raises(ValueError, match=r'rep2 at length 10 needs 5 distinct values'):
    small.sample_train_keys(jax.random.split(key, 2), 10, 11, 10)


def test_distinct_inputs_are_n_different_values():
  task = tasks.get('sorting_hinted', {'num_values': 30})
  for n in (1, 7, 30):
    batch = task.sample(jax.random.key(n), 200, n, *_widths(task, n), 'distinct')
    for row in np.asarray(batch['tokens'])[:, :n]:
      assert len(set(row.tolist())) == n and 1 <= row.min() and row.max() <= 30
  with pytest.raises(ValueError, match='needs 31 distinct values'):
    task.check_length(31, 'distinct')
