"""Deterministic context-free tasks: stack_manipulation, reverse_string,
modular_arithmetic_brackets, solve_equation."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from tasks import base
from tasks import expressions as ex

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class StackManipulation(base.Task):
  """Run POP / PUSH actions on a given stack; output the final stack top to bottom.

  Tokens: 0/1 stack symbols, 2 POP, 3 PUSH 0, 4 PUSH 1. The input is the initial stack,
  bottom to top, then the actions; POP on an empty stack is ignored. Output classes 0, 1 and
  2 = terminator: the final stack top to bottom, then 2, then zeros to length L + 1. The
  accuracy mask keeps the positions up to the terminator.

  Sampling: stack length ~ U{1..L-1}, stack bits uniform, the other tokens ~ U{2, 3, 4}.
  L = 1 (degenerate in the reference): the input is one random bit b and the target `b 2`.

  Examples: `1 1 0 1 1 3 3` -> `0 0 1 1 0 1 1 2`;  `0 1 0 2 2 2 4` -> `1 2 0 0 0 0 0 0`
  with mask `1 1 0 0 0 0 0 0`.
  """

  name: str = 'stack_manipulation'
  level: str = 'dcf'
  vocab_size: int = 5
  num_classes: int = 3

  def output_length(self, length):
    return length + 1

  def _sample_inputs(self, key, batch_size, length, max_length):
    k_len, k_tok = jax.random.split(key)
    stack_len = 1 + base.uniform_below(k_len, jnp.full((batch_size,), length - 1))
    # One draw from {0..5} per position gives an independent bit and action.
    draw = base.uniform_digits(k_tok, (batch_size, max_length), 6)
    bits, actions = draw % 2, 2 + draw // 2
    pos = base.positions(max_length)
    x = jnp.where(pos < stack_len[:, None], bits, actions)
    return jnp.where(pos < length, x, 0)

  def _target(self, inputs, length):
    # The stack symbols are pushes too, so every token is a push (0, 1, 3, 4) or a pop (2).
    # Heights: h_t = max(h_{t-1} +- 1, 0) (a pop on an empty stack is ignored). A push
    # survives iff the height never falls below its level afterwards; it then sits at
    # index H - h_t of the top-to-bottom output (H the final height).
    batch, width = inputs.shape
    pos = base.positions(width)
    valid = pos < length
    push = valid & (inputs != 2)
    step = jnp.where(push, 1, jnp.where(valid, -1, 0))
    height = base.cumulative(lambda h, d: jnp.maximum(h + d, 0), step, 0)
    final = height[:, -1]
    later_min = base.cumulative(jnp.minimum, height, width + 1, reverse=True)
    survives = push & (later_min >= height)
    value = jnp.where(inputs < 2, inputs, inputs - 3)
    index = jnp.where(survives, final[:, None] - height, width + 1)
    rows = jnp.broadcast_to(jnp.arange(batch)[:, None], (batch, width))
    stack = jnp.zeros((batch, width + 1), jnp.int32).at[rows, index].set(value, mode='drop')
    return base.terminated_output(stack, final, width + 1)


@dataclasses.dataclass(frozen=True)
class ReverseString(base.Task):
  """Output the input reversed. Tokens 0/1. Example: `0111` -> `1110`."""

  name: str = 'reverse_string'
  level: str = 'dcf'
  vocab_size: int = 2
  num_classes: int = 2

  def output_length(self, length):
    return length

  def _sample_inputs(self, key, batch_size, length, max_length):
    x = base.uniform_digits(key, (batch_size, max_length), 2)
    return jnp.where(base.positions(max_length) < length, x, 0)

  def _target(self, inputs, length):
    # inputs[:, ::-1][:, i] = x[Lmax-1-i]; shift left by Lmax - L to get x[L-1-i].
    return base.seq_output(base.shift_left(inputs[:, ::-1], inputs.shape[1] - length), length)


# Token ids of solve_equation <-> the internal codes of `expressions`.
def _eq_ids(codes: Array) -> Array:
  """Internal codes -> solve_equation token ids: digits, `+`, `-` keep theirs; `(` 8 -> 7,
  `)` 9 -> 8, `x` 10 -> 9; `*` and PAD (not in its expressions) -> 0. Arithmetic rather
  than a table, which would be a gather per token on CPU."""
  ids = jnp.where(codes <= ex.MINUS, codes, jnp.where(codes == ex.TIMES, 0, codes - 1))
  return jnp.where(codes == ex.PAD, 0, ids)


# id -> code; NumPy, so that importing the tasks starts no JAX backend (a multi-process job
# must call jax.distributed.initialize first).
_EQ_CODES = np.asarray(
  [0, 1, 2, 3, 4, ex.PLUS, ex.MINUS, ex.OPEN, ex.CLOSE, ex.X, ex.PAD], np.int32
)


@dataclasses.dataclass(frozen=True)
class ModularArithmeticBrackets(base.Task):
  """Evaluate a fully bracketed expression mod 5.

  Tokens: 0-4 digits, 5 `+`, 6 `-`, 7 `*`, 8 `(`, 9 `)`; id 10 (`x`) is in the vocabulary
  but unused. The expression is the reference generator gen(L) (see `tasks.expressions`):
  split points l ~ U{1..n-4}, operators uniform over {+, -, *}, digits uniform; `-d` is a
  negated digit.

  Example: `( 0 - ( 3 ) )` -> 2.
  """

  name: str = 'modular_arithmetic_brackets'
  level: str = 'dcf'
  vocab_size: int = 11
  num_classes: int = 5

  def _sample(self, key, batch_size, length, max_length):
    tokens, value = ex.generate(key, batch_size, length, max_length, num_ops=3)
    return jnp.where(tokens == ex.PAD, 0, tokens), *base.cls_output(value)

  def _target(self, inputs, length):
    return base.cls_output(ex.evaluate(inputs, length)[1])


@dataclasses.dataclass(frozen=True)
class SolveEquation(base.Task):
  """Find the digit x of `expr = v` (mod 5), expr a bracket expression with + and - only.

  Tokens: 0-4 digits, 5 `+`, 6 `-`, 7 `(`, 8 `)`, 9 `x`, 10 `=`. Sampling: expr = gen(L-2)
  without `*`, value v; a position idx ~ U{0..L-3}, then scan forward cyclically to the
  first digit and replace it by `x`; the input is expr' `=` v and the target the digit
  replaced. Since only + and - occur, expr' is +-x + c and the digit is unique.

  Quirk kept from the reference: L < 3 is degenerate, all-zero input (L tokens of id 0)
  and target 0.

  Example: `( 4 - x ) = 4` -> 0.
  """

  name: str = 'solve_equation'
  level: str = 'dcf'
  vocab_size: int = 11
  num_classes: int = 5

  def _sample(self, key, batch_size, length, max_length):
    k_expr, k_idx = jax.random.split(key)
    n = length - 2
    tokens, value = ex.generate(k_expr, batch_size, n, max_length, num_ops=2)
    pos = base.positions(max_length)
    # The first digit at or after idx, cyclically: two masked minima over the positions.
    digit_pos = jnp.where((tokens < 5) & (pos < n), pos, max_length)
    idx = base.uniform_below(k_idx, jnp.full((batch_size,), n))
    chosen = jnp.min(jnp.where(pos >= idx[:, None], digit_pos, max_length), axis=1)
    chosen = jnp.where(chosen < max_length, chosen, jnp.min(digit_pos, axis=1))
    answer = base.take_per_row(tokens, chosen)
    tokens = jnp.where(pos == chosen[:, None], ex.X, tokens)
    x = _eq_ids(tokens)
    x = jnp.where(pos == n, 10, jnp.where(pos == n + 1, value[:, None], x))
    degenerate = length < 3
    x = jnp.where(degenerate | (pos >= length), 0, x)
    return x, *base.cls_output(jnp.where(degenerate, 0, answer))

  def _target(self, inputs, length):
    n = length - 2
    codes = jnp.asarray(_EQ_CODES)[jnp.clip(inputs, 0, 10)]
    a, b = ex.evaluate(codes, n)
    value = base.take_col(inputs, length - 1)
    x = (a * (value - b)) % 5  # a = +-1 is its own inverse mod 5
    return base.cls_output(jnp.where(length < 3, 0, x))
