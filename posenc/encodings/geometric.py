"""Geometric attention of the Neural Data Router (Csordás et al. 2022): a softmax replacement."""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import papers

Array = jax.Array


def geometric_weights(scores: Array, q_pos: Array, k_pos: Array, visible: Array) -> Array:
  """Stick-breaking over keys by distance: the nearest key that says yes takes the query.

  Keys are visited from the nearest outwards, the right one first on ties; key j is chosen
  with probability P_ij = σ(s_ij) provided no key visited before it was::

    A_ij = P_ij · Π_{k visited before j} (1 - P_ik).

  The query itself and invisible keys are never chosen. Rows sum to at most 1; the rest is
  "attend to nothing".

  Args:
    scores: s [B, H, Q, S] (or any [..., Q, S] with unbatched positions).
    q_pos: int [Q]; k_pos: int [S] (or [B, Q], [B, S]).
    visible: bool, broadcastable to the scores: key j may be attended from query i.

  Returns:
    float32, the shape of the scores.

  Example (one query at 1, keys 0..2, all s = 0 so P = 1/2): the right key 2 is visited
    first and gets 1/2, the left key 0 gets 1/2 · (1 - 1/2) = 1/4: [1/4, 0, 1/2].
  """
  s = scores.astype(jnp.float32)
  offset = _per_head(k_pos[..., None, :] - q_pos[..., :, None])
  rank = 2 * jnp.abs(offset) - (offset > 0)  # visiting order; 0 is the query itself
  valid = jnp.broadcast_to(visible & (rank > 0), s.shape)
  log_not_p = jnp.where(valid, -jax.nn.softplus(s), 0.0)  # log(1 - σ(s)) = -softplus(s)
  order = jnp.broadcast_to(jnp.argsort(rank, axis=-1), s.shape)
  visited = jnp.take_along_axis(log_not_p, order, axis=-1)
  before = jnp.cumsum(visited, axis=-1) - visited  # keys visited earlier, in visiting order
  closer = jnp.take_along_axis(before, jnp.argsort(order, axis=-1), axis=-1)
  return jnp.where(valid, jnp.exp(s + log_not_p + closer), 0.0)  # log σ(s) = s - softplus(s)


def _per_head(x: Array) -> Array:
  """[Q, S] unchanged; [B, Q, S] (per sequence) -> [B, 1, Q, S], to meet [B, H, Q, S]."""
  return x if x.ndim == 2 else x[:, None]


def geometric_scores(
  q: Array,
  k: Array,
  q_pos: Array,
  k_pos: Array,
  *,
  u: Array,
  gamma: Array,
  s0: Array,
  direction: Array | None = None,
) -> Array:
  """The logits of geometric attention: s_ij = γ (q_i + u)·k_j + s0 [+ β_i^← or β_i^→].

  Args:
    q: [B, Q, H, K]; k: [B, S, H, K]; q_pos: int [Q]; k_pos: int [S] (or [B, Q], [B, S]).
    u: [H, K]; gamma, s0: scalars.
    direction: optional [B, Q, H, 2]: the directional encoding (β^←, β^→) of each query,
      added for keys left and right of it.

  Returns:
    float32 [B, H, Q, S].

  Example: with q = k = 0 and no direction every score is s0.
  """
  q, k = q.astype(jnp.float32), k.astype(jnp.float32)
  s = gamma * jnp.einsum('bqhk,bshk->bhqs', q + u, k) + s0
  if direction is not None:
    beta = direction.astype(jnp.float32).transpose(0, 2, 1, 3)  # [B, H, Q, 2]
    left = _per_head(k_pos[..., None, :] < q_pos[..., :, None])
    s = s + jnp.where(left, beta[..., :1], beta[..., 1:])
  return s


class GeometricEncoding(core.EncodingModule):
  """NDR geometric attention (no gating, no shared layers); optional directional encoding.

  Parameters: u [H, K] (init 0), γ (init 1/sqrt(K)), s0 (init 0); with `directional`:
  (β^←, β^→) = ρ·(W_p h_i + b_p) per head from the layer input h, W_p: Dense(2H), ρ (init 1).
  """

  directional: bool = False
  geometric_normalize: bool = False

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del num_positions, length, deterministic
    h, d = self.num_heads, self.head_dim
    u = self.param('u', nn.initializers.zeros, (h, d), self.param_dtype)
    gamma = self.param('gamma', nn.initializers.constant(1 / math.sqrt(d)), (), self.param_dtype)
    s0 = self.param('s0', nn.initializers.zeros, (), self.param_dtype)
    direction = None
    if self.directional:
      rho = self.param('rho', nn.initializers.ones, (), self.param_dtype)
      direction = rho * nn.Dense(
        2 * h, kernel_init=core.HAIKU_LINEAR_INIT, param_dtype=self.param_dtype, name='direction'
      )(inputs)
      direction = direction.reshape(*direction.shape[:2], h, 2)  # [B, T, H, 2]

    def scores(q, k, qi, ki):  # the queries are those of `inputs`, in order
      return geometric_scores(q, k, qi, ki, u=u, gamma=gamma, s0=s0, direction=direction)

    return core.AttentionEncoding(
      'geometric',
      core.GEOMETRIC,
      scores=scores,
      weights=geometric_weights,
      normalize=self.geometric_normalize,
      params={'u': u, 'gamma': gamma, 's0': s0, 'direction': direction},
    )


# A Linen module, not the helpers': its scores are its own and the directional variant
# reads the layer input.
_NORMALIZE = {
  'geometric_normalize': declare.option(
    False,
    'divide the weights by their row sums (rows sum to at most 1 otherwise)',
    valid=declare.boolean,
    must_be='True or False',
  )
}
GEOMETRIC = core.Encoding(
  core.GEOMETRIC,
  attention=GeometricEncoding,
  options=_NORMALIZE,
  about="The Neural Data Router's geometric attention: a query takes the nearest key that "
  'matches, scanning outwards from itself; it replaces the softmax.',
  papers=(papers.CSORDAS2022,),
)
GEOMETRIC_DIRECTIONAL = core.Encoding(
  core.GEOMETRIC,
  attention=functools.partial(GeometricEncoding, directional=True),
  options=_NORMALIZE,
  about='Geometric attention with a directional encoding: the match also sees whether a key '
  'is left or right of the query.',
  papers=(papers.CSORDAS2022,),
)
