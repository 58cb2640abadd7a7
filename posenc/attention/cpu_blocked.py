"""The CPU backend: attention in cache-sized blocks, with measured CPU tricks.

Equal to `reference.attend` (tested, values and gradients), for a whole sequence. What it
does differently, each measured on XLA's CPU backend (docs/speed.md):
- layout [H, B, T, K]: every product is a batched dot without transposes;
- long sequences (T > `block`) run per head in query blocks of at most `block` rows, so a
  block's weights stay in cache between the product that makes them and the one that
  consumes them; relative, ALiBi and geometric attention run their heads one after another
  (`lax.map`), because XLA's scheduler otherwise keeps every block's intermediates live;
- the key-padding mask rides in the q·k product as an extra column;
- softmax is divided after `weights @ v`, with the row sums from a ones column of v;
- relative attention uses Transformer-XL's rel-shift and a custom VJP for its position term;
- geometric attention uses prefix sums and a skew (`geometric_prefix`), stick-breaking
  attention the same blocked prefix sums (XLA's reverse cumulative sum is slow on CPU).
Encodings without a specialization here run their readable functions block by block.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from posenc.attention import geometric_prefix
from posenc.attention import reference
from posenc.encodings import core
from posenc.encodings import embeddings
from posenc.encodings import biases

Array = jax.Array

# The logit of an invalid key: exp(MASKED - row max) is 0 whenever a row has a valid key.
MASKED = -1e30
# Guards 0/0 for rows without weight (geometric attention with every key masked).
TINY = 1e-30


class Scores(NamedTuple):
  """The attention weights of any block of heads and query rows, from per-layer state.

  Attributes:
    weights: (heads: a slice of 0..H-1 or one traced head index, queries: a slice of
      0..T-1) -> float32 [h, B, q, T].
    normalize: `weights` are exp(logits - max) (or geometric weights to be normalised):
      `attend` divides `weights @ v` by their row sums.
    sequential_heads: on long sequences run the heads one after another (`lax.map`, so
      `weights` gets a traced head index; use `take_heads`) with their query blocks
      unrolled, instead of every block unrolled. For encodings whose blocks make large
      intermediates (relative's position products, geometric's prefix sums) or whose
      unrolled per-block constants compile slowly (ALiBi).
    per_head: on long sequences a block holds one head (False: every head, for encodings
      whose weights are made for all heads at once, so no block recomputes them).
  """

  weights: Callable[[Any, slice], Array]
  normalize: bool
  sequential_heads: bool = False
  per_head: bool = True


def take_heads(x: Array, heads: slice | Array) -> Array:
  """x[heads] along the leading (head) axis: a static slice, or one traced head index.

  Example: take_heads(x, slice(0, 2)) -> x[0:2]; take_heads(x, jnp.int32(3)) -> x[3:4].
  """
  if isinstance(heads, slice):
    return x[heads]
  return jax.lax.dynamic_slice_in_dim(x, heads, 1, axis=0)


def attention_blocks(num_heads: int, num_positions: int, block: int) -> list[tuple[slice, slice]]:
  """The (heads, queries) blocks attention runs in: one block, or per head in query blocks.

  Sequences longer than `block` (> 0) run each head separately, in query blocks of at most
  `block` rows of near-equal size.

  Example: attention_blocks(2, 10, 4) -> head 0 and head 1 each with queries 0..2, 3..6,
    7..9; attention_blocks(2, 4, 4) -> [(slice(0, 2), slice(0, 4))].
  """
  if block <= 0 or num_positions <= block:
    return [(slice(0, num_heads), slice(0, num_positions))]
  num_blocks = -(-num_positions // block)
  bounds = [round(b * num_positions / num_blocks) for b in range(num_blocks + 1)]
  return [
    (slice(h, h + 1), slice(bounds[b], bounds[b + 1]))
    for h in range(num_heads)
    for b in range(num_blocks)
  ]


# ---------------------------------------------------------------------------------------
# Pieces of the softmax encodings.


def key_masked_dot(q: Array, k: Array, key_valid: Array | None) -> Array:
  """q·k plus MASKED on invalid keys, in one product: [.., Q, K] x [.., T, K] -> [.., Q, T].

  The mask rides in the product as an extra column (1 on the queries, 0 or MASKED on the
  keys) instead of a select over the [.., Q, T] logits.

  key_valid is [T], or [B, T] with q, k [H, B, .., K].

  Example: q = [[1]], k = [[2], [3]], key_valid [1, 0] -> [[2, -1e30]].
  """
  if key_valid is None:
    return jnp.einsum('...ik,...jk->...ij', q, k)
  bias = jnp.where(key_valid, 0.0, MASKED).astype(k.dtype)  # [T] or [B, T]
  q = jnp.concatenate([q, jnp.ones((*q.shape[:-1], 1), q.dtype)], axis=-1)
  k = jnp.concatenate([k, jnp.broadcast_to(bias[..., None], (*k.shape[:-1], 1))], axis=-1)
  return jnp.einsum('...ik,...jk->...ij', q, k)


def softmax_numerator(logits: Array, causal: bool, queries: slice) -> Array:
  """exp(logits - row max) of logits that already carry MASKED on invalid keys.

  Causal masking sets finfo.min rather than -inf, so a row with no valid key is uniform
  rather than NaN. The row max only guards exp against overflow: the normalised weights do
  not depend on it, so its gradient is zero in exact arithmetic, and stopping it saves the
  backward pass an argmax mask and a reduction per layer.

  Example: logits [[0, 1, -1e30]] -> [[e^-1, 1, 0]].
  """
  logits = logits.astype(jnp.float32)
  if causal:
    mask = geometric_prefix.visible_block(
      jnp.ones(logits.shape[-1], bool), logits.shape[-1], True, queries
    )
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  return jnp.exp(logits - row_max)


def _dot_product_scores(
  q: Array,
  k: Array,
  key_valid: Array,
  causal: bool,
  bias: Callable[[Any, slice], Array] | None = None,
  sequential_heads: bool = False,
) -> Scores:
  """softmax(q·k / sqrt(K) [+ bias(heads, queries) [h, B or 1, Q, T]]) numerators."""
  head_dim = q.shape[-1]

  def weights(heads, queries):
    logits = key_masked_dot(
      take_heads(q, heads)[:, :, queries] / math.sqrt(head_dim), take_heads(k, heads), key_valid
    )
    if bias is not None:
      logits = logits + bias(heads, queries)
    return softmax_numerator(logits, causal, queries)

  return Scores(weights, True, sequential_heads)


# ---------------------------------------------------------------------------------------
# Relative attention: rel-shift and a custom VJP.


def rel_shift(x: Array, num_keys: int | None = None) -> Array:
  """The Transformer-XL "rel-shift": from relative columns to key columns.

  For Q queries and T keys (T = Q by default), column c of x holds relative position
  c - T for the first query row, so out[..., i, j] = x[..., i, Q + j - i]. It is a reshape,
  not a gather: flattened, x[i, Q + j - i] sits at i(T + Q - 1) + j after dropping the
  first Q entries.

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


