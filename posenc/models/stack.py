"""The body every model family shares: embeddings and a stack of layers, plain or looped.

A plain stack applies L layers once (`layer_0..`). A looped stack (McLeish et al. 2024)
applies a block of L distinct layers (`block/layer_0..`) R times with shared weights, in a
`nn.scan` (compile time independent of R). With input injection the stack starts from zeros
and the embedded input e is added to the hidden state entering every layer ('layer') or
every application of the block ('block'); without it the stack starts from e, so a looped
L x 1 model without injection is the plain L-layer model. A recurrence window (start, stop)
runs recurrences start..stop-1 only, the earlier ones without gradient (the progressive
loss of Bansal et al. 2022).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc import attention
from posenc import encodings
from posenc.encodings import randomized
from posenc.models import layers

Array = jax.Array

INJECTIONS = ('none', 'layer', 'block')


class Recurrence(nn.Module):
  """One application of the looped block: `num_layers` layers, for `nn.scan` over R."""

  num_layers: int
  num_heads: int
  ffn_size: int
  dropout: float
  args: layers.AttentionArgs
  norm: str
  ffn: str
  injection: str
  causal: bool
  deterministic: bool
  dtype: Any
  param_dtype: Any

  @nn.compact
  def __call__(self, x: Array, r: Array, cache: dict[str, Any], shared: tuple) -> tuple:
    e, where, start, stop = shared
    # Gradients reach only recurrences start.. (earlier ones feed a constant).
    x = jnp.where((r == start) & (start > 0), jax.lax.stop_gradient(x), x)
    h, caches = x, {}
    for i in range(self.num_layers):
      if self.injection == 'layer' or (self.injection == 'block' and i == 0):
        h = h + e
      h, caches[f'layer_{i}'] = layers.Block(
        self.num_heads,
        self.ffn_size,
        self.dropout,
        self.args,
        self.norm,
        self.ffn,
        self.dtype,
        self.param_dtype,
        name=f'layer_{i}',
      )(h, where, self.causal, self.deterministic, cache.get(f'layer_{i}'))
    return jnp.where(r < stop, h, x), caches


class Architecture(nn.Module):
  """The fields every model family shares, and what they resolve to.

  Attributes:
    encoding: the encoding as the run parsed it (`posenc.encodings.Parsed`: its record and
      resolved options); or, for a model built outside a run, a name of `posenc.encodings`
      (or `input+attention`) parsed with `encoding_options`.
    num_layers: L, the distinct layers (of the looped block if recurrences > 1).
    d_model, num_heads, ffn_size, dropout: the sizes.
    max_position: L_max: size of the learned table and range of randomized positions.
    encoding_options: with an encoding by name, its options: hashable (key, value) pairs,
      e.g. (('relative_mode', 'reference'),).
    norm: 'post' (the study's) or 'pre' (with a final LayerNorm).
    ffn: 'relu' or 'gelu_glu'.
    recurrences: R, applications of the block of L layers (1: a plain stack).
    injection: 'none', 'layer' or 'block' (see the module docstring).
    loop: build the looped block structure even at R = 1 without injection.
    attention_impl: the attention backend (`posenc.attention.IMPLS`); 'auto' picks by the
      default backend's platform when the model is built.
    attention_block: cpu_blocked runs sequences longer than this per head in query blocks.
    fused_implementation: xla_fused's `jax.nn.dot_product_attention` implementation.
    temperature, temperature_beta: the attention temperature β ln(n) ('none', 'fixed',
      'learned'; `layers.AttentionArgs`).
    num_outputs: output heads, picked per example by a task index (one shared backbone).
    dtype, param_dtype: computation and parameter dtypes.
  """

  encoding: encodings.Parsed | str = 'none'
  num_layers: int = 5
  d_model: int = 64
  num_heads: int = 8
  ffn_size: int = 256
  dropout: float = 0.1
  max_position: int = 2048
  encoding_options: tuple[tuple[str, Any], ...] = ()
  norm: str = 'post'
  ffn: str = 'relu'
  recurrences: int = 1
  injection: str = 'none'
  attention_impl: str = 'auto'
  attention_block: int = 256
  fused_implementation: str | None = None
  temperature: str = 'none'
  temperature_beta: float = 1.0
  num_outputs: int = 1
  loop: bool = False
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @property
  def looped(self) -> bool:
    """The block structure (`block/layer_i`, any R): asked for, R > 1 or input injection."""
    return self.loop or self.recurrences > 1 or self.injection != 'none'

  @property
  def parsed(self) -> encodings.Parsed:
    """The encoding and its resolved options: the run's, or parsed from a name."""
    if isinstance(self.encoding, encodings.Parsed):
      return self.encoding
    return encodings.parse(self.encoding, self.encoding_options)

  @property
  def attention_args(self) -> layers.AttentionArgs:
    parsed = self.parsed
    return layers.AttentionArgs(
      parsed.spec,
      tuple(sorted(parsed.attention)),
      self.max_position,
      attention.resolve(self.attention_impl),
      self.attention_block,
      self.fused_implementation,
      self.temperature,
      self.temperature_beta,
    )

  def check_length(self, num_positions: int) -> None:
    parsed = self.parsed
    if parsed.spec.randomized and num_positions > self.max_position:
      raise ValueError(
        f'sequence length {num_positions} exceeds max_position='
        f'{self.max_position} of the randomized encoding {parsed.name!r}'
      )


def body(
  model: Architecture,
  embed: nn.Embed,
  tokens: Array,
  where: layers.Positions,
  *,
  causal: bool,
  deterministic: bool,
  cache: dict[str, Any] | None = None,
  window: tuple[Array, Array] | None = None,
  recurrences: int | None = None,
  context: Array | None = None,
) -> tuple[Array, dict[str, Any]]:
  """Embeddings and layers, created in `model`'s scope: tokens [B, Q] -> hidden [B, Q, D].

  Args:
    model: the calling model (its fields give the architecture).
    embed: its token embedding.
    tokens: int [B, Q]: the whole sequence, or the tokens of one decoding step.
    where: their positions (`layers.Positions`).
    causal: queries see no key to their right.
    deterministic: no dropout.
    cache: the keys and values of a decoding step (as returned); None over a whole sequence.
    window: (start, stop) recurrences to run (default all; looped stacks only).
    recurrences: R for this call (default `model.recurrences`; may differ at evaluation).
    context: int [B, S]: every token of the sequences so far, for input encodings that
      read the tokens (Abacus); default `tokens` (a whole sequence).

  Returns:
    The hidden states and the keys and values of every layer application (the new cache).
  """
  x = embed(tokens) * math.sqrt(model.d_model)
  if model.parsed.spec.embedding is not None:
    x = _add_positions(model, x, tokens, where, deterministic, context)
  if model.looped:
    x, new_cache = _looped_layers(
      model, x, where, causal, deterministic, cache, window, recurrences
    )
  else:
    if recurrences not in (None, 1):
      raise ValueError(
        f'recurrences={recurrences} needs a looped model (loop=True, '
        'recurrences > 1 or input injection)'
      )
    args, new_cache = model.attention_args, {}
    for i in range(model.num_layers):
      x, new_cache[f'layer_{i}'] = layers.Block(
        model.num_heads,
        model.ffn_size,
        model.dropout,
        args,
        model.norm,
        model.ffn,
        dtype=model.dtype,
        param_dtype=model.param_dtype,
        name=f'layer_{i}',
      )(x, where, causal, deterministic, None if cache is None else cache[f'layer_{i}'])
  if model.norm == 'pre':
    x = nn.LayerNorm(
      epsilon=layers.LAYER_NORM_EPS,
      dtype=model.dtype,
      param_dtype=model.param_dtype,
      name='final_norm',
    )(x)
  return x, new_cache


def _add_positions(
  model: Architecture,
  x: Array,
  tokens: Array,
  where: layers.Positions,
  deterministic: bool,
  context: Array | None,
) -> Array:
  """x [B, Q, D] plus the input encoding's vectors of the queries' positions (then dropout,
  for absolute encodings only, as the reference); created in `model`'s scope."""
  parsed = model.parsed
  table = parsed.spec.embedding(
    width=model.d_model,
    max_position=model.max_position,
    **dict(parsed.embedding),
    name='position_embed',
  )(where.draw_positions, where.draw_length, tokens if context is None else context, deterministic)
  q_idx = jnp.arange(tokens.shape[1]) if where.q_idx is None else where.q_idx
  pos = randomized.lookup(table, q_idx, 1) if table.ndim == 3 else table[q_idx]
  pos = pos if pos.ndim == 3 else pos[None]
  return layers.Dropout(model.dropout)(x + pos.astype(x.dtype), deterministic=deterministic)


def _looped_layers(
  model: Architecture,
  x: Array,
  where: layers.Positions,
  causal: bool,
  deterministic: bool,
  cache: dict[str, Any] | None,
  window: tuple[Array, Array] | None,
  recurrences: int | None,
) -> tuple[Array, dict[str, Any]]:
  """The looped stack: one block of layers scanned over the recurrences of `window` (its
  parameters shared), with input injection; created in `model`'s scope."""
  r_total = recurrences or model.recurrences
  start, stop = (0, r_total) if window is None else window
  start, stop = jnp.asarray(start, jnp.int32), jnp.asarray(stop, jnp.int32)
  scan = nn.scan(
    Recurrence,
    variable_broadcast='params',
    split_rngs={'params': False, 'dropout': True, 'noise': True},
    in_axes=(0, 0, nn.broadcast),
    length=r_total,
  )
  x0 = jnp.zeros_like(x) if model.injection != 'none' else x
  out, block_cache = scan(
    model.num_layers,
    model.num_heads,
    model.ffn_size,
    model.dropout,
    model.attention_args,
    model.norm,
    model.ffn,
    model.injection,
    causal,
    deterministic,
    model.dtype,
    model.param_dtype,
    name='block',
  )(x0, jnp.arange(r_total), {} if cache is None else cache['block'], (x, where, start, stop))
  return out, {'block': block_cache}
