"""The 13 positional encodings of the study: pure functions and a plain-dict registry.

Letters used in shapes: B batch, T sequence length (static; a padded batch has T = its
maximum and a traced `length` <= T of real positions), H heads, K head width, D model
width (= H * K), L the largest position a randomized encoding may draw (`max_position`).
i is a query index and j a key index, both 0-based.

Each encoding is an `Encoding` in `ENCODINGS` with two hooks the model calls:
- `embedding` (optional): a Linen module `(num_positions, length) -> [T, D]` added to the
  token embeddings (sin/cos, learned and their randomized variants);
- `attention`: a Linen module `(q, k, *, inputs, key_valid, causal) -> Scores` with q, k
  of shape [H, B, T, K] (head-major: every attention product is a batched dot without
  transposes, including the relative term's per-head product with its [H, 2T, K] table),
  the layer input `inputs` [B, T, D] and `key_valid` [T] (bool). It makes its parameters
  and position draws once per layer and returns `Scores`, whose `weights(heads, queries)`
  gives the [h, B, q, T] weights of any block of heads and query rows; the model computes
  `weights @ v` block by block, divided by the row sums of `weights` if `normalize`
  (softmax encodings return exp(logits - max) and let the model divide after the product,
  which saves a pass over the weights), then the output projection.
  `attention_matrix(scores)` gives the [H, B, T, T] attention matrix itself.
Adding an encoding = one module (or function) here + one `ENCODINGS` entry.

Randomized encodings draw from the 'noise' RNG stream: sin/cos and learned once per call,
relative/ALiBi/RoPE once per attention layer (Ruoss et al. 2023).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

# Haiku's default `hk.Linear` init: TruncatedNormal(1/sqrt(fan_in)) cut at 2 sigma, no
# variance correction. 0.87962566...² undoes variance_scaling's correction exactly.
HAIKU_LINEAR_INIT = nn.initializers.variance_scaling(
    0.87962566103423978**2, 'fan_in', 'truncated_normal')

# ------------------------------------------------------------------------------------------
# Pure functions.
# ------------------------------------------------------------------------------------------


def sinusoid_table(positions: Array, width: int, *, max_time: float = 10_000.0) -> Array:
  """Sinusoid encodings S(p) of (possibly negative or randomized) positions.

  S(p) = [sin(p ω_0), …, sin(p ω_{D/2-1}), cos(p ω_0), …, cos(p ω_{D/2-1})] with
  ω_i = max_time^(-2i/D): concatenated halves, not interleaved (as the released code of Ruoss et al.).

  Args:
    positions: integer or float array of any shape [...].
    width: D, even.
    max_time: the base of the geometric frequency progression.

  Returns:
    float32 [..., D].

  Example:
    >>> sinusoid_table(jnp.array([0, 1]), 4)   # ω = [1, 0.01]
    [[0, 0, 1, 1], [sin 1, sin .01, cos 1, cos .01]] = [[0, 0, 1, 1], [.841, .010, .540, 1.]]
  """
  if width % 2:
    raise ValueError(f'sinusoid width must be even, got {width}')
  freqs = max_time ** (-2.0 * np.arange(width // 2) / width)
  angles = jnp.asarray(positions, jnp.float32)[..., None] * jnp.asarray(freqs, jnp.float32)
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def random_positions(key: Array, num_positions: int, *, max_position: int,
                     length: Array | int | None = None, min_position: int = 0) -> Array:
  """A sorted uniform random subset of {min_position, …, max_position - 1}.

  Draws without replacement, as `sort(jax.random.choice(key, range, (T,), replace=False))`.
  With a traced `length` <= T (padded batches), the first `length` entries are exactly the
  sorted uniform `length`-subset that the exact-shape call `random_positions(key, length)`
  returns: we take the first T entries of one random permutation, push those at index >=
  length to the end with a sentinel, and sort. Entries past `length` are max_position - 1.

  Args:
    key: a PRNG key.
    num_positions: T (static).
    max_position: L (static); values are < L.
    length: traced or static number of real positions (default T).
    min_position: smallest value that may be drawn.

  Returns:
    int32 [T], non-decreasing; strictly increasing on the first `length` entries.

  Raises:
    ValueError: if T exceeds the population size L - min_position.

  Example:
    >>> random_positions(key, 3, max_position=10)    # e.g. [1, 4, 8]
    >>> random_positions(key, 5, max_position=10, length=3)   # [1, 4, 8, 9, 9]
  """
  population = max_position - min_position
  if num_positions > population:
    raise ValueError(
        f'sequence length {num_positions} exceeds the {population} positions available to '
        f'randomized encodings (max_position={max_position}); increase max_position')
  draw = jax.random.permutation(key, population)[:num_positions] + min_position
  if length is not None:
    draw = jnp.where(jnp.arange(num_positions) < length, draw, max_position)
  draw = jnp.sort(draw)
  return jnp.minimum(draw, max_position - 1).astype(jnp.int32)


def random_distances(key: Array, num_positions: int, *, max_position: int,
                     length: Array | int | None = None) -> Array:
  """Randomized distances [0, r_1, …, r_{T-1}] with r_1 < … < r_{T-1} drawn from {1..L-1}.

  Distance d between two of T positions is replaced by r_d (randomized ALiBi and relative).

  Args:
    key: a PRNG key.
    num_positions: T (static); distances 0..T-1 are needed.
    max_position: L.
    length: traced number of real positions (default T): r_d for d < length matches the
      exact-shape call.

  Returns:
    int32 [T] with entry 0 equal to 0.

  Example:
    >>> random_distances(key, 4, max_position=20)    # e.g. [0, 3, 7, 15]
  """
  if num_positions > max_position:
    raise ValueError(
        f'sequence length {num_positions} exceeds max_position={max_position} of randomized '
        'encodings; increase max_position')
  rest_length = None if length is None else length - 1
  rest = random_positions(key, num_positions - 1, max_position=max_position,
                          length=rest_length, min_position=1)
  return jnp.concatenate([jnp.zeros((1,), jnp.int32), rest])


def alibi_slopes(num_heads: int) -> np.ndarray:
  """ALiBi head slopes (Press et al. 2022), including the non-power-of-two rule.

  For n a power of two, s_k = 2^(-8(k+1)/n). Otherwise take the slopes of the closest lower
  power of two p and append every other slope of the 2p list, up to n slopes.

  Returns:
    float32 [H].

  Example:
    >>> alibi_slopes(8)    # [1/2, 1/4, …, 1/256]
    >>> alibi_slopes(3)    # [1/16, 1/256] + [1/4] = [.0625, .0039, .25]
  """
  def power_of_two(n):
    return [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]

  if num_heads & (num_heads - 1) == 0:
    slopes = power_of_two(num_heads)
  else:
    p = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(p) + power_of_two(2 * p)[0::2][:num_heads - p]
  return np.asarray(slopes, np.float32)


def alibi_bias(num_heads: int, num_positions: int, *, distances: Array | None = None,
               left_distances: Array | None = None, queries: slice | None = None,
               heads: slice | Array | None = None) -> Array:
  """Non-causal ALiBi bias, added to the 1/sqrt(K)-scaled logits.

  bias[h, i, j] = s_h · (-dist(|i - j|) + 0.5 · [j < i]) for j != i, and 0 for j = i;
  dist(d) = d, or `distances[d]` for randomized ALiBi (Ruoss et al. 2023). The +0.5 on keys left
  of the query breaks the left/right symmetry of the bidirectional encoder.

  Args:
    num_heads: H.
    num_positions: T.
    distances: optional int [T], distances[0] = 0: the randomized distance of offset d.
    left_distances: optional int [T] for keys left of the query (randomize_both_sides);
      defaults to `distances`.
    queries: the query rows to make (default all T): [H, Q, T], made where it is used
      rather than sliced from the whole [H, T, T].
    heads: the heads to make (default all H): a slice, or one traced head index
      (`take_heads`): [h, Q, T]. Made per block rather than sliced from all heads' bias,
      which XLA copies per block inside a loop.

  Returns:
    float32 [H, T, T] (or [H, Q, T]).

  Example (slope 1, T = 4):
    [[0, -1, -2, -3], [-.5, 0, -1, -2], [-1.5, -.5, 0, -1], [-2.5, -1.5, -.5, 0]]
  """
  queries = slice(0, num_positions) if queries is None else queries
  idx = np.arange(num_positions)
  rows = np.arange(queries.start, queries.stop)
  offset = np.abs(idx[None, :] - rows[:, None])
  left = idx[None, :] < rows[:, None]
  if distances is None:
    dist = jnp.asarray(offset, jnp.float32)
  else:
    right_dist = distances[offset]
    left_dist = right_dist if left_distances is None else left_distances[offset]
    dist = jnp.where(left, left_dist, right_dist).astype(jnp.float32)
  bias = -dist + 0.5 * left
  bias = jnp.where(offset == 0, 0.0, bias)
  heads = slice(0, num_heads) if heads is None else heads
  return take_heads(jnp.asarray(alibi_slopes(num_heads)), heads)[:, None, None] * bias[None]


def apply_rope(x: Array, positions: Array, *, max_time: float = 10_000.0) -> Array:
  """Rotary position encoding (Su et al. 2021) with interleaved pairs.

  For the pair (x_{2m}, x_{2m+1}) at position p, with f_m = max_time^(-m/(K/2)):
    x'_{2m} = x_{2m} cos(p f_m) - x_{2m+1} sin(p f_m),
    x'_{2m+1} = x_{2m+1} cos(p f_m) + x_{2m} sin(p f_m).

  Args:
    x: [..., T, K] queries or keys (e.g. [H, B, T, K]), K even.
    positions: [T] integer (or randomized) positions.
    max_time: frequency base.

  Returns:
    [..., T, K], in x's dtype.

  Example (K = 2, so f_0 = 1):
    x = [[1, 0]] at p = 0 -> [1, 0];  x = [[1, 0]] at p = 1 -> [cos 1, sin 1] = [.540, .841].
  """
  head_dim = x.shape[-1]
  if head_dim % 2:
    raise ValueError(f'rotary encoding needs an even head width, got {head_dim}')
  freqs = max_time ** (-np.arange(head_dim // 2) / (head_dim // 2))
  angles = jnp.asarray(positions, jnp.float32)[:, None] * jnp.asarray(freqs, jnp.float32)
  cos, sin = jnp.cos(angles), jnp.sin(angles)  # [T, K/2]
  pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], head_dim // 2, 2)
  even, odd = pairs[..., 0], pairs[..., 1]
  out = jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
  return out.reshape(x.shape).astype(x.dtype)


def rel_shift(x: Array, num_keys: int | None = None) -> Array:
  """The Transformer-XL "rel-shift": from relative columns to key columns.

  For Q queries and T keys (T = Q by default), column c of x holds relative position
  c - T for the first query row, so out[..., i, j] = x[..., i, Q + j - i] is the entry of
  relative position j - i. It is a reshape, not a gather: flattened, x[i, Q + j - i] sits
  at i(T + Q - 1) + j after dropping the first Q entries.

  A block of queries i0..i0+Q-1 of a T-position sequence takes the table columns
  T - i0 - Q .. 2T - i0 - 1 (`relative_window`); the whole sequence takes all 2T.

  Args:
    x: [..., Q, T + Q].
    num_keys: T (default Q).

  Returns:
    [..., Q, T].

  Example (T = Q = 2): rows [0, 1, 2, 3] -> [[2, 3], [1, 2]], i.e. out[i, j] = 2 + j - i.
  """
  *batch, q, width = x.shape
  t = q if num_keys is None else num_keys
  if width != t + q:
    raise ValueError(f'rel_shift expects [..., Q, T + Q] with T={t}, got {x.shape}')
  flat = x.reshape(*batch, q * width)[..., q:]
  return flat.reshape(*batch, q, t + q - 1)[..., :t]


def relative_window(num_positions: int, queries: slice) -> slice:
  """The columns of a [.., 2T, ..] relative table that queries `queries` read.

  Example: T = 4, queries 1..2 (slice(1, 3)) read relative positions -2..2; their window
  is columns slice(1, 7) (column c holds c - T; the first, -3, is never read, as column 0
  of the whole table), and rel_shift(x, num_keys=4) maps its [2, 6] products to [2, 4].
  """
  return slice(num_positions - queries.stop, 2 * num_positions - queries.start)


def relative_logits(q: Array, k: Array, rel: Array, u: Array, v: Array,
                    key_valid: Array | None = None) -> Array:
  """Transformer-XL logits (Dai et al. 2019), bidirectional, for a block of Q queries.

  logit[h, b, i, j] = [(q_i + u)·k_j + (q_i + v)·rel[Q + j - i]] / sqrt(K), for the
  relative-position table rel[c] = W_R S(c - T), c = 0..2T-1, already projected per head
  and cut to the queries' `relative_window` (all 2T columns when Q = T).

  Args:
    q: [H, B, Q, K] queries (Q = T for the whole sequence).
    k: [H, B, T, K].
    rel: [H, T + Q, K].
    u, v: [H, K] content and position biases.
    key_valid: optional bool [T]: invalid keys get `MASKED` (see `key_masked_dot`).

  Returns:
    float32 [H, B, Q, T].

  Example: with q = k = 0 the logit is v·rel[T + j - i] / sqrt(K): a function of j - i.
  """
  # 1/sqrt(K) goes on the [.., Q, K] operands, not on the [.., Q, T] sum: no extra pass.
  scale = 1 / math.sqrt(q.shape[-1])
  content = key_masked_dot((q + u[:, None, None]) * scale, k, key_valid)
  position = relative_position_logits((q + v[:, None, None]) * scale, rel)
  return (content + position).astype(jnp.float32)


@jax.custom_vjp
def relative_position_logits(qv: Array, rel: Array) -> Array:
  """out[h, b, i, j] = qv[h, b, i] · rel[h, Q + j - i]: the Transformer-XL position term.

  Head-major qv makes the product one [B·Q, K] x [K, T + Q] dot per head whose output is
  already in [H, B, Q, T + Q] row order; `rel_shift` then fuses into the consumer. The
  custom VJP builds the [H, B, Q, T + Q] cotangent with one `rel_unshift` and contracts it
  over its rows for the table gradient; autodiff made it in three pad passes plus a
  strided transpose, more than half of a relative training step.

  Args:
    qv: [H, B, Q, K] queries plus the position bias v (Q = T for the whole sequence).
    rel: [H, T + Q, K] projected relative table, the `relative_window` of the queries.

  Returns:
    [H, B, Q, T].
  """
  num_keys = rel.shape[1] - qv.shape[2]
  return rel_shift(jnp.einsum('hbik,hck->hbic', qv, rel), num_keys)


def _relative_position_logits_fwd(qv, rel):
  return relative_position_logits(qv, rel), (qv, rel)


def _relative_position_logits_bwd(residuals, g):
  qv, rel = residuals
  dp = rel_unshift(g)  # [H, B, Q, T + Q]; the unread entries are 0
  dqv = jnp.einsum('hbic,hck->hbik', dp, rel)
  drel = jnp.einsum('hbik,hbic->hkc', qv, dp).transpose(0, 2, 1)
  return dqv.astype(qv.dtype), drel.astype(rel.dtype)


relative_position_logits.defvjp(_relative_position_logits_fwd, _relative_position_logits_bwd)


def rel_unshift(x: Array) -> Array:
  """The transpose of `rel_shift`: out[..., i, Q + j - i] = x[..., i, j], 0 elsewhere.

  Rows padded to T + Q - 1 and flattened put x[i, j] at i(T + Q - 1) + j; Q leading zeros
  move it to i(T + Q) + (Q + j - i), i.e. row i, column Q + j - i of a [Q, T + Q] array.

  Args:
    x: [..., Q, T].

  Returns:
    [..., Q, T + Q].

  Example (T = Q = 2): [[a, b], [c, d]] -> [[0, 0, a, b], [0, c, d, 0]].
  """
  *batch, q, t = x.shape
  no_pad = [(0, 0)] * len(batch)
  rows = jnp.pad(x, no_pad + [(0, 0), (0, q - 1)]).reshape(*batch, q * (t + q - 1))
  return jnp.pad(rows, no_pad + [(q, 0)]).reshape(*batch, q, t + q)


# The logit of an invalid key: exp(MASKED - row max) is 0 whenever a row has a valid key.
MASKED = -1e30


def key_masked_dot(q: Array, k: Array, key_valid: Array | None) -> Array:
  """q·k, plus `MASKED` on invalid keys, in one product: [.., Q, K] x [.., T, K] -> [.., Q, T].

  The key-padding mask rides in the product as an extra column (1 on the queries, 0 or
  MASKED on the keys) instead of a select over the [.., Q, T] logits: at T = 1,000 that
  pass was a quarter of the attention's time.

  Example: q = [[1]], k = [[2], [3]], key_valid [1, 0] -> [[2, -1e30]].
  """
  if key_valid is None:
    return jnp.einsum('...ik,...jk->...ij', q, k)
  bias = jnp.where(key_valid, 0.0, MASKED).astype(k.dtype)
  q = jnp.concatenate([q, jnp.ones((*q.shape[:-1], 1), q.dtype)], axis=-1)
  k = jnp.concatenate([k, jnp.broadcast_to(bias[:, None], (*k.shape[:-1], 1))], axis=-1)
  return jnp.einsum('...ik,...jk->...ij', q, k)


def softmax_numerator(logits: Array, key_valid: Array, causal: bool,
                      queries: slice | None = None, keys_masked: bool = False) -> Array:
  """exp(logits - row max) over valid keys: softmax before the division by the row sum.

  Masked logits are set to finfo.min rather than -inf, so a row with no valid key gives a
  uniform row instead of NaN. The row max is over valid keys, so every row has an entry 1.

  Args:
    logits: [H, B, Q, T], the rows of queries `queries` (default all T).
    key_valid: bool [T].
    causal: also mask keys j > i.
    queries: which query rows `logits` holds (for the causal mask).
    keys_masked: the logits already carry `MASKED` on invalid keys (`key_masked_dot`);
      only the causal mask is left to apply.

  Returns:
    float32 [H, B, Q, T].

  Example: logits [[0, 1, 5]] with key_valid [1, 1, 0] -> [[e^-1, 1, 0]].
  """
  logits = logits.astype(jnp.float32)
  if causal or not keys_masked:
    key_valid = jnp.ones_like(key_valid) if keys_masked else key_valid
    mask = _attention_mask(key_valid, logits.shape[-1], causal, queries)
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  # The row max only guards exp against overflow: the normalised weights do not depend on
  # it, so its gradient is zero in exact arithmetic. Stopping it saves the backward pass
  # an argmax mask and a reduction over [H, B, T, T] per layer.
  row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  return jnp.exp(logits - row_max)


def normalized_weights(weights: Array, normalize: bool) -> Array:
  """The attention matrix [H, B, T, T] from an attention hook's (weights, normalize)."""
  if not normalize:
    return weights
  return weights / (jnp.sum(weights, axis=-1, keepdims=True) + TINY)


