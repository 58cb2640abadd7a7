"""The readable definition of attention with a positional encoding: einsum, mask, softmax."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import randomized

Array = jax.Array


def visible(q_idx: Array, k_idx: Array, key_valid: Array, causal: bool) -> Array:
  """bool [B or 1, 1, Q, S]: key j may be attended from query i (a real key, j <= i if causal).

  Args:
    q_idx: int [Q] or [B, Q]; k_idx: int [S] or [B, S]: sequence indices.
    key_valid: bool [T] or [B, T]: real (not padding) keys, by sequence index.
    causal: queries see no key to their right.

  Example: q_idx [1], k_idx [0, 1, 2], key_valid [1, 1, 0], causal -> [[[[T, T, F]]]].
  """
  real = randomized.lookup(key_valid, k_idx, 1)  # [(B,) S]
  mask = jnp.broadcast_to(
    real[..., None, :], real.shape[:-1] + (q_idx.shape[-1],) + real.shape[-1:]
  )
  if causal:
    mask = mask & (k_idx[..., None, :] <= q_idx[..., :, None])
  return mask[:, None] if mask.ndim == 3 else mask[None, None]


def weights(
  q: Array,
  k: Array,
  enc: core.AttentionEncoding,
  *,
  q_idx: Array,
  k_idx: Array,
  key_valid: Array,
  causal: bool,
  temperature: Array | None = None,
) -> Array:
  """The attention weights: softmax(τ (q·k / sqrt(K) + bias)) over the visible keys, or the
  encoding's weights in place of the softmax. Arguments as `attend`.

  Returns:
    float32 [B, H, Q, S]; each row of a query with a visible key sums to 1 (geometric
    attention without normalization: at most 1).
  """
  mask = visible(q_idx, k_idx, key_valid, causal)
  tau = 1.0 if temperature is None else temperature[:, None, :, None]
  if enc.kind == core.ROTATION:
    q, k = enc.rotated(q, k, q_idx, k_idx)
  if enc.kind == core.GEOMETRIC:
    w = enc.weights(tau * enc.scores(q, k, q_idx, k_idx), q_idx, k_idx, mask)
    if enc.normalize:
      w = w / (jnp.sum(w, axis=-1, keepdims=True) + 1e-30)
    return w.astype(jnp.float32)
  logits = jnp.einsum('bqhk,bshk->bhqs', q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
  if enc.kind == core.BIAS:
    logits = logits + enc.bias(q, k, q_idx, k_idx)
  logits = jnp.where(mask, tau * logits, jnp.finfo(jnp.float32).min)
  return jax.nn.softmax(logits, axis=-1)


def attend(
  q: Array,
  k: Array,
  v: Array,
  enc: core.AttentionEncoding,
  *,
  q_idx: Array,
  k_idx: Array,
  key_valid: Array,
  causal: bool,
  temperature: Array | None = None,
) -> Array:
  """softmax(τ (q·k / sqrt(K) + bias)) @ v, or the encoding's weights in place of the softmax.

  Args:
    q: [B, Q, H, K]; k, v: [B, S, H, K].
    enc: the layer's encoding (`posenc.encodings.core.AttentionEncoding`).
    q_idx: int [Q] or [B, Q]; k_idx: int [S] or [B, S]: sequence indices of queries, keys.
    key_valid: bool [T] or [B, T]: real (not padding) keys, indexed by sequence index.
    causal: queries see no key to their right.
    temperature: optional τ [B or 1, Q] multiplying each query's logits (geometric: its
      scores).

  Returns:
    [B, Q, H, K] in v's dtype. A row without a visible key averages every key (it is
    padding; no NaN).

  Example: one query and one key: the output is v itself.
  """
  w = weights(
    q, k, enc, q_idx=q_idx, k_idx=k_idx, key_valid=key_valid, causal=causal, temperature=temperature
  )
  return jnp.einsum('bhqs,bshk->bqhk', w.astype(v.dtype), v)
