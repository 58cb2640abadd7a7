"""tasks/arithmetic.py: every sampler against pure-Python oracles, and the sampling laws.

The oracles read the decoded text of a prompt, check that it is a well-formed prompt of its
task, and compute the answer with Python integers. Statistical tests use fixed keys and
reject at p < 1e-4 (chi-square) or |z| > 4.5 (binomial), so a correct sampler fails with
negligible probability per key.

Programs are compiled once per (task, batch size, widths): the oracle, law and jit tests
share BATCH and the widths of cell (30, 30) (`_cell_widths`), the training tests those of
n = 8.
"""

import collections
import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import tasks
from tasks import arithmetic
from tasks import base
from tasks import digits as digits_lib

P_MIN = 1e-4
Z_MAX = 4.5
BATCH = 1024
CELL_MAX = 30  # `sample` tests use cells up to (30, 30) in one compiled program
TRAIN_N = 8
NAMES = tuple(arithmetic.TASKS)


# ============================================================================ oracles
def _number(reversed_digits: str) -> int:
  """The value of a reversed digit string written by the samplers (no leading zeros)."""
  assert re.fullmatch(r'\d+', reversed_digits), reversed_digits
  assert reversed_digits[-1] != '0', f'leading zero in {reversed_digits!r}'
  return int(reversed_digits[::-1])


def _written(value: int) -> str:
  """The reversal of the usual written form: -333 -> '333-'."""
  return str(value)[::-1]


def oracle_addition(prompt):
  x, y = re.fullmatch(r'(\d+)\+(\d+)=', prompt).groups()
  return _written(_number(x) + _number(y)), (len(x), len(y))


def oracle_multiplication(prompt):
  x, y = re.fullmatch(r'(\d+)\*(\d+)=', prompt).groups()
  return _written(_number(x) * _number(y)), (len(x), len(y))


def oracle_addition_subtraction(prompt):
  x, op, y = re.fullmatch(r'(\d+)([+-])(\d+)=', prompt).groups()
  value = _number(x) + _number(y) if op == '+' else _number(x) - _number(y)
  return _written(value), (len(x), len(y))


def _symbol_index(symbol):
  return arithmetic.encode(symbol)[0] - arithmetic.FIRST_INDEX_SYMBOL


def oracle_sorting(prompt, num_index_symbols=64):
  assert prompt.endswith('=')
  pairs = [
    re.fullmatch(r'(<i\d+>|[a-zA-Z]):(\d+)', part).groups() for part in prompt[:-1].split(',')
  ]
  labels = [_symbol_index(symbol) for symbol, _ in pairs]
  assert labels == list(range(labels[0], labels[0] + len(labels))), labels  # consecutive
  assert 0 <= labels[0] and labels[-1] < num_index_symbols, labels
  values = []
  for _, digits in pairs:
    assert digits[-1] != '0', digits  # no leading zero; may begin with 0 reversed
    values.append(int(digits[::-1]))
  order = sorted(range(len(pairs)), key=lambda i: (values[i], i))
  return ','.join(pairs[i][0] for i in order), (len(pairs), max(len(d) for _, d in pairs))


def oracle_bitwise_or(prompt):
  x, y = re.fullmatch(r'([01]+)\|([01]+)=', prompt).groups()
  longer = max((x, y), key=len)
  assert (x + y).count('1') == 1 and (len(x) == len(y) or '1' not in longer), prompt
  width = max(len(x), len(y))
  return ''.join(
    str(int(x.ljust(width, '0')[i]) | int(y.ljust(width, '0')[i])) for i in range(width)
  ), (len(x), len(y))


ORACLES = {
  'addition': oracle_addition,
  'multiplication': oracle_multiplication,
  'addition_subtraction': oracle_addition_subtraction,
  'sorting': oracle_sorting,
  'bitwise_or': oracle_bitwise_or,
}


@pytest.mark.parametrize(
  'name, prompt, answer',
  [
    ('addition', '98282+3859172=', '2787472'),  # the paper's example
    ('addition', '999+1=', '0001'),
    ('multiplication', '21*43=', '804'),
    ('addition_subtraction', '321-654=', '333-'),  # 123 - 456 = -333
    ('addition_subtraction', '21-21=', '0'),
    ('sorting', 'a:64957,b:99963,c:10218,d:7141,e:05781=', 'd,e,b,a,c'),  # the paper's
    ('sorting', 'c:5,d:3,e:5,f:3=', 'd,f,c,e'),  # ties: stable
    ('bitwise_or', '001|00000=', '00100'),
  ],
)
def test_oracles_on_worked_examples(name, prompt, answer):
  assert ORACLES[name](prompt)[0] == answer


