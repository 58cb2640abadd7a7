"""Rotary position encoding (Su et al. 2021): q and k rotated by their positions (`apply_rope`),
its test-time scalings for longer sequences (`scaling`), and the encoding made of them
(`ROTARY`, with the helpers of `define`)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from posenc import suggest
from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import papers

Array = jax.Array


def rope_frequencies(head_dim: int, max_time: float = 10_000.0) -> np.ndarray:
  """f_m = max_time^(-m/(K/2)) for m = 0..K/2-1 (float64 [K/2])."""
  return max_time ** (-np.arange(head_dim // 2) / (head_dim // 2))


# Test-time scalings of RoPE for sequences longer than training, each the identity at
# factor 1 (`launch.analyze intervene`). s is the factor, L the original (training) length.
# 'yarn' is YaRN as its authors' code and the LM libraries compute it (a ramp over the
# dimension index); 'yarn_paper' the ramp over turns written in the paper's equation.
ROPE_SCALINGS = ('none', 'pi', 'ntk', 'yarn', 'yarn_paper')
# YaRN's bounds (Peng et al. 2023): dimensions turning fewer than ALPHA times over L are
# interpolated, more than BETA times kept; in between a linear ramp (beta_slow = 1,
# beta_fast = 32 in the authors' code).
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def ntk_max_time(max_time: float, factor: float, head_dim: int) -> float:
  """NTK-aware scaling: the base b s^(K/(K-2)), so the lowest frequency is divided by s
  and the highest kept. Example: b = 10,000, s = 2, K = 4 -> 40,000."""
  return max_time * factor ** (head_dim / (head_dim - 2))


def yarn_correction_dim(
  turns: float, head_dim: int, max_time: float, original_length: int
) -> float:
  """The (fractional) pair index m whose frequency b^(-2m/K) turns `turns` times over L:
  m = K ln(L / (2π turns)) / (2 ln b).

  Example: K = 16, b = 10,000, L = 16: 1 turn at m = 0.81, 32 turns at m = -2.20.
  """
  return head_dim * math.log(original_length / (turns * 2 * math.pi)) / (2 * math.log(max_time))


def yarn_frequencies(
  head_dim: int,
  max_time: float,
  factor: float,
  original_length: int,
  alpha: float = YARN_ALPHA,
  beta: float = YARN_BETA,
) -> np.ndarray:
  """YaRN's "NTK-by-parts" frequencies as its authors' code computes them: pairs up to
  floor(m(β)) keep f, pairs from ceil(m(α)) on take f / s, a linear ramp in the pair index
  between (`yarn_correction_dim` gives m(turns); the bounds clipped to [0, K - 1]).

  Example: K = 16, b = 10,000, L = 16, s = 4: low = 0, high = 1, so pair 0 (f = 1) is
  kept and every other pair divided by 4.
  """
  freqs = rope_frequencies(head_dim, max_time)
  low = max(math.floor(yarn_correction_dim(beta, head_dim, max_time, original_length)), 0)
  high = min(
    math.ceil(yarn_correction_dim(alpha, head_dim, max_time, original_length)), head_dim - 1
  )
  # The authors' guard against a zero-width ramp.
  width = high - low if high != low else 0.001
  interpolated = np.clip((np.arange(head_dim // 2) - low) / width, 0.0, 1.0)
  return freqs * (1 - interpolated) + freqs / factor * interpolated


def yarn_paper_frequencies(
  freqs: np.ndarray,
  factor: float,
  original_length: int,
  alpha: float = YARN_ALPHA,
  beta: float = YARN_BETA,
) -> np.ndarray:
  """YaRN's frequencies as the paper's equation writes them: f (1 - γ) / s + f γ, with
  γ = clip((r - α) / (β - α), 0, 1) a ramp in r = L f / (2π), the turns of each pair over L.
  """
  turns = original_length * freqs / (2 * np.pi)
  gamma = np.clip((turns - alpha) / (beta - alpha), 0.0, 1.0)
  return np.where(gamma == 1, freqs, freqs * (1 - gamma) / factor + freqs * gamma)


def yarn_attention_factor(factor: float) -> float:
  """YaRN's scale of q and k (so the logits scale by its square): 0.1 ln s + 1 (1 for s <= 1)."""
  return 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0


