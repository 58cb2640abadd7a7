"""The readable definition of attention with a positional encoding: einsum, mask, softmax."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from posenc.encodings import core

Array = jax.Array


def visible(q_idx: Array, k_idx: Array, key_valid: Array, causal: bool) -> Array:
  """bool [Q, S]: key j may be attended from query i (a real key, and j <= i if causal).

  Example: q_idx [1], k_idx [0, 1, 2], key_valid [1, 1, 0], causal -> [[True, True, False]].
  """
  mask = jnp.broadcast_to(key_valid[k_idx][None, :], (q_idx.shape[0], k_idx.shape[0]))
  if causal:
    mask = mask & (k_idx[None, :] <= q_idx[:, None])
  return mask


def attend(q: Array, k: Array, v: Array, enc: core.AttentionEncoding, *, q_idx: Array,
           k_idx: Array, key_valid: Array, causal: bool) -> Array:
  """softmax(q·k / sqrt(K) + bias) @ v, or the encoding's weights in place of the softmax.

  Args:
    q: [B, Q, H, K]; k, v: [B, S, H, K].
    enc: the layer's encoding (`posenc.encodings.core.AttentionEncoding`).
    q_idx: int [Q], k_idx: int [S]: the sequence indices of queries and keys.
    key_valid: bool [T]: real (not padding) keys, indexed by sequence index.
    causal: queries see no key to their right.

  Returns:
    [B, Q, H, K] in v's dtype. A row without a visible key averages every key (it is
    padding; no NaN).

  Example: one query and one key: the output is v itself.
  """
  mask = visible(q_idx, k_idx, key_valid, causal)
  if enc.kind == core.ROTATION:
    q, k = enc.rotate(q, q_idx), enc.rotate(k, k_idx)
  if enc.kind == core.GEOMETRIC:
    weights = enc.weights(enc.scores(q, k, q_idx, k_idx), q_idx, k_idx, mask)
    if enc.normalize:
      weights = weights / (jnp.sum(weights, axis=-1, keepdims=True) + 1e-30)
  else:
    logits = jnp.einsum('bqhk,bshk->bhqs', q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    if enc.kind == core.BIAS:
      logits = logits + enc.bias(q, k, q_idx, k_idx)
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
  return jnp.einsum('bhqs,bshk->bqhk', weights.astype(v.dtype), v)
