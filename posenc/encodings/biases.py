"""Encodings that add a bias to the attention logits: ALiBi, Transformer-XL relative and FIRE.

Each is one pure function of the query and key positions, made an encoding (`ALIBI`,
`RELATIVE`, `FIRE`) by the helpers of `define`, with what it binds once per layer (ALiBi's
fixed slopes, the relative table's offsets, FIRE's parameters) in a small `inputs` function.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import embeddings
from posenc.encodings import papers
from posenc.encodings import randomized as randomized_lib

Array = jax.Array


def alibi_slopes(num_heads: int) -> np.ndarray:
  """ALiBi head slopes (Press et al. 2022), including the non-power-of-two rule.

  For n a power of two, s_k = 2^(-8(k+1)/n). Otherwise take the slopes of the closest lower
  power of two p and append every other slope of the 2p list, up to n slopes.

  Returns:
    float32 [H].

  Example:
    >>> alibi_slopes(8)    # [1/2, 1/4, ..., 1/256]
    array([0.5 , 0.25 , 0.125 , 0.0625 , 0.03125 , 0.015625 , 0.0078125 , 0.00390625], dtype=float32)
    >>> alibi_slopes(3)    # [1/16, 1/256] + [1/4]
    array([0.0625 , 0.00390625, 0.25 ], dtype=float32)
  """

  def power_of_two(n):
    return [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]

  if num_heads & (num_heads - 1) == 0:
    slopes = power_of_two(num_heads)
  else:
    p = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(p) + power_of_two(2 * p)[0::2][: num_heads - p]
  return np.asarray(slopes, np.float32)


def alibi_bias(
  q_pos: Array,
  k_pos: Array,
  slopes: Array,
  *,
  distances: Array | None = None,
  left_distances: Array | None = None,
  causal: bool = False,
) -> Array:
  """ALiBi: `bias[h, i, j] = -s_h dist(|j - i|)`, plus s_h / 2 on keys left of the query in the
  bidirectional form; 0 for j = i.

  dist(d) = d, or `distances[d]` for randomized ALiBi (Ruoss et al. 2023).

  - `causal=False` (encoders): the reference encoder's form, `s_h (-dist(|j - i|) + 0.5 [j < i])`
    for j != i. The +0.5 on keys left of the query breaks the left/right symmetry of a
    bidirectional model.
  - `causal=True` (decoders): Press et al.'s ALiBi, -s_h dist(i - j) for j <= i. The
    bidirectional form would not do here: its +0.5 reaches every key but the query's own, so
    it is no constant shift of the row and leaves the diagonal a relative penalty of s_h / 2.

  Args:
    q_pos: int [Q] query positions; k_pos: int [S] key positions (or [B, Q], [B, S]: one
      set per sequence).
    slopes: [H] (`alibi_slopes`).
    distances: optional int [T] (or [B, T]), distances[0] = 0: the randomized distance of
      offset d.
    left_distances: optional, as `distances`, for keys left of the query
      (randomize_both_sides); defaults to `distances`.

  Returns:
    float32 [H, Q, S] ([B, H, Q, S] if anything is per sequence), added to the
    1/sqrt(K)-scaled logits.

  Example (slope 1, positions 0..3), bidirectional:
    [[0, -1, -2, -3], [-.5, 0, -1, -2], [-1.5, -.5, 0, -1], [-2.5, -1.5, -.5, 0]]
  causal (keys right of the query are masked by the model, so their bias does not matter):
    row 3 is [-3, -2, -1, 0].
  """
  offset = jnp.abs(k_pos[..., None, :] - q_pos[..., :, None])  # [(B,) Q, S]
  left = k_pos[..., None, :] < q_pos[..., :, None]
  if distances is None:
    dist = offset.astype(jnp.float32)
  else:
    left_distances = distances if left_distances is None else left_distances
    dist = jnp.where(
      left,
      randomized_lib.lookup(left_distances, offset, 2),
      randomized_lib.lookup(distances, offset, 2),
    ).astype(jnp.float32)
  bias = -dist if causal else jnp.where(offset == 0, 0.0, -dist + 0.5 * left)
  return jnp.asarray(slopes, jnp.float32)[:, None, None] * bias[..., None, :, :]


def relative_bias(
  q: Array,
  k: Array,
  q_pos: Array,
  k_pos: Array,
  *,
  u: Array,
  v: Array,
  w_r: Array,
  offset_positions: Array,
  max_time: float = 10_000.0,
) -> Array:
  """Transformer-XL's relative terms (Dai et al. 2019), added to q·k / sqrt(K).

  bias[b, h, i, j] = (u_h·k_j + (q_i + v_h)·R_h(j - i)) / sqrt(K), where R(o) = S(φ(o)) W_R
  is the sinusoid of offset o's position, projected and split into heads. φ maps offsets to
  positions: the identity, or randomized distances (`relative_offset_positions`).

  Args:
    q: [B, Q, H, K]; k: [B, S, H, K].
    q_pos: int [Q], k_pos: int [S]: sequence indices in 0..T-1 (or [B, Q], [B, S]).
    u, v: [H, K] content and position biases.
    w_r: [H·K, H·K] projection of the sinusoid.
    offset_positions: int [2T - 1] (or [B, 2T - 1]): φ(c - (T - 1)) for c = 0..2T-2.
    max_time: the sinusoid's frequency base.

  Returns:
    float32 [B, H, Q, S].

  Example: with q = k = 0 the bias is v·R(j - i) / sqrt(K), a function of j - i only.
  """
  num_heads, head_dim = u.shape
  t = (offset_positions.shape[-1] + 1) // 2
  table = embeddings.sinusoid(offset_positions, num_heads * head_dim, max_time=max_time)
  r = (table @ w_r.astype(jnp.float32)).reshape(*table.shape[:-1], num_heads, head_dim)
  q, k = q.astype(jnp.float32), k.astype(jnp.float32)
  # Every query against every offset, then each key's offset picked out.
  by_offset = jnp.einsum('bqhk,...chk->bhqc', q + v, r)
  column = k_pos[..., None, :] - q_pos[..., :, None] + (t - 1)  # [(B,) Q, S]
  column = column[None, None] if column.ndim == 2 else column[:, None]
  position = jnp.take_along_axis(
    by_offset, jnp.broadcast_to(column, by_offset.shape[:3] + column.shape[-1:]), axis=-1
  )
  content = jnp.einsum('hk,bshk->bhs', u, k)[:, :, None, :]
  return (content + position) / math.sqrt(head_dim)


def alibi_inputs(
  heads: int, causal: bool, alibi_reference_form: bool = False, slope_scale: float = 1.0
) -> dict[str, Any]:
  """ALiBi's slopes (scaled at test time by `slope_scale`) and its form: Press et al.'s
  under a causal mask, the reference encoder's bidirectional one otherwise or with
  `alibi_reference_form` (the reference encoder's `causal_masking` ran it so).

  Example: alibi_inputs(2, True) -> {'slopes': [1/16, 1/256], 'causal': True}.
  """
  slopes = jnp.asarray(alibi_slopes(heads))
  if slope_scale != 1:
    slopes = slopes * slope_scale
  return {'slopes': slopes, 'causal': causal and not alibi_reference_form}


# A test-time scaling of a distance bias (1: as trained; `posenc.analysis.interventions`).
SLOPE_SCALE = declare.option(
  1.0,
  'a test-time scaling of the bias (1: as trained)',
  valid=declare.number(),
  must_be='a number',
  test=True,
)
# ALiBi; randomized: distances d -> r_d, one draw per layer.
ALIBI = define.bias(
  alibi_bias,
  draws=define.DISTANCES,
  inputs=alibi_inputs,
  name='alibi',
  options={
    'randomize_both_sides': declare.BOTH_SIDES,
    'alibi_reference_form': declare.option(
      False,
      "ALiBi under a causal mask: the reference encoder's bidirectional form, not Press et al.'s",
      valid=declare.boolean,
      must_be='True or False',
    ),
    'slope_scale': SLOPE_SCALE,
  },
  about='ALiBi: a fixed bias on the attention logits, minus a slope times the distance between '
  'query and key, with geometrically spaced slopes across the heads: nearer keys weigh more.',
  papers=(papers.PRESS2022,),
)


def relative_offsets(
  num_positions: int,
  max_position: int,
  distances: Array | None = None,
  left_distances: Array | None = None,
  relative_mode: str = 'symmetric',
) -> dict[str, Array]:
  """The positions of the relative table's offsets (`offset_positions`): the offsets
  themselves, or for the randomized twin their drawn distances (`relative_mode`)."""
  return {
    'offset_positions': randomized_lib.relative_offset_positions(
      num_positions,
      distances=distances,
      left_distances=left_distances,
      mode=relative_mode,
      max_position=max_position,
    )
  }


# Transformer-XL relative attention; randomized: offsets ±d -> ±r_d (or the released code's
# clamped table, `relative_mode='reference'`), one draw per layer. Parameters per layer:
# u, v [H, K] ~ Normal(0.02); W_R (`w_r/kernel`, [D, D], no bias).
RELATIVE = define.bias(
  relative_bias,
  content=True,
  draws=define.DISTANCES,
  inputs=relative_offsets,
  name='relative',
  u=declare.param(('heads', 'head_dim'), nn.initializers.normal(0.02)),
  v=declare.param(('heads', 'head_dim'), nn.initializers.normal(0.02)),
  w_r=declare.param(('width', 'width'), core.HAIKU_LINEAR_INIT, stored_as='w_r/kernel'),
  options={
    'max_time': declare.MAX_TIME,
    'relative_mode': declare.option(
      'symmetric',
      "randomized distances: the method as published, or the released code's clamped table",
      valid=randomized_lib.RELATIVE_MODES,
      twin=True,
    ),
    'randomize_both_sides': declare.BOTH_SIDES,
  },
  about="Transformer-XL's relative encoding: sinusoids of the query-key distance, projected "
  'per layer, and two learned biases, added to the attention logits.',
  papers=(papers.DAI2019,),
)


FIRE_VARIANTS = ('aba', 'pc')


def fire_bias(q_pos: Array, k_pos: Array, mlp: Any, *, c: Array, threshold: Array) -> Array:
  """FIRE (Li et al. 2023): a learned function of the normalized relative distance.

  bias[h, i, j] = f_θ(ψ(i - j) / ψ(max(L, i)))_h with ψ(x) = log(|c·x| + 1), for query
  position i and key position j. In a causal model i - j >= 0, so the argument lies in
  [0, 1] ("progressive interpolation"); L keeps short contexts from being over-normalized.
  Bidirectional form (encoders): keys right of the query enter with the distance negated,
  -ψ(j - i) / ψ(max(L, i)), so f_θ tells the two sides apart.

  Args:
    q_pos: int [Q]; k_pos: int [S] (or [B, Q], [B, S]).
    mlp: f_θ, a function [..., 1] -> [..., H].
    c: the learnable scale of ψ (> 0 in effect: ψ uses |c·x|).
    threshold: L.

  Returns:
    float32 [H, Q, S] (or [B, H, Q, S]).

  Example: with f_θ the identity (H = 1) and c large, a key at the query gets 0 and the
    first position (j = 0) of a query at i >= L gets about 1.
  """
  q = jnp.asarray(q_pos, jnp.float32)
  rel = q[..., :, None] - jnp.asarray(k_pos, jnp.float32)[..., None, :]  # i - j
  psi = lambda x: jnp.log(jnp.abs(c * x) + 1.0)
  norm = psi(jnp.maximum(threshold, q))[..., :, None]
  x = jnp.sign(rel) * psi(jnp.abs(rel)) / (norm + 1e-6)
  out = mlp(x[..., None])  # [..., Q, S, H]
  return jnp.moveaxis(out, -1, -3)


def fire_mlp(x: Array, weights: tuple[Array, ...], biases: tuple[Array, ...]) -> Array:
  """f_θ of FIRE: ReLU layers x -> [..., H] (no ReLU after the last), biases optional.

  Example: one layer w = [[2.]], no bias: fire_mlp([[0.5]], (w,), ()) -> [[1.]].
  """
  for i, w in enumerate(weights):
    x = x @ w.astype(jnp.float32)
    if biases:
      x = x + biases[i].astype(jnp.float32)
    if i + 1 < len(weights):
      x = jax.nn.relu(x)
  return x


def fire_parameters(fire_variant: str) -> dict[str, declare.Param]:
  """FIRE's parameters. f_θ: 'aba' Linear(1, 32) + bias, ReLU, Linear(32, H) + bias (the
  Abacus paper's code, Flax's default initializers), c init 0.1, L = |λ·512| with λ (`scale`)
  init 1; 'pc' 1 -> 32 -> ReLU -> 32 -> ReLU -> H without biases, N(0, 1) then N(0, 1/32),
  c init 0.1, L = L_sqrt² with L_sqrt (`threshold_sqrt`) init 16."""
  hidden, p = 32, declare.param
  if fire_variant == 'aba':
    init = nn.initializers.lecun_normal()
    return {
      'w1': p((1, hidden), init),
      'w2': p((hidden, 'heads'), init),
      'b1': p((hidden,)),
      'b2': p(('heads',)),
      'c': p((), nn.initializers.constant(0.1)),
      'scale': p((), nn.initializers.ones),
    }
  later = nn.initializers.normal(1 / math.sqrt(hidden))
  return {
    'w1': p((1, hidden), nn.initializers.normal(1.0)),
    'w2': p((hidden, hidden), later),
    'w3': p((hidden, 'heads'), later),
    'c': p((), nn.initializers.constant(0.1)),
    'threshold_sqrt': p((), nn.initializers.constant(16.0)),
  }


def fire(
  q_pos: Array,
  k_pos: Array,
  *,
  c: Array,
  w1: Array,
  w2: Array,
  w3: Array | None = None,
  b1: Array | None = None,
  b2: Array | None = None,
  scale: Array | None = None,
  threshold_sqrt: Array | None = None,
) -> Array:
  """`fire_bias` with either variant's parameters (`fire_parameters`): f_θ the ReLU layers
  of w1, w2 (, w3) (with biases b1, b2), and L = |512 scale| ('aba') or threshold_sqrt²
  ('pc': its code's min(i, L) normalizer is a bug; this is the paper's max(L, i)).

  Returns:
    float32 [H, Q, S] (or [B, H, Q, S]).
  """
  weights = tuple(w for w in (w1, w2, w3) if w is not None)
  bias_terms = () if b1 is None else (b1, b2)
  threshold = jnp.abs(scale * 512.0) if scale is not None else threshold_sqrt**2
  mlp = lambda x: fire_mlp(x, weights, bias_terms)
  return fire_bias(q_pos, k_pos, mlp, c=c, threshold=threshold)


# FIRE, one set of parameters per layer; randomized (Zhou et al. 2024, as the Abacus paper's
# code): in training the positions are a sorted random subset of {0..L_max - 1}, one per
# sequence (per batch in an encoder); at evaluation they are 0..T-1.
FIRE = define.bias(
  fire,
  inputs=fire_parameters,
  draw_in_evaluation=False,
  name='fire',
  options={
    'fire_variant': declare.option(
      'aba',
      "FIRE's variant: the Abacus paper's code ('aba') or the paper's ('pc')",
      valid=FIRE_VARIANTS,
    )
  },
  about="FIRE: a small learned MLP of the log-scaled distance, divided by the query's position, "
  'gives the bias on the logits, so that distances read as fractions of the context.',
  papers=(papers.LI2024,),
)