# Guards 0/0 for rows without weight (geometric attention with every key masked).
TINY = 1e-30


def geometric_weights(logits: Array, key_valid: Array, *, causal: bool = False,
                      first_query: int = 0) -> Array:
  """Geometric (stick-breaking by distance) attention of the Neural Data Router.

  Keys are visited from the nearest outwards (on ties the right key comes first); key j is
  chosen with probability P_ij = σ(s_ij) provided no closer key was:
    A_ij = P_ij · Π_{k ∈ S_ij} (1 - P_ik),
    S_ij = {k != i : |k - i| < |j - i|} ∪ ({2i - j} if j < i)   (Csordás et al. 2022).
  The query itself and invalid keys have P = 0. In log space with C_i(t) = Σ_{k<=t} log(1 -
  P_ik) (C(<0) = 0, C(>T'-1) = C(T'-1)):
    log A_ij = log P_ij + C_i(2i - j) - C_i(j)        for j < i,
    log A_ij = log P_ij + C_i(j - 1) - C_i(2i - j)    for j > i.
  O(T²) memory: a blocked cumsum, and C_i(2i - j) by reshapes (`_mirror`) rather than a
  gather. Rows sum to at most 1; the remainder is "attend to nothing". NDR's
  `normalize_score` (divide by the row sum) is the model's `normalize` flag
  (`geometric_normalize` option).

  Rows may be a block of queries: row r is query i = first_query + r (every row is
  computed from its own logits only). Keys may be padded (invalid in `key_valid`):
  `GeometricAttention` pads them to a multiple of the cumsum block so that blocking is a
  reshape rather than a copy.

  Args:
    logits: s [..., Q, T'], e.g. [H, B, T, T]: queries first_query..first_query+Q-1 against
      keys 0..T'-1 (the entry of key j = i is ignored).
    key_valid: bool [T'].
    causal: also drop keys j > i.
    first_query: the position of the first row's query (static).

  Returns:
    float32 [..., Q, T'].

  Example (one row, i = 1, T = 3, all P = 1/2): the right key j = 2 comes first and gets
    1/2, the left key j = 0 gets 1/2 · (1 - 1/2) = 1/4, so the row is [1/4, 0, 1/2].
  """
  logits = logits.astype(jnp.float32)
  q, t = logits.shape[-2:]
  i = np.arange(first_query, first_query + q)[:, None]
  j = np.arange(t)[None, :]
  valid = _attention_mask(key_valid, t, causal, slice(first_query, first_query + q)) & (i != j)
  log_not_p = jnp.where(valid, -_softplus(logits), 0.0)  # log σ(-s) = -softplus(s)
  cum = blocked_cumsum(log_not_p)
  c_mirror = _mirror(cum, first_query)  # C_i(2i - j)
  closer = jnp.where(j < i, c_mirror - cum, cum - log_not_p - c_mirror)
  # log P = log σ(s) = s + log σ(-s).
  return jnp.where(valid, jnp.exp(logits + log_not_p + closer), 0.0)


