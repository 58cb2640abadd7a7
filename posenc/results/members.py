"""The members of results.json: one trained model each (`Member`, the fields every kind of
evaluation shares; each kind's record subclasses it in `posenc.kinds`), and the field checks
every record shares (a bad field is a one-line `SchemaError` naming the file and the field).

Example:
  >>> Member.from_json({'seed': 0, 'learning_rate': 1e-3, 'diverged': False,
  ...                   'score': 0.5}, 'r.json').score
  0.5
  >>> require({'seed': 'a'}, 'seed', int, 'r.json')
  Traceback (most recent call last):
  ...
  posenc.results.members.SchemaError: r.json: 'seed' is 'a', expected int
"""

from __future__ import annotations

import dataclasses
import math

from typing import Any, Mapping


class SchemaError(ValueError):
  """A results.json that does not follow the schema; the message names the file and field."""


# ---------------------------------------------------------------------------------------------
# Field checks, shared by the records.


def require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
  """data[key], which must be of `kind` (a bool is not an int unless `kind` says so)."""
  if key not in data:
    raise SchemaError(f'{where}: missing {key!r}')
  value = data[key]
  kinds = kind if isinstance(kind, tuple) else (kind,)
  if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
    names = ' or '.join(k.__name__ for k in kinds)
    raise SchemaError(f'{where}: {key!r} is {value!r}, expected {names}')
  return value


def number_or_none(value: Any, name: str, where: str) -> float | None:
  if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
    raise SchemaError(f'{where}: {name} is {value!r}, expected a number or null')
  return None if value is None else float(value)


def ints(values: Any, name: str, where: str) -> tuple[int, ...]:
  if not isinstance(values, list) or not all(
    isinstance(n, int) and not isinstance(n, bool) for n in values
  ):
    raise SchemaError(f'{where}: {name} must be a list of integers')
  return tuple(values)


def by_length_of(raw: Any, name: str, where: str) -> dict[int, float | None]:
  """{'41': 0.9} -> {41: 0.9}, in the file's order."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  try:
    return {int(k): None if v is None else float(v) for k, v in raw.items()}
  except (TypeError, ValueError) as e:
    raise SchemaError(f'{where}: bad {name} entry ({e})') from None


def nested_by_length(raw: Any, name: str, where: str) -> dict[str, dict[int, float | None]]:
  """{'uniform': {'10': 0.5}} -> {'uniform': {10: 0.5}}."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  return {str(k): by_length_of(v, f'{name}.{k}', where) for k, v in raw.items()}


def length_keys(values: Mapping[int, Any]) -> dict[str, Any]:
  return {str(k): v for k, v in values.items()}


# ---------------------------------------------------------------------------------------------
# Members.


@dataclasses.dataclass(frozen=True)
class Member:
  """One trained model: its seed and learning rate, whether it diverged, its score (None
  when it has none: diverged, or no length past training).

  `missing` names the optional fields its (version 1) file did not record; `to_json` leaves
  them out again. `data_seed` is the member's data seed when the population varies it
  (`config.data_seeds`), else None and not written.
  """

  seed: int
  learning_rate: float
  diverged: bool
  score: float | None
  missing: tuple[str, ...] = ()
  data_seed: int | None = None

  def _head(self) -> dict[str, Any]:
    head = {
      'seed': self.seed,
      'data_seed': self.data_seed,
      'learning_rate': self.learning_rate,
      'diverged': self.diverged,
      'score': self.score,
    }
    return {
      k: v for k, v in head.items() if k not in self.missing and (k != 'data_seed' or v is not None)
    }

  def to_json(self) -> dict[str, Any]:
    """The shared fields (a kind whose members record nothing more uses these as they are)."""
    return self._head()

  @classmethod
  def from_json(cls, data: Any, where: str) -> Member:
    head, _ = cls._read_head(data, where)
    return cls(**head)

  @staticmethod
  def _read_head(data: Any, where: str) -> tuple[dict[str, Any], str]:
    """The shared fields as keyword arguments, and `where` naming the member."""
    if not isinstance(data, dict):
      raise SchemaError(f'{where}: expected an object, got {data!r}')
    seed = require(data, 'seed', int, where)
    data_seed = require(data, 'data_seed', int, where) if 'data_seed' in data else None
    learning_rate = float(require(data, 'learning_rate', (int, float), where))
    where = (
      f'{where} (seed {seed}, '
      + ('' if data_seed is None else f'data seed {data_seed}, ')
      + f'learning rate {learning_rate:g})'
    )
    diverged = require(data, 'diverged', bool, where)
    score = number_or_none(data.get('score'), 'score', where)
    missing = () if 'score' in data else ('score',)
    return {
      'seed': seed,
      'learning_rate': learning_rate,
      'diverged': diverged,
      'score': score,
      'missing': missing,
      'data_seed': data_seed,
    }, where


def finite_curve(by_length: Mapping[Any, float | None]) -> dict[Any, float]:
  """Values by length (or by cell (a, b)), sorted by key, NaN where none was recorded.

  Example: finite_curve({8: None, 4: 1}) == {4: 1.0, 8: nan}.
  """
  return {n: math.nan if v is None else float(v) for n, v in sorted(by_length.items())}


def read_members(data: Mapping[str, Any], member: type, where: str) -> tuple[Any, ...]:
  raw = require(data, 'members', list, where)
  if not raw:
    raise SchemaError(f'{where}: members is empty')
  return tuple(member.from_json(m, f'{where}: members[{i}]') for i, m in enumerate(raw))
