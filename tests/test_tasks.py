"""tasks/: registry, worked examples of the spec, shapes, padding, and sampling laws.

The law tests draw from the padded program (max_length 41) that the oracle tests compile
anyway; that its valid part has the law of `sample` is tested here too.

Statistical tests use fixed keys (deterministic) and reject at p < 1e-4 (chi-square) or
|z| > 4.5 (binomial), so a correct sampler fails with negligible probability per key.
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
from tasks import base
import test_tasks_oracles as oracles

P_MIN = 1e-4

# name -> (V, C, O(L)) from the spec's table.
TABLE = {
  'even_pairs': (2, 2, lambda n: 1),
  'modular_arithmetic': (9, 5, lambda n: 1),
  'parity_check': (2, 2, lambda n: 1),
  'cycle_navigation': (3, 5, lambda n: 1),
  'stack_manipulation': (5, 3, lambda n: n + 1),
  'reverse_string': (2, 2, lambda n: n),
  'modular_arithmetic_brackets': (11, 5, lambda n: 1),
  'solve_equation': (11, 5, lambda n: 1),
  'duplicate_string': (2, 2, lambda n: 2 * n),
  'missing_duplicate_string': (4, 2, lambda n: 1),
  'odds_first': (2, 2, lambda n: n),
  'binary_addition': (3, 3, lambda n: n + 1),
  'binary_multiplication': (3, 3, lambda n: n),
  'compute_sqrt': (2, 2, lambda n: -(-n // 2)),
  'bucket_sort': (5, 5, lambda n: n),
}
LEVELS = ['regular'] * 4 + ['dcf'] * 4 + ['cs'] * 7


def _chi2_uniform(values, support):
  counts = collections.Counter(np.asarray(values).ravel().tolist())
  assert set(counts) <= set(support), (sorted(counts), support)
  observed = [counts.get(v, 0) for v in support]
  assert stats.chisquare(observed).pvalue > P_MIN, observed


def _chi2(observed: dict, probs: dict):
  """Goodness of fit of counts to probabilities (cells with expectation < 5 pooled)."""
  total = sum(observed.values())
  assert set(observed) <= set(probs), set(observed) - set(probs)
  big = [k for k in probs if probs[k] * total >= 5]
  small = [k for k in probs if k not in big]
  obs = [observed.get(k, 0) for k in big]
  exp = [probs[k] * total for k in big]
  if small:
    obs.append(sum(observed.get(k, 0) for k in small))
    exp.append(sum(probs[k] for k in small) * total)
  exp = np.asarray(exp) * sum(obs) / sum(exp)
  assert stats.chisquare(obs, exp).pvalue > P_MIN, list(zip(obs, exp.round(1)))


def _inputs(name, length, batch=20000, seed=0):
  return oracles.draw_inputs(name, length, -(-batch // oracles.NUM_SAMPLES), seed)


# ============================================================================ registry
def test_registry():
  assert tasks.NAMES == tuple(TABLE)
  assert isinstance(tasks.REGISTRY, dict)
  assert list(tasks.REGISTRY) == list(
    tasks.NAMES + tasks.ARITHMETIC + tasks.LANGUAGE + tasks.HINTING + tasks.LATER
  )
  for name, level in zip(tasks.NAMES, LEVELS):
    task = tasks.get(name)
    assert task.name == name and task.level == level
    vocab, classes, out_len = TABLE[name]
    assert (task.vocab_size, task.num_classes) == (vocab, classes)
    assert task.is_classification == (out_len(10) == 1)
    hash(task)  # static argument of jit


def test_unknown_name():
  with pytest.raises(ValueError, match=r"unknown task 'nope'.*even_pairs.*bucket_sort"):
    tasks.get('nope')


@pytest.mark.parametrize('name', tasks.NAMES)
def test_output_length_python_and_traced(name):
  task = tasks.get(name)
  for n in (1, 2, 7, 40):
    assert task.output_length(n) == TABLE[name][2](n)
    assert isinstance(task.output_length(n), int)
    assert int(jax.jit(task.output_length)(jnp.int32(n))) == TABLE[name][2](n)


# ============================================================================ examples
def _target(name, tokens):
  targets, mask = oracles.target_fn(name)(jnp.asarray([tokens], jnp.int32))
  return np.asarray(targets)[0].tolist(), np.asarray(mask)[0].tolist()


@pytest.mark.parametrize(
  'name, tokens, want, want_mask',
  [
    ('modular_arithmetic', [0, 6, 4, 5, 1, 5, 1], [3], None),  # 0 - 4 + 1 + 1
    ('modular_arithmetic', [0, 5, 1, 6, 4, 7, 4], [0], None),  # 0 + 1 - 4 * 4
    ('stack_manipulation', [1, 1, 0, 1, 1, 3, 3], [0, 0, 1, 1, 0, 1, 1, 2], [1] * 8),
    (
      'stack_manipulation',
      [0, 1, 0, 2, 2, 2, 4],
      [1, 2, 0, 0, 0, 0, 0, 0],
      [1, 1, 0, 0, 0, 0, 0, 0],
    ),
    ('modular_arithmetic_brackets', [8, 0, 6, 8, 3, 9, 9], [2], None),  # ( 0 - ( 3 ) )
    ('solve_equation', [7, 4, 6, 9, 8, 10, 4], [0], None),  # ( 4 - x ) = 4
    ('missing_duplicate_string', [0, 1, 2, 0, 1, 0, 3], [0], None),
    ('odds_first', [1, 0, 1, 1, 1, 0, 0], [0, 1, 0, 1, 1, 1, 0], None),
    ('binary_addition', [1, 2, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 2, 0, 0], [1] * 6 + [0] * 2),
    ('binary_multiplication', [1, 1, 2, 1, 0, 1, 0], [1, 1, 1, 1, 2, 0, 0], [1] * 5 + [0] * 2),
    ('compute_sqrt', [1, 1, 1, 0, 1, 0, 0], [1, 0, 1, 0], None),  # isqrt(116) = 10
    ('even_pairs', [0, 1, 1, 0], [0], None),
    ('cycle_navigation', [2, 2, 0, 1, 2], [2], None),
    ('bucket_sort', [4, 1, 3, 1, 0], [0, 1, 1, 3, 4], None),
  ],
)
def test_worked_examples(name, tokens, want, want_mask):
  targets, mask = _target(name, tokens)
  assert targets == want
  assert mask == (want_mask or [1] * len(want))


@pytest.mark.parametrize(
  'name, length, inputs, targets',
  [
    ('stack_manipulation', 1, None, None),
    ('solve_equation', 1, [[0]], [0]),
    ('solve_equation', 2, [[0, 0]], [0]),
    ('missing_duplicate_string', 1, [[1]], [1]),
    ('binary_addition', 1, [[0]], [0, 2]),
    ('binary_multiplication', 1, [[0]], [2]),
    ('binary_multiplication', 2, None, [0, 2]),
  ],
)
def test_degenerate_lengths(name, length, inputs, targets):
  batch = oracles.exact_sample(name, length)
  x, y = batch['inputs'], batch['targets']
  if inputs is not None:
    assert (x == np.asarray(inputs)).all()
  if targets is not None:
    assert (y == np.asarray(targets)).all()
  if name == 'stack_manipulation':  # one bit b -> `b 2`
    assert (y[:, 0] == x[:, 0]).all() and (y[:, 1] == 2).all() and set(x[:, 0]) == {0, 1}


# ============================================================================ shapes
# Every task's sampler also runs in the law and padding tests below: its shapes at every
# length are checked by default on one task of each level, `-m slow` on all.
SHAPE_SAMPLE = (
  'even_pairs',
  'reverse_string',
  'modular_arithmetic',
  'duplicate_string',
  'bucket_sort',
)


@pytest.mark.parametrize(
  'name', [n if n in SHAPE_SAMPLE else pytest.param(n, marks=pytest.mark.slow) for n in tasks.NAMES]
)
def test_shapes_and_ranges(name):
  """Shapes and dtypes of `sample` at L in {1, 2, 3, 7, 40, 500} (L = 3 and 500 traced
  only, to save compiles), and token / class ranges of the sampled values."""
  task = tasks.get(name)
  vocab, classes, out_len = TABLE[name]
  for length in (1, 2, 3, 7, 40, 500):
    l_in = length - 1 if name == 'modular_arithmetic' and length % 2 == 0 else length
    shapes = jax.eval_shape(lambda k, n=length: task.sample(k, 1000, n), jax.random.key(0))
    assert shapes['inputs'].shape == (1000, l_in) and shapes['inputs'].dtype == jnp.int32
    for key in ('targets', 'mask', 'output_valid'):
      assert shapes[key].shape == (1000, out_len(l_in)), key
    assert shapes['targets'].dtype == jnp.int32
    assert shapes['mask'].dtype == shapes['output_valid'].dtype == jnp.float32
    assert shapes['length'].shape == shapes['output_length'].shape == ()
  for length in oracles.EXACT_LENGTHS:
    batch = oracles.exact_sample(name, length)
    l_in = batch['inputs'].shape[1]
    assert (int(batch['length']), int(batch['output_length'])) == (l_in, out_len(l_in))
    assert 0 <= batch['inputs'].min() and batch['inputs'].max() < vocab
    assert 0 <= batch['targets'].min() and batch['targets'].max() < classes
    assert (batch['output_valid'] == 1).all()
  for length, max_length in ((3, 41), (500, 500)):
    batch = oracles.padded_sample(name, length, max_length)
    assert batch['inputs'].max() < vocab and batch['targets'].max() < classes


# ============================================================================ padding
@pytest.mark.parametrize('name', tasks.NAMES)
def test_padded_equals_exact_when_buffer_fits(name):
  """`sample` is `sample_padded` with max_length = L_in: same key, same batch."""
  task = tasks.get(name)
  for length in (7, 40):
    exact = oracles.exact_sample(name, length)
    padded = task.sample_padded(
      jax.random.key(7 + length), oracles.NUM_SAMPLES, length, task.input_length(length)
    )
    chex.assert_trees_all_equal(exact, jax.tree.map(np.asarray, padded))


@pytest.mark.parametrize('name', tasks.NAMES)
def test_padded_valid_part_has_the_exact_law(name):
  """Two-sample chi-square tests, per position, of input tokens and target classes: L = 7
  in a buffer of 41 vs the exact-shape sampler (independent keys)."""
  task = tasks.get(name)
  exact = oracles.exact_sample(name, 7)
  padded = oracles.padded_sample(name, 7, 41)
  l_in, out_len = int(exact['length']), int(exact['output_length'])
  assert int(padded['length']) == l_in and padded['inputs'].shape[1] == 41
  for key, width, size in (
    ('inputs', l_in, task.vocab_size),
    ('targets', out_len, task.num_classes),
  ):
    a, b = exact[key][:, :width], padded[key][:, :width]
    for pos in range(width):
      table = np.stack(
        [np.bincount(a[:, pos], minlength=size), np.bincount(b[:, pos], minlength=size)]
      )
      table = table[:, table.sum(0) > 0]
      if table.shape[1] > 1:
        assert stats.chi2_contingency(table).pvalue > P_MIN / 100, (key, pos, table)


def test_padded_sampler_compiles_once_across_lengths():
  task = tasks.get('binary_addition')
  before = base._sample_jit._cache_size()  # pylint: disable=protected-access
  for length in range(1, 17):
    batch = task.sample_padded(jax.random.key(length), 8, length, 16)
    assert batch['inputs'].shape == (8, 16) and int(batch['length']) == length
  assert base._sample_jit._cache_size() - before == 1  # pylint: disable=protected-access

  @jax.jit
  @chex.assert_max_traces(n=1)
  def sample(key, length):
    return tasks.get('modular_arithmetic_brackets').sample_padded(key, 8, length, 32)

  for length in (1, 5, 17, 32):
    assert int(sample(jax.random.key(0), length)['length']) == length


# ============================================================================ laws
def test_uniform_digit_draws():
  _chi2_uniform(_inputs('bucket_sort', 40, 2000), range(5))
  _chi2_uniform(_inputs('cycle_navigation', 40, 2000), range(3))
  _chi2_uniform(_inputs('parity_check', 40, 2000), range(2))
  x = np.asarray(base.uniform_digits(jax.random.key(3), (40000,), 15))
  _chi2_uniform(x, range(15))
  pairs = x[0::2] * 15 + x[1::2]  # neighbours independent
  _chi2_uniform(pairs, range(225))


def test_modular_arithmetic_laws():
  x = _inputs('modular_arithmetic', 9, 10000)
  _chi2_uniform(x[:, 1::2], (5, 6, 7))
  _chi2_uniform(x[:, 0::2], range(5))


def test_stack_laws():
  x = _inputs('stack_manipulation', 9)
  stack_len = np.argmax(x >= 2, axis=1)
  _chi2_uniform(stack_len, range(1, 9))
  _chi2_uniform(x[x >= 2], (2, 3, 4))
  _chi2_uniform(x[x < 2], (0, 1))


def test_missing_symbol_position_is_uniform():
  x = _inputs('missing_duplicate_string', 9)
  _chi2_uniform(np.argmax(x == 2, axis=1), range(8))


def test_binary_operand_laws():
  for name in ('binary_addition', 'binary_multiplication'):
    x = _inputs(name, 10)
    sep = np.argmax(x == 2, axis=1)
    _chi2_uniform(sep, range(1, 9))  # len_n ~ U{1..L-2}
    rows = x[sep == 3][:, :3]  # n given len_n = 3: U{1..7}
    _chi2_uniform(rows @ np.asarray([1, 2, 4]), range(1, 8))
    rows = x[sep == 6][:, 7:]  # m given len_m = 3: U{1..7}
    _chi2_uniform(rows @ np.asarray([1, 2, 4]), range(1, 8))
    small = _inputs(name, 2, 5000)  # L = 2: n ~ U{0, 1, 2}
    _chi2_uniform(small @ np.asarray([1, 2]), range(3))
    # Operands past 24 bits are uniform bits redrawn if zero; shorter ones are drawn whole.
    x = _inputs(name, 41, 4000)
    sep = np.argmax(x == 2, axis=1)
    pos = np.arange(41)[None, :]
    in_n, in_m = pos < sep[:, None], pos > sep[:, None]
    assert ((x * in_n).max(axis=1) == 1).all() and ((x * in_m).max(axis=1) == 1).all()
    long_n = in_n & (sep[:, None] > 24)
    assert abs(x[long_n].mean() - 0.5) < 4 * 0.5 / np.sqrt(long_n.sum())


def test_sqrt_operand_law():
  x = _inputs('compute_sqrt', 3)
  _chi2_uniform(x @ np.asarray([4, 2, 1]), range(1, 8))
  assert (_inputs('compute_sqrt', 1, 100) == 1).all()


def _shape_probs(n, ops, memo={}):  # pylint: disable=dangerous-default-value
  """Exact law of gen(n)'s shape ('d' digit, 'o' binary operator)."""
  if (n, ops) in memo:
    return memo[n, ops]
  if n <= 4:
    out = {['d', '-d', '(d)', '(-d)'][n - 1]: 1.0}
  else:
    out = collections.defaultdict(float)
    for left in range(1, n - 3):
      for sl, pl in _shape_probs(left, ops).items():
        for sr, pr in _shape_probs(n - 3 - left, ops).items():
          out[f'({sl}o{sr})'] += pl * pr / (n - 4)
  memo[n, ops] = dict(out)
  return memo[n, ops]


