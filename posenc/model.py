"""The study's encoder transformer (Ruoss et al. 2023, as in their released code) in Flax Linen.

Post-LayerNorm, bidirectional by default, 5 × (d 64, 8 heads, FFN 256) and an output head on
every position. The positional encoding is picked by name from `posenc.encodings`; the model
builds its modules and hands each layer's `AttentionEncoding` to `posenc.attention.attend`,
so a new encoding needs no edit here.

Example:
  >>> model = Transformer(vocab_size=2, num_classes=2, encoding='randomized_relative')
  >>> tokens, seq_length = empty_output_layout(inputs, length, output_length, max_out, 2)
  >>> params = model.init({'params': k1, 'noise': k2}, tokens, seq_length,
  ...                     deterministic=True)['params']
  >>> logits = model.apply({'params': params}, tokens, seq_length, deterministic=True,
  ...                      rngs={'noise': k3})          # [B, T, C]
  >>> outputs = read_outputs(logits, length, max_out)   # [B, O_max, C]
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc import attention
from posenc import encodings
from posenc.encodings import core

Array = jax.Array

_LAYER_NORM_EPS = 1e-5  # Haiku's default; Flax's is 1e-6.


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
  """How every layer's attention runs: the encoding and its options, and the backend.

  Attributes:
    encoding: the `posenc.encodings.Encoding` of the model.
    encoding_kwargs: (name, value) options its attention module takes.
    max_position: L, the range of randomized positions.
    impl: a resolved backend of `posenc.attention.IMPLS` (not 'auto').
    block: cpu_blocked's query block on long sequences (0: never split).
    fused_implementation: xla_fused's `jax.nn.dot_product_attention` implementation.
  """
  encoding: encodings.Encoding
  encoding_kwargs: tuple[tuple[str, Any], ...] = ()
  max_position: int = 2048
  impl: str = 'cpu_blocked'
  block: int = 256
  fused_implementation: str | None = None


class MultiHeadAttention(nn.Module):
  """q, k, v projections (no bias), the encoding, attention on a backend, out projection."""
  num_heads: int
  args: AttentionArgs
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array, key_valid: Array, causal: bool) -> Array:
    b, t, d = x.shape
    head_dim = d // self.num_heads
    args = self.args

    def project(name):  # -> [B, T, H, K]
      y = nn.Dense(d, use_bias=False, kernel_init=core.HAIKU_LINEAR_INIT, dtype=self.dtype,
                   param_dtype=self.param_dtype, name=name)(x)
      return y.reshape(b, t, self.num_heads, head_dim)

    q, k, v = project('query'), project('key'), project('value')
    if args.encoding.attention is None:
      enc = core.AttentionEncoding('content', core.CONTENT)
    else:
      enc = args.encoding.attention(
          max_position=args.max_position, num_heads=self.num_heads, head_dim=head_dim,
          param_dtype=self.param_dtype, **dict(args.encoding_kwargs), name='encoding')(
              t, jnp.sum(key_valid), x)
    out = attention.attend(q, k, v, enc, key_valid=key_valid, causal=causal, impl=args.impl,
                           block=args.block, fused_implementation=args.fused_implementation)
    return nn.Dense(d, use_bias=False, kernel_init=core.HAIKU_LINEAR_INIT, dtype=self.dtype,
                    param_dtype=self.param_dtype, name='out')(out.reshape(b, t, d))


class EncoderBlock(nn.Module):
  """h = LN(h + Dropout(MHA(h))); h = LN(h + Dropout(FFN(h))): post-LN, as the reference."""
  num_heads: int
  ffn_size: int
  dropout: float
  args: AttentionArgs
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, key_valid, causal, deterministic):
    d = x.shape[-1]
    types = {'dtype': self.dtype, 'param_dtype': self.param_dtype}
    a = MultiHeadAttention(self.num_heads, self.args, **types, name='attention')(
        x, key_valid, causal)
    x = nn.LayerNorm(epsilon=_LAYER_NORM_EPS, **types)(
        x + Dropout(self.dropout)(a, deterministic=deterministic))
    f = nn.Dense(self.ffn_size, kernel_init=core.HAIKU_LINEAR_INIT, **types)(x)
    f = nn.Dense(d, kernel_init=core.HAIKU_LINEAR_INIT, **types)(nn.relu(f))
    return nn.LayerNorm(epsilon=_LAYER_NORM_EPS, **types)(
        x + Dropout(self.dropout)(f, deterministic=deterministic))


class Transformer(nn.Module):
  """Encoder transformer: tokens [B, T] int32 -> logits [B, T, C].

  Token ids 0..V-1 are inputs and id V is the empty output query. Keys at positions >=
  `seq_length` are masked, so the logits of real positions do not depend on the padding.
  RNG streams: 'dropout' (when not deterministic) and 'noise' (randomized encodings, always).

  Attributes:
    vocab_size: V.
    num_classes: C.
    encoding: a name of `posenc.encodings` (or `input+attention`).
    num_layers, d_model, num_heads, ffn_size, dropout: the architecture.
    max_position: L: size of the learned table and range of randomized positions.
    causal: mask keys right of the query.
    encoding_options: hashable (key, value) pairs, e.g. (('relative_mode', 'reference'),).
    embedding_init_scale: σ of the token embedding's TruncNormal init (the reference's
      `emb_init_scale`, 0.02, applied to its one-hot Dense).
    attention_impl: the attention backend (`posenc.attention.IMPLS`); 'auto' picks by the
      default backend's platform when the model is built.
    attention_block: cpu_blocked runs sequences longer than this per head in query blocks
      of at most this many rows; 0 never splits.
    fused_implementation: xla_fused's `jax.nn.dot_product_attention` implementation (None:
      XLA; 'cudnn': cuDNN flash attention on NVIDIA GPUs, bf16/fp16).
    dtype: the computation dtype (float32 or bfloat16); attention weights and the softmax
      are float32 either way.
    param_dtype: the parameters' dtype.
  """
  vocab_size: int
  num_classes: int
  encoding: str
  num_layers: int = 5
  d_model: int = 64
  num_heads: int = 8
  ffn_size: int = 256
  dropout: float = 0.1
  max_position: int = 2048
  causal: bool = False
  encoding_options: tuple[tuple[str, Any], ...] = ()
  embedding_init_scale: float = 0.02
  attention_impl: str = 'auto'
  attention_block: int = 256
  fused_implementation: str | None = None
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, tokens: Array, seq_length: Array, *, deterministic: bool) -> Array:
    spec = encodings.get(self.encoding)
    attention_options, embedding_options = encodings.resolve_options(
        self.encoding, self.encoding_options)
    t = tokens.shape[1]
    if spec.randomized and t > self.max_position:
      raise ValueError(f'sequence length {t} exceeds max_position={self.max_position} of '
                       f'the randomized encoding {self.encoding!r}')
    types = {'dtype': self.dtype, 'param_dtype': self.param_dtype}
    x = nn.Embed(self.vocab_size + 1, self.d_model,
                 embedding_init=nn.initializers.truncated_normal(self.embedding_init_scale),
                 name='token_embed', **types)(tokens) * math.sqrt(self.d_model)
    if spec.embedding is not None:
      pos = spec.embedding(width=self.d_model, max_position=self.max_position,
                           **embedding_options, name='position_embed')(t, seq_length)
      # Dropout on the embeddings only for absolute encodings, as the reference.
      x = Dropout(self.dropout)(x + pos[None].astype(x.dtype), deterministic=deterministic)
    key_valid = jnp.arange(t) < seq_length
    args = AttentionArgs(spec, tuple(sorted(attention_options.items())), self.max_position,
                         attention.resolve(self.attention_impl), self.attention_block,
                         self.fused_implementation)
    for layer in range(self.num_layers):
      x = EncoderBlock(self.num_heads, self.ffn_size, self.dropout, args, **types,
                       name=f'layer_{layer}')(x, key_valid, self.causal, deterministic)
    return nn.Dense(self.num_classes, kernel_init=core.HAIKU_LINEAR_INIT, name='head',
                    **types)(x).astype(jnp.float32)


def init_rngs(key: Array) -> dict[str, Array]:
  """The RNG dict `Transformer.init` needs: {'params', 'noise', 'dropout'}."""
  k_params, k_noise, k_dropout = jax.random.split(key, 3)
  return {'params': k_params, 'noise': k_noise, 'dropout': k_dropout}


def num_params(model: Transformer, num_positions: int = 4) -> int:
  """Parameter count from shapes only (jax.eval_shape; nothing is allocated)."""
  tokens = jnp.zeros((1, num_positions), jnp.int32)
  shapes = jax.eval_shape(
      lambda key: model.init(init_rngs(key), tokens, jnp.int32(num_positions),
                             deterministic=True)['params'],
      jax.random.key(0))
  return sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes))


def empty_output_layout(inputs: Array, length: Array, output_length: Array,
                        max_output_length: int, query_id: int) -> tuple[Array, Array]:
  """The reference's "empty output tokens" layout, padded.

  Args:
    inputs: int32 [B, Lmax], 0 past `length`.
    length: int32 scalar L_in (traced is fine).
    output_length: int32 scalar O(L_in).
    max_output_length: Omax (static).
    query_id: the token id of the empty output query (V).

  Returns:
    (tokens int32 [B, Lmax + Omax], seq_length = length + output_length): the inputs, then
    O query tokens, packed contiguously from position 0, then zeros (masked as keys).

  Example (V = 2): inputs [[1, 0, 1, 0]], length 3, output_length 2, Omax 4 ->
    tokens [[1, 0, 1, 2, 2, 0, 0, 0]], seq_length 5.
  """
  b, l_max = inputs.shape
  positions = jnp.arange(l_max + max_output_length)
  padded = jnp.concatenate(
      [inputs.astype(jnp.int32), jnp.zeros((b, max_output_length), jnp.int32)], axis=1)
  seq_length = jnp.asarray(length + output_length, jnp.int32)
  tokens = jnp.where(positions < length, padded,
                     jnp.where(positions < seq_length, query_id, 0))
  return tokens.astype(jnp.int32), seq_length


def read_outputs(logits: Array, length: Array, max_output_length: int) -> Array:
  """logits[:, length : length + Omax]: the output positions (pad rows past O(L) included).

  Args:
    logits: [B, T, C] with T >= length + Omax.
    length: int32 scalar L_in.
    max_output_length: Omax (static).

  Returns:
    [B, Omax, C].
  """
  return jax.lax.dynamic_slice_in_dim(logits, length, max_output_length, axis=1)
