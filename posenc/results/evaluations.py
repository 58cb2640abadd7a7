"""The evaluation records of results.json, one per protocol: what each protocol measured
for every member, and how every reader reads it: the metric (`metrics`, `metric_of`), a
member's score and curve in it (`score_of`, `curve`) and what the score is taken over
(`score_basis`). The metric is chosen here and nowhere else: the report's tables, the
scorecard and the interventions all read members through these.

Example:
  >>> record = RangeResults((4, 8), (8, 8), members)     # doctest: +SKIP
  >>> record.score_basis()['lengths']
  [8]
  >>> record.metric_of('decoder'), record.metric_of('decoder', 'accuracy')
  ('exact match', 'accuracy')
  >>> record.curve(members[0], 'encoder', 'exact_match')   # {length: exact match}
  {4: 1.0, 8: 0.25}
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Mapping

from posenc import families
from posenc.results.members import (
  GridMember,
  LengthsMember,
  Member,
  PerplexityMember,
  RangeMember,
  SchemaError,
  finite_curve,
  ints,
  read_members,
  require,
)

# Every metric a record can be read in, by the name a reader chooses it by, and how titles and
# axis labels name it.
METRICS: dict[str, str] = {
  'accuracy': 'accuracy',
  'exact_match': 'exact match',
  'perplexity': 'perplexity',
}

# ---------------------------------------------------------------------------------------------
# The evaluations, one per protocol.


class Evaluation(abc.ABC):
  """What every evaluation record gives its readers: a member's score and its curve by length
  in one of the record's `metrics` (by default the one the model family is judged by:
  generated answers by exact match), and whether higher is better."""

  evaluation: ClassVar[str]  # results.json's `evaluation`, the protocol's name.
  # The metrics its members record (names of METRICS); the first is the default.
  metrics: ClassVar[tuple[str, ...]] = ('accuracy',)
  higher_is_better: ClassVar[bool] = True

  def metric_name(self, family: str, metric: str | None = None) -> str:
    """The name of the metric `score_of` and `curve` read: `metric` when given, else the one
    `family` is judged by.

    Raises:
      ValueError: `metric` is not one of `metrics`.
    """
    del family
    return self._chosen(metric, self.metrics[0])

  def metric_of(self, family: str, metric: str | None = None) -> str:
    """How titles name that metric, e.g. 'exact match'."""
    return METRICS[self.metric_name(family, metric)]

  def score_of(self, member: Member, family: str, metric: str | None = None) -> float | None:
    self.metric_name(family, metric)
    return member.score

  @abc.abstractmethod
  def score_basis(self) -> dict[str, Any]:
    """What a member's score is taken over: {'what': a phrase, 'lengths': [the lengths]}."""

  def _chosen(self, metric: str | None, default: str) -> str:
    if metric is None:
      return default
    if metric not in self.metrics:
      raise ValueError(
        f'{self.evaluation} results have no metric {metric!r}; they record '
        f'{", ".join(self.metrics)}'
      )
    return metric


@dataclasses.dataclass(frozen=True)
class RangeResults(Evaluation):
  """The study's evaluation: every member's metrics at `eval_lengths`; `score_lengths` the
  first and last length past training (None when none is)."""

  evaluation: ClassVar[str] = 'range'
  default_family: ClassVar[str] = 'encoder'  # Version 1 files from before the decoder.
  metrics: ClassVar[tuple[str, ...]] = ('accuracy', 'exact_match')
  higher_is_better: ClassVar[bool] = True
  # Each metric's member fields: its score (the mean past training) and its curve by length.
  FIELDS: ClassVar[Mapping[str, tuple[str, str]]] = {
    'accuracy': ('score', 'accuracy_by_length'),
    'exact_match': ('exact_match_score', 'exact_match_by_length'),
  }
  eval_lengths: tuple[int, ...]
  score_lengths: tuple[int, int] | None
  members: tuple[RangeMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {
      'evaluation': self.evaluation,
      'eval_lengths': list(self.eval_lengths),
      'score_lengths': None if self.score_lengths is None else list(self.score_lengths),
      'members': [m.to_json() for m in self.members],
    }

  def score_basis(self) -> dict[str, Any]:
    first, last = self.score_lengths or (0, -1)
    return {
      'what': 'mean over the evaluated lengths past training',
      'lengths': [n for n in self.eval_lengths if first <= n <= last],
    }

  def metric_name(self, family: str, metric: str | None = None) -> str:
    """A decoder generates its outputs: exact match; an encoder: per-token accuracy."""
    return self._chosen(metric, 'exact_match' if families.of(family).generates else 'accuracy')

  def score_of(self, member: RangeMember, family: str, metric: str | None = None) -> float | None:
    return getattr(member, self.FIELDS[self.metric_name(family, metric)][0])

  def curve(
    self, member: RangeMember, family: str = 'encoder', metric: str | None = None
  ) -> dict[int, float]:
    """The member's `metric_name(family, metric)` by length, sorted (NaN where none was
    recorded; {} for a file from before the exact-match metric)."""
    return finite_curve(getattr(member, self.FIELDS[self.metric_name(family, metric)][1]) or {})

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> RangeResults:
    lengths = ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where)
    score_lengths = data.get('score_lengths')
    if score_lengths is not None:
      score_lengths = ints(score_lengths, 'score_lengths', where)
    return cls(lengths, score_lengths, read_members(data, RangeMember, where))