def rel_unshift(x: Array) -> Array:
  """The transpose of `rel_shift`: out[..., i, Q + j - i] = x[..., i, j], 0 elsewhere.

  Example (T = Q = 2): [[a, b], [c, d]] -> [[0, 0, a, b], [0, c, d, 0]].
  """
  *batch, q, t = x.shape
  no_pad = [(0, 0)] * len(batch)
  rows = jnp.pad(x, no_pad + [(0, 0), (0, q - 1)]).reshape(*batch, q * (t + q - 1))
  return jnp.pad(rows, no_pad + [(q, 0)]).reshape(*batch, q, t + q)


def relative_window(num_positions: int, queries: slice) -> slice:
  """The columns of a [.., 2T, ..] relative table that queries `queries` read.

  Example: T = 4, queries 1..2 read relative positions -2..2: columns slice(1, 7).
  """
  return slice(num_positions - queries.stop, 2 * num_positions - queries.start)


@jax.custom_vjp
def relative_position_logits(qv: Array, rel: Array) -> Array:
  """out[h, b, i, j] = qv[h, b, i] · rel[h, Q + j - i]: the Transformer-XL position term.

  One [B·Q, K] x [K, T + Q] dot per head, then `rel_shift`. The custom VJP builds the
  cotangent of the product with one `rel_unshift`; autodiff made it in three pad passes
  plus a strided transpose, more than half of a relative training step.

  Args:
    qv: [H, B, Q, K] queries plus the position bias v.
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


def relative_logits(
  q: Array, k: Array, rel: Array, u: Array, v: Array, key_valid: Array | None = None
) -> Array:
  """[(q_i + u)·k_j + (q_i + v)·rel[Q + j - i]] / sqrt(K) for a block of Q queries.

  Args:
    q: [H, B, Q, K]; k: [H, B, T, K]; rel: [H, T + Q, K]; u, v: [H, K].
    key_valid: optional bool [T]: invalid keys get MASKED.

  Returns:
    float32 [H, B, Q, T].
  """
  # 1/sqrt(K) goes on the [.., Q, K] operands, not on the [.., Q, T] sum: no extra pass.
  scale = 1 / math.sqrt(q.shape[-1])
  content = key_masked_dot((q + u[:, None, None]) * scale, k, key_valid)
  position = relative_position_logits((q + v[:, None, None]) * scale, rel)
  return (content + position).astype(jnp.float32)


def _relative_scores(q, k, enc, key_valid, causal):
  p = enc.params
  num_heads, _, t, head_dim = q.shape
  # The offsets -(T-1)..T-1 of the draw (which may cover a longer sequence); columns
  # c = 0..2T-1 hold offset c - T (the first is never read).
  drawn = p['offset_positions']
  centre = (drawn.shape[-1] - 1) // 2
  offsets = drawn[centre - (t - 1) : centre + t]
  offsets = jnp.concatenate([offsets[:1], offsets])
  table = embeddings.sinusoid(offsets, num_heads * head_dim, max_time=p['max_time'])
  rel = (table @ p['w_r'].astype(jnp.float32)).reshape(2 * t, num_heads, head_dim)
  rel = rel.transpose(1, 0, 2).astype(q.dtype)
  u, v = p['u'].astype(q.dtype), p['v'].astype(q.dtype)

  def weights(heads, queries):
    logits = relative_logits(
      take_heads(q, heads)[:, :, queries],
      take_heads(k, heads),
      take_heads(rel, heads)[:, relative_window(t, queries)],
      take_heads(u, heads),
      take_heads(v, heads),
      key_valid,
    )
    return softmax_numerator(logits, causal, queries)

  return Scores(weights, True, sequential_heads=True)


# ---------------------------------------------------------------------------------------
# The other specializations and the generic path.


def _alibi_scores(q, k, enc, key_valid, causal):
  p = enc.params
  t = q.shape[2]
  positions = jnp.arange(t)

  def bias(heads, queries):  # made per block, not sliced from all heads' bias (XLA copies)
    b = biases.alibi_bias(
      positions[queries],
      positions,
      take_heads(p['slopes'], heads),
      distances=p['distances'],
      left_distances=p['left_distances'],
      causal=p['causal'],
    )
    return b[:, None] if b.ndim == 3 else b.transpose(1, 0, 2, 3)  # [h, B or 1, Q, T]

  return _dot_product_scores(q, k, key_valid, causal, bias, sequential_heads=True)


def _geometric_scores(q, k, enc, key_valid, causal):
  p = enc.params
  t = q.shape[2]
  qu = q + p['u'][:, None, None].astype(q.dtype)
  beta = None if p['direction'] is None else p['direction'].transpose(2, 0, 1, 3)
  # Keys padded (masked) to a multiple of the prefix-sum block make its blocking a reshape;
  # unpadded, XLA fused the pad with the softplus into one slow loop.
  num_keys = geometric_prefix.padded_keys(t)
  k = jnp.pad(k, [(0, 0), (0, 0), (0, num_keys - t), (0, 0)])
  keys_valid = jnp.pad(key_valid, [(0, 0)] * (key_valid.ndim - 1) + [(0, num_keys - t)])

  def weights(heads, queries):
    logits = (
      p['gamma']
      * jnp.einsum('hbik,hbjk->hbij', take_heads(qu, heads)[:, :, queries], take_heads(k, heads))
      + p['s0']
    )
    if beta is not None:
      left = np.arange(num_keys)[None, :] < np.arange(queries.start, queries.stop)[:, None]
      b = take_heads(beta, heads)[:, :, queries]
      logits = logits + jnp.where(left, b[..., :1], b[..., 1:])
    return geometric_prefix.geometric_weights(
      logits, keys_valid, causal=causal, first_query=queries.start
    )[..., :t]

  return Scores(weights, enc.normalize, sequential_heads=True)


def _stick_breaking_scores(q, k, enc, key_valid, causal):
  """`stick_breaking.stick_breaking_weights` with the reverse cumulative sum of each row as
  a flipped `geometric_prefix.blocked_cumsum` (two small matmuls per block of keys)."""
  del causal  # causal by definition: only keys before the query are visited
  p = enc.params
  t, scale = q.shape[2], 1 / math.sqrt(q.shape[-1])

  def weights(heads, queries):
    z = jnp.einsum(
      'hbik,hbjk->hbij', take_heads(q, heads)[:, :, queries] * scale, take_heads(k, heads)
    ).astype(jnp.float32)
    i = np.arange(queries.start, queries.stop)[:, None]
    j = np.arange(t)[None, :]
    real = key_valid[..., None, :]  # [1, T] or [B, 1, T]
    earlier = ((j <= i) if p['attend_self'] else (j < i)) & real
    log_not = jnp.where(earlier, -geometric_prefix.softplus(z), 0.0)  # log(1 - σ(z))
    after = jnp.flip(geometric_prefix.blocked_cumsum(jnp.flip(log_not, -1)), -1) - log_not
    w = jnp.where(earlier, jnp.exp(z + log_not + after), 0.0)  # log σ(z) = z + log(1 - σ(z))
    if p['remainder'] == 'self':
      rest = 1.0 - jnp.sum(w, axis=-1, keepdims=True)
      w = w + jnp.where((j == i) & real, rest, 0.0)
    return w

  return Scores(weights, normalize=False)


def _generic_scores(q, k, enc, key_valid, causal):
  """Any encoding through its readable functions, block by block (no specialization)."""
  t = q.shape[2]
  positions = jnp.arange(t)
  q_bthk, k_bthk = q.transpose(1, 2, 0, 3), k.transpose(1, 2, 0, 3)

  def weights(heads, queries):
    qi = positions[queries]
    visible = reference.visible(qi, positions, key_valid, causal)  # [B or 1, 1, Q, T]
    if enc.kind == core.GEOMETRIC:
      w = enc.weights(enc.scores(q_bthk[:, queries], k_bthk, qi, positions), qi, positions, visible)
      return take_heads(w.transpose(1, 0, 2, 3), heads)
    logits = jnp.einsum('bqhk,bshk->hbqs', q_bthk[:, queries], k_bthk) / math.sqrt(q.shape[-1])
    if enc.kind == core.BIAS:
      bias = enc.bias(q_bthk[:, queries], k_bthk, qi, positions)
      logits = logits + bias.transpose(1, 0, 2, 3)
    logits = jnp.where(visible.transpose(1, 0, 2, 3), logits, MASKED)
    return take_heads(softmax_numerator(logits, False, queries), heads)

  return Scores(weights, enc.kind != core.GEOMETRIC or enc.normalize, per_head=False)


_SPECIALIZED = {
  'relative': _relative_scores,
  'alibi': _alibi_scores,
  'geometric': _geometric_scores,
  'stick_breaking': _stick_breaking_scores,
}


def scores(
  q: Array, k: Array, enc: core.AttentionEncoding, key_valid: Array, causal: bool
) -> Scores:
  """The layer's `Scores` for q, k [H, B, T, K] (already rotated for a rotary encoding)."""
  if enc.family in ('content', 'rotary'):
    return _dot_product_scores(q, k, key_valid, causal)
  if enc.family == 'relative' and jnp.ndim(enc.params['offset_positions']) > 1:
    return _generic_scores(q, k, enc, key_valid, causal)  # a draw per sequence
  return _SPECIALIZED.get(enc.family, _generic_scores)(q, k, enc, key_valid, causal)


