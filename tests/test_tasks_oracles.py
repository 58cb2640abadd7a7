"""Independent oracles for the 15 tasks, written from the spec with Python ints and loops.

Each oracle takes one input sequence (a list of ints) and returns (targets, mask) as lists,
and asserts that the sequence is a well-formed sample of the task at its length (the
structure the reference's sampler produces). Nothing here imports `tasks`.
"""

from __future__ import annotations

import math


def even_pairs(x):
  return [sum(a != b for a, b in zip(x, x[1:])) % 2], [1]


def modular_arithmetic(x):
  assert len(x) % 2 == 1
  assert all(0 <= t <= 4 for t in x[0::2]) and all(t in (5, 6, 7) for t in x[1::2]), x
  expr = ''.join(str(t) if i % 2 == 0 else '+-*'[t - 5] for i, t in enumerate(x))
  return [eval(expr) % 5], [1]  # pylint: disable=eval-used  (digits and + - * only)


def parity_check(x):
  return [sum(x) % 2], [1]


def cycle_navigation(x):
  state = 0
  for t in x:
    state = (state + {0: -1, 1: 0, 2: 1}[t]) % 5
  return [state], [1]


def stack_manipulation(x):
  n = len(x)
  stack_len = 0
  while stack_len < n and x[stack_len] in (0, 1):
    stack_len += 1
  assert all(t in (2, 3, 4) for t in x[stack_len:]), x
  assert stack_len == 1 if n == 1 else 1 <= stack_len <= n - 1, x
  stack = list(x[:stack_len])
  for t in x[stack_len:]:
    if t == 2:
      if stack:
        stack.pop()
    else:
      stack.append(t - 3)
  out = stack[::-1] + [2]
  mask = [1] * len(out) + [0] * (n + 1 - len(out))
  return out + [0] * (n + 1 - len(out)), mask


def reverse_string(x):
  return x[::-1], [1] * len(x)


class _Parser:
  """Recursive-descent parser of gen()'s grammar: E := d | -d | (d) | (-d) | (E op E)."""

  def __init__(self, tokens, sym, ops):
    self.t, self.i, self.sym, self.ops = tokens, 0, sym, ops

  def peek(self):
    return self.t[self.i] if self.i < len(self.t) else None

  def eat(self, expected=None):
    tok = self.peek()
    assert tok is not None and (expected is None or tok == expected), (self.t, self.i)
    self.i += 1
    return tok

  def atom(self):
    """A digit or x -> (coefficient of x, constant)."""
    tok = self.eat()
    if tok == self.sym['x']:
      return (1, 0)
    assert 0 <= tok <= 4, (self.t, self.i)
    return (0, tok)

  def expr(self):
    if self.peek() == self.sym['-']:
      self.eat()
      a, b = self.atom()
      value = (-a, -b)
    elif self.peek() == self.sym['(']:
      self.eat()
      inner_start = self.i
      left = self.expr()
      if self.peek() == self.sym[')'] and self.i - inner_start <= 2:  # (d) or (-d)
        value = left
      else:
        op = self.eat()
        assert op in self.ops, (self.t, self.i)
        right = self.expr()
        if op == self.sym['+']:
          value = (left[0] + right[0], left[1] + right[1])
        elif op == self.sym['-']:
          value = (left[0] - right[0], left[1] - right[1])
        else:
          assert left[0] == 0 or right[0] == 0
          value = (left[0] * right[1] + right[0] * left[1], left[1] * right[1])
      self.eat(self.sym[')'])
    else:
      value = self.atom()
    return value[0] % 5, value[1] % 5


BRACKET_SYMBOLS = {'+': 5, '-': 6, '*': 7, '(': 8, ')': 9, 'x': 10}
EQUATION_SYMBOLS = {'+': 5, '-': 6, '(': 7, ')': 8, 'x': 9, '=': 10}


def parse_expression(tokens, sym, ops):
  """(value (a, b), length of the root's left operand or None) of a whole expression."""
  parser = _Parser(tokens, sym, ops)
  first_left = None
  if len(tokens) >= 5:
    # Length of the root's left operand: parse it alone.
    sub = _Parser(tokens, sym, ops)
    sub.i = 1
    sub.expr()
    first_left = sub.i - 1
  value = parser.expr()
  assert parser.i == len(tokens), tokens
  return value, first_left


