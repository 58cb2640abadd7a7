"""The study's encoder transformer (Ruoss et al. 2023, as in their released code) in Flax Linen.

Post-LayerNorm, bidirectional by default, 5 × (d 64, 8 heads, FFN 256) and an output head on
every position. The positional encoding is picked by name from `posenc.encodings`; the model
builds its modules and hands each layer's `AttentionEncoding` to `posenc.attention.attend`,
so a new encoding needs no edit here. The options of `stack.Architecture` (pre-LN, GELU-GLU,
a looped block with input injection, an attention temperature, several output heads) apply.

Example:
  >>> model = Encoder(vocab_size=2, num_classes=2, encoding='randomized_relative')
  >>> tokens, seq_length = empty_output_layout(  # doctest: +SKIP
  ...   inputs, length, output_length, max_out, 2)
  >>> params = model.init({'params': k1, 'noise': k2}, tokens, seq_length,  # doctest: +SKIP
  ...                     deterministic=True)['params']
  >>> logits = model.apply({'params': params}, tokens, seq_length, deterministic=True,
  ...                      rngs={'noise': k3})          # [B, T, C]  # doctest: +SKIP
  >>> outputs = read_outputs(logits, length, max_out)   # [B, O_max, C]  # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.models import layers
from posenc.models import stack

Array = jax.Array


def output_heads(
  h: Array, task: Array | None, num_classes: int, num_outputs: int, **types: Any
) -> Array:
  """Logits [B, T, C] of hidden states [B, T, D], made in the calling module's scope: one
  head (`head`, Dense C), or several (`heads`, kernel [D, n, C]), each example's picked by
  its task index [B], so one backbone serves several tasks."""
  if num_outputs == 1:
    return nn.Dense(num_classes, kernel_init=core.HAIKU_LINEAR_INIT, name='head', **types)(h)
  logits = nn.DenseGeneral(
    (num_outputs, num_classes), kernel_init=core.HAIKU_LINEAR_INIT, name='heads', **types
  )(h)
  task = jnp.zeros(h.shape[0], jnp.int32) if task is None else task
  return jnp.take_along_axis(logits, task[:, None, None, None], axis=2)[:, :, 0]


class Encoder(stack.Architecture):
  """Encoder transformer: tokens [B, T] int32 -> logits [B, T, C] (float32).

  Token ids 0..V-1 are inputs and id V is the empty output query. Keys at positions >=
  `seq_length` are masked, so the logits of real positions do not depend on the padding.
  RNG streams: 'dropout' (when not deterministic) and 'noise' (randomized encodings, always).
  Randomized encodings draw once per batch (the reference's protocol).

  Attributes (beyond `stack.Architecture`'s):
    vocab_size: V.
    num_classes: C.
    causal: mask keys right of the query.
    embedding_init_scale: σ of the token embedding's TruncNormal init (the reference's
      `emb_init_scale`, 0.02, applied to its one-hot Dense).
  """

  vocab_size: int = 0
  num_classes: int = 0
  causal: bool = False
  embedding_init_scale: float = 0.02

  @nn.compact
  def __call__(
    self,
    tokens: Array,
    seq_length: Array,
    *,
    deterministic: bool,
    task: Array | None = None,
    recurrences: int | None = None,
    window: tuple[Array, Array] | None = None,
  ) -> Array:
    """Logits of every position; `task` [B] picks each example's output head, `recurrences`
    and `window` run a looped block another number of times or in part (`stack.body`)."""
    t = tokens.shape[1]
    self.check_length(t)
    types = {'dtype': self.dtype, 'param_dtype': self.param_dtype}
    embed = nn.Embed(
      self.vocab_size + 1,
      self.d_model,
      embedding_init=nn.initializers.truncated_normal(self.embedding_init_scale),
      name='token_embed',
      **types,
    )
    key_valid = jnp.arange(t) < seq_length
    where = layers.Positions(
      key_valid=key_valid, q_idx=None, draw_length=jnp.asarray(seq_length), draw_positions=t
    )
    h, _ = stack.body(
      self,
      embed,
      tokens,
      where,
      causal=self.causal,
      deterministic=deterministic,
      window=window,
      recurrences=recurrences,
    )
    return output_heads(h, task, self.num_classes, self.num_outputs, **types).astype(jnp.float32)


def init_rngs(key: Array) -> dict[str, Array]:
  """The RNG dict `init` needs: {'params', 'noise', 'dropout'}."""
  k_params, k_noise, k_dropout = jax.random.split(key, 3)
  return {'params': k_params, 'noise': k_noise, 'dropout': k_dropout}


def num_params(model: Encoder, num_positions: int = 4) -> int:
  """Parameter count from shapes only (jax.eval_shape; nothing is allocated)."""
  tokens = jnp.zeros((1, num_positions), jnp.int32)
  shapes = jax.eval_shape(
    lambda key: model.init(init_rngs(key), tokens, jnp.int32(num_positions), deterministic=True)[
      'params'
    ],
    jax.random.key(0),
  )
  return sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes))


def empty_output_layout(
  inputs: Array, length: Array, output_length: Array, max_output_length: int, query_id: int
) -> tuple[Array, Array]:
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
    [inputs.astype(jnp.int32), jnp.zeros((b, max_output_length), jnp.int32)], axis=1
  )
  seq_length = jnp.asarray(length + output_length, jnp.int32)
  tokens = jnp.where(positions < length, padded, jnp.where(positions < seq_length, query_id, 0))
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
