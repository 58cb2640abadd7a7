"""Rotary position encoding (Su et al. 2021): q and k rotated by their positions."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from posenc.encodings import core
from posenc.encodings import embeddings
from posenc.encodings import randomized as randomized_lib

Array = jax.Array


def apply_rope(x: Array, positions: Array, *, max_time: float = 10_000.0) -> Array:
  """Rotates interleaved pairs of x by angles proportional to the positions.

  For the pair (x_{2m}, x_{2m+1}) at position p, with f_m = max_time^(-m/(K/2)):
    x'_{2m} = x_{2m} cos(p f_m) - x_{2m+1} sin(p f_m),
    x'_{2m+1} = x_{2m+1} cos(p f_m) + x_{2m} sin(p f_m).
  q·k after rotation depends on the positions only through their difference.

  Args:
    x: [..., T, H, K] queries or keys, K even.
    positions: [T] integer (or randomized) positions, or [B, T] with x [B, T, H, K].
    max_time: frequency base.

  Returns:
    [..., T, H, K], in x's dtype.

  Example (K = 2, so f_0 = 1):
    x = [1, 0] at p = 0 -> [1, 0];  x = [1, 0] at p = 1 -> [cos 1, sin 1] = [.540, .841].
  """
  head_dim = x.shape[-1]
  if head_dim % 2:
    raise ValueError(f'rotary encoding needs an even head width, got {head_dim}')
  freqs = max_time ** (-np.arange(head_dim // 2) / (head_dim // 2))
  angles = (jnp.asarray(positions, jnp.float32)[..., None, None]
            * jnp.asarray(freqs, jnp.float32))
  cos, sin = jnp.cos(angles), jnp.sin(angles)  # [(B,) T, 1, K/2]
  pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], head_dim // 2, 2)
  even, odd = pairs[..., 0], pairs[..., 1]
  out = jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
  return out.reshape(x.shape).astype(x.dtype)


class RotaryEncoding(core.EncodingModule):
  """RoPE at 0..T-1; randomized: q and k share one draw of sorted positions per layer."""
  randomized: bool = False
  max_time: float = 10_000.0

  def __call__(self, num_positions: int, length: Array, inputs: Array,
               deterministic: bool = True) -> core.AttentionEncoding:
    del inputs, deterministic
    positions = embeddings.positions_of(self, num_positions, length)
    max_time = self.max_time
    return core.AttentionEncoding(
        'rotary', core.ROTATION,
        rotate=lambda x, idx: apply_rope(x, randomized_lib.lookup(positions, idx, 1),
                                         max_time=max_time),
        params={'positions': positions, 'max_time': max_time})