@dataclasses.dataclass(frozen=True)
class GridResults(Evaluation):
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
    return finite_curve(
      {a: v for (a, b), v in sorted(member.exact_match_by_cell.items()) if a == b}
    )

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> GridResults:
    axes = require(data, 'axes', list, where)
    if len(axes) != 2 or not all(isinstance(a, str) and a for a in axes):
      raise SchemaError(f'{where}: axes is {axes!r}, expected two axis names')
    grid = require(data, 'grid', dict, where)
    at = f'{where}: grid'
    return cls(
      (axes[0], axes[1]),
      require(grid, 'max', int, at),
      require(grid, 'stride', int, at),
      ints(require(grid, 'beyond', list, at), 'beyond', at),
      require(grid, 'samples_per_cell', int, at),
      read_members(data, GridMember, where),
    )


@dataclasses.dataclass(frozen=True)
class LengthsResults(Evaluation):
  """The hinting study's evaluation: per test distribution and length; the score over
  `score_distribution` at `score_lengths`."""

  evaluation: ClassVar[str] = 'lengths'
  default_family: ClassVar[str] = 'decoder'
  metrics: ClassVar[tuple[str, ...]] = ('exact_match',)
  higher_is_better: ClassVar[bool] = True
  hints: tuple[str, ...]
  hint_schedule: str
  eval_lengths: tuple[int, ...]
  distributions: tuple[str, ...]
  score_distribution: str
  score_lengths: tuple[int, ...]
  members: tuple[LengthsMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {
      'evaluation': self.evaluation,
      'hints': list(self.hints),
      'hint_schedule': self.hint_schedule,
      'eval_lengths': list(self.eval_lengths),
      'distributions': list(self.distributions),
      'score_distribution': self.score_distribution,
      'score_lengths': list(self.score_lengths),
      'members': [m.to_json() for m in self.members],
    }

  def score_basis(self) -> dict[str, Any]:
    return {
      'what': f'mean over the {self.score_distribution} lengths past training',
      'lengths': list(self.score_lengths),
    }

  def curve(
    self, member: LengthsMember, family: str = 'decoder', metric: str | None = None
  ) -> dict[int, float]:
    """Full-sequence accuracy on the score distribution, by length."""
    self.metric_name(family, metric)
    return finite_curve(member.by_length['exact_match'][self.score_distribution])

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> LengthsResults:
    distributions = tuple(str(d) for d in require(data, 'distributions', list, where))
    if not distributions:
      raise SchemaError(f'{where}: distributions is empty')
    lengths = ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where)
    hints = require(data, 'hints', list, where) if 'hints' in data else []
    return cls(
      tuple(str(h) for h in hints),
      str(data.get('hint_schedule', 'alternate')),
      lengths,
      distributions,
      str(data.get('score_distribution', distributions[0])),
      ints(data.get('score_lengths', []), 'score_lengths', where),
      read_members(data, LengthsMember, where),
    )


@dataclasses.dataclass(frozen=True)
class PerplexityResults(Evaluation):
  """A language model's perplexity per window length; `corpus` describes the split,
  `eval_seconds` the time per length and mode."""

  evaluation: ClassVar[str] = 'perplexity'
  default_family: ClassVar[str] = 'decoder'
  metrics: ClassVar[tuple[str, ...]] = ('perplexity',)
  higher_is_better: ClassVar[bool] = False
  eval_lengths: tuple[int, ...]
  corpus: Mapping[str, Any]
  eval_seconds: Mapping[str, Any]
  members: tuple[PerplexityMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {
      'evaluation': self.evaluation,
      'eval_lengths': list(self.eval_lengths),
      'corpus': dict(self.corpus),
      'eval_seconds': dict(self.eval_seconds),
      'members': [m.to_json() for m in self.members],
    }

  def score_basis(self) -> dict[str, Any]:
    return {'what': 'at the longest evaluated length', 'lengths': [max(self.eval_lengths)]}

  def curve(
    self, member: PerplexityMember, family: str = 'decoder', metric: str | None = None
  ) -> dict[int, float]:
    """Perplexity by length in the first window mode (the score's)."""
    self.metric_name(family, metric)
    return finite_curve(next(iter(member.perplexity_by_length.values())))

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> PerplexityResults:
    return cls(
      ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where),
      data.get('corpus') or {},
      data.get('eval_seconds') or {},
      read_members(data, PerplexityMember, where),
    )
