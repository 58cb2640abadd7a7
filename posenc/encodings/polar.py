"""Polar positional embedding (PoPE, Gopalakrishnan et al. 2025): content sets the magnitudes,
position alone sets the phases.

Each of the K features of a query or key becomes a complex number with magnitude
softplus(x_c) and phase p·θ_c (θ_c = max_time^(-c/K), c = 0..K-1: K frequencies, where RoPE
has K/2), the keys' phases shifted by a learned δ_c per head (initialised at 0, kept in
[-2π, 0]). The logit of query position t and key position s is the real part of their
product:

  a_ts = Σ_c softplus(q_c) softplus(k_c) cos((s - t)·θ_c + δ_c)

so it depends on the positions through s - t only, and "what" (magnitudes) and "where"
(phases) do not mix as in RoPE. Written as real vectors of width 2K, [μ cos φ, μ sin φ]
interleaved, a_ts is their dot product; the backends divide it by sqrt(2K), the width of
those vectors (an SDPA call's scale; the paper's scale is not given in the sources at hand).
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import papers

Array = jax.Array


def pope_frequencies(head_dim: int, max_time: float = 10_000.0) -> np.ndarray:
  """θ_c = max_time^(-c/K) for c = 0..K-1 (float64 [K]). Example: K = 2 -> [1, 0.01]."""
  return max_time ** (-np.arange(head_dim) / head_dim)


def apply_pope(
  x: Array, positions: Array, *, max_time: float = 10_000.0, phase_shift: Array | None = None
) -> Array:
  """x [..., T, H, K] -> [..., T, H, 2K]: (softplus(x_c) cos φ_c, softplus(x_c) sin φ_c)
  interleaved, φ_c = p·θ_c (+ δ_hc for keys).

  Args:
    x: queries or keys [..., T, H, K].
    positions: [T] (or [B, T] with x [B, T, H, K]).
    max_time: the frequency base.
    phase_shift: δ [H, K] for keys; None for queries.

  Returns:
    [..., T, H, 2K] in x's dtype; the dot product of a query's and a key's is a_ts above.

  Example (K = 1, θ = 1): x = [0] at p = 0 -> [ln 2, 0]; at p = π/2 -> [0, ln 2].
  """
  head_dim = x.shape[-1]
  angles = jnp.asarray(positions, jnp.float32)[..., None, None] * jnp.asarray(
    pope_frequencies(head_dim, max_time), jnp.float32
  )  # [.., T, 1, K]
  if phase_shift is not None:
    angles = angles + phase_shift.astype(jnp.float32)
  magnitude = jax.nn.softplus(x.astype(jnp.float32))
  out = jnp.stack([magnitude * jnp.cos(angles), magnitude * jnp.sin(angles)], axis=-1)
  return out.reshape(*x.shape[:-1], 2 * head_dim).astype(x.dtype)


def pope_queries(x: Array, positions: Array, phase_shift: Array, *, max_time: float) -> Array:
  """The queries' PoPE (no phase shift): `apply_pope`."""
  del phase_shift  # the keys'
  return apply_pope(x, positions, max_time=max_time)


def pope_keys(x: Array, positions: Array, phase_shift: Array, *, max_time: float) -> Array:
  """The keys' PoPE, phases shifted by δ clamped to [-2π, 0] (as the reference
  implementation, in the forward pass)."""
  delta = jnp.clip(phase_shift, -2 * math.pi, 0.0)
  return apply_pope(x, positions, max_time=max_time, phase_shift=delta)


# PoPE: positions 0..T-1, one phase shift δ [H, K] per layer (init 0).
POPE = define.rotation(
  pope_queries,
  keys=pope_keys,
  even_head_dim=False,
  name='pope',
  phase_shift=declare.param(('heads', 'head_dim'), nn.initializers.zeros),
  options={'max_time': declare.MAX_TIME},
  about='PoPE: content sets the magnitudes of the query and key features and position alone '
  'their phases, so that "what" and "where" do not mix as in RoPE.',
  papers=(papers.GOPALAKRISHNAN2025,),
)