# ============================================================================ helpers
def _cell_widths(task, a=CELL_MAX, b=CELL_MAX):
  return task.max_prompt(a, b), task.max_answer(a, b)


def _examples(batch):
  """[(prompt text, answer text without EOS)] of a batch, checking its layout: the prompt
  ends with '=', the answer with its only EOS at length - 1, zeros after."""
  tokens = np.asarray(batch['tokens'])
  prompt_length, length = np.asarray(batch['prompt_length']), np.asarray(batch['length'])
  out = []
  for row, lp, n in zip(tokens, prompt_length, length):
    assert 0 < lp < n <= len(row)
    assert row[lp - 1] == arithmetic.EQUALS and row[n - 1] == arithmetic.EOS
    assert (row[n:] == 0).all()
    answer = row[lp : n - 1]
    assert (answer != arithmetic.EOS).all() and (answer != arithmetic.SPACE).all()
    out.append((arithmetic.decode(row[:lp]), arithmetic.decode(answer)))
  return out


def _check_oracle(name, batch, **oracle_kwargs):
  """Every example's answer equals the oracle's; returns the oracle's axes per example."""
  axes = []
  for prompt, answer in _examples(batch):
    want, cell = ORACLES[name](prompt, **oracle_kwargs)
    assert answer == want, (prompt, answer, want)
    axes.append(cell)
  return np.asarray(axes)


def _chi2_uniform(values, support):
  counts = collections.Counter(np.asarray(values).ravel().tolist())
  assert set(counts) <= set(support), (sorted(counts), support)
  observed = [counts.get(v, 0) for v in support]
  assert stats.chisquare(observed).pvalue > P_MIN, observed


def _binomial_ok(successes, trials, p):
  z = (successes - trials * p) / math.sqrt(trials * p * (1 - p))
  assert abs(z) < Z_MAX, (successes, trials, p, z)


def _sample(task, key, a, b, batch_size=BATCH):
  return task.sample(jax.random.key(key), batch_size, a, b, *_cell_widths(task))


def _train_widths(task, n=TRAIN_N):
  return task.max_prompt(n, n), task.max_answer(n, n)


# ============================================================================ vocabulary
def test_vocabulary_constants_and_decode():
  assert arithmetic.DIGITS == tuple(range(10)) and arithmetic.EOS == 18
  assert (
    arithmetic.PLUS,
    arithmetic.MINUS,
    arithmetic.TIMES,
    arithmetic.EQUALS,
    arithmetic.COMMA,
    arithmetic.COLON,
    arithmetic.OR,
    arithmetic.SPACE,
  ) == tuple(range(10, 18))
  assert arithmetic.FIRST_INDEX_SYMBOL == 19
  assert arithmetic.decode([9, 8, 10, 3, 13, 2, 7, 18]) == '98+3=27$'
  assert arithmetic.decode([19, 44, 45, 70, 71, 100]) == 'azAZ<i52><i81>'
  text = 'a:64957,<i60>:1=<i60>,a$ 1|0-*'
  assert arithmetic.decode(arithmetic.encode(text)) == text
  with pytest.raises(ValueError, match='not in the vocabulary'):
    arithmetic.encode('x?')


def test_registry_and_task_attributes():
  assert NAMES == ('addition', 'multiplication', 'addition_subtraction', 'sorting', 'bitwise_or')
  for name in NAMES:
    task = tasks.get(name)
    assert task.name == name and task.level == 'arithmetic' and task.pad_probability == 0
    assert task.digit_ids == tuple(range(10)) and task.eos_id == 18
    assert len(task.axes) == 2 and all(isinstance(x, str) for x in task.axes)
    assert task.vocab_size == (19 + 64 if name == 'sorting' else 19)
    hash(task)  # a static argument of jit
  assert arithmetic.Sorting(num_index_symbols=100).vocab_size == 119
  with pytest.raises(ValueError, match=r"unknown task 'nope'.*addition.*bitwise_or"):
    tasks.get('nope')
  with pytest.raises(ValueError, match='pad_probability'):
    arithmetic.Addition(pad_probability=1.5)


