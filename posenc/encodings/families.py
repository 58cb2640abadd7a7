"""Bias families of the distance: a log-weight r(t) per head added to the attention logits.

Qin et al. (2023) show that a relative encoding extrapolates when Σ_t exp(r(t)) converges
(`posenc.analysis.receptive`). Each family here is one small function of the distance t >= 0 and its
per-head parameters, returning [..., H, Q, S]:

  kerple_log      -r·log(1 + k·t)                  r, k > 0 learned per head (KERPLE)
  kerple_power    -k·t^r                           k > 0, 0 < r <= 2 learned (KERPLE)
  sandwich        s_h·(Σ_{j=1}^{d'/2} cos(t/ρ^{2j/d'}) - d'/2), s_h = H / (8h) (Sandwich)
  type1           -2·log(t + 1)                    (Qin et al.'s first family: b = 1/n²)
  type2           -log²(t + 1)                     (their second: b = exp(-ln² n))
  inverse_n       -log(t + 1)                      (negative control: b = 1/n diverges)
  inverse_n_log_n -log(n·log n), n = max(t + 1, 2) (negative control; n = 1, where
                                                   n·log n = 0, takes n = 2's value)
  sliding_window  0 for t <= w, else -1e9          (a window of w keys on either side)
  t5              a learned scalar per head and log-spaced distance bucket (Raffel et al.)

Distances: t = |i - j| for query position i and key position j. In a causal model keys right
of the query are masked, so t = i - j. Bidirectional models may give keys on the left and
on the right their own parameters (`bias_two_sided`); T5's buckets always tell the sides
apart in an encoder. Randomized variants take i and j from one sorted random draw of
positions in {0..L-1} per sequence (per batch in an encoder), so t is a sampled position
difference; they draw at evaluation too, as the study's randomized encodings do.

Each family is an encoding made with the helpers of `define` (`record`): `distance_bias`
turns a family's function and its parameters into the bias, `family_parameters` declares the
parameters its options ask for. Each layer has its own parameters (KERPLE's code shares one
module across all layers). KERPLE's code clips r and k to >= 0.01 in place after each step;
here the clipped values are what the model uses and the gradient passes through the clip
(`_clamped`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc import encoding_names
from posenc.encodings import biases
from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import papers

Array = jax.Array

# A bias this low gives a key weight exp(-1e9) = 0 in float32, as -inf would, without the
# NaNs of (-inf) - (-inf) in a backend's running maximum.
OUTSIDE = -1e9
# KERPLE's code keeps its parameters >= 0.01 (and the power's exponent <= 2).
KERPLE_MIN = 0.01


def _per_head(p: Array, t: Array) -> tuple[Array, Array]:
  """p [H] -> [H, 1, 1] against t [..., Q, S] -> [..., 1, Q, S]."""
  return jnp.asarray(p, jnp.float32)[:, None, None], t[..., None, :, :]


def kerple_log(t: Array, r: Array, k: Array) -> Array:
  """-r_h·log(1 + k_h·t). Example: r = k = 1, t = [0, 1, 3] -> [0, -0.693, -1.386]."""
  r, t = _per_head(r, t)
  k, _ = _per_head(k, t[..., 0, :, :])
  return -r * jnp.log1p(k * t)


def kerple_power(t: Array, r: Array, k: Array) -> Array:
  """-k_h·t^{r_h}; 0 at t = 0 (with a finite gradient in r). Example: r = 2, k = 1,
  t = [0, 1, 3] -> [0, -1, -9]."""
  r, t = _per_head(r, t)
  k, _ = _per_head(k, t[..., 0, :, :])
  positive = t > 0
  power = jnp.where(positive, jnp.where(positive, t, 1.0) ** r, 0.0)
  return -k * power


def sandwich_scales(num_heads: int) -> np.ndarray:
  """Sandwich's per-head scale s_h = H / (8h), h = 1..H (ALiBi-like). Example: H = 8 ->
  [1, 1/2, ..., 1/8]."""
  return np.asarray([num_heads / (8.0 * h) for h in range(1, num_heads + 1)], np.float32)


def sandwich(t: Array, scales: Array, dim: int, base: float = 10_000.0) -> Array:
  """s_h·(Σ_{j=1}^{d'/2} cos(t / base^{2j/d'}) - d'/2): the inner product of two sinusoids
  of width d' = `dim`, shifted so that it is 0 at t = 0 and <= 0 elsewhere.

  Example: d' = 2, s = 1: t = 0 -> 0; t = π·base -> cos(π) - 1 = -2.
  """
  freqs = base ** (-2.0 * jnp.arange(1, dim // 2 + 1, dtype=jnp.float32) / dim)
  total = jnp.cos(t[..., None] * freqs).sum(-1) - dim // 2
  s, total = _per_head(scales, total)
  return s * total


def type1(t: Array) -> Array:
  """-2·log(t + 1): b_t = 1/(t + 1)². Example: t = [0, 1, 3] -> [0, -1.386, -2.773]."""
  return -2.0 * jnp.log1p(t)


def type2(t: Array) -> Array:
  """-log²(t + 1). Example: t = [0, 1, 3] -> [0, -0.480, -1.922]."""
  return -(jnp.log1p(t) ** 2)


def inverse_n(t: Array) -> Array:
  """-log(t + 1): b_t = 1/(t + 1), whose series diverges. Example: t = 1 -> -0.693."""
  return -jnp.log1p(t)


def inverse_n_log_n(t: Array) -> Array:
  """-log(n·log n) with n = t + 1, and n = 1 (log 1 = 0) given n = 2's value, so t = 0 and
  t = 1 both get -log(2·log 2) = 0.327. Example: t = 2 -> -log(3·log 3) = -1.193."""
  n = jnp.maximum(t + 1.0, 2.0)
  return -jnp.log(n * jnp.log(n))


def sliding_window(t: Array, window: int) -> Array:
  """0 for keys at distance <= w, OUTSIDE beyond. Example: w = 1, t = [0, 1, 2] ->
  [0, 0, -1e9]."""
  return jnp.where(t <= window, 0.0, OUTSIDE)


def t5_buckets(
  offset: Array, *, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128
) -> Array:
  """T5's bucket of a key at signed offset j - i: exact buckets for the smallest half of
  the distances, log-spaced ones up to `max_distance`, the last bucket beyond; in a
  bidirectional model half the buckets are for keys on the right.

  Example (causal, 32 buckets, 128): distances 0..15 -> 0..15, 16 -> 16, 127 -> 31.
  """
  n = -offset
  bucket = jnp.zeros_like(offset)
  if bidirectional:
    num_buckets //= 2
    bucket = bucket + (n < 0) * num_buckets
    n = jnp.abs(n)
  else:
    n = jnp.maximum(n, 0)
  exact = num_buckets // 2
  large = exact + (
    jnp.log(jnp.maximum(n, 1) / exact) / math.log(max_distance / exact) * (num_buckets - exact)
  ).astype(offset.dtype)
  return bucket + jnp.where(n < exact, n, jnp.minimum(large, num_buckets - 1))


def t5_bias(
  offset: Array, table: Array, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> Array:
  """table[bucket(j - i)] per head: table [num_buckets, H] -> [..., H, Q, S]."""
  bucket = t5_buckets(
    offset, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
  )
  return jnp.moveaxis(jnp.asarray(table, jnp.float32)[bucket], -1, -3)


FAMILIES = encoding_names.FAMILIES
# The families with parameters learned per head (two sets with `bias_two_sided`).
LEARNED = ('kerple_log', 'kerple_power')
# The families whose bias is the same in every head.
SHARED = ('type1', 'type2', 'inverse_n', 'inverse_n_log_n', 'sliding_window')


def _positive_or_none(value: Any, options: Any) -> bool:
  return value is None or declare.number(0)(value, options)


def _t5_distance(value: Any, options: Any) -> bool:
  return declare.integer(0)(value, options) and value > options['t5_buckets'] // 2


# Every family takes every option (one config serves a grid of them), in this order.
OPTIONS: dict[str, core.Option] = {
  'bias_two_sided': declare.option(
    False,
    'bidirectional models: parameters of their own for keys left and right of the query',
    valid=declare.boolean,
    must_be='True or False',
  ),
  'bias_r': declare.option(
    None, 'a fixed KERPLE r (None: learned per head)', valid=_positive_or_none, must_be='> 0'
  ),
  'bias_k': declare.option(
    None, 'a fixed KERPLE k (None: learned per head)', valid=_positive_or_none, must_be='> 0'
  ),
  'kerple_r_min': declare.option(
    KERPLE_MIN,
    "kerple_log's r is kept above it (e.g. 1.01 for a convergent series)",
    valid=declare.number(),
    must_be='a number',
  ),
  'bias_window': declare.option(
    128,
    "sliding_window's w: the keys on either side a query sees",
    valid=declare.integer(1),
    must_be='an integer >= 1',
  ),
  'sandwich_dim': declare.option(
    0, "Sandwich's d' (0: the head width)", valid=declare.integer(0), must_be='an integer >= 0'
  ),
  'max_time': declare.option(
    10_000.0, "Sandwich's base ρ", valid=declare.number(0), must_be='a number > 0'
  ),
  't5_buckets': declare.option(
    32, "T5's buckets", valid=declare.integer(4), must_be='an integer >= 4'
  ),
  't5_max_distance': declare.option(
    128,
    "T5's distance of the last bucket",
    valid=_t5_distance,
    must_be=lambda o: f'an integer > t5_buckets / 2 = {o["t5_buckets"] // 2}',
  ),
  'slope_scale': biases.SLOPE_SCALE,
}
# The power kernel is conditionally positive definite for 0 < r <= 2 only.
POWER_R = declare.option(
  None,
  'a fixed KERPLE r (None: learned per head)',
  valid=lambda r, o: r is None or (_positive_or_none(r, o) and r <= 2),
  must_be='> 0 and <= 2 for kerple_power (the power kernel is conditionally positive '
  'definite for 0 < r <= 2)',
)


def _clamped(p: Array, low: float, high: float = math.inf) -> Array:
  """p clipped to [low, high] in value, with the gradient of p (a projected-gradient
  stand-in: the clipped range is what the model uses, and a parameter past it is pushed
  back by its gradient)."""
  return p + jax.lax.stop_gradient(jnp.clip(p, low, high) - p)


def family_parameters(
  family: str,
  causal: bool,
  bias_two_sided: bool,
  bias_r: float | None,
  bias_k: float | None,
  t5_buckets: int,
) -> dict[str, declare.Param]:
  """The parameters of `family`: T5's table [buckets, H]; KERPLE's r and k per head (log:
  r ~ U(0, 2), k ~ U(0, 1); power: k ~ U(0, 1), r ~ U(0, 2)) unless fixed by an option, one
  set per side (`_left`, `_right`) with `bias_two_sided` in a bidirectional model."""
  if family == 't5':
    init = nn.initializers.variance_scaling(1.0, 'fan_avg', 'uniform')
    return {'t5_table': declare.param((t5_buckets, 'heads'), init)}
  if family not in LEARNED:
    return {}
  sides = ('_left', '_right') if bias_two_sided and not causal else ('',)
  out = {}
  for side in sides:
    if bias_r is None:
      out['r' + side] = declare.param(('heads',), nn.initializers.uniform(2.0))
    if bias_k is None:
      out['k' + side] = declare.param(('heads',), nn.initializers.uniform(1.0))
  return out


def family_bias(
  family: str,
  t: Array,
  params: dict[str, Array],
  *,
  heads: int,
  head_dim: int = 0,
  sandwich_dim: int = 0,
  max_time: float = 10_000.0,
  bias_window: int = 128,
) -> Array:
  """r(t) of `family` for every head: t [..., Q, S] float -> [..., H, Q, S]; params
  KERPLE's {'r', 'k'} [H] (as the model uses them: `kerple`)."""
  shared = lambda fn: jnp.broadcast_to(
    fn(t)[..., None, :, :], t.shape[:-2] + (heads,) + t.shape[-2:]
  )
  if family == 'kerple_log':
    return kerple_log(t, params['r'], params['k'])
  if family == 'kerple_power':
    return kerple_power(t, params['r'], params['k'])
  if family == 'sandwich':
    return sandwich(t, sandwich_scales(heads), sandwich_dim or head_dim, max_time)
  if family == 'sliding_window':
    return shared(lambda x: sliding_window(x, bias_window))
  return shared(
    {'type1': type1, 'type2': type2, 'inverse_n': inverse_n, 'inverse_n_log_n': inverse_n_log_n}[
      family
    ]
  )


