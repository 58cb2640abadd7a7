"""Context-sensitive tasks: duplicate_string, missing_duplicate_string, odds_first,
binary_addition, binary_multiplication, compute_sqrt, bucket_sort."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from tasks import base
from tasks import bignum

Array = jax.Array


def _random_string(key, batch_size, length, max_length, vocab=2):
  x = base.uniform_digits(key, (batch_size, max_length), vocab)
  return jnp.where(base.positions(max_length) < length, x, 0)


@dataclasses.dataclass(frozen=True)
class DuplicateString(base.Task):
  """Output the input twice. Tokens 0/1, O = 2L. Example: `101` -> `101101`."""

  name: str = 'duplicate_string'
  level: str = 'cs'
  vocab_size: int = 2
  num_classes: int = 2

  def output_length(self, length):
    return 2 * length

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _random_string(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    x = jnp.where(base.positions(inputs.shape[1]) < length, inputs, 0)
    x = jnp.pad(x, ((0, 0), (0, inputs.shape[1])))
    return base.seq_output(x + base.shift_right(x, length), 2 * length)


@dataclasses.dataclass(frozen=True)
class MissingDuplicateString(base.Task):
  """Find the symbol hidden in a duplicated string.

  Tokens: 0/1 bits, 2 = the hidden symbol, 3 = padding. s ~ U{0,1}^(L//2), d = s s,
  idx ~ U{0..len(d)-1}; the target is d[idx], the input d with d[idx] := 2, plus a final 3
  when L is odd. L = 1 is degenerate in the reference: input `1`, target 1.

  Example: `0 1 2 0 1 0 3` -> 0 (the hidden symbol mirrors position 5, a 0).
  """

  name: str = 'missing_duplicate_string'
  level: str = 'cs'
  vocab_size: int = 4
  num_classes: int = 2

  def _sample(self, key, batch_size, length, max_length):
    k_str, k_idx = jax.random.split(key)
    half = length // 2
    pos = base.positions(max_length)
    s = jnp.where(pos < half, base.uniform_digits(k_str, (batch_size, max_length), 2), 0)
    d = s + base.shift_right(s, half)
    idx = base.uniform_below(k_idx, jnp.full((batch_size,), 2 * half))
    answer = base.take_per_row(d, idx)
    x = jnp.where(pos == idx[:, None], 2, d)
    x = jnp.where((pos == length - 1) & (length % 2 == 1), 3, x)
    degenerate = length == 1
    x = jnp.where(degenerate, jnp.where(pos == 0, 1, 0), x)
    return x, *base.cls_output(jnp.where(degenerate, 1, answer))

  def _target(self, inputs, length):
    half = length // 2
    idx = jnp.argmax(inputs == 2, axis=1)
    mirror = jnp.where(idx < half, idx + half, idx - half)
    return base.cls_output(jnp.where(length == 1, 1, base.take_per_row(inputs, mirror)))


@dataclasses.dataclass(frozen=True)
class OddsFirst(base.Task):
  """Output the tokens at odd positions, then those at even positions (0-indexed).

  y = x[1::2] ++ x[0::2] (the reference's docstring says the opposite; its code does this).
  Example: `1011100` -> `010` `1110`.
  """

  name: str = 'odds_first'
  level: str = 'cs'
  vocab_size: int = 2
  num_classes: int = 2

  def output_length(self, length):
    return length

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _random_string(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    width = inputs.shape[1]
    x = jnp.where(base.positions(width) < length, inputs, 0)
    even_width = width + width % 2
    x = jnp.pad(x, ((0, 0), (0, 2 * even_width - width)))  # even width, room to shift
    odds, evens = x[:, 1::2], x[:, 0::2]
    num_odds = length // 2
    y = jnp.where(base.positions(odds.shape[1]) < num_odds, odds, 0)
    y = y + base.shift_right(evens, num_odds)
    return base.seq_output(y[:, :width], length)


def _binary_expression(key, batch_size, length, max_length):
  """Inputs of binary_addition / binary_multiplication (L >= 3 and L <= 2 cases)."""
  k_len, k_bits, k_small = jax.random.split(key, 3)
  pos = base.positions(max_length)
  # L >= 3: n (len_n bits, LE) 2 m (len_m bits, LE); len_n ~ U{1..L-2}; n, m uniform nonzero.
  len_n = 1 + base.uniform_below(k_len, jnp.full((batch_size,), length - 2))[:, None]
  in_n = pos < len_n
  in_m = (pos > len_n) & (pos < length)

  len_m = length - 1 - len_n
  short = 24  # a nonzero operand of at most this many bits is drawn directly

  def draw(k):
    # Uniform bits, then every operand of <= `short` bits replaced by the bits of a draw
    # from {1..2**len - 1}: only long operands can still be zero (probability < 2**-24 a
    # row), so the rejection loop below almost never runs. Before, a 1-bit operand was
    # zero half the time, so a batch of 512 needed several redraw rounds.
    k_bits, k_n, k_m = jax.random.split(k, 3)
    bits = base.uniform_digits(k_bits, (batch_size, max_length), 2)
    for k_op, size, first, inside in ((k_n, len_n, 0, in_n), (k_m, len_m, len_n + 1, in_m)):
      value = 1 + base.uniform_below(k_op, 2 ** jnp.clip(size[:, 0], 1, short) - 1)[:, None]
      own = (value >> jnp.clip(pos - first, 0, 31)) & 1
      bits = jnp.where(inside & (size <= short), own, bits)
    return bits

  def bad(bits):
    zero_n = ~jnp.any(bits.astype(bool) & in_n, axis=1)
    zero_m = ~jnp.any(bits.astype(bool) & in_m, axis=1)
    return (zero_n | zero_m) & (length >= 3)

  bits = base.redraw_until(k_bits, draw, bad)
  x = jnp.where(in_n | in_m, bits, jnp.where(pos == len_n, 2, 0))
  # L <= 2: a number n ~ U{0..2**L - 2} written LE on L bits (no separator).
  small = base.uniform_below(k_small, jnp.full((batch_size,), 2 ** jnp.minimum(length, 2) - 1))
  small = jnp.where(pos < length, (small[:, None] >> pos) & 1, 0)
  return jnp.where(length <= 2, small, x)


def _operands(inputs, length):
  """(n, m) as LE bit arrays [B, Lmax] from `n 2 m` inputs."""
  pos = base.positions(inputs.shape[1])
  valid = pos < length
  sep = jnp.argmax((inputs == 2) & valid, axis=1)
  n = jnp.where(pos < sep[:, None], inputs, 0)
  m = jnp.where(valid & (pos > sep[:, None]), inputs, 0)
  return n, base.shift_left_rows(m, sep + 1)


@dataclasses.dataclass(frozen=True)
class BinaryAddition(base.Task):
  """Add two binary numbers, little-endian: `n 2 m` -> n + m, terminator 2, zeros (L + 1).

  Tokens 0/1 and 2 = `+`; classes 0/1 and 2 = terminator; the accuracy mask stops after the
  terminator. Sampling (L >= 3): len_n ~ U{1..L-2}, len_m = L-1-len_n, n ~ U{1..2**len_n-1}
  and m ~ U{1..2**len_m-1} written on exactly len_n / len_m bits (zeros at the high end).
  The sum is written without leading zeros.

  Quirk kept from the reference: L <= 2 draws n ~ U{0..2**L-2} (an exclusive bound), writes
  it on L bits with no `+`, and the target is n alone (0 as `0`): L = 1 gives `0` -> `0 2`.

  Example: `1 2 0 1 1 1 1` (1 + 30) -> `1 1 1 1 1 2 0 0`.
  """

  name: str = 'binary_addition'
  level: str = 'cs'
  vocab_size: int = 3
  num_classes: int = 3

  def output_length(self, length):
    return length + 1

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _binary_expression(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    n, m = _operands(inputs, length)
    total = bignum.add(n, m)
    small = jnp.where(base.positions(inputs.shape[1]) < length, inputs, 0)
    total = jnp.where(length <= 2, small, total)
    size = jnp.maximum(bignum.bit_length(total), 1)
    return base.terminated_output(total, size, inputs.shape[1] + 1)


@dataclasses.dataclass(frozen=True)
class BinaryMultiplication(base.Task):
  """Multiply two binary numbers, little-endian: `n 2 m` -> n * m, terminator 2, zeros (L).

  Same inputs and classes as binary_addition; the product (at most L - 1 bits) is written
  without leading zeros.

  Quirk kept from the reference: L <= 2 is degenerate, the inputs are drawn as in
  binary_addition and the target is L - 1 zeros then 2 (`2` for L = 1, `0 2` for L = 2).

  Example: `1 1 2 1 0 1 0` (3 x 5) -> `1 1 1 1 2 0 0`.
  """

  name: str = 'binary_multiplication'
  level: str = 'cs'
  vocab_size: int = 3
  num_classes: int = 3

  def output_length(self, length):
    return length

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _binary_expression(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    width = inputs.shape[1]
    n, m = _operands(inputs, length)
    # Column sums are at most min(len_n, len_m) <= (L - 1) // 2.
    product = bignum.multiply(n, m, width, max_column=max(1, (width - 1) // 2))
    size = jnp.where(length <= 2, length - 1, bignum.bit_length(product))
    product = jnp.where(length <= 2, 0, product)
    return base.terminated_output(product, size, width)


@dataclasses.dataclass(frozen=True)
class ComputeSqrt(base.Task):
  """Integer square root in binary, big-endian: n on L bits -> isqrt(n) on ceil(L/2) bits.

  Tokens 0/1; n ~ U{1..2**L-1} (a uniform nonzero L-bit string). No terminator, no mask.
  Example: `1110100` (116) -> `1010` (10).
  """

  name: str = 'compute_sqrt'
  level: str = 'cs'
  vocab_size: int = 2
  num_classes: int = 2

  def output_length(self, length):
    return (length + 1) // 2

  def _sample_inputs(self, key, batch_size, length, max_length):
    valid = base.positions(max_length) < length

    def draw(k):
      return jnp.where(valid, base.uniform_digits(k, (batch_size, max_length), 2), 0)

    return base.redraw_until(key, draw, lambda bits: ~jnp.any(bits == 1, axis=1))

  def _target(self, inputs, length):
    out_width = (inputs.shape[1] + 1) // 2
    root = bignum.isqrt_big_endian(inputs, length, out_width)
    return base.seq_output(root, (length + 1) // 2)


@dataclasses.dataclass(frozen=True)
class BucketSort(base.Task):
  """Sort a string over {0..4}. Example: `4 1 3 1 0` -> `0 1 1 3 4`.

  Computed by counting: y_i = #{v in 0..3 : #(x <= v) <= i}.
  """

  name: str = 'bucket_sort'
  level: str = 'cs'
  vocab_size: int = 5
  num_classes: int = 5

  def output_length(self, length):
    return length

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _random_string(key, batch_size, length, max_length, vocab=5)

  def _target(self, inputs, length):
    pos = base.positions(inputs.shape[1])
    valid = pos < length
    # counts[b, v] = #(x <= v) for v = 0..3, in one pass over the inputs.
    below = valid[..., None] & (inputs[..., None] <= jnp.arange(4))
    counts = jnp.sum(below.astype(jnp.int32), axis=1)
    y = jnp.sum((pos[..., None] >= counts[:, None, :]).astype(jnp.int32), axis=-1)
    return base.seq_output(y, length)