def modular_arithmetic_brackets(x):
  (a, b), _ = parse_expression(x, BRACKET_SYMBOLS, (5, 6, 7))
  assert a == 0
  return [b], [1]


def solve_equation(x):
  n = len(x)
  if n < 3:
    assert all(t == 0 for t in x)
    return [0], [1]
  assert x[n - 2] == 10 and 0 <= x[n - 1] <= 4, x
  assert x[: n - 2].count(9) == 1, x
  (a, b), _ = parse_expression(x[: n - 2], EQUATION_SYMBOLS, (5, 6))
  assert a in (1, 4), x
  solutions = [d for d in range(5) if (a * d + b) % 5 == x[n - 1]]
  assert len(solutions) == 1
  return solutions, [1]


def duplicate_string(x):
  return x + x, [1] * (2 * len(x))


def missing_duplicate_string(x):
  n = len(x)
  if n == 1:
    assert x == [1]
    return [1], [1]
  half = n // 2
  assert (x[-1] == 3) == (n % 2 == 1), x
  d = x[: 2 * half]
  assert d.count(2) == 1 and all(t in (0, 1, 2) for t in d), x
  idx = d.index(2)
  mirror = idx + half if idx < half else idx - half
  assert all(d[i] == d[i + half] for i in range(half) if 2 not in (d[i], d[i + half])), x
  return [d[mirror]], [1]


def odds_first(x):
  return x[1::2] + x[0::2], [1] * len(x)


def _binary_operands(x):
  n = len(x)
  assert x.count(2) == 1, x
  sep = x.index(2)
  assert 1 <= sep <= n - 2, x
  a = sum(bit << i for i, bit in enumerate(x[:sep]))
  b = sum(bit << i for i, bit in enumerate(x[sep + 1 :]))
  assert a >= 1 and b >= 1, x
  return a, b


def _le_bits(value):
  return [int(c) for c in reversed(format(value, 'b'))]


def _terminated(bits, width):
  out = bits + [2]
  return out + [0] * (width - len(out)), [1] * len(out) + [0] * (width - len(out))


def binary_addition(x):
  n = len(x)
  if n <= 2:
    assert all(t in (0, 1) for t in x)
    value = sum(bit << i for i, bit in enumerate(x))
    assert value <= 2**n - 2, x
    return _terminated(_le_bits(value), n + 1)
  a, b = _binary_operands(x)
  return _terminated(_le_bits(a + b), n + 1)


def binary_multiplication(x):
  n = len(x)
  if n <= 2:
    assert all(t in (0, 1) for t in x) and sum(b << i for i, b in enumerate(x)) <= 2**n - 2
    return _terminated([0] * (n - 1), n)
  a, b = _binary_operands(x)
  return _terminated(_le_bits(a * b), n)


def compute_sqrt(x):
  n = len(x)
  value = int(''.join(map(str, x)), 2)
  assert value >= 1, x
  width = (n + 1) // 2
  root = format(math.isqrt(value), 'b').zfill(width)
  return [int(c) for c in root], [1] * width


def bucket_sort(x):
  return sorted(x), [1] * len(x)


ORACLES = {
  'even_pairs': even_pairs,
  'modular_arithmetic': modular_arithmetic,
  'parity_check': parity_check,
  'cycle_navigation': cycle_navigation,
  'stack_manipulation': stack_manipulation,
  'reverse_string': reverse_string,
  'modular_arithmetic_brackets': modular_arithmetic_brackets,
  'solve_equation': solve_equation,
  'duplicate_string': duplicate_string,
  'missing_duplicate_string': missing_duplicate_string,
  'odds_first': odds_first,
  'binary_addition': binary_addition,
  'binary_multiplication': binary_multiplication,
  'compute_sqrt': compute_sqrt,
  'bucket_sort': bucket_sort,
}


# ============================================================================ tests
import functools  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tasks  # noqa: E402