def _softplus(x: Array) -> Array:
  """log(1 + e^x) as max(x, 0) + log(1 + e^-|x|).

  log(1 + e) rather than log1p(e): on XLA CPU log1p made geometric attention 25% slower
  (one layer in isolation at T = 1,000, 512 examples: 46.8 s against 37.2 s).
  Where e < 2^-24, 1 + e rounds to 1 and the term reads 0 instead of e: an absolute error
  below 6e-8 per key, the size of the rounding of the cumulative sums it feeds.
  """
  return jnp.maximum(x, 0.0) + jnp.log(1.0 + jnp.exp(-jnp.abs(x)))


CUMSUM_BLOCK = 32


def _padded_keys(num_keys: int, block: int = CUMSUM_BLOCK) -> int:
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


def _mirror(cum: Array, first_query: int = 0) -> Array:
  """out[..., r, j] = cum[..., r, 2i - j] with i = first_query + r, for a row cumsum; 0 where
  2i - j < 0 and the row total cum[..., r, T' - 1] where 2i - j > T' - 1.

  Done with a flip, pads and reshapes (XLA CPU gathers are slow): with F[r, m] = cum[r,
  T' - 1 - m], out[r, j] = F[r, T' - 1 - 2i + j], i.e. row r of F read from an offset that
  falls by 2 per row. Rows of F padded to width W and flattened put F[r, m] at rW + m, so
  out[r, j] sits at r(W - 2) + base + j: rows of W - 2 after dropping `base` entries. The
  padding is zeros, read where 2i - j < 0; the other side is set by a select.

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
  skewed = flat[..., base:base + q * (width - 2)].reshape(*batch, q, width - 2)[..., :t]
  i = np.arange(i0, i0 + q)[:, None]
  j = np.arange(t)[None, :]
  return jnp.where(2 * i - j > t - 1, cum[..., -1:], skewed)


def _attention_mask(key_valid: Array, num_positions: int, causal: bool,
                    queries: slice | None = None) -> Array:
  """bool [Q, T] (broadcastable to [H, B, Q, T]): key j is visible from query i."""
  queries = slice(0, num_positions) if queries is None else queries
  num_queries = queries.stop - queries.start
  mask = jnp.broadcast_to(key_valid[None, :], (num_queries, num_positions))
  if causal:
    i = np.arange(queries.start, queries.stop)[:, None]
    mask = mask & (i >= np.arange(num_positions)[None, :])
  return mask


# ------------------------------------------------------------------------------------------
# Hooks: Linen modules the model instantiates by name.
# ------------------------------------------------------------------------------------------

class SinCosEmbedding(nn.Module):
  """Additive sinusoid embedding S(0..T-1), or S(sorted random positions) if randomized."""
  width: int
  max_position: int = 2048
  randomized: bool = False
  max_time: float = 10_000.0

  def __call__(self, num_positions: int, length: Array) -> Array:
    """Returns float32 [T, D]."""
    return sinusoid_table(_positions(self, num_positions, length), self.width,
                          max_time=self.max_time)


class LearnedEmbedding(nn.Module):
  """Additive learned table E[0..T-1] (Embed(L, D), TruncNormal(1) init as hk.Embed).

  Randomized: E[sorted random positions], the "label-based" encoding. Positions >= L are
  clamped to L - 1, as the reference's gather does.
  """
  width: int
  max_position: int = 2048
  randomized: bool = False

  @nn.compact
  def __call__(self, num_positions: int, length: Array) -> Array:
    table = self.param('embedding', nn.initializers.truncated_normal(1.0),
                       (self.max_position, self.width))
    positions = jnp.minimum(_positions(self, num_positions, length), self.max_position - 1)
    return jnp.take(table, positions, axis=0)


def _positions(module: nn.Module, num_positions: int, length: Array) -> Array:
  """0..T-1, or one sorted random draw from the module's 'noise' stream."""
  if not module.randomized:
    return jnp.arange(num_positions)
  return random_positions(module.make_rng('noise'), num_positions,
                          max_position=module.max_position, length=length)


