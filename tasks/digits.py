"""Numbers as little-endian digit arrays, for the arithmetic and hinting tasks' samplers.

A number is int32 [B, W] (index i = weight 10**i), zero above its length. Carries are
resolved by parallel-prefix look-ahead (log2 W vectorised steps), not by a sequential loop
over the digits.

Example:
  >>> add_digits(jnp.array([[9, 9, 0]]), jnp.array([[1, 0, 0]]))   # 99 + 1
  Array([[0, 0, 1, 0]], dtype=int32)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base

Array = jax.Array


def fit(x: Array, width: int) -> Array:
  """x [B, N] cropped or zero-padded on the right to [B, width]."""
  n = x.shape[1]
  return x[:, :width] if n >= width else jnp.pad(x, ((0, 0), (0, width - n)))


def shift_up(x: Array, k: int) -> Array:
  """y[:, i] = x[:, i - k] (zero/False for i < k): multiplication by 10**k, cropped."""
  if k == 0:
    return x
  if k >= x.shape[1]:
    return jnp.zeros_like(x)
  return jnp.pad(x, ((0, 0), (k, 0)))[:, : x.shape[1]]


def carry_out(generate: Array, propagate: Array) -> Array:
  """Carry out of every position, bool [B, W], with no carry into position 0.

  Position i emits a carry if it generates one, or propagates the carry coming in; the
  prefix is combined in ceil(log2 W) doubling steps (Kogge-Stone).
  """
  step = 1
  while step < generate.shape[1]:
    generate = generate | (propagate & shift_up(generate, step))
    propagate = propagate & shift_up(propagate, step)
    step *= 2
  return generate


def resolve_carries(columns: Array, bound: int) -> Array:
  """The decimal digits of sum_k columns[:, k] * 10**k.

  Args:
    columns: int32 [B, W], entries in [0, bound]; the value must be below 10**W.
    bound: a static upper bound of the entries.

  Returns:
    int32 [B, W], digits 0..9, little-endian.

  Example: [[10, 9, 9, 1, 0]] (1999 + 1, digit-wise) -> [[0, 0, 0, 2, 0]] (2000).
  """
  # Each round moves the tens of every column one position up, so entries shrink to at
  # most 9 + bound // 10; at <= 18 at most one carry can enter or leave a column.
  while bound > 18:
    columns = columns % 10 + shift_up(columns // 10, 1)
    bound = 9 + bound // 10
  carry = shift_up(carry_out(columns >= 10, columns == 9), 1).astype(jnp.int32)
  total = columns + carry
  return jnp.where(total >= 10, total - 10, total)


def add_digits(x: Array, y: Array) -> Array:
  """x + y for little-endian digit arrays [B, W] -> [B, W + 1].

  Example: add_digits([[9, 9, 9]], [[1, 0, 0]]) == [[0, 0, 0, 1]] (999 + 1 = 1000).
  """
  width = max(x.shape[1], y.shape[1]) + 1
  return resolve_carries(fit(x, width) + fit(y, width), 18)


def subtract_digits(x: Array, y: Array) -> tuple[Array, Array]:
  """(|x - y| as digits [B, W], x < y as bool [B]) for little-endian digit arrays [B, W].

  Example: subtract_digits([[3, 2, 1]], [[6, 5, 4]]) == ([[3, 3, 3]], [True]) (123 - 456).
  """
  width = max(x.shape[1], y.shape[1])
  x, y = fit(x, width), fit(y, width)
  # The highest differing digit decides the sign: a reduction, cheaper than a second
  # look-ahead.
  pos = base.positions(width)
  top = jnp.max(jnp.where(x != y, pos, -1), axis=1)
  negative = base.take_per_row(x, top) < base.take_per_row(y, top)
  big = jnp.where(negative[:, None], y, x)
  small = jnp.where(negative[:, None], x, y)
  diff = big - small
  borrow = shift_up(carry_out(diff < 0, diff == 0), 1).astype(jnp.int32)
  diff = diff - borrow
  return jnp.where(diff < 0, diff + 10, diff), negative


def multiply_digits(x: Array, y: Array, width: int, count: Any = None) -> Array:
  """x * y as little-endian digits [B, width]; the product must be below 10**width.

  Args:
    x: int32 [B, Wx] digits (the loop runs over its columns: pass the shorter operand).
    y: int32 [B, Wy] digits.
    width: static output width.
    count: how many low columns of x can be nonzero (static or traced, <= Wx; default Wx).

  Example: multiply_digits([[9, 9]], [[9, 9]], 4) == [[1, 0, 8, 9]] (99 * 99 = 9801).
  """
  wx = x.shape[1]
  count = wx if count is None else count
  ypad = jnp.pad(fit(y, width), ((0, 0), (width, 0)))

  def body(i, columns):
    shifted = lax.dynamic_slice_in_dim(ypad, width - i, width, axis=1)  # y * 10**i
    return columns + lax.dynamic_index_in_dim(x, i, axis=1) * shifted

  columns = lax.fori_loop(0, count, body, jnp.zeros((x.shape[0], width), jnp.int32))
  return resolve_carries(columns, 81 * max(1, min(wx, y.shape[1])))


def num_digits(x: Array) -> Array:
  """int32 [B]: the number of digits of little-endian digit arrays [B, W] (1 for zero)."""
  nonzero = jnp.where(x != 0, base.positions(x.shape[1]) + 1, 0)
  return jnp.maximum(jnp.max(nonzero, axis=1), 1)


def draw_operands(key: Array, lengths: Array, width: int) -> Array:
  """Uniform numbers of exactly `lengths` digits, as little-endian digits [B, width].

  The top digit (index length - 1) is uniform in 1..9, the others in 0..9, so the number is
  uniform in [10**(l-1), 10**l - 1]. `lengths` int32 [B], 1 <= lengths <= width.
  """
  k_low, k_top = jax.random.split(key)
  low = base.uniform_digits(k_low, (lengths.shape[0], width), 10)
  top = 1 + base.uniform_digits(k_top, (lengths.shape[0], 1), 9)
  pos, top_pos = base.positions(width), lengths[:, None] - 1
  return jnp.where(pos < top_pos, low, jnp.where(pos == top_pos, top, 0))