def _shape(tokens, sym):
  out, prev = [], None
  for t in tokens:
    if t <= 4 or t == sym['x']:
      out.append('d')
    elif t == sym['('] or t == sym[')']:
      out.append('(' if t == sym['('] else ')')
    elif t == sym['-'] and prev not in ('d', ')'):
      out.append('-')
    else:
      out.append('o')
    prev = out[-1]
  return ''.join(out)


@pytest.mark.parametrize('length', [9, 11])
def test_bracket_expression_shape_law(length):
  """The whole shape of gen(L) follows the recursive law exactly (all shapes at once)."""
  x = _inputs('modular_arithmetic_brackets', length)
  sym = oracles.BRACKET_SYMBOLS
  _chi2(collections.Counter(_shape(r, sym) for r in x.tolist()), _shape_probs(length, 3))
  ops = x[np.vectorize(lambda t: t in (5, 7))(x) | (x == 6)]
  _chi2_uniform(ops[ops != 6], (5, 7))
  _chi2_uniform(x[x <= 4], range(5))


def test_bracket_root_split_and_operators():
  x = _inputs('modular_arithmetic_brackets', 40, 10000)
  sym = oracles.BRACKET_SYMBOLS
  lefts, root_ops = [], []
  for row in x.tolist():
    _, left = oracles.parse_expression(row, sym, (5, 6, 7))
    lefts.append(left)
    root_ops.append(row[1 + left])
  _chi2_uniform(lefts, range(1, 37))  # left_len ~ U{1..L-4}
  _chi2_uniform(root_ops, (5, 6, 7))


