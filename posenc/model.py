"""The study's encoder transformer (Ruoss et al. 2023, as in their released code) in Flax Linen.

Post-LayerNorm, bidirectional by default, 5 × (d 64, 8 heads, FFN 256) and an output head on
every position. The positional encoding is picked by name from `posenc.encodings.ENCODINGS`;
the model only calls its hooks, so a new encoding needs no edit here.

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

import functools
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc import encodings

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
  (k0, k1) are the first two words of `jax.random.key_data(key)`. It replaces threefry
  bits (jax.random.bernoulli, ~40% of a training step): two cheap mixing rounds per
  element instead of 20 threefry rounds, fused into the consumer. Deterministic in `key`,
  vmappable over keys, and the drop probability is rate to within 2^-32.

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


def attention_blocks(num_heads: int, num_positions: int,
                     block: int) -> list[tuple[slice, slice]]:
  """The (heads, queries) blocks attention runs in: one block, or per head in query blocks.

  Sequences longer than `block` (> 0) run each head separately, in query blocks of at most
  `block` rows of near-equal size. Each block's [1, B, q, T] weights are made,
  exponentiated and consumed while they are in cache, and blocks are independent, so XLA
  runs them on all cores (or, for `Scores.sequential_heads`, one head after another): at
  T = 1,000 the [H, B, T, T] weights of a whole layer (32 MB per example) would stream
  through memory three times instead.

  Example: attention_blocks(2, 10, 4) -> head 0 and head 1 each with queries 0..2, 3..6,
    7..9; attention_blocks(2, 4, 4) -> [(slice(0, 2), slice(0, 4))].
  """
  if block <= 0 or num_positions <= block:
    return [(slice(0, num_heads), slice(0, num_positions))]
  num_blocks = -(-num_positions // block)
  bounds = [round(b * num_positions / num_blocks) for b in range(num_blocks + 1)]
  return [(slice(h, h + 1), slice(bounds[b], bounds[b + 1]))
          for h in range(num_heads) for b in range(num_blocks)]


class MultiHeadAttention(nn.Module):
  """q, k, v projections (no bias), encoding-specific weights, weights @ v, out projection."""
  num_heads: int
  make_attention: Callable[..., nn.Module]  # `Encoding.attention` with its options bound
  block: int = 0  # `attention_blocks`; 0: one block

  @nn.compact
  def __call__(self, x: Array, key_valid: Array, causal: bool) -> Array:
    b, t, d = x.shape
    head_dim = d // self.num_heads

    def project(name):  # -> [H, B, T, K], the layout of the attention hooks
      y = nn.Dense(d, use_bias=False, kernel_init=encodings.HAIKU_LINEAR_INIT, name=name)(x)
      return y.reshape(b, t, self.num_heads, head_dim).transpose(2, 0, 1, 3)

    q, k, v = project('query'), project('key'), project('value')
    scores = self.make_attention(name='encoding')(
        q, k, inputs=x, key_valid=key_valid, causal=causal)
    v = v.astype(jnp.float32)
    if scores.normalize:
      # A column of ones gives the row sums from the same product: no extra pass over
      # the weights.
      v = jnp.concatenate([v, jnp.ones((*v.shape[:-1], 1), v.dtype)], axis=-1)

    def attend(heads, queries):  # -> [h, B, q, K]
      out = jnp.einsum('hbij,hbjk->hbik', scores.weights(heads, queries),
                       encodings.take_heads(v, heads))
      if scores.normalize:
        out = out[..., :-1] / (out[..., -1:] + encodings.TINY)
      return out

    blocks = attention_blocks(self.num_heads, t, self.block)
    if scores.sequential_heads and len(blocks) > 1:
      # One head after another, its query blocks unrolled: see `Scores.sequential_heads`.
      per_head = [queries for heads, queries in blocks if heads.start == 0]
      out = jax.lax.map(
          lambda h: jnp.concatenate([attend(h, queries) for queries in per_head], axis=2)[0],
          jnp.arange(self.num_heads))
    else:
      rows = {}
      for heads, queries in blocks:
        rows.setdefault(heads.start, []).append(attend(heads, queries))
      out = jnp.concatenate([jnp.concatenate(r, axis=2) for r in rows.values()], axis=0)
    out = out.transpose(1, 2, 0, 3).reshape(b, t, d).astype(x.dtype)
    return nn.Dense(d, use_bias=False, kernel_init=encodings.HAIKU_LINEAR_INIT,
                    name='out')(out)


class EncoderBlock(nn.Module):
  """h = LN(h + Dropout(MHA(h))); h = LN(h + Dropout(FFN(h))): post-LN, as the reference."""
  num_heads: int
  ffn_size: int
  dropout: float
  make_attention: Callable[..., nn.Module]
  attention_block: int = 0

  @nn.compact
  def __call__(self, x, key_valid, causal, deterministic):
    d = x.shape[-1]
    a = MultiHeadAttention(self.num_heads, self.make_attention, self.attention_block,
                           name='attention')(x, key_valid, causal)
    x = nn.LayerNorm(epsilon=_LAYER_NORM_EPS)(
        x + Dropout(self.dropout)(a, deterministic=deterministic))
    f = nn.Dense(self.ffn_size, kernel_init=encodings.HAIKU_LINEAR_INIT)(x)
    f = nn.Dense(d, kernel_init=encodings.HAIKU_LINEAR_INIT)(nn.relu(f))
    return nn.LayerNorm(epsilon=_LAYER_NORM_EPS)(
        x + Dropout(self.dropout)(f, deterministic=deterministic))


class Transformer(nn.Module):
  """Encoder transformer: tokens [B, T] int32 -> logits [B, T, C].

  Token ids 0..V-1 are inputs and id V is the empty output query. Keys at positions >=
  `seq_length` are masked, so the logits of real positions do not depend on the padding.
  RNG streams: 'dropout' (when not deterministic) and 'noise' (randomized encodings, always).

  Attributes:
    vocab_size: V.
    num_classes: C.
    encoding: a name in `posenc.encodings.NAMES`.
    num_layers, d_model, num_heads, ffn_size, dropout: the architecture.
    max_position: L: size of the learned table and range of randomized positions.
    causal: mask keys right of the query.
    encoding_options: hashable (key, value) pairs, e.g. (('relative_mode', 'reference'),).
    embedding_init_scale: σ of the token embedding's TruncNormal init (the reference's
      `emb_init_scale`, 0.02, applied to its one-hot Dense).
    attention_block: sequences longer than this run attention per head in query blocks of
      at most this many rows (`attention_blocks`); 0 never splits. Same function, other
      float rounding order; speed only (long evaluation sequences).
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
  attention_block: int = 256

  @nn.compact
  def __call__(self, tokens: Array, seq_length: Array, *, deterministic: bool) -> Array:
    spec = encodings.get(self.encoding)
    attention_options, embedding_options = encodings.resolve_options(
        self.encoding, self.encoding_options)
    t = tokens.shape[1]
    if spec.randomized and t > self.max_position:
      raise ValueError(f'sequence length {t} exceeds max_position={self.max_position} of '
                       f'the randomized encoding {self.encoding!r}')
    x = nn.Embed(self.vocab_size + 1, self.d_model,
                 embedding_init=nn.initializers.truncated_normal(self.embedding_init_scale),
                 name='token_embed')(tokens) * math.sqrt(self.d_model)
    if spec.embedding is not None:
      pos = spec.embedding(width=self.d_model, max_position=self.max_position,
                           **embedding_options, name='position_embed')(t, seq_length)
      # Dropout on the embeddings only for absolute encodings, as the reference.
      x = Dropout(self.dropout)(x + pos[None].astype(x.dtype),
                                   deterministic=deterministic)
    key_valid = jnp.arange(t) < seq_length
    make_attention = functools.partial(spec.attention, max_position=self.max_position,
                                       **attention_options)
    for layer in range(self.num_layers):
      x = EncoderBlock(self.num_heads, self.ffn_size, self.dropout, make_attention,
                       self.attention_block, name=f'layer_{layer}')(
                           x, key_valid, self.causal, deterministic)
    return nn.Dense(self.num_classes, kernel_init=encodings.HAIKU_LINEAR_INIT,
                    name='head')(x)


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