def scaling(
  kind: str, factor: float, original_length: int, head_dim: int, max_time: float
) -> tuple[float, np.ndarray | None, float]:
  """(position divisor, frequencies (None: the standard ones), q/k scale) of a scaling.

  Example: ('pi', 4, ...) -> (4, None, 1): positions p -> p / 4, as in Chen et al. 2023.
  """
  if kind == 'none':
    return 1.0, None, 1.0
  if kind == 'pi':
    return factor, None, 1.0
  if kind == 'ntk':
    return 1.0, rope_frequencies(head_dim, ntk_max_time(max_time, factor, head_dim)), 1.0
  if kind == 'yarn':
    return (
      1.0,
      yarn_frequencies(head_dim, max_time, factor, original_length),
      yarn_attention_factor(factor),
    )
  if kind == 'yarn_paper':
    return (
      1.0,
      yarn_paper_frequencies(rope_frequencies(head_dim, max_time), factor, original_length),
      yarn_attention_factor(factor),
    )
  raise ValueError(
    f'unknown rope_scaling {kind!r}{suggest.did_you_mean(kind, ROPE_SCALINGS)}; valid: {", ".join(ROPE_SCALINGS)}'
  )


def apply_rope(
  x: Array,
  positions: Array,
  *,
  max_time: float = 10_000.0,
  freqs: np.ndarray | None = None,
  scale: float = 1.0,
) -> Array:
  """Rotates interleaved pairs of x by angles proportional to the positions.

  For the pair (x_{2m}, x_{2m+1}) at position p, with f_m = max_time^(-m/(K/2))::

    x'_{2m} = x_{2m} cos(p f_m) - x_{2m+1} sin(p f_m),
    x'_{2m+1} = x_{2m+1} cos(p f_m) + x_{2m} sin(p f_m).

  q·k after rotation depends on the positions only through their difference.

  Args:
    x: [..., T, H, K] queries or keys, K even.
    positions: [T] integer (or randomized) positions, or [B, T] with x [B, T, H, K].
    max_time: frequency base.
    freqs: [K/2] frequencies instead of max_time's (a test-time scaling, `scaling`).
    scale: multiplies the result (YaRN's attention factor).

  Returns:
    [..., T, H, K], in x's dtype.

  Example (K = 2, so f_0 = 1):
    x = [1, 0] at p = 0 -> [1, 0];  x = [1, 0] at p = 1 -> [cos 1, sin 1] = [.540, .841].
  """
  head_dim = x.shape[-1]
  if head_dim % 2:
    raise ValueError(f'rotary encoding needs an even head width, got {head_dim}')
  if freqs is None:
    freqs = rope_frequencies(head_dim, max_time)
  angles = jnp.asarray(positions, jnp.float32)[..., None, None] * jnp.asarray(freqs, jnp.float32)
  cos, sin = jnp.cos(angles), jnp.sin(angles)  # [(B,) T, 1, K/2]
  pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], head_dim // 2, 2)
  even, odd = pairs[..., 0], pairs[..., 1]
  out = jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
  if scale != 1:
    out = out * scale
  return out.reshape(x.shape).astype(x.dtype)


def rope(
  x: Array,
  positions: Array,
  *,
  max_time: float = 10_000.0,
  rope_scaling: str = 'none',
  rope_factor: float = 1.0,
  rope_original_length: int = 0,
) -> Array:
  """RoPE (`apply_rope`), rescaled at test time for longer sequences by `rope_scaling`
  ('pi', 'ntk', 'yarn', 'yarn_paper' by `rope_factor`, YaRN against `rope_original_length`;
  'none' is RoPE as trained).

  Example: rope(x, p, rope_scaling='pi', rope_factor=2.0) == apply_rope(x, p / 2).
  """
  divisor, freqs, scale = scaling(
    rope_scaling, rope_factor, rope_original_length, x.shape[-1], max_time
  )
  if divisor != 1:
    positions = positions / divisor
  return apply_rope(x, positions, max_time=max_time, freqs=freqs, scale=scale)


# RoPE at 0..T-1; randomized: q and k share one draw of sorted positions per layer.
ROTARY = define.rotation(
  rope,
  name='rotary',
  options={
    'max_time': declare.MAX_TIME,
    'rope_scaling': declare.option(
      'none', 'a test-time scaling of RoPE for longer sequences', valid=ROPE_SCALINGS, test=True
    ),
    'rope_factor': declare.option(
      1.0,
      "the scaling's factor s",
      valid=declare.number(0),
      must_be='a number > 0',
      test=True,
    ),
    'rope_original_length': declare.option(
      0,
      "YaRN's original (training) length L; 0 only with another scaling",
      valid=declare.integer(0),
      must_be='an integer >= 0',
      test=True,
    ),
  },
  about='RoPE: queries and keys are rotated by angles proportional to their positions, so that '
  'their dot product depends on the distance between them only.',
  papers=(papers.SU2024,),
)