def kerple(
  family: str,
  learned: dict[str, Array],
  side: str,
  *,
  heads: int,
  bias_r: float | None,
  bias_k: float | None,
  kerple_r_min: float,
) -> dict[str, Array]:
  """KERPLE's r and k [H] of one side ('', '_left', '_right') as the model uses them: the
  learned ones or those fixed by the options, clipped to their range; {} for the others."""
  if family not in LEARNED:
    return {}
  value = lambda name, fixed: (
    learned[name + side] if fixed is None else jnp.full((heads,), fixed, jnp.float32)
  )
  r, k = value('r', bias_r), value('k', bias_k)
  if family == 'kerple_log':
    return {'r': _clamped(r, max(KERPLE_MIN, kerple_r_min)), 'k': _clamped(k, KERPLE_MIN)}
  return {'r': _clamped(r, KERPLE_MIN, 2.0), 'k': _clamped(k, KERPLE_MIN)}


def distance_bias(
  q_pos: Array,
  k_pos: Array,
  *,
  family: str,
  causal: bool,
  heads: int,
  head_dim: int,
  bias_two_sided: bool,
  bias_r: float | None,
  bias_k: float | None,
  kerple_r_min: float,
  bias_window: int,
  sandwich_dim: int,
  max_time: float,
  t5_buckets: int,
  t5_max_distance: int,
  slope_scale: float = 1.0,
  **learned: Array,
) -> Array:
  """r(|j - i|) of `family` for query positions i [Q] and key positions j [S] (or [B, Q],
  [B, S]): [H, Q, S] (or [B, H, Q, S]), times `slope_scale`. T5 reads the signed offset
  (its buckets tell the sides apart in an encoder); with `bias_two_sided` (and no causal
  mask) keys left of the query use the `_left` parameters, the others the `_right` ones.

  Example (type1, one query at 2, keys 0..2): [-2 log 3, -2 log 2, 0] in every head.
  """
  offset = k_pos[..., None, :] - q_pos[..., :, None]  # [(B,) Q, S]
  if family == 't5':
    out = t5_bias(
      offset,
      learned['t5_table'],
      bidirectional=not causal,
      num_buckets=t5_buckets,
      max_distance=t5_max_distance,
    )
  else:
    t = jnp.abs(offset).astype(jnp.float32)
    fixed = dict(heads=heads, bias_r=bias_r, bias_k=bias_k, kerple_r_min=kerple_r_min)
    sizes = dict(
      heads=heads,
      head_dim=head_dim,
      sandwich_dim=sandwich_dim,
      max_time=max_time,
      bias_window=bias_window,
    )
    side = lambda s: family_bias(family, t, kerple(family, learned, s, **fixed), **sizes)
    if bias_two_sided and not causal:
      out = jnp.where((offset < 0)[..., None, :, :], side('_left'), side('_right'))
    else:
      out = side('')
  return out if slope_scale == 1 else out * slope_scale


