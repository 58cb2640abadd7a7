"""Arbitrary-precision arithmetic on batches of bit arrays, vectorised and jittable.

Little-endian bit arrays are int32 [B, N] of 0/1 (index i = weight 2**i).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base

Array = jax.Array


def _shift_up(x: Array, k: int) -> Array:
  """Multiply by 2**k, dropping bits past the width."""
  return jnp.pad(x, ((0, 0), (k, 0)))[:, : x.shape[1]] if k else x


def add(a: Array, b: Array) -> Array:
  """a + b mod 2**N for LE bit arrays [B, N] (carry look-ahead, no sequential loop).

  The carry out of bit i is the generate bit g = a&b of the last position k <= i that does
  not propagate (a^b == 0), or 0 if there is none; a running maximum over 2k + g finds it.
  """
  g, p = a & b, a ^ b
  idx = base.positions(a.shape[1])
  last = base.cumulative(jnp.maximum, jnp.where(p == 0, 2 * idx + g, -1), -1)
  carry_out = (last >= 0) & (last % 2 == 1)
  return p ^ _shift_up(carry_out.astype(a.dtype), 1)


def add_many(terms: list[Array]) -> Array:
  """Sum of LE bit arrays (mod 2**N): carry-save 3:2 compression, then one `add`."""
  terms = list(terms)
  while len(terms) > 2:
    x, y, z = terms.pop(), terms.pop(), terms.pop()
    terms = [x ^ y ^ z, _shift_up((x & y) | (x & z) | (y & z), 1)] + terms
  return add(*terms) if len(terms) == 2 else terms[0]


def multiply(a: Array, b: Array, width: int, max_column: int | None = None) -> Array:
  """a * b as LE bits [B, width], for operands whose bit lengths add up to <= width.

  `max_column` bounds the column sums (default: the smaller width), i.e. the number of
  set bits of the smaller operand.

  Column sums c_k = sum_{i+j=k} a_i b_j come from a float32 FFT; they are small integers
  (<= min(N_a, N_b)), so rounding is exact. A cyclic convolution of size n >= width does
  not wrap since c_k = 0 for k >= width - 1. Then sum_j 2**j * bit_j(c) is added exactly.
  """
  n = 1 << (width - 1).bit_length()
  fa = jnp.fft.rfft(a.astype(jnp.float32), n=n)
  fb = jnp.fft.rfft(b.astype(jnp.float32), n=n)
  cols = jnp.round(jnp.fft.irfft(fa * fb, n=n)[:, :width]).astype(jnp.int32)
  planes = (max_column or min(a.shape[1], b.shape[1])).bit_length()
  return add_many([_shift_up((cols >> j) & 1, j) for j in range(planes)])


def bit_length(x: Array) -> Array:
  """Index of the highest set bit + 1 (0 for zero), for LE bits [B, N] -> int32 [B]."""
  return jnp.max(jnp.where(x != 0, base.positions(x.shape[1]) + 1, 0), axis=1)


def _limb_shl(x: Array, k: int, low: Array) -> Array:
  """(x << k) | low for numbers in uint32 limbs x [num_limbs, B] (little-endian limbs)."""
  carry = jnp.concatenate([low[None, :], x[:-1] >> (32 - k)], axis=0)
  return (x << k) | carry


def _limb_sub(a: Array, b: Array) -> tuple[Array, Array]:
  """a - b on uint32 limbs [num_limbs, B]: (difference mod 2**(32 num_limbs), borrow [B]).

  The borrow into limb i is found by look-ahead (log2(num_limbs) steps): limb j generates
  a borrow if a_j < b_j and propagates one if a_j == b_j.
  """
  gen, prop = a < b, a == b
  step = 1
  while step < a.shape[0]:
    pad = ((step, 0), (0, 0))
    gen = gen | (prop & jnp.pad(gen[:-step], pad))
    prop = prop & jnp.pad(prop[:-step], pad)
    step *= 2
  borrow_in = jnp.pad(gen[:-1], ((1, 0), (0, 0)))
  return a - b - borrow_in.astype(jnp.uint32), gen[-1]


def isqrt_big_endian(bits: Array, length: Any, out_width: int) -> Array:
  """floor(sqrt(n)) for n given by big-endian bits[:, :length] (length <= N, traced).

  The classic digit-by-digit method: one root bit per pair of input bits, from the top,
  keeping the remainder R and root Q exact in 32-bit limbs (R <= 2Q + 1 has about
  out_width + 2 bits). Step: R = 4R + pair; if R >= 4Q + 1: R -= 4Q + 1, Q = 2Q + 1
  else Q = 2Q.

  Returns:
    int32 [B, out_width]: the root, big-endian, in ceil(length / 2) bits, zeros after.
  """
  batch = bits.shape[0]
  root_len = (length + 1) // 2
  offset = 2 * root_len - length  # 1: an implicit leading 0 for odd lengths
  padded = jnp.pad(bits.astype(jnp.uint32), ((0, 0), (1, 2)))
  num_limbs = (out_width + 4) // 32 + 1
  zeros = jnp.zeros((num_limbs, batch), jnp.uint32)
  ones = jnp.ones((batch,), jnp.uint32)

  def body(s, state):
    rem, root = state
    pair = lax.dynamic_slice_in_dim(padded, 2 * s + 1 - offset, 2, axis=1)
    rem = _limb_shl(rem, 2, low=pair[:, 0] * 2 + pair[:, 1])
    diff, borrow = _limb_sub(rem, _limb_shl(root, 2, low=ones))
    ge = ~borrow
    rem = jnp.where(ge[None, :], diff, rem)
    root = _limb_shl(root, 1, low=ge.astype(jnp.uint32))
    return rem, root

  _, root = lax.fori_loop(0, root_len, body, (zeros, zeros))
  # Little-endian bits of Q, reversed into root_len big-endian bits.
  shifts = jnp.arange(32, dtype=jnp.uint32)
  le = ((root.T[:, :, None] >> shifts) & 1).reshape(batch, -1)
  be = base.shift_left(le[:, ::-1], le.shape[1] - root_len)
  return be[:, :out_width].astype(jnp.int32)
