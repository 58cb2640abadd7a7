"""Randomized positions and distances (Ruoss et al. 2023), shared by every randomized encoding.

sin/cos, learned and RoPE replace the positions 0..T-1 by a sorted random subset of
{0..L-1} (`random_positions`); ALiBi and relative attention replace the distance d between
two tokens by r_d, with r_1 < ... < r_{T-1} a sorted random subset of {1..L-1}
(`random_distances`), as the reference implementation does. One draw serves a whole batch;
attention encodings draw once per layer, embeddings once per call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

RELATIVE_MODES = ('symmetric', 'reference')


def random_positions(
  key: Array,
  num_positions: int,
  *,
  max_position: int,
  length: Array | int | None = None,
  min_position: int = 0,
) -> Array:
  """A sorted uniform random subset of {min_position, ..., max_position - 1}.

  Draws without replacement, as `sort(jax.random.choice(key, range, (T,), replace=False))`.
  With a traced `length` <= T (padded batches), the first `length` entries are exactly the
  sorted uniform `length`-subset that the exact-shape call `random_positions(key, length)`
  returns: the first T entries of one random permutation, those at index >= length pushed
  to the end, sorted. Entries past `length` are max_position - 1.

  Args:
    key: a PRNG key.
    num_positions: T (static).
    max_position: L (static); values are < L.
    length: traced or static number of real positions (default T); an int array [B]
      draws one subset per sequence, each of its own length.
    min_position: smallest value that may be drawn.

  Returns:
    int32 [T] ([B, T] for a length per sequence), non-decreasing; strictly increasing on
    the first `length` entries.

  Example:
    >>> key = jax.random.key(0)
    >>> random_positions(key, 3, max_position=10)
    Array([0, 1, 8], dtype=int32)
    >>> random_positions(key, 5, max_position=10, length=3)   # the same 3, then 9s
    Array([0, 1, 8, 9, 9], dtype=int32)
  """
  if length is not None and jnp.ndim(length) == 1:
    keys = jax.random.split(key, length.shape[0])
    return jax.vmap(
      lambda k, n: random_positions(
        k, num_positions, max_position=max_position, length=n, min_position=min_position
      )
    )(keys, length)
  population = max_position - min_position
  if num_positions > population:
    raise ValueError(
      f'sequence length {num_positions} exceeds the {population} positions available to '
      f'randomized encodings (max_position={max_position}); increase max_position'
    )
  draw = jax.random.permutation(key, population)[:num_positions] + min_position
  if length is not None:
    draw = jnp.where(jnp.arange(num_positions) < length, draw, max_position)
  draw = jnp.sort(draw)
  return jnp.minimum(draw, max_position - 1).astype(jnp.int32)


def random_distances(
  key: Array, num_positions: int, *, max_position: int, length: Array | int | None = None
) -> Array:
  """Randomized distances [0, r_1, ..., r_{T-1}] with r_1 < ... < r_{T-1} drawn from {1..L-1}.

  Args:
    key: a PRNG key.
    num_positions: T (static); distances 0..T-1 are needed.
    max_position: L.
    length: traced number of real positions (default T): r_d for d < length matches the
      exact-shape call.

  Returns:
    int32 [T] ([B, T] for a length per sequence) with entry 0 equal to 0.

  Example:
    >>> random_distances(jax.random.key(0), 4, max_position=20)    # r_0 = 0, then increasing
    Array([0, 1, 2, 9], dtype=int32)
  """
  if num_positions > max_position:
    raise ValueError(
      f'sequence length {num_positions} exceeds max_position={max_position} of randomized '
      'encodings; increase max_position'
    )
  rest_length = None if length is None else length - 1
  rest = random_positions(
    key, num_positions - 1, max_position=max_position, length=rest_length, min_position=1
  )
  return jnp.concatenate([jnp.zeros(rest.shape[:-1] + (1,), jnp.int32), rest], axis=-1)


def relative_offset_positions(
  num_positions: int,
  *,
  distances: Array | None = None,
  left_distances: Array | None = None,
  mode: str = 'symmetric',
  max_position: int = 0,
) -> Array:
  """The position the relative encoding feeds its sinusoid for each offset j - i.

  Entry c holds offset c - (T - 1), c = 0..2T-2. Without `distances`: the offset itself.
  With randomized distances r_d:
  - 'symmetric' (the method as published): ±d -> ±r_d, 0 -> 0; `left_distances` give the
    left side its own draw (randomize_both_sides).
  - 'reference' (the released code): its table has rows 0..L-1 only and the index L + offset
    is clamped, so every key at or right of the query gets L - 1 and a left key at distance
    d gets L - r_d.

  Args:
    num_positions: T.
    distances: optional int [T] or [B, T] (one draw per sequence): r_d, r_0 = 0.
    left_distances: optional, the same shape: r_d of keys left of the query.
    mode: 'symmetric' or 'reference'.
    max_position: L (for 'reference').

  Returns:
    int32 [2T - 1] (or [B, 2T - 1]).

  Example (T = 3, r = [0, 2, 5], L = 8): no draw -> [-2, -1, 0, 1, 2];
    symmetric -> [-5, -2, 0, 2, 5]; reference -> [3, 6, 7, 7, 7].
  """
  if mode not in RELATIVE_MODES:
    raise ValueError(f'relative_mode must be one of {RELATIVE_MODES}, got {mode!r}')
  offsets = np.arange(-(num_positions - 1), num_positions)
  if distances is None:
    return jnp.asarray(offsets, jnp.int32)
  d = np.abs(offsets)
  if mode == 'reference':
    return jnp.where(offsets >= 0, max_position - 1, max_position - distances[..., d]).astype(
      jnp.int32
    )
  left = distances if left_distances is None else left_distances
  return jnp.where(offsets >= 0, distances[..., d], -left[..., d]).astype(jnp.int32)


def lookup(table: Array, index: Array, rank: int) -> Array:
  """table[index] for a table shared by the batch ([T]) or one per sequence ([B, T]).

  `index` has `rank` axes, or one more in front (the batch) when it differs per sequence.

  Example: lookup([[0, 5, 9], [0, 2, 3]], [1, 2], rank=1) -> [[5, 9], [2, 3]].
  """
  table, index = jnp.asarray(table), jnp.asarray(index)
  if table.ndim == 1:
    return table[index]
  if index.ndim == rank:
    index = jnp.broadcast_to(index, (table.shape[0],) + index.shape)
  return jax.vmap(lambda t, i: t[i])(table, index)
