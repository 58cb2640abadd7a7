"""Bias families of the distance: a log-weight r(t) per head added to the attention logits.

Qin et al. (2023) show that a relative encoding extrapolates when Σ_t exp(r(t)) converges
(`posenc.receptive`). Each family here is one small function of the distance t >= 0 and its
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

Each layer has its own module and parameters (KERPLE's code shares one module across all
layers). KERPLE's code clips r and k to >= 0.01 in place after each step; here the clipped
values are what the model uses and the gradient passes through the clip (`_clamped`).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc import encoding_names
from posenc.encodings import core
from posenc.encodings import randomized as randomized_lib

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


def check_options(name: str, options: dict[str, Any]) -> None:
  """ValueError naming an option of encoding `name` outside its range (fixed KERPLE
  parameters, the window, T5's buckets)."""
  r, k, w = options.get('bias_r'), options.get('bias_k'), options.get('bias_window', 1)
  if r is not None and not r > 0:
    raise ValueError(f'encoding_options.bias_r={r!r} must be > 0')
  if r is not None and 'kerple_power' in name and r > 2:
    raise ValueError(
      f'encoding_options.bias_r={r!r} must be <= 2 for {name!r} (the power '
      'kernel is conditionally positive definite for 0 < r <= 2)'
    )
  if k is not None and not k > 0:
    raise ValueError(f'encoding_options.bias_k={k!r} must be > 0')
  if not (isinstance(w, (int, np.integer)) and w >= 1):
    raise ValueError(f'encoding_options.bias_window={w!r} must be an integer >= 1')
  buckets = options.get('t5_buckets', 32)
  distance = options.get('t5_max_distance', 128)
  if not (isinstance(buckets, (int, np.integer)) and buckets >= 4):
    raise ValueError(f'encoding_options.t5_buckets={buckets!r} must be an integer >= 4')
  if not (isinstance(distance, (int, np.integer)) and distance > buckets // 2):
    raise ValueError(
      f'encoding_options.t5_max_distance={distance!r} must be an integer '
      f'> t5_buckets / 2 = {buckets // 2}'
    )


def _clamped(p: Array, low: float, high: float = math.inf) -> Array:
  """p clipped to [low, high] in value, with the gradient of p (a projected-gradient
  stand-in: the clipped range is what the model uses, and a parameter past it is pushed
  back by its gradient)."""
  return p + jax.lax.stop_gradient(jnp.clip(p, low, high) - p)


def family_params(module: nn.Module, family: str, side: str) -> dict[str, Array]:
  """The parameters of `family` for one side ('' or '_left' / '_right'), created on
  `module`: KERPLE's initializations (log: r ~ U(0, 2), k ~ U(0, 1); power: k ~ U(0, 1),
  r ~ U(0, 2)), or fixed values from the options."""
  h = module.num_heads
  if family not in LEARNED:
    return {}

  def param(name, high, fixed):
    if fixed is not None:
      return jnp.full((h,), fixed, jnp.float32)
    return module.param(name + side, nn.initializers.uniform(high), (h,), module.param_dtype)

  r = param('r', 2.0, module.bias_r)
  k = param('k', 1.0, module.bias_k)
  if family == 'kerple_log':
    return {'r': _clamped(r, max(KERPLE_MIN, module.kerple_r_min)), 'k': _clamped(k, KERPLE_MIN)}
  return {'r': _clamped(r, KERPLE_MIN, 2.0), 'k': _clamped(k, KERPLE_MIN)}


def family_bias(family: str, t: Array, params: dict[str, Array], module: Any) -> Array:
  """r(t) of `family` for every head: t [..., Q, S] float -> [..., H, Q, S]."""
  h = module.num_heads
  shared = lambda fn: jnp.broadcast_to(fn(t)[..., None, :, :], t.shape[:-2] + (h,) + t.shape[-2:])
  if family == 'kerple_log':
    return kerple_log(t, params['r'], params['k'])
  if family == 'kerple_power':
    return kerple_power(t, params['r'], params['k'])
  if family == 'sandwich':
    return sandwich(t, sandwich_scales(h), module.sandwich_dim or module.head_dim, module.max_time)
  if family == 'sliding_window':
    return shared(lambda x: sliding_window(x, module.bias_window))
  return shared(
    {'type1': type1, 'type2': type2, 'inverse_n': inverse_n, 'inverse_n_log_n': inverse_n_log_n}[
      family
    ]
  )


class DistanceBiasEncoding(core.EncodingModule):
  """One of `FAMILIES` as an attention bias, one module per layer.

  Options: `bias_two_sided` (bidirectional: own parameters for keys left and right of the
  query), `bias_r` / `bias_k` (fixed KERPLE parameters instead of learned ones),
  `kerple_r_min` (keep kerple_log's r above it, e.g. 1.01 for a convergent series),
  `bias_window` (sliding_window's w), `sandwich_dim` (d'; 0: the head width), `max_time`
  (Sandwich's ρ), `t5_buckets`, `t5_max_distance`.
  """

  family: str = 'type1'
  randomized: bool = False
  bias_two_sided: bool = False
  bias_r: float | None = None
  bias_k: float | None = None
  kerple_r_min: float = KERPLE_MIN
  bias_window: int = 128
  sandwich_dim: int = 0
  max_time: float = 10_000.0
  t5_buckets: int = 32
  t5_max_distance: int = 128
  slope_scale: float = 1.0  # A test-time scaling of the whole bias (1: as trained).

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del inputs, deterministic
    if self.randomized:
      positions = randomized_lib.random_positions(
        self.make_rng('noise'), num_positions, max_position=self.max_position, length=length
      )
    else:
      positions = jnp.arange(num_positions)
    two_sided = self.bias_two_sided and not self.causal
    if self.family == 't5':
      table = self.param(
        't5_table',
        nn.initializers.variance_scaling(1.0, 'fan_avg', 'uniform'),
        (self.t5_buckets, self.num_heads),
        self.param_dtype,
      )
      params = {'t5_table': table}
    elif two_sided:
      params = {
        'left': family_params(self, self.family, '_left'),
        'right': family_params(self, self.family, '_right'),
      }
    else:
      params = family_params(self, self.family, '')

    def bias(q, k, qi, ki):
      out = unscaled_bias(q, k, qi, ki)
      return out if self.slope_scale == 1 else out * self.slope_scale

    def unscaled_bias(q, k, qi, ki):
      del q, k
      i = randomized_lib.lookup(positions, qi, 1)
      j = randomized_lib.lookup(positions, ki, 1)
      offset = j[..., None, :] - i[..., :, None]  # [(B,) Q, S]
      if self.family == 't5':
        return core.with_batch(
          t5_bias(
            offset,
            params['t5_table'],
            bidirectional=not self.causal,
            num_buckets=self.t5_buckets,
            max_distance=self.t5_max_distance,
          )
        )
      t = jnp.abs(offset).astype(jnp.float32)
      if two_sided:
        left = (offset < 0)[..., None, :, :]
        return core.with_batch(
          jnp.where(
            left,
            family_bias(self.family, t, params['left'], self),
            family_bias(self.family, t, params['right'], self),
          )
        )
      return core.with_batch(family_bias(self.family, t, params, self))

    return core.AttentionEncoding(
      self.family, core.BIAS, bias=bias, params={'positions': positions, **params}
    )