@pytest.mark.parametrize(
  'name, a, b, prompt, answer',
  [
    ('addition', 3, 5, 10, 7),
    ('multiplication', 3, 5, 10, 9),
    ('addition_subtraction', 5, 3, 10, 7),
    ('sorting', 4, 5, 32, 8),
    ('bitwise_or', 3, 5, 10, 6),
  ],
)
def test_max_sizes(name, a, b, prompt, answer):
  task = tasks.get(name)
  assert (task.max_prompt(a, b), task.max_answer(a, b)) == (prompt, answer)
  padded = dataclasses.replace(task, pad_probability=0.1)
  assert (padded.max_prompt(a, b), padded.max_answer(a, b)) == (3 * prompt, answer)


def test_width_and_cell_checks():
  task = tasks.get('addition')
  key = jax.random.key(0)
  with pytest.raises(ValueError, match=r'needs prompt_width >= 12 and answer_width >= 7'):
    task.sample(key, 4, 5, 5, 11, 7)
  with pytest.raises(ValueError, match='needs prompt_width'):
    task.sample_train(key, 4, 9, *_train_widths(task))
  with pytest.raises(ValueError, match='start at 1'):
    task.sample(key, 4, 0, 5, 50, 50)
  with pytest.raises(ValueError, match='num_index_symbols=3'):
    arithmetic.Sorting(num_index_symbols=3).sample(key, 4, 4, 2, 100, 100)


# ============================================================================ digit arithmetic
def _to_digits(values, width):
  return jnp.asarray([[int(c) for c in str(v)[::-1].ljust(width, '0')] for v in values], jnp.int32)


def _from_digits(digits):
  return [int(''.join(map(str, row[::-1]))) for row in np.asarray(digits).tolist()]


def _adversarial_numbers(rng, count, max_digits):
  """Numbers made of long runs of 9s and 0s with a few random digits: long carry and
  borrow chains, and the extremes 10**k - 1, 10**k."""
  out = []
  for _ in range(count):
    size = int(rng.integers(1, max_digits + 1))
    kind = rng.integers(4)
    if kind == 0:
      out.append(10**size - 1)
    elif kind == 1:
      out.append(10 ** (size - 1))
    else:
      fill = '9' if kind == 2 else '0'
      digits = [fill if rng.random() < 0.9 else str(rng.integers(10)) for _ in range(size)]
      digits[0] = str(rng.integers(1, 10))
      out.append(int(''.join(digits)))
  return out


def test_add_digits_carry_chains():
  width = 60
  xs = [10**k - 1 for k in range(1, width + 1)] + [1, 5, 10**59]
  ys = [1] * width + [10**width - 1, 5, 10**59]
  got = _from_digits(digits_lib.add_digits(_to_digits(xs, width), _to_digits(ys, width)))
  assert got == [x + y for x, y in zip(xs, ys)]
  rng = np.random.default_rng(0)
  xs, ys = _adversarial_numbers(rng, 3000, width), _adversarial_numbers(rng, 3000, width)
  got = _from_digits(digits_lib.add_digits(_to_digits(xs, width), _to_digits(ys, width)))
  assert got == [x + y for x, y in zip(xs, ys)]


def test_subtract_digits_borrow_chains_and_signs():
  width = 60
  rng = np.random.default_rng(1)
  xs = [10**k for k in range(1, width)] + [123, 5, 7] + _adversarial_numbers(rng, 3000, width)
  ys = [1] * (width - 1) + [456, 5, 10**59] + _adversarial_numbers(rng, 3000, width)
  diff, negative = digits_lib.subtract_digits(_to_digits(xs, width), _to_digits(ys, width))
  assert _from_digits(diff) == [abs(x - y) for x, y in zip(xs, ys)]
  assert np.asarray(negative).tolist() == [x < y for x, y in zip(xs, ys)]


@pytest.mark.parametrize('width_x, width_y', [(1, 1), (20, 20), (7, 33), (100, 100)])
def test_multiply_digits_max_length_products(width_x, width_y):
  rng = np.random.default_rng(width_x + width_y)
  nines = [(10**width_x - 1, 10**width_y - 1)]  # the largest column sums: 81 * min width
  pairs = nines + list(
    zip(_adversarial_numbers(rng, 500, width_x), _adversarial_numbers(rng, 500, width_y))
  )
  pairs += [
    (
      int(rng.integers(1, 10)) * 10 ** (width_x - 1)
      + int(rng.integers(10 ** min(width_x - 1, 18))),
      10**width_y - 1 - int(rng.integers(10 ** min(width_y - 1, 18))),
    )
    for _ in range(500)
  ]
  xs, ys = zip(*pairs)
  product = digits_lib.multiply_digits(
    _to_digits(xs, width_x), _to_digits(ys, width_y), width_x + width_y
  )
  assert _from_digits(product) == [x * y for x, y in pairs]
  assert _from_digits(product)[0] == (10**width_x - 1) * (10**width_y - 1)