class Scores(NamedTuple):
  """What an attention hook returns: the attention weights of any block of heads and queries.

  `weights(heads, queries)` gives float32 [h, B, q, T] for the heads `heads` (a slice of
  0..H-1) and the query rows `queries` (a slice of 0..T-1), computed from state the hook
  prepared once per layer (projections, position draws, tables). The model asks for the
  whole [H, B, T, T] at once for short sequences and for per-head query blocks for long
  ones, so the weights of one block stay in cache between the product that makes them
  and the product that consumes them (`Transformer.attention_block`).

  Attributes:
    weights: (heads: slice, queries: slice) -> float32 [h, B, q, T].
    normalize: weights are exp(logits - max): the model divides `weights @ v` by the row
      sums (from a ones column of v, which saves a pass over the weights).
    num_heads, num_queries: H and T, for `full`.
    sequential_heads: when a sequence is split into blocks, run the heads one after
      another (`lax.map`, so `weights` gets `heads` as a traced int32 index; use
      `take_heads`) with their query blocks unrolled, instead of every block unrolled.
      For hooks whose blocks make large intermediates (relative attention's position
      products and their rel-shift, geometric attention's prefix sums): unrolled, XLA's
      concurrency-first scheduler keeps every block's intermediates live at once and they
      fall out of cache. It also compiles 3-4x faster where every block would otherwise be
      specialised (ALiBi's per-block bias is constant-folded when unrolled).

  Example:
    >>> scores = DotProductAttention().apply({}, q, k, inputs=None, key_valid=valid,
    ...                                      causal=False)
    >>> scores.weights(slice(0, 1), slice(0, 8))   # head 0, queries 0..7: [1, B, 8, T]
    >>> attention_matrix(scores)                    # [H, B, T, T], rows sum to 1
  """
  weights: Callable[[slice, slice], Array]
  normalize: bool
  num_heads: int
  num_queries: int
  sequential_heads: bool = False

  def full(self) -> Array:
    """float32 [H, B, T, T]: every head and query."""
    return self.weights(slice(0, self.num_heads), slice(0, self.num_queries))