LENGTHS = (1, 2, 3, 4, 5, 7, 8, 40, 41, 100, 500)
NUM_SAMPLES = 1000
# Compiles dominate the run time, so the tests share programs: the exact-shape sampler and
# `task.target` at the lengths of the shape table, and one padded sampler per buffer size
# (lengths are traced) for the other lengths.
EXACT_LENGTHS = (1, 2, 7, 40)
TARGET_FN_LENGTHS = (2, 40)  # `task.target` compiles per width; all 11 under -m slow
PADDED = ((41, (3, 4, 5, 7, 8, 41)), (500, (100, 500)))
_TARGET_FNS = {}


def target_fn(name):
  """jax.jit(task.target), one per task (so its compiles are shared by the tests)."""
  return _TARGET_FNS.setdefault(name, jax.jit(tasks.get(name).target))


@functools.lru_cache(maxsize=None)
def exact_sample(name, length):
  """`sample` of NUM_SAMPLES examples (key 7 + length), as numpy; cached across tests."""
  batch = tasks.get(name).sample(jax.random.key(7 + length), NUM_SAMPLES, length)
  return jax.tree.map(np.asarray, batch)


@functools.lru_cache(maxsize=None)
def padded_sample(name, length, max_length):
  """`sample_padded` of NUM_SAMPLES examples (key 9 + length), as numpy; cached."""
  batch = tasks.get(name).sample_padded(jax.random.key(9 + length), NUM_SAMPLES, length, max_length)
  return jax.tree.map(np.asarray, batch)


def draw_inputs(name, length, num_batches, seed=0):
  """Valid inputs of num_batches * NUM_SAMPLES examples at length <= 41, from the padded
  program of the tests (max_length 41: no new compile), as one numpy array."""
  task = tasks.get(name)
  out = []
  for i in range(num_batches):
    key = jax.random.fold_in(jax.random.key(seed), i)
    batch = task.sample_padded(key, NUM_SAMPLES, length, 41)
    out.append(np.asarray(batch['inputs'])[:, : int(batch['length'])])
  return np.concatenate(out)


def _check(name, batch, length, call_target):
  """The oracle vs the sampled targets (and `task.target`), on a batch's valid part."""
  task = tasks.get(name)
  l_in = int(batch['length'])
  assert l_in == task.input_length(length)
  out_len = task.output_length(l_in)
  assert int(batch['output_length']) == out_len
  inputs = batch['inputs']
  assert not inputs[:, l_in:].any()
  for key in ('targets', 'mask', 'output_valid'):
    assert not batch[key][:, out_len:].any(), key
  assert (batch['output_valid'][:, :out_len] == 1).all()
  x = inputs[:, :l_in]
  targets, mask = batch['targets'][:, :out_len], batch['mask'][:, :out_len]
  if call_target:
    got_targets, got_mask = target_fn(name)(x)
    assert got_targets.shape == got_mask.shape == (len(x), out_len)
    np.testing.assert_array_equal(np.asarray(got_targets), targets)
    np.testing.assert_array_equal(np.asarray(got_mask), mask)
  oracle = ORACLES[name]
  for row, y, m in zip(x.tolist(), targets.tolist(), mask.tolist()):
    want_y, want_m = oracle(row)
    assert (y, m) == (want_y, want_m), (row, y, want_y, m, want_m)


@pytest.mark.parametrize('name', tasks.NAMES)
def test_exact_sampler_and_target_fn_match_oracle(name):
  for length in EXACT_LENGTHS:
    _check(name, exact_sample(name, length), length, call_target=length in TARGET_FN_LENGTHS)


@pytest.mark.parametrize('name', tasks.NAMES)
def test_padded_sampler_matches_oracle(name):
  for max_length, lengths in PADDED:
    for length in lengths:
      _check(name, padded_sample(name, length, max_length), length, call_target=False)


@pytest.mark.slow
@pytest.mark.parametrize('name', tasks.NAMES)
def test_target_fn_matches_oracle_at_every_length(name):
  """`task.target` itself (one compile per width) at all 11 lengths, 1000 inputs each."""
  task = tasks.get(name)
  for length in LENGTHS:
    max_length = max(task.input_length(length), 41 if length <= 41 else length)
    batch = padded_sample(name, length, max_length)
    _check(name, batch, length, call_target=True)