def test_resolve_carries_docstring_example():
  got = digits_lib.resolve_carries(jnp.asarray([[10, 9, 9, 1, 0]]), 18)
  assert np.asarray(got).tolist() == [[0, 0, 0, 2, 0]]


# ============================================================================ oracle tests
@pytest.mark.parametrize('name', NAMES)
def test_sample_train_against_oracle(name):
  """Three training batches of 1024 over the grid [1..8]**2, every answer checked; the
  cells read back from the text are the ones `train_cells` assigns."""
  task = tasks.get(name)
  widths = _train_widths(task)
  for seed in range(3):
    key = jax.random.key(100 + seed)
    batch = task.sample_train(key, BATCH, TRAIN_N, *widths)
    assert batch['tokens'].shape == (BATCH, sum(widths))
    assert batch['tokens'].dtype == batch['length'].dtype == jnp.int32
    axes = _check_oracle(name, batch)
    a, b = map(np.asarray, arithmetic.train_cells(jax.random.split(key)[0], BATCH, TRAIN_N))
    assert (axes[:, 0] == a).all()
    if name == 'sorting':  # b bounds the lengths; the longest is random
      assert (axes[:, 1] <= b).all() and (axes[:, 1] == b).mean() > 0.5
    else:
      assert (axes[:, 1] == b).all()


@pytest.mark.parametrize('name', NAMES)
def test_sample_at_cells_against_oracle(name):
  """`sample` at corner and interior cells up to (30, 30), one compiled program."""
  task = tasks.get(name)
  cells = [(1, 1), (CELL_MAX, CELL_MAX), (1, CELL_MAX), (CELL_MAX, 1), (20, 20), (7, 13)]
  for i, (a, b) in enumerate(cells):
    batch = _sample(task, 200 + i, a, b)
    axes = _check_oracle(name, batch)
    assert (axes[:, 0] == a).all()
    assert (axes[:, 1] <= b).all() if name == 'sorting' else (axes[:, 1] == b).all()
    lengths = np.asarray(batch['length'] - batch['prompt_length'])
    if name == 'multiplication':  # products of a + b or a + b - 1 digits, plus EOS
      assert set(lengths.tolist()) <= {a + b, a + b + 1} and lengths.max() == a + b + 1


def _all_nines_or_power(key, lengths, width):
  """In place of `draw_operands`: per row 10**l - 1 or 10**(l-1), the extreme operands."""
  pos, size = base.positions(width), lengths[:, None]
  nines = jnp.where(pos < size, 9, 0)
  power = jnp.where(pos == size - 1, 1, 0)
  return jnp.where(jax.random.bernoulli(key, 0.5, (lengths.shape[0], 1)), nines, power)


@pytest.mark.parametrize('name', ['addition', 'multiplication', 'addition_subtraction'])
def test_forced_extreme_operands_end_to_end(monkeypatch, name):
  """99..9 + 99..9, 99..9 + 10**k (carries through every digit), 10**k - 99..9 (borrows),
  99..9 * 99..9 (the longest products) through the whole sampler, checked by the oracle."""
  monkeypatch.setattr(digits_lib, 'draw_operands', _all_nines_or_power)
  task = dataclasses.replace(tasks.get(name), name=name + '_forced')  # a fresh compile
  seen = set()
  for i, (a, b) in enumerate([(20, 20), (CELL_MAX, 1), (1, CELL_MAX), (13, 29)]):
    batch = _sample(task, 300 + i, a, b, batch_size=64)
    for prompt, answer in _examples(batch):
      assert answer == ORACLES[name](prompt)[0], (prompt, answer)
      seen.add(prompt)
  assert '9' * 20 + '*' + '9' * 20 + '=' in seen or name != 'multiplication'
  assert len(seen) >= 12


