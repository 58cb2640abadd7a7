"""The layers every model family is built from: dropout, attention, the transformer block.

Letters: B batch, Q queries (the tokens given), S keys, T sequence length, H heads, K head
width, D model width, F feed-forward width.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flax import struct
import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc import attention
from posenc import encodings
from posenc.encodings import core

Array = jax.Array

LAYER_NORM_EPS = 1e-5  # Haiku's default; Flax's is 1e-6.
NORMS = ('post', 'pre')
FFNS = ('relu', 'gelu_glu')
TEMPERATURES = ('none', 'fixed', 'learned')


def _mix32(x: Array) -> Array:
  """A bijective 32-bit integer mixer ("lowbias32", C. Wellons): full avalanche in 5 ops."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * jnp.uint32(0x846CA68B)
  return x ^ (x >> 16)


def dropout_keep_mask(key: Array, shape: tuple[int, ...], rate: float) -> Array:
  """bool `shape`: True with probability 1 - rate, a counter-based hash of (key, index).

  Element n (row-major flat index) keeps iff mix(mix(n ^ k0) + k1) >= rate * 2^32, where
  (k0, k1) are the first two words of `jax.random.key_data(key)`. Two cheap integer mixing
  rounds per element, fused into the consumer, instead of threefry's 20: fewer operations
  on every platform, so it is not a CPU-only trick. Deterministic in `key`, vmappable over
  keys, and the drop probability is rate to within 2^-32.

  Example: dropout_keep_mask(jax.random.key(0), (2, 3), 0.1) -> e.g. [[T, T, T], [T, F, T]].
  """
  words = jax.random.key_data(key).reshape(-1).astype(jnp.uint32)
  index = jnp.zeros(shape, jnp.uint32)
  stride = 1
  for axis in reversed(range(len(shape))):
    index = index + jax.lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride)
    stride *= shape[axis]
  bits = _mix32(_mix32(index ^ words[0]) + words[1])
  threshold = min(round(rate * 2.0**32), 2**32 - 1)
  return bits >= jnp.uint32(threshold)


class Dropout(nn.Module):
  """Inverted dropout (as nn.Dropout) with `dropout_keep_mask` bits from the 'dropout' stream."""

  rate: float

  @nn.compact
  def __call__(self, x: Array, deterministic: bool) -> Array:
    if deterministic or self.rate == 0.0:
      return x
    if self.rate >= 1.0:
      return jnp.zeros_like(x)
    keep = dropout_keep_mask(self.make_rng('dropout'), x.shape, self.rate)
    return jnp.where(keep, x / (1.0 - self.rate), jnp.zeros((), x.dtype)).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class AttentionArgs:
  """How every layer's attention runs.

  Attributes:
    encoding: the `posenc.encodings.Encoding` of the model.
    encoding_kwargs: (name, value) options its attention module takes.
    max_position: L, the range of randomized positions.
    impl: a resolved backend of `posenc.attention.IMPLS` (not 'auto').
    block: cpu_blocked's query block on long sequences (0: never split).
    fused_implementation: xla_fused's `jax.nn.dot_product_attention` implementation.
    temperature: 'none', or τ = β ln(n) on each query's logits (n the keys it attends;
      Awasthi & Gupta 2023) with β 'fixed' at `temperature_beta` or 'learned' from it
      (one β per layer).
    temperature_beta: β, or its initial value.
  """

  encoding: encodings.Encoding
  encoding_kwargs: tuple[tuple[str, Any], ...] = ()
  max_position: int = 2048
  impl: str = 'cpu_blocked'
  block: int = 256
  fused_implementation: str | None = None
  temperature: str = 'none'
  temperature_beta: float = 1.0


@struct.dataclass
class Positions:
  """Where the given tokens sit, and what the encodings draw over.

  Attributes:
    key_valid: bool [T] or [B, T]: real keys by sequence index.
    q_idx: None (the tokens are the whole sequence 0..T-1) or int [B, Q]: the sequence
      index of each given token (one decoding step: [B, 1]).
    draw_positions: T, the sequence length the encodings' draws and tables cover (static).
    draw_length: int scalar (one draw per batch) or [B] (one per sequence): the real
      length a randomized draw is made for.
  """

  key_valid: Array
  q_idx: Array | None
  draw_length: Array
  draw_positions: int = struct.field(pytree_node=False, default=0)


def _write(cache: Array, new: Array, start: Array) -> Array:
  """cache [B, S, H, K] with new [B, Q, H, K] written at rows start[b]..start[b]+Q-1."""
  return jax.vmap(lambda c, n, i: jax.lax.dynamic_update_slice_in_dim(c, n, i, axis=0))(
    cache, new.astype(cache.dtype), start
  )