def take_heads(x: Array, heads: slice | Array) -> Array:
  """x[heads] along the leading (head) axis: a static slice, or one traced head index.

  Example: take_heads(x, slice(0, 2)) -> x[0:2]; take_heads(x, jnp.int32(3)) -> x[3:4].
  """
  if isinstance(heads, slice):
    return x[heads]
  return jax.lax.dynamic_slice_in_dim(x, heads, 1, axis=0)


def attention_matrix(scores: Scores) -> Array:
  """The normalised attention matrix [H, B, T, T] of a hook's `Scores`."""
  return normalized_weights(scores.full(), scores.normalize)


def _dot_product_scores(q: Array, k: Array, key_valid: Array, causal: bool,
                        bias: Callable[[Any, slice], Array] | None = None,
                        sequential_heads: bool = False) -> Scores:
  """Softmax scores of q·k / sqrt(K) (+ bias(heads, queries) [h, Q, T]): none, sin/cos, learned,
  ALiBi, RoPE."""
  num_heads, _, t, head_dim = q.shape

  def weights(heads, queries):
    logits = key_masked_dot(take_heads(q, heads)[:, :, queries] / math.sqrt(head_dim),
                            take_heads(k, heads), key_valid)
    if bias is not None:
      logits = logits + bias(heads, queries)[:, None]
    return softmax_numerator(logits, key_valid, causal, queries, keys_masked=True)

  return Scores(weights, True, num_heads, t, sequential_heads=sequential_heads)


