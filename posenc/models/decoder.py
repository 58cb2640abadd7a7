"""A causal decoder-only language model on the shared layers, with a KV cache for decoding.

Every encoding runs in its causal form (keys up to the query), and randomized encodings draw
one set of positions per sequence, for the sequence's real length. The same call serves
teacher forcing over whole sequences and one decoding step against a cache:

  >>> model = Decoder(vocab_size=8, encoding='randomized_rotary')
  >>> logits, cache = model.apply(variables, tokens, lengths, deterministic=True,  # doctest: +SKIP
  ...                             rngs={'noise': key})                     # [B, T, V]
  >>> logits, cache = model.apply(  # [B, 1, V]  # doctest: +SKIP
  ...   variables, next_tokens[:, None], q_idx + 1, q_idx=q_idx, cache=cache, num_positions=S,
  ...   deterministic=True, rngs={'noise': key})

`posenc.models.generate` builds greedy generation from it.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.models import encoder
from posenc.models import layers
from posenc.models import stack

Array = jax.Array


class Decoder(stack.Architecture):
  """Causal decoder: tokens [B, Q] -> next-token logits [B, Q, V] (float32), and the cache.

  Attributes (beyond `stack.Architecture`'s):
    vocab_size: V, every token (separators and end-of-sequence included).
    tie_embeddings: the output projection is the token embedding's transpose (one head).
    embedding_init_scale: σ of the token embedding's TruncNormal init.
  """

  vocab_size: int = 0
  tie_embeddings: bool = False
  embedding_init_scale: float = 0.02

  @nn.compact
  def __call__(
    self,
    tokens: Array,
    lengths: Array,
    *,
    deterministic: bool,
    q_idx: Array | None = None,
    cache: dict[str, Any] | None = None,
    num_positions: int | None = None,
    draw_length: Array | None = None,
    task: Array | None = None,
    recurrences: int | None = None,
    window: tuple[Array, Array] | None = None,
    context: Array | None = None,
  ) -> tuple[Array, dict[str, Any]]:
    """Next-token logits of the given tokens.

    Args:
      tokens: int [B, Q]: whole sequences (q_idx None) or the tokens of a decoding step.
      lengths: int [B]: each sequence's real length so far (keys at or past it are masked).
      deterministic: no dropout.
      q_idx: int [B, Q]: the given tokens' sequence indices, with `cache`.
      cache: the keys and values of earlier tokens, as returned ([B, S, H, K] per layer
        application); None over whole sequences.
      num_positions: S, the sequence length the encodings' draws cover (default: Q, or the
        cache's length); keep it the same for every call of one generation.
      draw_length: int [B]: the real length each sequence's randomized draw is made for
        (default `lengths`).
      task: int [B]: each example's output head.
      recurrences, window: see `stack.body`.
      context: int [B, S]: every token so far, with a cache, for encodings that read the
        sequence (Abacus); the given tokens must be written in it at their indices.

    Returns:
      (logits [B, Q, V], cache): the keys and values of every layer application for the
      given tokens (whole sequences) or the updated cache.
    """
    q = tokens.shape[1]
    lengths = jnp.broadcast_to(jnp.asarray(lengths), tokens.shape[:1])
    if num_positions is None:
      num_positions = q if cache is None else jax.tree.leaves(cache)[0].shape[-3]
    self.check_length(num_positions)
    types = {'dtype': self.dtype, 'param_dtype': self.param_dtype}
    embed = nn.Embed(
      self.vocab_size,
      self.d_model,
      embedding_init=nn.initializers.truncated_normal(self.embedding_init_scale),
      name='token_embed',
      **types,
    )
    keys = q if cache is None else num_positions
    key_valid = jnp.arange(keys)[None, :] < lengths[:, None]
    where = layers.Positions(
      key_valid=key_valid,
      q_idx=q_idx,
      draw_length=lengths if draw_length is None else draw_length,
      draw_positions=num_positions,
    )
    h, new_cache = stack.body(
      self,
      embed,
      tokens,
      where,
      causal=True,
      deterministic=deterministic,
      cache=cache,
      window=window,
      recurrences=recurrences,
      context=context,
    )
    if self.tie_embeddings:
      logits = embed.attend(h)
    else:
      logits = encoder.output_heads(h, task, self.vocab_size, self.num_outputs, **types)
    return logits.astype(jnp.float32), new_cache