def test_solve_equation_laws():
  length = 11
  x = _inputs('solve_equation', length)
  sym = oracles.EQUATION_SYMBOLS
  n = length - 2
  shapes = collections.Counter(_shape(r[:n], sym) for r in x.tolist())
  _chi2(shapes, _shape_probs(n, 2))
  assert not (x == 7 - 7 + 11).any()  # no token past the vocabulary
  # Which digit becomes x: P(digit k) = (#positions whose cyclic scan stops at k) / n.
  expected, observed, var = 0.0, 0, 0.0
  for row in x.tolist():
    digits = [i for i, t in enumerate(row[:n]) if t <= 4 or t == sym['x']]
    first, last = digits[0], digits[-1]
    p_first = (first + 1 + n - 1 - last) / n
    expected += p_first
    var += p_first * (1 - p_first)
    observed += row.index(sym['x']) == first
  assert abs(observed - expected) < 4.5 * math.sqrt(var), (observed, expected)


def test_solve_equation_ids_invert_codes():
  from tasks import dcf  # pylint: disable=import-outside-toplevel

  ids = np.arange(11)  # every token id but PAD's 0 slot
  codes = np.asarray(dcf._EQ_CODES)[ids]  # pylint: disable=protected-access
  back = np.asarray(dcf._eq_ids(codes))  # pylint: disable=protected-access
  assert (back[:10] == ids[:10]).all() and back[10] == 0  # id 10 (`=`) -> PAD -> 0
