"""Geometric attention by prefix sums: O(T²) with no sort and no gather, for whole sequences.

The same weights as `posenc.encodings.geometric.geometric_weights` (tested equal), for the
queries first_query..first_query+Q-1 of a sequence against keys 0..T'-1 at positions equal
to their indices. In log space with C_i(t) = Σ_{k<=t} log(1 - P_ik) (C(<0) = 0,
C(>T'-1) = C(T'-1)), the keys visited before key j are those nearer than |j - i| plus, for a
left key, the right key at the same distance:
  log A_ij = log P_ij + C_i(2i - j) - C_i(j)        for j < i,
  log A_ij = log P_ij + C_i(j - 1) - C_i(2i - j)    for j > i.
C is a blocked prefix sum (two small matmuls) and C_i(2i - j) a flip and a skew
(`mirror`): XLA's cumulative sums and gathers are slow on CPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

CUMSUM_BLOCK = 32


def softplus(x: Array) -> Array:
  """log(1 + e^x) as max(x, 0) + log(1 + e^-|x|).

  log(1 + e) rather than log1p(e): on XLA CPU log1p made geometric attention 25% slower
  (docs/speed.md). Where e < 2^-24, 1 + e rounds to 1 and the term reads 0 instead of
  e: an absolute error below 6e-8 per key, the size of the rounding of the sums it feeds.
  """
  return jnp.maximum(x, 0.0) + jnp.log(1.0 + jnp.exp(-jnp.abs(x)))


def padded_keys(num_keys: int, block: int = CUMSUM_BLOCK) -> int:
  """The key count rounded up to a multiple of `block` if that adds at most 1/8 more keys.

  Example: 1000 -> 1024; 40 -> 40 (64 would add 60%); 96 -> 96.
  """
  padded = -(-num_keys // block) * block
  return padded if 8 * (padded - num_keys) <= num_keys else num_keys


def blocked_cumsum(x: Array, block: int = CUMSUM_BLOCK) -> Array:
  """Cumulative sum over the last axis, by blocks: ~2x faster than jnp.cumsum on XLA CPU.

  Within-block prefix sums are one small matmul with an upper-triangular matrix of ones;
  the block totals get their own (short) prefix sum and are added back. A last axis that is
  a multiple of `block` is blocked by a reshape; otherwise it is padded (a copy).
  """
  *batch, t = x.shape
  nb = -(-t // block)
  xb = jnp.pad(x, [(0, 0)] * len(batch) + [(0, nb * block - t)]).reshape(*batch, nb, block)
  within = xb @ jnp.triu(jnp.ones((block, block), x.dtype))
  before = within[..., -1] @ jnp.triu(jnp.ones((nb, nb), x.dtype), 1)
  return (within + before[..., None]).reshape(*batch, nb * block)[..., :t]


def mirror(cum: Array, first_query: int = 0) -> Array:
  """out[..., r, j] = cum[..., r, 2i - j] with i = first_query + r, for a row cumsum; 0 where
  2i - j < 0 and the row total cum[..., r, T' - 1] where 2i - j > T' - 1.

  With F[r, m] = cum[r, T' - 1 - m], out[r, j] = F[r, T' - 1 - 2i + j]: row r of F read from
  an offset that falls by 2 per row. Rows of F padded to width W and flattened put F[r, m]
  at rW + m, so out[r, j] sits at r(W - 2) + base + j: rows of W - 2 after dropping `base`
  entries. The padding is zeros, read where 2i - j < 0; the other side is a select.

  Example (one row of T' = 4, i = 1, cum = [a, b, c, d]): 2i - j = 2, 1, 0, -1 -> [c, b, a, 0].
  """
  *batch, q, t = cum.shape
  no_pad = [(0, 0)] * len(batch)
  i0 = first_query
  left = max(0, 2 * (i0 + q - 1) - (t - 1))  # so that T' - 1 - 2i + left >= 0 for every row
  right = max(t - 1 - 2 * i0, 2 - left, 0)  # zeros, read where 2i - j < 0; rows of W-2 >= T'
  width = left + t + right
  base = left + t - 1 - 2 * i0
  flat = jnp.pad(jnp.flip(cum, -1), no_pad + [(0, 0), (left, right)])
  flat = flat.reshape(*batch, q * width)
  flat = jnp.pad(flat, no_pad + [(0, max(0, base - 2 * q))])
  skewed = flat[..., base : base + q * (width - 2)].reshape(*batch, q, width - 2)[..., :t]
  i = np.arange(i0, i0 + q)[:, None]
  j = np.arange(t)[None, :]
  return jnp.where(2 * i - j > t - 1, cum[..., -1:], skewed)


def visible_block(key_valid: Array, num_keys: int, causal: bool, queries: slice) -> Array:
  """bool [Q, T'] ([B, Q, T'] for key_valid [B, T']): key j visible from query i of the
  block `queries` (a real key; j <= i if causal)."""
  mask = jnp.broadcast_to(
    key_valid[..., None, :], key_valid.shape[:-1] + (queries.stop - queries.start, num_keys)
  )
  if causal:
    i = np.arange(queries.start, queries.stop)[:, None]
    mask = mask & (i >= np.arange(num_keys)[None, :])
  return mask


def geometric_weights(
  logits: Array, key_valid: Array, *, causal: bool = False, first_query: int = 0
) -> Array:
  """Geometric attention weights of queries first_query.. against every key, by prefix sums.

  Args:
    logits: s [..., Q, T']: queries first_query..first_query+Q-1 against keys 0..T'-1 (the
      entry of key j = i is ignored).
    key_valid: bool [T'], or [B, T'] with logits [..., B, Q, T'].
    causal: also drop keys j > i.
    first_query: the position of the first row's query (static).

  Returns:
    float32 [..., Q, T'].
  """
  logits = logits.astype(jnp.float32)
  q, t = logits.shape[-2:]
  i = np.arange(first_query, first_query + q)[:, None]
  j = np.arange(t)[None, :]
  valid = visible_block(key_valid, t, causal, slice(first_query, first_query + q)) & (i != j)
  log_not_p = jnp.where(valid, -softplus(logits), 0.0)  # log σ(-s) = -softplus(s)
  cum = blocked_cumsum(log_not_p)
  c_mirror = mirror(cum, first_query)  # C_i(2i - j)
  closer = jnp.where(j < i, c_mirror - cum, cum - log_not_p - c_mirror)
  # log P = log σ(s) = s + log σ(-s).
  return jnp.where(valid, jnp.exp(logits + log_not_p + closer), 0.0)