class DotProductAttention(nn.Module):
  """softmax(q·k / sqrt(K)): the attention of none, sin_cos and learned."""
  max_position: int = 2048

  def __call__(self, q, k, *, inputs, key_valid, causal):
    del inputs
    return _dot_product_scores(q, k, key_valid, causal)


class AlibiAttention(nn.Module):
  """softmax(q·k / sqrt(K) + ALiBi bias); randomized: distances d -> r_d, one draw per layer."""
  max_position: int = 2048
  randomized: bool = False
  randomize_both_sides: bool = False

  def __call__(self, q, k, *, inputs, key_valid, causal):
    del inputs
    num_heads, t = q.shape[0], q.shape[2]
    distances = left = None
    if self.randomized:
      length = jnp.sum(key_valid)
      distances = random_distances(self.make_rng('noise'), t,
                                   max_position=self.max_position, length=length)
      if self.randomize_both_sides:
        left = random_distances(self.make_rng('noise'), t, max_position=self.max_position,
                                length=length)
    bias = functools.partial(alibi_bias, num_heads, t, distances=distances,
                             left_distances=left)
    return _dot_product_scores(q, k, key_valid, causal,
                               lambda heads, queries: bias(heads=heads, queries=queries),
                               sequential_heads=True)


class RotaryAttention(nn.Module):
  """softmax(RoPE(q)·RoPE(k) / sqrt(K)); randomized: q and k share one draw per layer."""
  max_position: int = 2048
  randomized: bool = False
  max_time: float = 10_000.0

  def __call__(self, q, k, *, inputs, key_valid, causal):
    del inputs
    positions = _positions(self, q.shape[2], jnp.sum(key_valid))
    q = apply_rope(q, positions, max_time=self.max_time)
    k = apply_rope(k, positions, max_time=self.max_time)
    return _dot_product_scores(q, k, key_valid, causal)


