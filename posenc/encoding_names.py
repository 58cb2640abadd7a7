"""The names of the built-in encodings, the one place they are written (no JAX, no Flax).

The registry (`posenc.encodings.ENCODINGS`) holds an entry for each name of `ALL`, in its
order; the report, which needs no model, reads its rows and columns from here.

  STUDY       the randomized-encoding study's 13 (Ruoss et al. 2023: Table 1's 11, Table 5's
              two geometric variants), in its order: the range tables' columns
  ARITHMETIC  the arithmetic study's (McLeish et al. 2024): Abacus, FIRE and FIRE on
              randomized positions
  RECENT      the methods of 2024-2025 (docs/encodings_2024.md)
  FAMILIES    the bias families of the distance (Qin et al. 2023, KERPLE, Sandwich, T5),
              each also on randomized positions
  ALL         every built-in, in the registry's order: the region table's columns
  TWINS       the encodings with a randomized twin, `randomized_<name>`

Example:
  >>> ALL[:3]
  ('none', 'sin_cos', 'relative')
  >>> twin('alibi'), 'kerple_log' in TWINS
  ('randomized_alibi', True)
"""

from __future__ import annotations

RANDOMIZED = 'randomized_'

# Table 1 of the study: the standard encodings, then each one's randomized twin.
TABLE1: tuple[str, ...] = (
  'none',
  'sin_cos',
  'relative',
  'alibi',
  'rotary',
  'learned',
  'randomized_sin_cos',
  'randomized_relative',
  'randomized_alibi',
  'randomized_rotary',
  'randomized_learned',
)
# Table 5 of the study: the Neural Data Router's geometric attention, plain and directional.
GEOMETRIC: tuple[str, ...] = ('geometric', 'geometric_directional')
STUDY: tuple[str, ...] = TABLE1 + GEOMETRIC
ARITHMETIC: tuple[str, ...] = ('abacus', 'fire', 'randomized_fire')
RECENT: tuple[str, ...] = (
  'position_coupling',
  'pope',
  'dape',
  'dape_v2',
  'cope',
  'forgetting',
  'stick_breaking',
)
FAMILIES: tuple[str, ...] = (
  'kerple_log',
  'kerple_power',
  'sandwich',
  'type1',
  'type2',
  'inverse_n',
  'inverse_n_log_n',
  'sliding_window',
  't5',
)
ALL: tuple[str, ...] = (
  TABLE1
  + ARITHMETIC
  + GEOMETRIC
  + RECENT
  + tuple(name for family in FAMILIES for name in (family, RANDOMIZED + family))
)
TWINS: tuple[str, ...] = tuple(n[len(RANDOMIZED) :] for n in ALL if n.startswith(RANDOMIZED))


def twin(name: str) -> str:
  """The name of `name`'s randomized twin. Example: twin('rotary') == 'randomized_rotary'."""
  return RANDOMIZED + name
