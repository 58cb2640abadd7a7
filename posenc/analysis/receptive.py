"""Receptive fields of relative encodings (Qin et al. 2023).

A Toeplitz bias r(t) at causal distance t weights key t by b_t = exp(r(t)). The theoretical
receptive field (TRF) at ε is the smallest j whose nearest keys hold more than 1 - ε of the
total weight within a horizon H:

    TRF(ε, H) = min { j : Σ_{t<j} b_t > (1 - ε) Σ_{t<H} b_t }

It needs no training. Qin et al. prove that a bias extrapolates when Σ_t b_t converges; then
the TRF settles as H grows, while for a divergent series (1/n, 1/(n ln n)) it keeps growing
with H. `convergence` turns that into a cheap test run before training. Whether the series
converges is decided from the family's closed form where it has one (`SERIES`: a geometric
series, a p-series, finite support, a constant tail); the TRF at growing horizons then says
how fast (a convergent series whose TRF still grows at 10^7 "converges slowly", as the
p-series Σ t^-1.01 does). Only a family without a closed form (Sandwich) is judged by its TRF
alone.

    >>> weights('type1', 512)[0, :3]              # 1, 1/4, 1/9
    array([1.        , 0.25      , 0.11111111])
    >>> trf(weights('type1', 512), 0.01)          # per head [H]
    array([54, 54, 54, 54, 54, 54, 54, 54])
    >>> trf(weights('type1', 10_000_000), 0.01)   # settled; seconds  # doctest: +SKIP
    array([61, 61, 61, 61, 61, 61, 61, 61])
    >>> convergence('inverse_n')['converges']
    False
    >>> kerple = {'bias_r': 1.5, 'bias_k': 1.0}
    >>> convergence('kerple_log', options=kerple)['converges']  # seconds  # doctest: +SKIP
    True

Bias encodings covered: every family of `posenc.encodings.families` and ALiBi (r = -s_h t),
at their initial parameters (a seed) or at given ones (e.g. a trained layer's). FIRE and
the Transformer-XL bias depend on more than the distance and have no TRF.
"""

from __future__ import annotations

import types
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from posenc import encoding_names
from posenc import encodings
from posenc.encodings import biases
from posenc.encodings import families

HORIZONS = (512, 10_000, 10_000_000)
# The longest horizon the analyses take: ten times the default's longest (its weights are
# float64 [heads, horizon], 6.4 GB at 8 heads).
MAX_HORIZON = 10**8
# A TRF that grows by more than this factor from the middle horizon to the last one has not
# settled (1/(t+1) grows ~1,000x, 1/(n ln n) ~800x, the fast convergent ones by at most
# 1.02x; a slowly convergent series such as Σ t^-1.5 grows too, its TRF being ~5.6k keys).
GROWTH = 1.5
# Distances are evaluated in chunks of this many, so a horizon of 10^7 stays small in memory.
_CHUNK = 1 << 20


def family_of(name: str) -> str:
  """The bias family of encoding `name` ('alibi' or one of encoding_names.FAMILIES), or
  ValueError naming the encodings that have one."""
  base = name.split('+')[-1]
  base = base[len('randomized_') :] if base.startswith('randomized_') else base
  if base == 'alibi' or base in encoding_names.FAMILIES:
    return base
  valid = ['alibi', *encoding_names.FAMILIES]
  raise ValueError(
    f'encoding {name!r} has no distance bias; valid: {", ".join(valid)} (or '
    'their randomized_ variants)'
  )


