"""Encodings added to the token embeddings: sin/cos and learned, plain or randomized.

Each is a function of explicit positions [T] (0..T-1, or a sorted random draw), so one
decoding step at position t is the same call with positions [t].
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc.encodings import randomized as randomized_lib

Array = jax.Array


def sinusoid(positions: Array, width: int, *, max_time: float = 10_000.0) -> Array:
  """Sinusoid encodings S(p) of (possibly negative or randomized) positions.

  S(p) = [sin(p w_0), ..., sin(p w_{D/2-1}), cos(p w_0), ..., cos(p w_{D/2-1})] with
  w_i = max_time^(-2i/D): concatenated halves, not interleaved (as the released code of
  Ruoss et al.).

  Args:
    positions: integer or float array of any shape [...].
    width: D, even.
    max_time: the base of the geometric frequency progression.

  Returns:
    float32 [..., D].

  Example:
    >>> sinusoid(jnp.array([0, 1]), 4)   # w = [1, 0.01]
    [[0, 0, 1, 1], [sin 1, sin .01, cos 1, cos .01]] = [[0, 0, 1, 1], [.841, .010, .540, 1.]]
  """
  if width % 2:
    raise ValueError(f'sinusoid width must be even, got {width}')
  freqs = max_time ** (-2.0 * np.arange(width // 2) / width)
  angles = jnp.asarray(positions, jnp.float32)[..., None] * jnp.asarray(freqs, jnp.float32)
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def learned(positions: Array, table: Array) -> Array:
  """Rows of a learned table: table[min(p, L - 1)] (the reference's gather clamps).

  Args:
    positions: int [...].
    table: [L, D].

  Returns:
    [..., D].

  Example: learned(jnp.array([0, 5]), jnp.eye(3)) -> [[1, 0, 0], [0, 0, 1]].
  """
  return jnp.take(table, jnp.minimum(positions, table.shape[0] - 1), axis=0)


def positions_of(module: nn.Module, num_positions: int, length: Array) -> Array:
  """0..T-1, or one sorted random draw from the module's 'noise' stream if it is randomized."""
  if not module.randomized:
    return jnp.arange(num_positions)
  return randomized_lib.random_positions(module.make_rng('noise'), num_positions,
                                         max_position=module.max_position, length=length)


class SinCosEmbedding(nn.Module):
  """S(0..T-1), or S(sorted random positions) if randomized: [T, D]."""
  width: int
  max_position: int = 2048
  randomized: bool = False
  max_time: float = 10_000.0

  def __call__(self, num_positions: int, length: Array) -> Array:
    return sinusoid(positions_of(self, num_positions, length), self.width,
                    max_time=self.max_time)


class LearnedEmbedding(nn.Module):
  """E[0..T-1] (Embed(L, D), TruncNormal(1) init as hk.Embed), or E[sorted random positions]
  if randomized: the "label-based" encoding. [T, D]."""
  width: int
  max_position: int = 2048
  randomized: bool = False

  @nn.compact
  def __call__(self, num_positions: int, length: Array) -> Array:
    table = self.param('embedding', nn.initializers.truncated_normal(1.0),
                       (self.max_position, self.width))
    return learned(positions_of(self, num_positions, length), table)