RELATIVE_MODES = ('symmetric', 'reference')


class RelativeAttention(nn.Module):
  """Transformer-XL relative attention; see `relative_logits` and `relative_positions`.

  Parameters per layer: u, v [H, K] ~ Normal(0.02); W_R: Dense(H·K, no bias) applied to the
  sinusoid table of width H·K.
  """
  max_position: int = 2048
  randomized: bool = False
  relative_mode: str = 'symmetric'
  randomize_both_sides: bool = False
  max_time: float = 10_000.0

  @nn.compact
  def __call__(self, q, k, *, inputs, key_valid, causal):
    del inputs
    num_heads, _, t, head_dim = q.shape
    u = self.param('u', nn.initializers.normal(0.02), (num_heads, head_dim))
    v = self.param('v', nn.initializers.normal(0.02), (num_heads, head_dim))
    if self.randomized:
      rng = self.make_rng('noise')
      left_rng = self.make_rng('noise') if self.randomize_both_sides else None
      positions = randomized_relative_positions(
          rng, t, max_position=self.max_position, length=jnp.sum(key_valid),
          mode=self.relative_mode, left_key=left_rng)
    else:
      positions = jnp.arange(-t, t)
    table = sinusoid_table(positions, num_heads * head_dim, max_time=self.max_time)
    rel = nn.Dense(num_heads * head_dim, use_bias=False, kernel_init=HAIKU_LINEAR_INIT,
                   name='w_r')(table).reshape(2 * t, num_heads, head_dim).transpose(1, 0, 2)
    rel, u, v = rel.astype(q.dtype), u.astype(q.dtype), v.astype(q.dtype)

    def weights(heads, queries):
      logits = relative_logits(take_heads(q, heads)[:, :, queries], take_heads(k, heads),
                               take_heads(rel, heads)[:, relative_window(t, queries)],
                               take_heads(u, heads), take_heads(v, heads), key_valid)
      return softmax_numerator(logits, key_valid, causal, queries, keys_masked=True)

    return Scores(weights, True, num_heads, t, sequential_heads=True)


def randomized_relative_positions(key: Array, num_positions: int, *, max_position: int,
                                  length: Array | None = None, mode: str = 'symmetric',
                                  left_key: Array | None = None) -> Array:
  """Positions fed to the sinusoid table for the 2T relative columns c = 0..2T-1.

  Column c holds relative position j - i = c - T. With randomized distances r_d
  (`random_distances`):
  - 'symmetric' (the method as published): ±d -> ±r_d, 0 -> 0. `left_key` draws the left
    side independently (randomize_both_sides).
  - 'reference' (the released code of Ruoss et al.): the table has rows
    0..L-1 only and the index L + rel is clamped, so every key at or right of the query gets
    S(L - 1) and a left key at distance d gets S(L - r_d).

  Returns:
    int32 [2T] (column 0, relative position -T, is never read after the rel-shift).

  Example (T = 3, r = [0, 2, 5], L = 8): symmetric -> [-5, -5, -2, 0, 2, 5];
    reference -> [3, 3, 6, 7, 7, 7].
  """
  if mode not in RELATIVE_MODES:
    raise ValueError(f'relative_mode must be one of {RELATIVE_MODES}, got {mode!r}')
  r = random_distances(key, num_positions, max_position=max_position, length=length)
  offsets = np.arange(-num_positions, num_positions)
  d = np.minimum(np.abs(offsets), num_positions - 1)
  if mode == 'reference':
    return jnp.where(offsets >= 0, max_position - 1, max_position - r[d]).astype(jnp.int32)
  r_left = r if left_key is None else random_distances(
      left_key, num_positions, max_position=max_position, length=length)
  return jnp.where(offsets >= 0, r[d], -r_left[d]).astype(jnp.int32)


class GeometricAttention(nn.Module):
  """NDR geometric attention (no gating, no shared layers); optional directional encoding.

  s_ij = γ·(q_i + u)·k_j + s0 [+ β_i^← for j < i, β_i^→ for j > i], then
  `geometric_weights`. Parameters: u [H, K] (init 0), γ (init 1/sqrt(K)), s0 (init 0); with
  `directional`: (β^←, β^→) = ρ·(W_p h_i + b_p) per head, W_p: Dense(2H), ρ (init 1).
  """
  max_position: int = 2048
  directional: bool = False
  geometric_normalize: bool = False

  @nn.compact
  def __call__(self, q, k, *, inputs, key_valid, causal):
    num_heads, _, t, head_dim = q.shape
    u = self.param('u', nn.initializers.zeros, (num_heads, head_dim))
    gamma = self.param('gamma', nn.initializers.constant(1 / math.sqrt(head_dim)), ())
    s0 = self.param('s0', nn.initializers.zeros, ())
    beta = None
    if self.directional:
      rho = self.param('rho', nn.initializers.ones, ())
      beta = rho * nn.Dense(2 * num_heads, kernel_init=HAIKU_LINEAR_INIT,
                            name='direction')(inputs)
      beta = beta.reshape(*beta.shape[:2], num_heads, 2).transpose(2, 0, 1, 3)  # [H,B,T,2]
    qu = q + u[:, None, None].astype(q.dtype)
    # Keys padded (masked) to a multiple of the cumsum block make its blocking a reshape;
    # unpadded, XLA fused the pad with the softplus into one slow loop (one layer in
    # isolation at T = 1,000, 512 examples: 39.5 s unpadded, 36.7 s padded).
    num_keys = _padded_keys(t)
    k = jnp.pad(k, [(0, 0), (0, 0), (0, num_keys - t), (0, 0)])
    keys_valid = jnp.pad(key_valid, (0, num_keys - t))

    def weights(heads, queries):
      logits = gamma * jnp.einsum('hbik,hbjk->hbij', take_heads(qu, heads)[:, :, queries],
                                  take_heads(k, heads)) + s0
      if beta is not None:
        left = np.arange(num_keys)[None, :] < np.arange(queries.start, queries.stop)[:, None]
        b = take_heads(beta, heads)[:, :, queries]
        logits = logits + jnp.where(left, b[..., :1], b[..., 1:])
      return geometric_weights(logits, keys_valid, causal=causal,
                               first_query=queries.start)[..., :t]

    return Scores(weights, self.geometric_normalize, num_heads, t, sequential_heads=True)


