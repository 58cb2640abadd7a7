"""The accelerator backend: whole batches, all heads at once, in XLA's fused attention.

Content, rotation and bias encodings run in `jax.nn.dot_product_attention` (the bias as a
[B or 1, H, Q, S] array), which XLA fuses on GPU and TPU and which can be asked for cuDNN's
flash attention (`implementation='cudnn'`, bf16/fp16 on NVIDIA GPUs). NDR geometric
attention, which replaces the softmax, runs by prefix sums over whole rows
(`geometric_prefix`); one decoding step, and the other replacements of the softmax
(stick-breaking, already cumulative sums), use their readable functions. Nothing runs per
head or per example.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from posenc.attention import geometric_prefix
from posenc.attention import reference
from posenc.encodings import core

Array = jax.Array


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
  whole_sequence: bool,
  temperature: Array | None = None,
  implementation: str | None = None,
) -> Array:
  """As `reference.attend` (same arguments and result); `whole_sequence`: q_idx and k_idx
  are both arange(T) (static knowledge the geometric prefix sums need)."""
  with jax.named_scope('attention_xla_fused'):
    if enc.kind == core.GEOMETRIC:
      if enc.family != 'geometric' or not whole_sequence or jnp.ndim(key_valid) > 1:
        return reference.attend(
          q,
          k,
          v,
          enc,
          q_idx=q_idx,
          k_idx=k_idx,
          key_valid=key_valid,
          causal=causal,
          temperature=temperature,
        )
      s = enc.scores(q, k, q_idx, k_idx)
      if temperature is not None:
        s = s * temperature[:, None, :, None]
      with jax.named_scope('geometric_prefix_sums'):
        weights = geometric_prefix.geometric_weights(s, key_valid, causal=causal)
      if enc.normalize:
        weights = weights / (jnp.sum(weights, axis=-1, keepdims=True) + 1e-30)
      return jnp.einsum('bhqs,bshk->bqhk', weights.astype(v.dtype), v)
    if enc.kind == core.ROTATION:
      q, k = enc.rotated(q, k, q_idx, k_idx)
    bias = enc.bias(q, k, q_idx, k_idx) if enc.kind == core.BIAS else None
    if temperature is not None:  # τ (q·k / sqrt(K) + bias): scale q and the bias
      q = (q * temperature[:, :, None, None]).astype(q.dtype)
      bias = None if bias is None else bias * temperature[:, None, :, None]
    mask = reference.visible(q_idx, k_idx, key_valid, causal)
    width = v.shape[-1]
    if q.shape[-1] > width:  # q and k wider than v (PoPE): v padded with zeros, then cut
      v = jnp.pad(v, [(0, 0)] * 3 + [(0, q.shape[-1] - width)])
    with jax.named_scope('dot_product_attention'):
      return jax.nn.dot_product_attention(
        q,
        k,
        v.astype(q.dtype),
        bias=None if bias is None else bias.astype(q.dtype),
        mask=mask,
        implementation=implementation,
      )[..., :width].astype(v.dtype)