# ============================================================================ laws
def test_operand_law():
  """Exact digit counts, no leading zeros (checked by the oracle), uniform digits: the top
  digit on 1..9, the others on 0..9; a 1-digit operand on 1..9."""
  task = tasks.get('addition')
  texts = [p for p, _ in _examples(_sample(task, 400, 1, 3))]
  x, y = zip(*(re.fullmatch(r'(\d+)\+(\d+)=', p).groups() for p in texts))
  assert {len(s) for s in x} == {1} and {len(s) for s in y} == {3}
  _chi2_uniform([int(s) for s in x], range(1, 10))
  _chi2_uniform([int(s[2]) for s in y], range(1, 10))
  _chi2_uniform([int(s[0]) for s in y], range(10))
  _chi2_uniform([int(s[1]) for s in y], range(10))
  # The value of a 2-digit operand: uniform on 10..99.
  texts = [p for p, _ in _examples(_sample(task, 401, 2, 2))]
  _chi2_uniform(
    [int(p[:2][::-1]) for p in texts] + [int(p[3:5][::-1]) for p in texts], range(10, 100)
  )


def test_addition_subtraction_operator_law():
  task = tasks.get('addition_subtraction')
  texts = [p for p, _ in _examples(_sample(task, 410, 5, 5))]
  _binomial_ok(sum('+' in p for p in texts), len(texts), 0.5)
  answers = [a for _, a in _examples(_sample(task, 411, 1, 1))]
  assert any(a.endswith('-') for a in answers) and '0' in answers


def test_train_cells_stratified_law():
  """The start cell is uniform over the n**2 cells; a batch takes consecutive cells in
  row-major order, wrapping around."""
  n, batch_size = 5, 7
  keys = jax.random.split(jax.random.key(420), 20_000)
  a, b = jax.jit(jax.vmap(lambda k: arithmetic.train_cells(k, batch_size, n)))(keys)
  cell = (np.asarray(a) - 1) * n + (np.asarray(b) - 1)
  assert ((np.diff(cell, axis=1) - 1) % (n * n) == 0).all()
  _chi2_uniform(cell[:, 0], range(n * n))


@pytest.mark.parametrize('name', ['addition', 'bitwise_or'])
def test_sample_train_stratified_law_of_operand_lengths(name):
  """Chi-square of the (l_1, l_2) read from the tokens over 3,000 batches of 7 examples
  (7 is prime to the 16 cells, so batches do not tile the grid)."""
  task, n, batch_size = tasks.get(name), 4, 7
  widths = _train_widths(task, n)
  keys = jax.random.split(jax.random.key(430), 3000)
  tokens = np.asarray(
    jax.jit(jax.vmap(lambda k: task.sample_train(k, batch_size, n, *widths)['tokens']))(keys)
  )
  tokens = tokens.reshape(-1, tokens.shape[-1])
  op = arithmetic.PLUS if name == 'addition' else arithmetic.OR
  len_a = np.argmax(tokens == op, axis=1)
  len_b = np.argmax(tokens == arithmetic.EQUALS, axis=1) - len_a - 1
  assert (1 <= len_a).all() and (len_a <= n).all() and (1 <= len_b).all() and (len_b <= n).all()
  _chi2_uniform((len_a - 1) * n + len_b - 1, range(n * n))


# ============================================================================ shapes, jit
@pytest.mark.parametrize('name', NAMES)
def test_shapes_zeros_and_traced_cells(name):
  """Shapes, dtypes and zeros past `length` at traced (a, b): one compiled program for all
  cells (jit of `sample` with a, b as arguments), prompt_length and length as the oracle
  reads them."""
  task = tasks.get(name)
  widths = _cell_widths(task, 9, 9)
  fn = jax.jit(lambda k, a, b: task.sample(k, 16, a, b, *widths))
  shapes = jax.eval_shape(fn, jax.random.key(0), 3, 4)
  assert shapes['tokens'].shape == (16, sum(widths))
  assert shapes['prompt_length'].shape == shapes['length'].shape == (16,)
  assert all(v.dtype == jnp.int32 for v in shapes.values())
  for a, b in ((1, 1), (9, 9), (2, 7), (8, 3)):
    batch = fn(jax.random.key(a * 10 + b), jnp.int32(a), jnp.int32(b))
    axes = _check_oracle(name, batch)  # zeros past `length`, EOS, '=' checked
    assert (axes[:, 0] == a).all()
    tokens = np.asarray(batch['tokens'])
    assert tokens.min() >= 0 and tokens.max() < task.vocab_size
    if name != 'sorting':
      assert (np.asarray(batch['prompt_length']) == a + b + 2).all()
  assert fn._cache_size() == 1  # pylint: disable=protected-access


