"""The grid kind's record in results.json: every member's exact match (and token accuracy)
on each cell (a, b) of two operand lengths and per region (McLeish et al. 2024), its score
the out-of-distribution region's.

Example (a member as results.json holds it; its cells' keys 'a,b'):
  >>> data = {'seed': 0, 'learning_rate': 1e-4, 'diverged': False, 'score': 0.75,
  ...         'regions': {'ood': 0.75, 'beyond': 0.5, 'id': 1.0},
  ...         'exact_match_by_cell': {'3,5': 1.0}}
  >>> member = GridMember.from_json(data, 'results.json')
  >>> member.regions['ood'], member.exact_match_by_cell[3, 5]
  (0.75, 1.0)
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar, Mapping

from posenc import results


_CELL = re.compile(r'\s*(\d+)\s*,\s*(\d+)\s*')


def _by_cell(raw: Any, name: str, where: str) -> dict[tuple[int, int], float | None]:
  """{'3,5': 1.0} -> {(3, 5): 1.0}."""
  if not isinstance(raw, dict):
    raise results.SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  cells = {}
  for key, value in raw.items():
    match = _CELL.fullmatch(key)
    if not match:
      raise results.SchemaError(f"{where}: {name} key {key!r} is not 'a,b'")
    cells[int(match[1]), int(match[2])] = results.number_or_none(value, f'{name}[{key!r}]', where)
  return cells


@dataclasses.dataclass(frozen=True)
class GridMember(results.Member):
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
    raw = results.require(data, 'regions', dict, where)
    for name in cls.REGIONS:
      if name not in raw:
        raise results.SchemaError(f'{where}: regions has no {name!r}')
    regions = {}
    for name in raw:  # In the file's order.
      regions[name] = results.number_or_none(raw[name], f'regions.{name}', where)
      if regions[name] is not None and not head['diverged'] and not math.isfinite(regions[name]):
        raise results.SchemaError(
          f'{where}: not diverged but its regions.{name} is {regions[name]}'
        )
    tokens = data.get('token_accuracy_regions')
    if tokens is not None:
      tokens = {
        str(k): results.number_or_none(v, f'token_accuracy_regions.{k}', where)
        for k, v in results.require(data, 'token_accuracy_regions', dict, where).items()
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
        results.require(data, 'exact_match_by_cell', dict, where), 'exact_match_by_cell', where
      ),
      accuracy_by_cell=(
        None if accuracy is None else _by_cell(accuracy, 'accuracy_by_cell', where)
      ),
    )


@dataclasses.dataclass(frozen=True)
class GridResults(results.Evaluation):
  """Exact match over a grid of cells (a, b) for a, b in 1..grid_max at `grid_stride` (and
  grid_max), plus (x, x) for x in `beyond`; `axes` names the two axes."""

  evaluation: ClassVar[str] = 'grid'
  default_family: ClassVar[str] = 'decoder'  # Only decoders generate answers.
  # A curve's length n is the cell (n, n): both operands n long.
  metrics: ClassVar[tuple[str, ...]] = ('exact_match',)
  higher_is_better: ClassVar[bool] = True
  axes: tuple[str, str]
  grid_max: int
  grid_stride: int
  beyond: tuple[int, ...]
  samples_per_cell: int
  members: tuple[GridMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {
      'evaluation': self.evaluation,
      'axes': list(self.axes),
      'grid': {
        'max': self.grid_max,
        'stride': self.grid_stride,
        'beyond': list(self.beyond),
        'samples_per_cell': self.samples_per_cell,
      },
      'members': [m.to_json() for m in self.members],
    }

  def score_basis(self) -> dict[str, Any]:
    return {
      'what': 'mean over the out-of-distribution cells (a, b), an operand past training, '
      'of the grid of operand lengths (length n in the curves: the cell (n, n))',
      'lengths': sorted({*range(1, self.grid_max + 1, self.grid_stride), self.grid_max}),
    }

  def curve(
    self, member: GridMember, family: str = 'decoder', metric: str | None = None
  ) -> dict[int, float]:
    """Exact match on the diagonal cells (n, n), by n."""
    self.metric_name(family, metric)
    return results.finite_curve(
      {a: v for (a, b), v in sorted(member.exact_match_by_cell.items()) if a == b}
    )

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> GridResults:
    axes = results.require(data, 'axes', list, where)
    if len(axes) != 2 or not all(isinstance(a, str) and a for a in axes):
      raise results.SchemaError(f'{where}: axes is {axes!r}, expected two axis names')
    grid = results.require(data, 'grid', dict, where)
    at = f'{where}: grid'
    return cls(
      (axes[0], axes[1]),
      results.require(grid, 'max', int, at),
      results.require(grid, 'stride', int, at),
      results.ints(results.require(grid, 'beyond', list, at), 'beyond', at),
      results.require(grid, 'samples_per_cell', int, at),
      results.read_members(data, GridMember, where),
    )


# What the registry reads this kind's results.json by.
RECORD = GridResults