def initial_params(
  name: str,
  *,
  num_heads: int = 8,
  head_dim: int = 64,
  seed: int = 0,
  options: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """The parameters one layer of encoding `name` starts with (seed `seed`)."""
  family = family_of(name)
  if family == 'alibi':
    return {}
  attention, _ = encodings.resolve_options(family, options or {})
  module = encodings.get(family).attention(
    num_heads=num_heads, head_dim=head_dim, causal=True, **attention
  )
  variables = module.init(jax.random.key(seed), 1, 1, jnp.zeros((1, 1, 1)))
  return jax.device_get(variables.get('params', {}))


def _used_params(
  name: str,
  num_heads: int,
  head_dim: int,
  params: dict[str, Any] | None,
  options: dict[str, Any] | None,
) -> tuple[dict[str, Any], Any]:
  """(the parameters the model uses, the module's options): the initial ones unless given,
  KERPLE's clipped to their range (fixed KERPLE parameters filled in)."""
  family = family_of(name)
  attention, _ = encodings.resolve_options(family, options or {})
  module = types.SimpleNamespace(num_heads=num_heads, head_dim=head_dim, **attention)
  if family == 'alibi':
    return {'slopes': biases.alibi_slopes(num_heads).astype(np.float64)}, module
  params = (
    initial_params(name, num_heads=num_heads, head_dim=head_dim, options=options)
    if params is None
    else params
  )
  if family in families.LEARNED:
    low = (
      max(families.KERPLE_MIN, module.kerple_r_min)
      if family == 'kerple_log'
      else (families.KERPLE_MIN)
    )
    high = 2.0 if family == 'kerple_power' else np.inf
    fixed = lambda key: (
      params[key] if key in params else np.full(num_heads, attention[f'bias_{key}'])
    )  # fixed parameters are not in the tree
    params = {
      'r': np.clip(np.asarray(fixed('r'), np.float64), low, high),
      'k': np.maximum(np.asarray(fixed('k'), np.float64), families.KERPLE_MIN),
    }
  return params, module


def log_weights(
  name: str,
  t: np.ndarray,
  *,
  num_heads: int = 8,
  head_dim: int = 64,
  params: dict[str, Any] | None = None,
  options: dict[str, Any] | None = None,
) -> np.ndarray:
  """r(t) of encoding `name` per head at causal distances t: float64 [H, len(t)]."""
  family = family_of(name)
  params, module = _used_params(name, num_heads, head_dim, params, options)
  if family == 'alibi':
    return -params['slopes'][:, None] * np.asarray(t, np.float64)[None, :]
  t32 = jnp.asarray(t, jnp.float32)[None, :]  # one query against len(t) keys
  if family == 't5':
    out = families.t5_bias(
      -jnp.asarray(t, jnp.int32)[None, :],
      params['t5_table'],
      bidirectional=False,
      num_buckets=module.t5_buckets,
      max_distance=module.t5_max_distance,
    )
  else:
    out = families.family_bias(
      family,
      t32,
      params,
      heads=num_heads,
      head_dim=head_dim,
      sandwich_dim=module.sandwich_dim,
      max_time=module.max_time,
      bias_window=module.bias_window,
    )
  return np.asarray(out, np.float64)[:, 0, :]


def _always(value: bool) -> Any:
  return lambda params, num_heads: np.full(num_heads, value)


# Whether Σ_t exp(r(t)) converges, per head, from each family's closed form (Qin et al.
# 2023, Table 1): params (those the model uses) -> bool [H]. Sandwich has none: its proof's
# bound is loose and as printed inconsistent, so its TRF alone decides.
SERIES = {
  'alibi': _always(True),  # Σ e^{-m t}: geometric, ratio e^{-m} < 1 (m > 0)
  'kerple_log': lambda p, h: np.broadcast_to(p['r'] > 1, (h,)),  # (1 + k t)^-r ~ p-series
  'kerple_power': _always(True),  # e^{-k t^r}, k, r > 0: below every p-series
  'type1': _always(True),  # 1 / n^2: p-series, p = 2
  'type2': _always(True),  # e^{-ln^2 n}: below every p-series
  'inverse_n': _always(False),  # 1 / n: the harmonic series
  'inverse_n_log_n': _always(False),  # 1 / (n ln n): diverges by the integral test
  'sliding_window': _always(True),  # finite support
  't5': _always(False),  # the last bucket's constant weight beyond max_distance
}


def weights(name: str, horizon: int, **kwargs: Any) -> np.ndarray:
  """b_t = exp(r(t)) for t = 0..horizon-1 per head: float64 [H, horizon]."""
  chunks = [
    np.exp(log_weights(name, np.arange(s, min(s + _CHUNK, horizon)), **kwargs))
    for s in range(0, horizon, _CHUNK)
  ]
  return np.concatenate(chunks, axis=1)


def trf(w: np.ndarray, eps: float | Sequence[float]) -> np.ndarray:
  """TRF(ε) per head of weights w [H, T] (or one row [T]): smallest j with
  Σ_{t<j} w_t > (1 - ε) Σ_t w_t. Returns int [H] ([H, E] for a sequence of ε).

  Example: w = [1, 1, 1, 1], ε = 0.3 -> 3 (3 of 4 > 0.7·4 fails, ... 3 > 2.8).
  """
  w = np.atleast_2d(np.asarray(w, np.float64))
  prefix = np.concatenate([np.zeros((w.shape[0], 1)), np.cumsum(w, axis=1)], axis=1)
  eps_arr = np.atleast_1d(np.asarray(eps, np.float64))
  if ((eps_arr <= 0) | (eps_arr >= 1)).any():
    raise ValueError(f'eps={eps!r} must lie in (0, 1)')
  out = np.stack(
    [[np.searchsorted(p, (1 - e) * p[-1], side='right') for e in eps_arr] for p in prefix]
  )
  return out[:, 0] if np.ndim(eps) == 0 else out


def convergence(
  name: str, eps: float = 0.01, horizons: Sequence[int] = HORIZONS, **kwargs: Any
) -> dict[str, Any]:
  """Whether `name`'s bias series converges, and its TRF at each horizon.

  Returns {'encoding', 'eps', 'horizons', 'trf': [[per head] per horizon],
  'settles': the TRF grows by at most GROWTH from the second-to-last horizon to the last in
  every head, 'converges': per SERIES in every head (closed form) or else `settles`,
  'basis': 'closed form' or 'TRF', 'divergent_heads': [head indices]}.

  Example: kerple_log with r = 1.5, k = 1 (Σ (1 + t)^-1.5): converges, but its TRF at
  ε = 0.01 is ~5.6k keys, so at horizon 10^4 it has not settled: 'settles' is False.
  """
  heads = kwargs.get('num_heads', 8)
  family = family_of(name)
  if family in families.SHARED:  # one head's series stands for all of them
    kwargs = {**kwargs, 'num_heads': 1}
  fields = [np.broadcast_to(trf(weights(name, h, **kwargs), eps), (heads,)) for h in horizons]
  settles = bool(np.all(fields[-1] <= GROWTH * np.maximum(fields[-2], 1)))
  if family in SERIES:
    params, _ = _used_params(
      name, heads, kwargs.get('head_dim', 64), kwargs.get('params'), kwargs.get('options')
    )
    per_head = np.asarray(SERIES[family](params, heads), bool)
    basis = 'closed form'
  else:
    per_head, basis = np.full(heads, settles), 'TRF'
  return {
    'encoding': name,
    'eps': eps,
    'horizons': list(horizons),
    'trf': [f.tolist() for f in fields],
    'settles': settles,
    'converges': bool(per_head.all()),
    'basis': basis,
    'divergent_heads': np.flatnonzero(~per_head).tolist(),
  }


def diagnostic(name: str, **kwargs: Any) -> str | None:
  """One line on whether `name`'s bias series converges at its initial parameters (None
  for an encoding without a distance bias).

  Example: 'kerple_log: at its initial parameters the bias series diverges in 3 of 8 heads
  (r <= 1: ...)'.
  """
  try:
    family_of(name)
  except ValueError:
    return None
  result = convergence(name, **kwargs)
  first, last = (max(f) for f in (result['trf'][0], result['trf'][-1]))
  horizons = result['horizons']
  fields = (
    f'receptive field at eps={result["eps"]}, widest head: {first:,} keys at horizon '
    f'{horizons[0]:,}, {last:,} at {horizons[-1]:,}'
  )
  head = f'{name}: at its initial parameters the bias series'
  if result['basis'] == 'TRF' and not result['settles']:
    return (
      f'{head} has not settled by horizon {horizons[-1]:,} ({fields}): it diverges or '
      "converges too slowly for Qin et al.'s condition to help (no closed form decides)"
    )
  if not result['converges']:
    bad, heads = len(result['divergent_heads']), len(result['trf'][0])
    where = 'in every head' if bad == heads else f'in {bad} of {heads} heads'
    return (
      f'{head} diverges {where} ({fields}): Qin et al.\'s condition for extrapolation fails there'
    )
  if not result['settles']:
    mid = max(result['trf'][-2])
    return (
      f'{head} converges, slowly ({fields}; it still widens from {mid:,} keys at '
      f'horizon {horizons[-2]:,}): Qin et al.\'s condition for extrapolation holds, '
      'over more keys than the horizons it is trained at'
    )
  return f'{head} converges ({fields}): Qin et al.\'s condition for extrapolation holds'


def mass_by_distance(w: np.ndarray, causal: bool) -> np.ndarray:
  """Each query's attention mass at each distance d = |i - j|: w [..., Q, S] (rows of
  queries 0..Q-1 over keys 0..S-1) -> [..., Q, S]; in a bidirectional model a distance
  d > 0 holds the keys at i - d and i + d.

  Example (causal): the row [0.2, 0.3, 0.5] of query 2 -> [0.5, 0.3, 0.2].
  """
  w = np.asarray(w, np.float64)
  q, s = w.shape[-2:]
  i, d = np.arange(q)[:, None], np.arange(s)[None, :]
  left = i - d
  mass = np.where(
    left >= 0,
    np.take_along_axis(w, np.broadcast_to(np.clip(left, 0, s - 1), w.shape[:-2] + (q, s)), axis=-1),
    0.0,
  )
  if not causal:
    right = i + d
    mass = mass + np.where(
      (right < s) & (d > 0),
      np.take_along_axis(
        w, np.broadcast_to(np.clip(right, 0, s - 1), w.shape[:-2] + (q, s)), axis=-1
      ),
      0.0,
    )
  return mass


def erf(w: np.ndarray, eps: float | Sequence[float], causal: bool) -> np.ndarray:
  """The empirical receptive field of each query (Qin et al.): the smallest j whose j
  nearest distances hold more than 1 - ε of its attention. w [..., Q, S] -> int [..., Q]
  ([E, ..., Q] for a sequence of ε).

  Example: a causal row [0.05, 0.15, 0.8] (query 2): ε = 0.1 -> 2 (0.8 + 0.15 > 0.9).
  """
  eps_arr = np.atleast_1d(np.asarray(eps, np.float64))
  if ((eps_arr <= 0) | (eps_arr >= 1)).any():
    raise ValueError(f'eps={eps!r} must lie in (0, 1)')
  cum = np.cumsum(mass_by_distance(w, causal), axis=-1)
  out = np.stack([np.sum(cum <= (1 - e) * cum[..., -1:], axis=-1) + 1 for e in eps_arr])
  return out[0] if np.ndim(eps) == 0 else out
