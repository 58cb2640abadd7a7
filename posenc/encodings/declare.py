"""Declarations an encoding function makes: its parameters (`param`: a shape in the model's
sizes and an initializer) and its options (`option`: a default, what it means, its valid
values), with the valid-value tests options share (`integer`, `number`, `boolean`) and the
options several encodings share (`MAX_TIME`, `BOTH_SIDES`).

Example:
  >>> param(('heads',), nn.initializers.ones).concrete({'heads': 4})
  (4,)
  >>> option(128, "sliding_window's w", valid=integer(1), must_be='an integer >= 1').default
  128
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax

from posenc.encodings import core

Array = jax.Array
# The model's sizes a parameter's shape may name.
SIZES = ('heads', 'head_dim', 'width', 'max_position')


@dataclasses.dataclass(frozen=True)
class Param:
  """A parameter of an encoding function: its shape (ints, or the sizes of `SIZES`), its
  initializer (a `jax.nn.initializers` function) and where it is stored, if not under its
  keyword ('w_r/kernel': as a Dense layer named w_r stores its kernel)."""

  shape: tuple[int | str, ...]
  init: Callable[..., Array] = nn.initializers.zeros
  stored_as: str | None = None

  def concrete(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
    missing = [s for s in self.shape if isinstance(s, str) and s not in sizes]
    if missing:
      raise ValueError(f'parameter shape {self.shape!r}: this kind of encoding has no {missing[0]}')
    return tuple(sizes[s] if isinstance(s, str) else int(s) for s in self.shape)


def param(
  shape: tuple[int | str, ...] | int | str,
  init: Callable[..., Array] = nn.initializers.zeros,
  *,
  stored_as: str | None = None,
) -> Param:
  """A parameter declaration. Example: param(('heads',), nn.initializers.ones)."""
  shape = shape if isinstance(shape, tuple) else (shape,)
  bad = [
    s
    for s in shape
    if not (isinstance(s, str) and s in SIZES)
    and not (isinstance(s, int) and not isinstance(s, bool) and s >= 1)
  ]
  if bad:
    raise ValueError(
      f'parameter shape {shape!r}: {bad[0]!r} is not a positive int or one of {", ".join(SIZES)}'
    )
  if not callable(init):
    raise ValueError(f'parameter init {init!r} is not an initializer (key, shape, dtype) -> array')
  if stored_as is not None and not 1 <= len(stored_as.split('/')) <= 2:
    raise ValueError(f'parameter stored_as={stored_as!r} is not NAME or MODULE/NAME')
  return Param(shape, init, stored_as)


def option(
  default: Any,
  doc: str,
  *,
  valid: tuple[Any, ...] | Callable[[Any, Mapping[str, Any]], bool] | None = None,
  must_be: str | Callable[[Mapping[str, Any]], str] = '',
  test: bool = False,
  twin: bool = False,
) -> core.Option:
  """An option declaration (`core.Option`): its default, what it means and its valid values
  (choices, or a test of the value and the other options with `must_be` in words).

  Example: option(128, "sliding_window's w", valid=integer(1), must_be='an integer >= 1').
  """
  if not isinstance(doc, str) or not doc:
    raise ValueError(f'option with default {default!r}: say what it means in `doc`')
  if callable(valid) and not must_be:
    raise ValueError(f'option {doc!r}: say which values are valid in `must_be`')
  return core.Option(default, doc, valid, must_be, test, twin)


def integer(low: int) -> Callable[[Any, Any], bool]:
  """A valid-values test: an int >= low (not a bool)."""
  return lambda x, _: isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= low


def number(above: float | None = None) -> Callable[[Any, Any], bool]:
  """A valid-values test: a real number (not a bool), > above if given."""
  return lambda x, _: (
    isinstance(x, numbers.Real) and not isinstance(x, bool) and (above is None or x > above)
  )


def boolean(value: Any, options: Any) -> bool:
  """A valid-values test: True or False."""
  del options
  return isinstance(value, bool)


MAX_TIME = option(
  10_000.0,
  "the base of the sinusoids' geometric frequency progression",
  valid=number(0),
  must_be='a number > 0',
)
BOTH_SIDES = option(
  False,
  'randomized distances: keys left of the query get a draw of their own',
  valid=boolean,
  must_be='True or False',
  twin=True,
)