# What each family is, and where it comes from.
ABOUT: dict[str, tuple[str, tuple[core.Paper, ...]]] = {
  'kerple_log': (
    "KERPLE's logarithmic kernel: a bias -r·log(1 + k·t) of the distance t, r and k learned "
    'per head.',
    (papers.CHI2022,),
  ),
  'kerple_power': (
    "KERPLE's power kernel: a bias -k·t^r of the distance t, k and r learned per head.",
    (papers.CHI2022,),
  ),
  'sandwich': (
    'Sandwich: the dot product of sinusoidal embeddings of the two positions, less its value '
    'at distance 0, scaled per head: a fixed bias that decays with distance.',
    (papers.CHI2023,),
  ),
  'type1': (
    "Qin et al.'s first family: a fixed bias -2·log(t + 1) (weights 1/n²), whose sum over "
    'distances converges: by their criterion it extrapolates.',
    (papers.QIN2024,),
  ),
  'type2': (
    "Qin et al.'s second family: a fixed bias -log²(t + 1), whose sum over distances converges.",
    (papers.QIN2024,),
  ),
  'inverse_n': (
    'A fixed bias -log(t + 1) (weights 1/n): a negative control, its sum over distances '
    'diverges (Qin et al.).',
    (papers.QIN2024,),
  ),
  'inverse_n_log_n': (
    'A fixed bias -log(n·log n), n = t + 1 (weights 1/(n log n)): a negative control, its sum '
    'diverges, slowly (Qin et al.).',
    (papers.QIN2024,),
  ),
  'sliding_window': (
    'Attention to the w nearest keys on either side only (bias 0 inside the window, -inf '
    'outside): the encoding Qin et al. compare every other with.',
    (papers.QIN2024,),
  ),
  't5': (
    "T5's relative bias: a learned scalar per head and distance bucket, the buckets exact "
    'for short distances and log-spaced for long ones.',
    (papers.RAFFEL2020,),
  ),
}


def record(family: str) -> core.Encoding:
  """The encoding of `family` (one of `FAMILIES`), made with `define.bias`; its randomized
  twin takes i and j from one sorted random draw of positions per layer."""
  options = dict(OPTIONS, bias_r=POWER_R) if family == 'kerple_power' else OPTIONS
  return define.bias(
    functools.partial(distance_bias, family=family),
    inputs=functools.partial(family_parameters, family),
    name=family,
    options=options,
    about=ABOUT[family][0],
    papers=ABOUT[family][1],
  )