def test_sample_compiles_once_for_all_cells():
  """Python-int cells are traced too: `sample` at new cells adds no compiled program."""
  task = arithmetic.Addition(name='addition_cache_probe')
  widths = _cell_widths(task, 6, 6)
  task.sample(jax.random.key(0), 8, 1, 1, *widths)
  compiled = arithmetic._sample_jit._cache_size()  # pylint: disable=protected-access
  for a, b in ((6, 6), (3, 5), (4, 2)):
    task.sample(jax.random.key(a), 8, a, b, *widths)
  assert arithmetic._sample_jit._cache_size() == compiled  # pylint: disable=protected-access


# ============================================================================ sorting
def test_sorting_symbols_and_lengths_law():
  """m = 30 labels from an offset uniform on 0..34; each number's length uniform on
  1..j; top digits uniform on 1..9."""
  task = tasks.get('sorting')
  texts = [p for p, _ in _examples(_sample(task, 500, 30, 4))]
  offsets, lengths, tops = [], [], []
  for prompt in texts:
    oracle_sorting(prompt)  # consecutive, in range
    pairs = [part.split(':') for part in prompt[:-1].split(',')]
    offsets.append(_symbol_index(pairs[0][0]))
    lengths += [len(d) for _, d in pairs]
    tops += [int(d[-1]) for _, d in pairs]
  _chi2_uniform(offsets, range(64 - 30 + 1))
  _chi2_uniform(lengths, range(1, 5))
  _chi2_uniform(tops, range(1, 10))


def test_sorting_ties_are_stable():
  """One-digit numbers, 30 of them: many ties, broken by position (checked by the oracle,
  which sorts by (value, position))."""
  task = tasks.get('sorting')
  examples = _examples(_sample(task, 510, CELL_MAX, 1))
  for prompt, answer in examples:
    assert answer == oracle_sorting(prompt)[0]
    values = [int(part.split(':')[1]) for part in prompt[:-1].split(',')]
    assert len(set(values)) < len(values)


def test_sorting_more_index_symbols():
  task = arithmetic.Sorting(num_index_symbols=100)
  widths = task.max_prompt(70, 3), task.max_answer(70, 3)
  batch = task.sample(jax.random.key(520), 64, 70, 3, *widths)
  for prompt, answer in _examples(batch):
    assert answer == oracle_sorting(prompt, num_index_symbols=100)[0]
    assert '<i' in prompt  # labels past the 52 letters


# ============================================================================ bitwise or
def test_bitwise_or_law():
  task = tasks.get('bitwise_or')
  texts = [p for p, _ in _examples(_sample(task, 530, 5, 5))]
  x = [re.fullmatch(r'([01]+)\|([01]+)=', p).group(1) for p in texts]
  _binomial_ok(sum('1' in s for s in x), len(x), 0.5)
  _chi2_uniform([p.replace('|', '').index('1') % 5 for p in texts], range(5))
  texts = [p for p, _ in _examples(_sample(task, 531, 3, 7))]
  assert all('1' in p.split('|')[0] for p in texts)
  _chi2_uniform([p.index('1') for p in texts], range(3))


# ============================================================================ random padding
def _strip_spaces(batch):
  """(unpadded prompts, answers, spaces before each prompt character)."""
  prompts, answers, runs = [], [], []
  for prompt, answer in _examples(batch):
    chars = re.findall(r'( *)(<i\d+>|[^ ])', prompt)
    assert ''.join(s + c for s, c in chars) == prompt  # no trailing spaces
    runs += [len(s) for s, _ in chars]
    prompts.append(''.join(c for _, c in chars))
    answers.append(answer)
  return prompts, answers, runs


