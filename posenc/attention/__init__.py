"""One attention function with a positional encoding, several backends.

  out = attend(q, k, v, enc, key_valid=valid, causal=False, impl='auto')   # [B, Q, H, K]

`impl`:
- 'reference': einsum, mask, softmax: the readable definition (`reference.attend`);
- 'xla_fused': whole batches and all heads at once; `jax.nn.dot_product_attention` for
  content, rotation and bias encodings, which XLA and cuDNN fuse on GPU and TPU;
- 'cpu_blocked': cache-sized blocks and CPU-specific tricks (`cpu_blocked`);
- 'auto' (default): 'cpu_blocked' on CPU, 'xla_fused' on GPU and TPU (`resolve`).
Every backend is tested equal to 'reference' (values and gradients). Speed tricks live
only here, never in an encoding's function.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from posenc import suggest
from posenc.attention import cpu_blocked
from posenc.attention import fused
from posenc.attention import reference
from posenc.encodings import core

Array = jax.Array

IMPLS = ('auto', 'reference', 'xla_fused', 'cpu_blocked')


def resolve(impl: str, platform: str | None = None) -> str:
  """The backend `impl` stands for on `platform` (default: JAX's default backend).

  Example: resolve('auto', 'cpu') == 'cpu_blocked'; resolve('auto', 'tpu') == 'xla_fused'.
  """
  if impl not in IMPLS:
    raise ValueError(
      f'unknown attention impl {impl!r}{suggest.did_you_mean(impl, IMPLS)}; valid: {", ".join(IMPLS)}'
    )
  if impl != 'auto':
    return impl
  platform = platform or jax.default_backend()
  return 'cpu_blocked' if platform == 'cpu' else 'xla_fused'


def attend(
  q: Array,
  k: Array,
  v: Array,
  enc: core.AttentionEncoding,
  *,
  key_valid: Array,
  causal: bool,
  impl: str = 'auto',
  q_idx: Array | None = None,
  k_idx: Array | None = None,
  temperature: Array | None = None,
  block: int = 256,
  fused_implementation: str | None = None,
) -> Array:
  """Attention of queries q over keys k and values v under the layer's encoding.

  Args:
    q: [B, Q, H, K]; k, v: [B, S, H, K].
    enc: the layer's `AttentionEncoding`.
    key_valid: bool [T] (or [B, T]: per sequence): real keys by sequence index (padding is
      False).
    causal: queries see no key to their right.
    impl: a backend of `IMPLS`.
    q_idx, k_idx: int [Q], [S] (or [B, Q], [B, S]) sequence indices; default arange (a
      whole sequence).
    temperature: optional τ [B or 1, Q] multiplying each query's logits (`temperature`).
    block: cpu_blocked's query block on long sequences (0: never split).
    fused_implementation: xla_fused's `jax.nn.dot_product_attention` implementation
      (None: XLA; 'cudnn': cuDNN flash attention on NVIDIA GPUs).

  Returns:
    [B, Q, H, K] in v's dtype.
  """
  impl = resolve(impl)
  whole = q_idx is None and k_idx is None
  q_idx = jnp.arange(q.shape[1]) if q_idx is None else q_idx
  k_idx = jnp.arange(k.shape[1]) if k_idx is None else k_idx
  if impl == 'cpu_blocked' and whole and temperature is None:
    with jax.named_scope('attention_cpu_blocked'):
      return cpu_blocked.attend(q, k, v, enc, key_valid=key_valid, causal=causal, block=block)
  if impl == 'reference':
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
  # xla_fused; and cpu_blocked for a part of a sequence (one decoding step) or a temperature.
  return fused.attend(
    q,
    k,
    v,
    enc,
    q_idx=q_idx,
    k_idx=k_idx,
    key_valid=key_valid,
    causal=causal,
    whole_sequence=whole,
    temperature=temperature,
    implementation=fused_implementation,
  )


def temperature(beta: Array, q_idx: Array, length: Array, causal: bool) -> Array:
  """τ = β ln(max(n, 2)) per query (Awasthi & Gupta 2023), n the keys it attends: the
  real length, or i + 1 for query i of a causal model (at most the real length).

  Args:
    beta: scalar β.
    q_idx: int [Q] or [B, Q]; length: int scalar or [B]: real positions.
    causal: whether queries see only keys up to themselves.

  Returns:
    float32 [B or 1, Q].

  Example: β = 1, causal, q_idx [0, 1, 5], length 9 -> [ln 2, ln 2, ln 6].
  """
  q_idx = q_idx if q_idx.ndim == 2 else q_idx[None]
  length = jnp.reshape(length, (-1, 1))
  n = (
    jnp.minimum(q_idx + 1, length)
    if causal
    else jnp.broadcast_to(length, jnp.broadcast_shapes(length.shape, q_idx.shape))
  )
  return beta * jnp.log(jnp.maximum(n, 2).astype(jnp.float32))
