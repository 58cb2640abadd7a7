"""Forgetting attention (Lin et al. 2025, the Forgetting Transformer): a data-dependent ALiBi.

Each token l writes a forget gate f_l = σ(w_h·x_l + b_h) per head h from the attention
layer's input x_l, and query i discounts key j by every gate between them:

  logits_ij = q_i·k_j / sqrt(K) + Σ_{l=j+1..i} log f_l          (j <= i)

With F_t = Σ_{l<=t} log f_l this is F_i - F_j: one cumulative sum per sequence. The model
has no other positional encoding. Causal by definition (the gates of the tokens between
key and query). A constant gate f is ALiBi with slope -log f.
"""

from __future__ import annotations

from typing import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import papers

Array = jax.Array


def forgetting_bias(log_forget: Array, q_idx: Array, k_idx: Array) -> Array:
  """Σ_{l=j+1..i} log f_l for query i and key j <= i (0 right of the query, which is masked).

  Computed as F_i - F_j with F the cumulative sum of log f over the sequence, so one
  decoding step reads the cumulative gates of its cached keys.

  Args:
    log_forget: log f [B, S, H] (<= 0) of the tokens at sequence indices 0..S-1.
    q_idx: int [Q] or [B, Q]; k_idx: int [S'] or [B, S']: indices into 0..S-1.

  Returns:
    float32 [B, H, Q, S'].

  Example (one head, log f = [a, b, c] at indices 0, 1, 2): the row of query 2 is
    [b + c, c, 0].
  """
  cum = jnp.cumsum(log_forget.astype(jnp.float32), axis=1)  # F [B, S, H]
  b = cum.shape[0]
  qi = jnp.broadcast_to(q_idx, (b, q_idx.shape[-1]))
  ki = jnp.broadcast_to(k_idx, (b, k_idx.shape[-1]))
  at_q = jnp.take_along_axis(cum, qi[..., None], axis=1).transpose(0, 2, 1)  # [B, H, Q]
  at_k = jnp.take_along_axis(cum, ki[..., None], axis=1).transpose(0, 2, 1)  # [B, H, S']
  left = ki[:, None, None, :] <= qi[:, None, :, None]
  return jnp.where(left, at_q[..., :, None] - at_k[..., None, :], 0.0)


class ForgettingEncoding(core.EncodingModule):
  """The forget gates of one layer: Dense(H) with a bias on the attention's input (after
  the norm in a pre-LN block), log-sigmoid in float32.

  Initialised as the authors' code: kernel ~ N(0, 0.02), bias `forget_bias_init` (0: f ≈ 1/2
  before training). The log f of each token is cached with its key and value (`key_state`),
  so a decoding step reads F of every cached key. FoX's "Pro" extras (output gate, QK-norm,
  key and value shifts) belong to its block, not to its positional treatment, and are not here.
  """

  forget_bias_init: float = 0.0

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del num_positions, length, deterministic
    core.check_causal(self, 'forgetting')
    gate = nn.Dense(
      self.num_heads,
      kernel_init=nn.initializers.normal(0.02),
      bias_init=nn.initializers.constant(self.forget_bias_init),
      param_dtype=self.param_dtype,
      name='forget_gate',
    )(inputs)
    log_forget = jax.nn.log_sigmoid(gate.astype(jnp.float32))[..., None]  # [B, Q, H, 1]

    def with_keys(state: Mapping[str, Array]) -> core.AttentionEncoding:
      every = state['log_forget'][..., 0]  # [B, S, H]
      return core.AttentionEncoding(
        'forgetting',
        core.BIAS,
        bias=lambda q, k, qi, ki: forgetting_bias(every, qi, ki),
        params={'log_forget': every},
      )

    return core.AttentionEncoding(
      'forgetting', core.BIAS, key_state={'log_forget': log_forget}, with_keys=with_keys
    )


# A Linen module, not the helpers': its gates read the layer input and are cached with the
# keys (`key_state`).
FORGETTING = core.Encoding(
  core.BIAS,
  attention=ForgettingEncoding,
  options={
    'forget_bias_init': declare.option(
      0.0,
      "the forget gate's bias at initialization (0: f = 1/2 before training)",
      valid=declare.number(),
      must_be='a number',
    )
  },
  causal_only=True,
  about='Forgetting attention (FoX): each token has a learned forget gate, and a key\'s logit '
  'is lowered by the log gates of the tokens after it up to the query: a data-dependent '
  'ALiBi; causal by definition.',
  papers=(papers.LIN2025,),
)
