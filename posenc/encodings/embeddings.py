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


def abacus_positions(tokens: Array, is_digit: Array) -> Array:
  """Each digit's index within its number: 1, 2, 3, ... from the number's first token; 0 for
  every other token (McLeish et al. 2024). A number is a maximal run of digit tokens.

  Args:
    tokens: int [..., T] (only for the shape).
    is_digit: bool [..., T].

  Returns:
    int32 [..., T].

  Example: `98+385=` with digits d -> [1, 2, 0, 1, 2, 3, 0].
  """
  t = jnp.arange(tokens.shape[-1])
  previous = jnp.pad(is_digit, [(0, 0)] * (is_digit.ndim - 1) + [(1, 0)])[..., :-1]
  start = jnp.where(is_digit & ~previous, t, 0)
  run_start = jax.lax.cummax(start, axis=start.ndim - 1)
  return jnp.where(is_digit, t - run_start + 1, 0).astype(jnp.int32)


class SinCosEmbedding(nn.Module):
  """S(0..T-1), or S(sorted random positions) if randomized: [T, D] ([B, T, D] for draws
  per sequence)."""
  width: int
  max_position: int = 2048
  randomized: bool = False
  max_time: float = 10_000.0

  def __call__(self, num_positions: int, length: Array, tokens: Array | None = None,
               deterministic: bool = True) -> Array:
    del tokens, deterministic
    return sinusoid(positions_of(self, num_positions, length), self.width,
                    max_time=self.max_time)


class LearnedEmbedding(nn.Module):
  """E[0..T-1] (Embed(L, D), TruncNormal(1) init as hk.Embed), or E[sorted random positions]
  if randomized: the "label-based" encoding. [T, D] ([B, T, D] for draws per sequence)."""
  width: int
  max_position: int = 2048
  randomized: bool = False

  @nn.compact
  def __call__(self, num_positions: int, length: Array, tokens: Array | None = None,
               deterministic: bool = True) -> Array:
    del tokens, deterministic
    table = self.param('embedding', nn.initializers.truncated_normal(1.0),
                       (self.max_position, self.width))
    return learned(positions_of(self, num_positions, length), table)


class AbacusEmbedding(nn.Module):
  """Abacus (McLeish et al. 2024): E[each digit's index within its number] from a learned
  table of `max_position` rows; non-digits read row 0. In training one offset k ~ U{0..K}
  per batch (from the 'noise' stream) is added to every digit's index, so the model sees
  indices up to K + the longest number; at evaluation k = 0. [B, T, D] for tokens [B, T]."""
  width: int
  max_position: int = 2048
  digit_ids: tuple[int, ...] = tuple(range(10))
  abacus_offset: int = 99

  @nn.compact
  def __call__(self, num_positions: int, length: Array, tokens: Array | None = None,
               deterministic: bool = True) -> Array:
    del num_positions, length
    table = self.param('embedding', nn.initializers.truncated_normal(1.0),
                       (self.max_position, self.width))
    positions = abacus_positions(tokens, jnp.isin(tokens, jnp.asarray(self.digit_ids)))
    if not deterministic:
      k = jax.random.randint(self.make_rng('noise'), (), 0, self.abacus_offset + 1)
      positions = jnp.where(positions > 0, positions + k, 0)
    return learned(positions, table)


def coupled_positions(tokens: Array, is_digit: Array, start: Array) -> Array:
  """Position coupling (Cho et al. 2024): digits of equal significance share one position.

  In the arithmetic tasks every number is written least-significant digit first, so a
  digit's index within its number (`abacus_positions`, 1-based) is its significance + 1:
  digit k of each operand and of the answer get start + k + 1, every other token (the
  operators) start, as in the authors' code (which zero-pads the operands; here they keep
  their lengths and still share ids by significance).

  Args:
    tokens: int [B, T]; is_digit: bool [B, T].
    start: int [B] (or a scalar): the offset s >= 1 of each sequence.

  Returns:
    int32 [B, T].

  Example (s = 1): `98+385=` -> [2, 3, 1, 2, 3, 4, 1]; the answer `384` after it -> [2, 3, 4].
  """
  start = jnp.reshape(jnp.asarray(start, jnp.int32), (-1, 1))
  return (start + abacus_positions(tokens, is_digit)).astype(jnp.int32)


class CouplingEmbedding(nn.Module):
  """Position coupling: E[coupled position] from a learned table of `max_position` rows
  (N(0, 1) init, as the authors' code). In training each sequence draws its own offset
  s ~ U{1..P - 1 - (its longest number)} (from the 'noise' stream) with P =
  `coupling_max_position` (the authors' max_pos; 0: the table's size), so the ids stay
  below P; at evaluation s = 1. A number longer than max_position - 2 digits reads the
  table's last row. [B, T, D] for tokens [B, T]."""
  width: int
  max_position: int = 2048
  digit_ids: tuple[int, ...] = tuple(range(10))
  coupling_max_position: int = 0

  @nn.compact
  def __call__(self, num_positions: int, length: Array, tokens: Array | None = None,
               deterministic: bool = True) -> Array:
    del num_positions, length
    table = self.param('embedding', nn.initializers.normal(1.0),
                       (self.max_position, self.width))
    is_digit = jnp.isin(tokens, jnp.asarray(self.digit_ids))
    start = jnp.ones(tokens.shape[:1], jnp.int32)
    if not deterministic:
      longest = jnp.max(abacus_positions(tokens, is_digit), axis=-1)
      limit = min(self.coupling_max_position or self.max_position, self.max_position)
      top = jnp.maximum(limit - 1 - longest, 1)
      start = jax.random.randint(self.make_rng('noise'), tokens.shape[:1], 1, top + 1)
    return learned(coupled_positions(tokens, is_digit, start), table)

