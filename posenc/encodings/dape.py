"""Data-adaptive positional encoding (DAPE, Zheng et al. 2024) and DAPE-V2 (Zheng et al. 2025):
a base bias corrected by a small network that reads the attention scores themselves.

With A = q·k / sqrt(K) and B a base bias (ALiBi, KERPLE or FIRE), both [B, H, Q, S]:

  DAPE:     logits = A + B + f([A; B])      f: Linear 2H -> F, LeakyReLU, Linear F -> H,
                                            at every (query, key) pair alone
  DAPE-V2:  logits = A + B + g([A; B])      g: the same with 1x3 convolutions along the
                                            keys (zero-padded), so each score also reads
                                            its neighbours j - 1 and j + 1

as the authors' code (channels [A; B], F = `dape_hidden` = 32, LeakyReLU slope 0.01,
PyTorch's default initialisation, one network per layer). f is pointwise, so it is causal
wherever A and B are. g reads neighbouring keys: as in the authors' code the scores of keys
right of the query are zeroed before it (so nothing leaks from them); the scores and hidden
features of padding keys are zeroed too, so a padded sequence gives its unpadded logits, and
a pass that ends before the sequence's real keys do (a generation's prompt pass) reads the
hidden features of the key after its last as the whole sequence does (`dape_v2_bias`). The
base bias is its registry encoding's module at its default options (`dape_base`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import biases
from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import families
from posenc.encodings import papers

Array = jax.Array

# The base biases' module factories (each at its default options).
DAPE_BASES: dict[str, Any] = {
  'alibi': biases.ALIBI.attention,
  'kerple_log': families.record('kerple_log').attention,
  'fire': biases.FIRE.attention,
}


def dape_features(q: Array, k: Array, base: Array) -> Array:
  """[A; B] with A = q·k / sqrt(K): [B, Q, H, K] x [B, S, H, K], B [B or 1, H, Q, S] ->
  float32 [B, Q, S, 2H] (the heads last, the channels of f)."""
  a = jnp.einsum('bqhk,bshk->bqsh', q.astype(jnp.float32), k.astype(jnp.float32)) / math.sqrt(
    q.shape[-1]
  )
  b = jnp.broadcast_to(base.astype(jnp.float32).transpose(0, 2, 3, 1), a.shape)
  return jnp.concatenate([a, b], axis=-1)


def dape_bias(q: Array, k: Array, base: Array, w1: Array, b1: Array, w2: Array, b2: Array) -> Array:
  """B + f([A; B]), f(x) = W2 LeakyReLU(W1 x + b1) + b2, per (query, key) pair.

  Args:
    q: [B, Q, H, K]; k: [B, S, H, K].
    base: B [B or 1, H, Q, S], the base bias.
    w1: [2H, F]; b1: [F]; w2: [F, H]; b2: [H].

  Returns:
    float32 [B, H, Q, S], added to A = q·k / sqrt(K).

  Example: with w2 = 0 and b2 = 0 (f = 0) the result is the base bias.
  """
  x = dape_features(q, k, base)
  f = jax.nn.leaky_relu(x @ w1.astype(jnp.float32) + b1) @ w2.astype(jnp.float32) + b2
  return base.astype(jnp.float32) + f.transpose(0, 3, 1, 2)


def conv_keys(x: Array, kernel: Array, bias: Array, after: Array | None = None) -> Array:
  """A 1x3 convolution along the key axis, zero-padded at the left end and padded with
  `after` (default zeros: 'same') at the right.

  Args:
    x: [B, Q, S, C]; kernel: [3, C, C']: taps for keys j - 1, j, j + 1; bias: [C'].
    after: [B, Q, 1, C]: the features of the key right of the axis' last.

  Returns:
    [B, Q, S, C'].

  Example: C = C' = 1, kernel [[1]], [[0]], [[0]] shifts right: x = [1, 2, 3] -> [0, 1, 2].
  """
  after = jnp.zeros_like(x[:, :, :1]) if after is None else after
  padded = jnp.concatenate([jnp.zeros_like(x[:, :, :1]), x, after], axis=2)
  s = x.shape[2]
  return sum(padded[:, :, t : t + s] @ kernel[t].astype(jnp.float32) for t in range(3)) + bias


def dape_v2_bias(
  q: Array,
  k: Array,
  base: Array,
  visible: Array,
  real: Array,
  real_after: Array,
  conv1: Array,
  b1: Array,
  conv2: Array,
  b2: Array,
) -> Array:
  """B + g([A; B]) with g = conv2(LeakyReLU(conv1(·))), 1x3 convolutions along the keys,
  on the scores of the visible keys (the others zeroed); hidden features of padding keys
  are zeroed too.

  The hidden features of the key right of the axis' last enter the last key's g when that
  key is real (`real_after`): a pass whose key axis ends before the sequence does (the
  prompt pass of a generation, whose next keys come in decoding steps) then gives the
  logits of the whole sequence, where that key is in the axis. Its scores are those of an
  invisible key (zero: it is right of every query of a causal pass), so its features are
  LeakyReLU(b1 + the left tap of conv1 on the last key's): known without the key. Where it
  is not real (every whole sequence: the axis covers the real keys) they are zero, as the
  'same' padding of the authors' code.

  Args:
    q, k, base: as `dape_bias`.
    visible: bool broadcastable to [B, 1, Q, S]: the keys each query may see.
    real: bool broadcastable to [B, 1, Q, S]: the keys that are not padding.
    real_after: bool broadcastable to [B, 1, Q, 1]: a real key follows the axis' last.
    conv1: [3, 2H, F]; b1: [F]; conv2: [3, F, H]; b2: [H].

  Returns:
    float32 [B, H, Q, S].

  Example: with conv2 = 0 and b2 = 0 (g = 0) the result is the base bias.
  """
  x = dape_features(q, k, base)
  as_features = lambda m, s: jnp.broadcast_to(m, (x.shape[0], 1, x.shape[1], s)).transpose(
    0, 2, 3, 1
  )  # [B, Q, S or 1, 1]
  x = jnp.where(as_features(visible, x.shape[2]), x, 0.0)
  h = jax.nn.leaky_relu(conv_keys(x, conv1, b1))
  h_after = jax.nn.leaky_relu(x[:, :, -1:] @ conv1[0].astype(jnp.float32) + b1)
  h_after = jnp.where(as_features(real_after, 1), h_after, 0.0)
  g = conv_keys(jnp.where(as_features(real, x.shape[2]), h, 0.0), conv2, b2, h_after)
  return base.astype(jnp.float32) + g.transpose(0, 3, 1, 2)


class DapeEncoding(core.EncodingModule):
  """DAPE (`convolution=False`) or DAPE-V2 (True) over the bias of `dape_base`, one network
  of width `dape_hidden` per layer (PyTorch's Linear/Conv initialisation: uniform in
  ±1/sqrt(fan_in)), the base module in the submodule `base`."""

  dape_base: str = 'alibi'
  dape_hidden: int = 32
  convolution: bool = False

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    if self.dape_base not in DAPE_BASES:
      raise ValueError(f'unknown dape_base {self.dape_base!r}; valid: {", ".join(DAPE_BASES)}')
    base = DAPE_BASES[self.dape_base](
      max_position=self.max_position,
      num_heads=self.num_heads,
      head_dim=self.head_dim,
      param_dtype=self.param_dtype,
      causal=self.causal,
      name='base',
    )(num_positions, length, inputs, deterministic)
    h, hidden = self.num_heads, self.dape_hidden
    taps = 3 if self.convolution else 1

    def torch_default(name, fan_in, shape):
      bound = 1 / math.sqrt(fan_in)
      init = lambda key, shape, dtype: jax.random.uniform(key, shape, dtype, -bound, bound)
      return self.param(name, init, shape, self.param_dtype)

    shape = lambda a, b: (taps, a, b) if self.convolution else (a, b)
    w1 = torch_default('w1', taps * 2 * h, shape(2 * h, hidden))
    b1 = torch_default('b1', taps * 2 * h, (hidden,))
    w2 = torch_default('w2', taps * hidden, shape(hidden, h))
    b2 = torch_default('b2', taps * hidden, (h,))
    causal = self.causal

    def bias(q, k, qi, ki):
      b = core.with_batch(base.bias(q, k, qi, ki))
      if not self.convolution:
        return dape_bias(q, k, b, w1, b1, w2, b2)
      real = ki[..., None, :] < jnp.reshape(length, (-1, 1, 1))  # not padding
      seen = real & (ki[..., None, :] <= qi[..., :, None]) if causal else real
      after = ki[..., None, -1:] + 1 < jnp.reshape(length, (-1, 1, 1))  # the key after the last
      return dape_v2_bias(q, k, b, seen[:, None], real[:, None], after[:, None], w1, b1, w2, b2)

    name = 'dape_v2' if self.convolution else 'dape'
    return core.AttentionEncoding(
      name, core.BIAS, bias=bias, params={'base': base.params, 'w1': w1, 'w2': w2}
    )


# Linen modules, not the helpers': the network reads the scores and the base bias.
_OPTIONS = {
  'dape_base': declare.option(
    'alibi', "DAPE's base bias (its registry encoding at its defaults)", valid=tuple(DAPE_BASES)
  ),
  'dape_hidden': declare.option(
    32, "the width F of DAPE's network", valid=declare.integer(1), must_be='an integer >= 1'
  ),
}
DAPE = core.Encoding(
  core.BIAS,
  attention=DapeEncoding,
  options=_OPTIONS,
  about='DAPE: a small MLP across the heads reads the attention logits and a base bias '
  '(ALiBi or KERPLE) together and corrects the bias, so that it adapts to the input.',
  papers=(papers.ZHENG2024,),
)
DAPE_V2 = core.Encoding(
  core.BIAS,
  attention=functools.partial(DapeEncoding, convolution=True),
  options=_OPTIONS,
  about="DAPE-V2: DAPE's correction made by 1x3 convolutions along the keys, the attention "
  'scores read as a feature map.',
  papers=(papers.ZHENG2025, papers.ZHENG2024),
)
