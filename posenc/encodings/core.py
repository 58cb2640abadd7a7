"""What an attention encoding hands to the attention function, and shared initializers.

Letters: B batch, Q queries, S keys, T sequence length (static; a padded batch has T = its
maximum), H heads, K head width, D model width (= H * K), L the range of randomized
positions (`max_position`). q_idx [Q] and k_idx [S] are int32 indices of queries and keys in
the sequence: arange(T) for both over a whole sequence, [t] against arange(t + 1) for one
decoding step at t.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array

# Haiku's default `hk.Linear` init: TruncatedNormal(1/sqrt(fan_in)) cut at 2 sigma, no
# variance correction. 0.87962566...² undoes variance_scaling's correction exactly.
HAIKU_LINEAR_INIT = nn.initializers.variance_scaling(
  0.87962566103423978**2, 'fan_in', 'truncated_normal'
)

# The four kinds of positional encoding (`Encoding.kind`). GEOMETRIC is every replacement of
# the softmax (NDR geometric attention, stick-breaking), named after the first one here.
EMBEDDING, ROTATION, BIAS, GEOMETRIC = 'embedding', 'rotation', 'bias', 'geometric'
# Attention without a positional encoding (content only).
CONTENT = 'content'


@dataclasses.dataclass(frozen=True)
class AttentionEncoding:
  """One layer's attention encoding: its parameters and draws, bound into pure functions.

  Attributes:
    family: the encoding function it calls ('content', 'rotary', 'alibi', 'relative',
      'geometric', ...); backends may key a faster equivalent on it.
    kind: CONTENT, ROTATION, BIAS or GEOMETRIC.
    rotate: ROTATION: (x [B, T', H, K], idx [T']) -> x rotated to the positions of idx
      ([B, T', H, K'], K' >= K: PoPE's are twice as wide as v).
    rotate_keys: ROTATION: the keys' rotation where it differs from the queries' (None:
      `rotate`).
    bias: BIAS: (q [B, Q, H, K], k [B, S, H, K], q_idx, k_idx) -> [B or 1, H, Q, S], added
      to the logits q·k / sqrt(K).
    scores: GEOMETRIC: (q, k, q_idx, k_idx) -> s [B, H, Q, S], the logits of the keys.
    weights: GEOMETRIC: (s, q_idx, k_idx, visible [.., Q, S] bool) -> [B, H, Q, S], the
      attention weights that replace softmax(s).
    normalize: GEOMETRIC: divide the weights by their row sums.
    params: the parameters and draws behind the functions, by name (for backends).
    key_state: features of the given tokens [B, Q, H, X] that the functions need for every
      key (e.g. the Forgetting Transformer's gates), by name: the model caches them next
      to the keys and values and calls `with_keys` with the state of all the keys.
    with_keys: (state of every key {name: [B, S, H, X]}) -> the encoding bound to it.
  """

  family: str
  kind: str
  rotate: Callable[[Array, Array], Array] | None = None
  rotate_keys: Callable[[Array, Array], Array] | None = None
  bias: Callable[[Array, Array, Array, Array], Array] | None = None
  scores: Callable[[Array, Array, Array, Array], Array] | None = None
  weights: Callable[[Array, Array, Array, Array], Array] | None = None
  normalize: bool = True
  params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  key_state: Mapping[str, Array] = dataclasses.field(default_factory=dict)
  with_keys: Callable[[Mapping[str, Array]], 'AttentionEncoding'] | None = None

  def rotated(self, q: Array, k: Array, q_idx: Array, k_idx: Array) -> tuple[Array, Array]:
    """ROTATION: (q, k) rotated to the positions of q_idx and k_idx."""
    return self.rotate(q, q_idx), (self.rotate_keys or self.rotate)(k, k_idx)


@dataclasses.dataclass(frozen=True)
class Encoding:
  """How the model builds one encoding.

  Attributes:
    kind: core.EMBEDDING, ROTATION, BIAS, GEOMETRIC or CONTENT (no encoding); for a
      combination, its attention part's kind.
    embedding: optional module factory `(width=, max_position=, **options)`, called once
      per forward pass as `module(num_positions, length) -> [T, D]`; the model adds it to
      the token embeddings and applies dropout.
    attention: optional module factory `(max_position=, num_heads=, head_dim=,
      param_dtype=, **options)`, called per layer as `module(num_positions, length,
      inputs) -> AttentionEncoding` with the layer input [B, T, D]. None: content only.
    embedding_options, attention_options: the names of `encoding_options` each part takes.
    randomized: draws from the 'noise' RNG stream (at evaluation too).
    reads_digits: reads which tokens are digits (the task's `digit_ids`): a task without
      digits cannot use it.
    learned_table: positions index a learned table of `max_position` rows.
    even_head_dim: rotates pairs of coordinates: the head width must be even.
    test_options: options of its attention part that change it at test time only (the
      knobs of `posenc.interventions`, neutral by default): passed when given, and not
      recorded among a run's options otherwise.
    causal_only: causal by definition (it counts, gates or breaks the keys up to the
      query): only a causal model (the decoder) can use it.
  """

  kind: str
  embedding: Callable[..., Any] | None = None
  attention: Callable[..., Any] | None = None
  embedding_options: tuple[str, ...] = ()
  attention_options: tuple[str, ...] = ()
  randomized: bool = False
  reads_digits: bool = False
  learned_table: bool = False
  even_head_dim: bool = False
  test_options: tuple[str, ...] = ()
  causal_only: bool = False

  @property
  def bounded(self) -> bool:
    """Sequences longer than `max_position` cannot be encoded: positions are drawn from
    {0..max_position-1}, or index a table of that many rows."""
    return self.randomized or self.learned_table


def with_batch(x: Array) -> Array:
  """[H, Q, S] -> [1, H, Q, S]; [B, H, Q, S] unchanged."""
  return x if x.ndim == 4 else x[None]


class Kernel(nn.Module):
  """A weight matrix stored as nn.Dense stores it (`name/kernel`), for an encoding function
  that takes its product itself."""

  shape: tuple[int, ...]
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self) -> Array:
    return self.param('kernel', HAIKU_LINEAR_INIT, self.shape, self.param_dtype)


class EncodingModule(nn.Module):
  """Base of the attention encodings' modules: the sizes the model gives every one of them.

  Subclasses are called per layer as `module(num_positions, length, inputs) ->
  AttentionEncoding`, with T = num_positions (static, the length its draws cover), the
  traced number of real positions and the layer input of the queries [B, Q, D] (the whole
  sequence, or the tokens of one decoding step).
  """

  max_position: int = 2048
  num_heads: int = 8
  head_dim: int = 8
  param_dtype: Any = jnp.float32
  causal: bool = False  # the model's: keys right of a query are masked


def check_causal(module: EncodingModule, name: str) -> None:
  """ValueError unless `module` runs under a causal mask (for encodings causal by definition)."""
  if not module.causal:
    raise ValueError(
      f'encoding {name!r} is causal by definition and needs a causal model (model.family=decoder)'
    )