@pytest.mark.parametrize('name', ['addition', 'sorting'])
def test_random_padding(name):
  """With p = 0.3: the same examples as without padding (same key, same unpadded width)
  with spaces in the prompt only, 0-2 of them before each prompt character, one or more
  with probability p and two with probability 0.1 p**2."""
  p = 0.3
  plain = tasks.get(name)
  padded = dataclasses.replace(plain, pad_probability=p)
  a, b = (12, 9) if name == 'addition' else (6, 5)
  width_p, width_a = plain.max_prompt(a, b), plain.max_answer(a, b)
  assert padded.max_prompt(a, b) == 3 * width_p
  key = jax.random.key(540)
  want = _examples(plain.sample(key, BATCH, a, b, width_p, width_a))
  batch = padded.sample(key, BATCH, a, b, 3 * width_p, width_a)
  prompts, answers, runs = _strip_spaces(batch)
  assert list(zip(prompts, answers)) == want
  runs = np.asarray(runs)
  assert runs.max() <= 2
  _binomial_ok((runs >= 1).sum(), runs.size, p)
  _binomial_ok((runs == 2).sum(), (runs >= 1).sum(), 0.1 * p)
  lengths = np.asarray(batch['prompt_length'])
  spaces = (np.asarray(batch['tokens']) == arithmetic.SPACE).sum(axis=1)
  unpadded = np.asarray([len(arithmetic.encode(w)) for w, _ in want])
  assert (lengths == unpadded + spaces).all()


def test_random_padding_worst_case_fits():
  """p = 1: every prompt character gets a space, about 10% two; sample_train widths hold."""
  task = arithmetic.Addition(pad_probability=1.0)
  widths = _train_widths(task)
  batch = task.sample_train(jax.random.key(550), 256, TRAIN_N, *widths)
  prompts, answers, runs = _strip_spaces(batch)
  assert min(runs) == 1 and max(runs) == 2
  for prompt, answer in zip(prompts, answers):
    assert answer == oracle_addition(prompt)[0]


# ============================================================================ slow
@pytest.mark.slow
@pytest.mark.parametrize('name', NAMES)
def test_sample_train_paper_scale_grid_against_oracle(name):
  """Training batches over the grid [1..100]**2, the paper's evaluation range (sorting: up
  to 100 numbers of up to 100 digits, with 100 index symbols), then the corner cell."""
  task = tasks.get(name)
  kwargs = {}
  if name == 'sorting':
    task = arithmetic.Sorting(num_index_symbols=100)
    kwargs = {'num_index_symbols': 100}
  n = 100
  widths = _train_widths(task, n)
  for seed in range(3):
    _check_oracle(name, task.sample_train(jax.random.key(600 + seed), 512, n, *widths), **kwargs)
  _check_oracle(name, task.sample(jax.random.key(610), 512, n, n, *widths), **kwargs)


def test_index_hints_mark_each_significance_with_one_symbol():
  from tasks import arithmetic

  tokens = jnp.asarray([arithmetic.encode('98+385=')])
  out, length = arithmetic.with_index_hints(tokens, jnp.array([7]), jnp.array([0]), 102, 12)
  assert arithmetic.decode(out[0, : int(length[0])]) == 'a9b8+a3b8c5='
  # Wrapping around the alphabet: K = 3, start 2.
  out, length = arithmetic.with_index_hints(tokens, jnp.array([7]), jnp.array([2]), 3, 12)
  assert arithmetic.decode(out[0, : int(length[0])]) == 'c9a8+c3a8b5='
  task = tasks.get('addition', {'index_hints': True})
  plain = tasks.get('addition')
  key = jax.random.key(5)
  hinted = task.sample(key, 16, 4, 6, task.max_prompt(4, 6), task.max_answer(4, 6))
  bare = plain.sample(key, 16, 4, 6, plain.max_prompt(4, 6), plain.max_answer(4, 6))
  assert task.vocab_size == arithmetic.NUM_BASE_TOKENS + 102
  for row in range(16):
    ids = [int(t) for t in hinted['tokens'][row, : int(hinted['length'][row])]]
    # Without the hints it is the plain task's example.
    plain_ids = [t for t in ids if t < arithmetic.FIRST_INDEX_SYMBOL]
    assert plain_ids == [int(t) for t in bare['tokens'][row, : int(bare['length'][row])]]
    # The symbol before each digit names its significance: the same in both operands and
    # the answer.
    numbers, current = [], []
    for t in ids:
      if t in (arithmetic.PLUS, arithmetic.EQUALS, arithmetic.EOS):
        numbers.append(current)
        current = []
      else:
        current.append(t)
    symbols = [n[0::2] for n in numbers]
    assert all(all(d < 10 for d in n[1::2]) for n in numbers)
    for a, b in zip(symbols, symbols[1:]):
      short = min(len(a), len(b))
      assert a[:short] == b[:short]
  with pytest.raises(ValueError, match='index_hints and pad_probability'):
    tasks.get('addition', {'index_hints': True, 'pad_probability': 0.1})