# ------------------------------------------------------------------------------------------
# Registry.
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Encoding:
  """How the model uses one encoding.

  Attributes:
    attention: module factory `(max_position=..., **attention_options) -> module`, called
      per layer as `module(q, k, *, inputs, key_valid, causal) -> Scores` with q, k
      [H, B, T, K] (see `Scores` and the module docstring).
    embedding: optional module factory `(width=..., max_position=..., **embedding_options)`,
      called once as `module(num_positions, length) -> [T, D]`; the model adds it to the
      token embeddings and applies dropout.
    attention_options: names of the `encoding_options` the attention module takes.
    embedding_options: names of the `encoding_options` the embedding module takes.
    randomized: draws from the 'noise' RNG stream.
  """
  attention: Callable[..., nn.Module]
  embedding: Callable[..., nn.Module] | None = None
  attention_options: tuple[str, ...] = ()
  embedding_options: tuple[str, ...] = ()
  randomized: bool = False


# Every encoding option and its default; an encoding ignores options it does not take.
OPTION_DEFAULTS: dict[str, Any] = {
    'max_time': 10_000.0,
    'relative_mode': 'symmetric',
    'randomize_both_sides': False,
    'geometric_normalize': False,
}

_p = functools.partial
_RANDOMIZED_RELATIVE_OPTIONS = ('max_time', 'relative_mode', 'randomize_both_sides')
ENCODINGS: dict[str, Encoding] = {
    'none': Encoding(DotProductAttention),
    'sin_cos': Encoding(DotProductAttention, SinCosEmbedding, embedding_options=('max_time',)),
    'relative': Encoding(RelativeAttention, attention_options=('max_time',)),
    'alibi': Encoding(AlibiAttention),
    'rotary': Encoding(RotaryAttention, attention_options=('max_time',)),
    'learned': Encoding(DotProductAttention, LearnedEmbedding),
    'randomized_sin_cos': Encoding(DotProductAttention, _p(SinCosEmbedding, randomized=True),
                                   embedding_options=('max_time',), randomized=True),
    'randomized_relative': Encoding(_p(RelativeAttention, randomized=True),
                                    attention_options=_RANDOMIZED_RELATIVE_OPTIONS,
                                    randomized=True),
    'randomized_alibi': Encoding(_p(AlibiAttention, randomized=True),
                                 attention_options=('randomize_both_sides',), randomized=True),
    'randomized_rotary': Encoding(_p(RotaryAttention, randomized=True),
                                  attention_options=('max_time',), randomized=True),
    'randomized_learned': Encoding(DotProductAttention, _p(LearnedEmbedding, randomized=True),
                                   randomized=True),
    'geometric': Encoding(GeometricAttention, attention_options=('geometric_normalize',)),
    'geometric_directional': Encoding(_p(GeometricAttention, directional=True),
                                      attention_options=('geometric_normalize',)),
}
NAMES: tuple[str, ...] = tuple(ENCODINGS)


def get(name: str) -> Encoding:
  """The registry entry of `name`; unknown names raise ValueError listing the valid ones."""
  if name not in ENCODINGS:
    raise ValueError(f'unknown encoding {name!r}; valid encodings: {", ".join(NAMES)}')
  return ENCODINGS[name]


def resolve_options(name: str, options: tuple[tuple[str, Any], ...] | dict = ()
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
  """(attention kwargs, embedding kwargs) of `name` from (key, value) option pairs.

  Options an encoding does not take are ignored, so one config can serve the whole grid;
  keys no encoding knows raise ValueError (typos).

  Example:
    >>> resolve_options('randomized_relative', (('relative_mode', 'reference'),))
    ({'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}, {})
  """
  given = dict(options)
  unknown = sorted(set(given) - set(OPTION_DEFAULTS))
  if unknown:
    raise ValueError(f'unknown encoding options {unknown}; valid: {sorted(OPTION_DEFAULTS)}')
  if given.get('relative_mode', 'symmetric') not in RELATIVE_MODES:
    raise ValueError(
        f'relative_mode must be one of {RELATIVE_MODES}, got {given["relative_mode"]!r}')
  spec = get(name)
  pick = lambda keys: {key: given.get(key, OPTION_DEFAULTS[key]) for key in keys}
  return pick(spec.attention_options), pick(spec.embedding_options)