def attend(
  q: Array,
  k: Array,
  v: Array,
  enc: core.AttentionEncoding,
  *,
  key_valid: Array,
  causal: bool,
  block: int = 256,
) -> Array:
  """Attention over a whole sequence, in blocks: q, k, v [B, T, H, K] -> [B, T, H, K]."""
  positions = jnp.arange(q.shape[1])
  if enc.kind == core.ROTATION:
    q, k = enc.rotated(q, k, positions, positions)
  q, k, v = (x.transpose(2, 0, 1, 3) for x in (q, k, v))
  out_dtype = v.dtype
  s = scores(q, k, enc, key_valid, causal)
  num_heads, t = q.shape[0], q.shape[2]
  v = v.astype(jnp.float32)
  if s.normalize:
    # A column of ones gives the row sums from the same product: no extra pass.
    v = jnp.concatenate([v, jnp.ones((*v.shape[:-1], 1), v.dtype)], axis=-1)

  def attend_block(heads, queries):  # -> [h, B, q, K]
    out = jnp.einsum('hbij,hbjk->hbik', s.weights(heads, queries), take_heads(v, heads))
    if s.normalize:
      out = out[..., :-1] / (out[..., -1:] + TINY)
    return out

  if s.per_head:
    blocks = attention_blocks(num_heads, t, block)
  else:
    blocks = [(slice(0, num_heads), queries) for _, queries in attention_blocks(1, t, block)]
  if s.sequential_heads and len(blocks) > 1:
    per_head = [queries for heads, queries in blocks if heads.start == 0]
    out = jax.lax.map(
      lambda h: jnp.concatenate([attend_block(h, qs) for qs in per_head], axis=2)[0],
      jnp.arange(num_heads),
    )
  else:
    rows: dict[int, list[Array]] = {}
    for heads, queries in blocks:
      rows.setdefault(heads.start, []).append(attend_block(heads, queries))
    out = jnp.concatenate([jnp.concatenate(r, axis=2) for r in rows.values()], axis=0)
  return out.transpose(1, 2, 0, 3).astype(out_dtype)
