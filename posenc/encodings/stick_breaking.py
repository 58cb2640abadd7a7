"""Stick-breaking attention (Tan et al. 2025): a softmax replacement with no positional encoding.

Query i visits its keys from the nearest earlier one backwards; key j takes the share
β_ij = σ(z_ij) of what the keys between them left over:

  A_ij = σ(z_ij) ∏_{j<t<i} (1 - σ(z_it)),   z_ij = q_i·k_j / sqrt(K),   j < i

so nearer keys are preferred without any position being given. A row sums to at most 1; its
remainder 1 - Σ_j A_ij goes to the query's own value (`stick_remainder='self'`, as the
authors' reference `o + rem·v_i`; their language model instead adds rem times a learned
per-head vector before a group norm) or nowhere ('none'). In log space, with
log(1 - σ(z)) = -softplus(z):

  log A_ij = log σ(z_ij) - Σ_{j<t<i} softplus(z_it)

one reverse cumulative sum per row: no loop over positions, no product that underflows.
NDR geometric attention (`geometric`) is its bidirectional relative: it visits keys on both
sides by distance. Causal by definition.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import papers

Array = jax.Array


STICK_REMAINDERS = ('self', 'none')


def stick_breaking_weights(
  scores: Array,
  q_pos: Array,
  k_pos: Array,
  visible: Array,
  attend_self: bool = False,
  remainder: str = 'self',
) -> Array:
  """A_ij = σ(z_ij) ∏_{j<t<i} (1 - σ(z_it)) over the visible keys before the query, the
  remainder of the row added to the query's own weight ('self') or dropped ('none').

  Args:
    scores: z [B, H, Q, S] (or any [..., Q, S] with unbatched positions), keys in sequence
      order.
    q_pos: int [Q]; k_pos: int [S] (or [B, Q], [B, S]): sequence indices.
    visible: bool, broadcastable to the scores: key j may be attended from query i.
    attend_self: the query is its own nearest key (j <= i; the stick is broken at the
      query first) instead of attending only to earlier keys (the authors' default).
    remainder: 'self' or 'none' (`STICK_REMAINDERS`).

  Returns:
    float32, the shape of the scores; rows sum to 1 ('self', for a visible query) or at
    most 1 ('none').

  Example (query 2, keys 0..2, every z = 0 so σ = 1/2): key 1 gets 1/2, key 0 gets 1/4,
    and the remainder 1/4 goes to the query itself: [1/4, 1/2, 1/4] ('none': [1/4, 1/2, 0]).
  """
  s = scores.astype(jnp.float32)
  offset = k_pos[..., None, :] - q_pos[..., :, None]
  offset = offset[:, None] if offset.ndim == 3 else offset
  earlier = jnp.broadcast_to(visible & ((offset <= 0) if attend_self else (offset < 0)), s.shape)
  log_not = jnp.where(earlier, -jax.nn.softplus(s), 0.0)  # log(1 - σ(z))
  # Σ over the keys after j (up to the query): a reverse cumulative sum without j itself.
  after = jax.lax.cumsum(log_not, axis=s.ndim - 1, reverse=True) - log_not
  weights = jnp.where(earlier, jnp.exp(jax.nn.log_sigmoid(s) + after), 0.0)
  if remainder == 'none':
    return weights
  itself = jnp.broadcast_to((offset == 0) & visible, s.shape)
  rest = 1.0 - jnp.sum(weights, axis=-1, keepdims=True)
  return weights + jnp.where(itself, rest, 0.0)


def stick_breaking_scores(q: Array, k: Array) -> Array:
  """z = q·k / sqrt(K): [B, Q, H, K] x [B, S, H, K] -> float32 [B, H, Q, S]."""
  return jnp.einsum('bqhk,bshk->bhqs', q.astype(jnp.float32), k.astype(jnp.float32)) / math.sqrt(
    q.shape[-1]
  )


class StickBreakingEncoding(core.EncodingModule):
  """Stick-breaking attention; no parameters (the logits are plain q·k / sqrt(K))."""

  stick_attend_self: bool = False
  stick_remainder: str = 'self'

  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del num_positions, length, inputs, deterministic
    core.check_causal(self, 'stick_breaking')
    if self.stick_remainder not in STICK_REMAINDERS:
      raise ValueError(
        f'unknown stick_remainder {self.stick_remainder!r}; valid: {", ".join(STICK_REMAINDERS)}'
      )
    attend_self, remainder = self.stick_attend_self, self.stick_remainder
    return core.AttentionEncoding(
      'stick_breaking',
      core.GEOMETRIC,
      params={'attend_self': attend_self, 'remainder': remainder},
      scores=lambda q, k, qi, ki: stick_breaking_scores(q, k),
      weights=lambda s, qi, ki, visible: stick_breaking_weights(
        s, qi, ki, visible, attend_self, remainder
      ),
      normalize=False,
    )


# A Linen module, not the helpers': it checks the mask and names its options after the
# weights' arguments (its backends read them).
STICK_BREAKING = core.Encoding(
  core.GEOMETRIC,
  attention=StickBreakingEncoding,
  options={
    'stick_attend_self': declare.option(
      False,
      'the query may attend to itself (its stick is broken first)',
      valid=declare.boolean,
      must_be='True or False',
    ),
    'stick_remainder': declare.option(
      'self',
      "where a row's remainder goes: the query's own value or nowhere",
      valid=STICK_REMAINDERS,
    ),
  },
  causal_only=True,
  about='Stick-breaking attention: from the nearest key backwards, each key takes a share (the '
  'sigmoid of its logit) of the weight still left; it replaces the softmax and needs no '
  'positions; causal by definition.',
  papers=(papers.TAN2025,),
)
