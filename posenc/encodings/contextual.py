"""Contextual position encoding (CoPE, Golovneva et al. 2024): positions that count what the
query attends to.

Query i gates every key t at or before it, g_it = σ(q_i·k_t / sqrt(K)), and the position of
key j is the number of gates open between them, a fractional count:

  p_ij = Σ_{t=j..i} g_it,   logits_ij = q_i·k_j / sqrt(K) + q_i·e[p_ij]

e is a learned table of `cope_positions` vectors per layer (head width, shared by the
heads; p is clamped to its last row) read by linear interpolation between e[⌊p⌋] and e[⌈p⌉].
The position term is not scaled by 1/sqrt(K), as in the paper's code. With every gate 1,
p_ij = i - j + 1: a relative position counted from the query (the query itself is 1).
Causal by definition: the count runs over the keys up to the query.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import papers

Array = jax.Array


def contextual_positions(gates: Array) -> Array:
  """p_ij = Σ_{t>=j} g_it over a row of gates that are 0 right of the query.

  Args:
    gates: [..., Q, S] in [0, 1], keys in sequence order.

  Returns:
    float32 [..., Q, S].

  Example: gates [[1, 0.5, 1, 0]] (query at index 2) -> [[2.5, 1.5, 1, 0]].
  """
  return jax.lax.cumsum(gates.astype(jnp.float32), axis=gates.ndim - 1, reverse=True)


def interpolate(table_logits: Array, positions: Array) -> Array:
  """z[⌊p⌋] (1 - w) + z[⌈p⌉] w with w = p - ⌊p⌋, read along the last axis.

  Args:
    table_logits: z [..., Q, P]: each query against every row of the table.
    positions: p [..., Q, S] in [0, P - 1].

  Returns:
    [..., Q, S].

  Example: z = [[0, 10, 20]], p = [[0.5, 2]] -> [[5, 20]].
  """
  floor = jnp.floor(positions)
  low = jnp.take_along_axis(table_logits, floor.astype(jnp.int32), axis=-1)
  high = jnp.take_along_axis(table_logits, jnp.ceil(positions).astype(jnp.int32), axis=-1)
  w = positions - floor
  return low * (1 - w) + high * w


def cope_bias(q: Array, k: Array, q_idx: Array, k_idx: Array, table: Array) -> Array:
  """q_i·e[p_ij], the CoPE term added to q·k / sqrt(K).

  Args:
    q: [B, Q, H, K]; k: [B, S, H, K], keys in sequence order.
    q_idx: int [Q] or [B, Q]; k_idx: int [S] or [B, S]: sequence indices.
    table: e [K, P].

  Returns:
    float32 [B, H, Q, S] (0 right of the query, which is masked).

  Example: with q = 0 every gate is 1/2 and the bias is 0.
  """
  q, k = q.astype(jnp.float32), k.astype(jnp.float32)
  at_or_before = k_idx[..., None, :] <= q_idx[..., :, None]  # [(B,) Q, S]
  at_or_before = at_or_before[:, None] if at_or_before.ndim == 3 else at_or_before
  logits = jnp.einsum('bqhk,bshk->bhqs', q, k) / math.sqrt(q.shape[-1])
  gates = jnp.where(at_or_before, jax.nn.sigmoid(logits), 0.0)
  positions = jnp.minimum(contextual_positions(gates), table.shape[-1] - 1)
  table_logits = jnp.einsum('bqhk,kp->bhqp', q, table.astype(jnp.float32))
  return jnp.where(at_or_before, interpolate(table_logits, positions), 0.0)


class ContextualEncoding(core.EncodingModule):
  """CoPE: one table e [K, cope_positions] per layer, initialised at zero (the paper's)."""

  cope_positions: int = 64

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del num_positions, length, inputs, deterministic
    core.check_causal(self, 'cope')
    table = self.param(
      'positions', nn.initializers.zeros, (self.head_dim, self.cope_positions), self.param_dtype
    )
    return core.AttentionEncoding(
      'cope',
      core.BIAS,
      bias=lambda q, k, qi, ki: cope_bias(q, k, qi, ki, table),
      params={'table': table},
    )


# A Linen module, not the helpers': its positions count the gates of q and k.
COPE = core.Encoding(
  core.BIAS,
  attention=ContextualEncoding,
  options={
    'cope_positions': declare.option(
      64,
      "CoPE's table rows (npos_max): contextual positions past the last read it",
      valid=declare.integer(1),
      must_be='an integer >= 1',
    )
  },
  causal_only=True,
  about='CoPE: a position counts the keys a learned gate lets through between key and query '
  '(contextual positions), read from a learned table by interpolation; causal by definition.',
  papers=(papers.GOLOVNEVA2024,),
)
