"""The members of results.json: one trained model each, one class per protocol, and the
field checks every record shares (a bad field is a one-line `SchemaError` naming the file
and the field).

Example:
  >>> RangeMember.from_json({'seed': 0, 'learning_rate': 1e-3, 'diverged': False,
  ...                        'score': 0.5, 'accuracy_by_length': {'5': 0.5}}, 'r.json'
  ...                       ).accuracy_by_length
  {5: 0.5}
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar, Mapping


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


@dataclasses.dataclass(frozen=True)
class RangeMember(Member):
  """Per-length accuracy and exact match ({length: value}); the scores are their means over
  the lengths past training."""

  accuracy_by_length: Mapping[int, float | None] = dataclasses.field(default_factory=dict)
  exact_match_score: float | None = None
  exact_match_by_length: Mapping[int, float | None] | None = None

  def to_json(self) -> dict[str, Any]:
    out = {
      **self._head(),
      'accuracy_by_length': length_keys(self.accuracy_by_length),
      'exact_match_score': self.exact_match_score,
      'exact_match_by_length': (
        None if self.exact_match_by_length is None else length_keys(self.exact_match_by_length)
      ),
    }
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> RangeMember:
    head, where = cls._read_head(data, where)
    accuracy = by_length_of(
      require(data, 'accuracy_by_length', dict, where), 'accuracy_by_length', where
    )
    # Files written before the exact-match metric have neither field.
    missing = head.pop('missing') + tuple(
      k for k in ('exact_match_score', 'exact_match_by_length') if k not in data
    )
    exact = data.get('exact_match_by_length')
    if exact is not None:
      exact = by_length_of(exact, 'exact_match_by_length', where)
    return cls(
      **head,
      missing=missing,
      accuracy_by_length=accuracy,
      exact_match_score=number_or_none(data.get('exact_match_score'), 'exact_match_score', where),
      exact_match_by_length=exact,
    )


_CELL = re.compile(r'\s*(\d+)\s*,\s*(\d+)\s*')


def _by_cell(raw: Any, name: str, where: str) -> dict[tuple[int, int], float | None]:
  """{'3,5': 1.0} -> {(3, 5): 1.0}."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  cells = {}
  for key, value in raw.items():
    match = _CELL.fullmatch(key)
    if not match:
      raise SchemaError(f"{where}: {name} key {key!r} is not 'a,b'")
    cells[int(match[1]), int(match[2])] = number_or_none(value, f'{name}[{key!r}]', where)
  return cells


@dataclasses.dataclass(frozen=True)
class GridMember(Member):
  """Exact match per region ('ood', 'beyond', 'id'; None for an empty region) and per cell
  (a, b); token accuracy likewise. The score is the OOD region's exact match."""

  REGIONS: ClassVar[tuple[str, ...]] = ('ood', 'beyond', 'id')
  regions: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
  token_accuracy_regions: Mapping[str, float | None] | None = None
  exact_match_by_cell: Mapping[tuple[int, int], float | None] = dataclasses.field(
    default_factory=dict
  )
  accuracy_by_cell: Mapping[tuple[int, int], float | None] | None = None

  def to_json(self) -> dict[str, Any]:
    cells = lambda by: None if by is None else {f'{a},{b}': v for (a, b), v in by.items()}
    out = {
      **self._head(),
      'regions': dict(self.regions),
      'token_accuracy_regions': (
        None if self.token_accuracy_regions is None else dict(self.token_accuracy_regions)
      ),
      'exact_match_by_cell': cells(self.exact_match_by_cell),
      'accuracy_by_cell': cells(self.accuracy_by_cell),
    }
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> GridMember:
    head, where = cls._read_head(data, where)
    raw = require(data, 'regions', dict, where)
    for name in cls.REGIONS:
      if name not in raw:
        raise SchemaError(f'{where}: regions has no {name!r}')
    regions = {}
    for name in raw:  # In the file's order.
      regions[name] = number_or_none(raw[name], f'regions.{name}', where)
      if regions[name] is not None and not head['diverged'] and not math.isfinite(regions[name]):
        raise SchemaError(f'{where}: not diverged but its regions.{name} is {regions[name]}')
    tokens = data.get('token_accuracy_regions')
    if tokens is not None:
      tokens = {
        str(k): number_or_none(v, f'token_accuracy_regions.{k}', where)
        for k, v in require(data, 'token_accuracy_regions', dict, where).items()
      }
    accuracy = data.get('accuracy_by_cell')
    missing = head.pop('missing') + tuple(
      k for k in ('token_accuracy_regions', 'accuracy_by_cell') if k not in data
    )
    return cls(
      **head,
      missing=missing,
      regions=regions,
      token_accuracy_regions=tokens,
      exact_match_by_cell=_by_cell(
        require(data, 'exact_match_by_cell', dict, where), 'exact_match_by_cell', where
      ),
      accuracy_by_cell=(
        None if accuracy is None else _by_cell(accuracy, 'accuracy_by_cell', where)
      ),
    )


@dataclasses.dataclass(frozen=True)
class LengthsMember(Member):
  """Per metric ('exact_match', 'edit_distance', 'accuracy'), {distribution: {length:
  value}}. The score is the exact match over the first distribution's lengths past training."""

  METRICS: ClassVar[tuple[str, ...]] = ('exact_match', 'edit_distance', 'accuracy')
  by_length: Mapping[str, Mapping[str, Mapping[int, float | None]]] = dataclasses.field(
    default_factory=dict
  )

  def to_json(self) -> dict[str, Any]:
    return {
      **self._head(),
      **{
        f'{metric}_by_length': {d: length_keys(by) for d, by in table.items()}
        for metric, table in self.by_length.items()
      },
    }

  @classmethod
  def from_json(cls, data: Any, where: str) -> LengthsMember:
    head, where = cls._read_head(data, where)
    tables = {}
    for metric in cls.METRICS:
      key = f'{metric}_by_length'
      # Token accuracy was added last; the report reads only the first two.
      if key in data or metric != 'accuracy':
        tables[metric] = nested_by_length(require(data, key, dict, where), key, where)
    return cls(**head, by_length=tables)


@dataclasses.dataclass(frozen=True)
class PerplexityMember(Member):
  """Perplexity per window mode and length ({mode: {length: ppl}}); the score is the first
  mode's at the longest length, `degradation` |ppl_L - ppl_n| / ppl_n (Qin et al.)."""

  degradation: float | None = None
  perplexity_by_length: Mapping[str, Mapping[int, float | None]] = dataclasses.field(
    default_factory=dict
  )

  def to_json(self) -> dict[str, Any]:
    out = {
      **self._head(),
      'degradation': self.degradation,
      'perplexity_by_length': {
        mode: length_keys(by) for mode, by in self.perplexity_by_length.items()
      },
    }
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> PerplexityMember:
    head, where = cls._read_head(data, where)
    missing = head.pop('missing') + (() if 'degradation' in data else ('degradation',))
    return cls(
      **head,
      missing=missing,
      degradation=number_or_none(data.get('degradation'), 'degradation', where),
      perplexity_by_length=nested_by_length(
        require(data, 'perplexity_by_length', dict, where), 'perplexity_by_length', where
      ),
    )


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