class MultiHeadAttention(nn.Module):
  """q, k, v projections (no bias), the encoding, attention on a backend, out projection.

  Over a whole sequence it returns the tokens' keys and values (a cache to decode from);
  given a cache (decoding), it writes the new tokens' keys and values at their indices and
  attends over the cache.
  """

  num_heads: int
  args: AttentionArgs
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(
    self,
    x: Array,
    where: Positions,
    causal: bool,
    cache: dict[str, Array] | None = None,
    deterministic: bool = True,
  ) -> tuple[Array, dict[str, Array]]:
    b, t, d = x.shape
    head_dim = d // self.num_heads
    args = self.args
    q, k, v = [
      self._dense(name, x).reshape(b, t, self.num_heads, head_dim)
      for name in ('query', 'key', 'value')
    ]  # each [B, Q, H, K]
    enc = self._encoding(where, x, causal, head_dim, deterministic)
    q_idx = jnp.arange(t) if where.q_idx is None else where.q_idx
    tau = self._temperature(where, q_idx, causal)
    # Encodings that need a feature of every key (`key_state`) cache it with k and v.
    kv = {'k': k, 'v': v, **enc.key_state}
    if cache is not None:
      kv = {name: _write(cache[name], new, q_idx[:, 0]) for name, new in kv.items()}
    if enc.key_state:
      enc = enc.with_keys({name: kv[name] for name in enc.key_state})
    if cache is None and self.is_mutable_collection('intermediates'):
      # Analysis (receptive fields, attention maps): the weights of the readable definition.
      self.sow(
        'intermediates',
        'weights',
        attention.reference.weights(
          q,
          k,
          enc,
          q_idx=q_idx,
          k_idx=jnp.arange(t),
          key_valid=where.key_valid,
          causal=causal,
          temperature=tau,
        ),
      )
    # Over a whole sequence the keys are the queries' tokens (indices given only when the
    # positions are); decoding, the cache's every slot.
    if cache is None:
      q_at, k_at = where.q_idx, None if where.q_idx is None else jnp.arange(t)
    else:
      q_at, k_at = q_idx, jnp.arange(kv['k'].shape[1])
    out = attention.attend(
      q,
      kv['k'],
      kv['v'],
      enc,
      key_valid=where.key_valid,
      causal=causal,
      impl=args.impl,
      q_idx=q_at,
      k_idx=k_at,
      temperature=tau,
      block=args.block,
      fused_implementation=args.fused_implementation,
    )
    return self._dense('out', out.reshape(b, t, d)), kv

  def _dense(self, name: str, x: Array) -> Array:
    """A projection without bias, Haiku's initializer, named `name` in the parameters."""
    return nn.Dense(
      x.shape[-1],
      use_bias=False,
      kernel_init=core.HAIKU_LINEAR_INIT,
      dtype=self.dtype,
      param_dtype=self.param_dtype,
      name=name,
    )(x)

  def _encoding(
    self, where: Positions, x: Array, causal: bool, head_dim: int, deterministic: bool
  ) -> core.AttentionEncoding:
    """The layer's encoding (its module named 'encoding'), or content alone without one."""
    args = self.args
    if args.encoding.attention is None:
      return core.AttentionEncoding('content', core.CONTENT)
    return args.encoding.attention(
      max_position=args.max_position,
      num_heads=self.num_heads,
      head_dim=head_dim,
      param_dtype=self.param_dtype,
      causal=causal,
      **dict(args.encoding_kwargs),
      name='encoding',
    )(where.draw_positions, where.draw_length, x, deterministic)

  def _temperature(self, where: Positions, q_idx: Array, causal: bool) -> Array | None:
    """The attention's temperature per query (None: none), its beta learned or fixed."""
    args = self.args
    if args.temperature == 'none':
      return None
    beta = jnp.asarray(args.temperature_beta, jnp.float32)
    if args.temperature == 'learned':
      beta = self.param(
        'temperature_beta', nn.initializers.constant(args.temperature_beta), (), self.param_dtype
      )
    return attention.temperature(beta, q_idx, jnp.sum(where.key_valid, -1), causal)


class Block(nn.Module):
  """One transformer layer: attention and feed-forward, each in a residual with LayerNorm.

  post-LN (the study's, as the reference): h = LN(h + Dropout(MHA(h))); h = LN(h + FFN(h)).
  pre-LN: h = h + Dropout(MHA(LN(h))); h = h + Dropout(FFN(LN(h))).
  FFN: 'relu' (Dense F, ReLU, Dense D) or 'gelu_glu' (Dense 2F split into a, g; GELU(a)·g;
  Dense D), as McLeish et al.'s models.
  """

  num_heads: int
  ffn_size: int
  dropout: float
  args: AttentionArgs
  norm: str = 'post'
  ffn: str = 'relu'
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(
    self,
    x: Array,
    where: Positions,
    causal: bool,
    deterministic: bool,
    cache: dict[str, Array] | None = None,
  ) -> tuple[Array, dict[str, Array]]:
    d = x.shape[-1]
    types = {'dtype': self.dtype, 'param_dtype': self.param_dtype}
    norm = lambda: nn.LayerNorm(epsilon=LAYER_NORM_EPS, **types)
    attend = MultiHeadAttention(self.num_heads, self.args, **types, name='attention')
    drop = lambda y: Dropout(self.dropout)(y, deterministic=deterministic)

    def feed_forward(h):
      if self.ffn == 'relu':
        f = nn.relu(nn.Dense(self.ffn_size, kernel_init=core.HAIKU_LINEAR_INIT, **types)(h))
      else:
        a, g = jnp.split(
          nn.Dense(2 * self.ffn_size, kernel_init=core.HAIKU_LINEAR_INIT, **types)(h), 2, axis=-1
        )
        f = nn.gelu(a) * g
      return nn.Dense(d, kernel_init=core.HAIKU_LINEAR_INIT, **types)(f)

    if self.norm == 'post':
      a, kv = attend(x, where, causal, cache, deterministic)
      x = norm()(x + drop(a))
      out = norm()(x + drop(feed_forward(x)))
    else:
      a, kv = attend(norm()(x), where, causal, cache, deterministic)
      x = x + drop(a)
      out = x + drop(feed_forward(norm()(x)))
    if cache is None and self.is_mutable_collection('intermediates'):
      self.sow('intermediates', 'output', out)  # Analysis: the layer's activations.
    return out, kv
