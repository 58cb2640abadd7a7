"""The lengths kind's record in results.json: every member's exact match, edit distance and
token accuracy per test distribution and length (task hinting, Awasthi & Gupta 2023), its
score the exact match over the first distribution's lengths past training.

Example (a member as results.json holds it):
  >>> data = {'seed': 0, 'learning_rate': 1e-4, 'diverged': False, 'score': 0.25,
  ...         'exact_match_by_length': {'rep2': {'50': 0.25}},
  ...         'edit_distance_by_length': {'rep2': {'50': 3.5}}}
  >>> member = LengthsMember.from_json(data, 'results.json')
  >>> member.by_length['exact_match']['rep2'][50]    # metric, distribution, length
  0.25
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from posenc import results


@dataclasses.dataclass(frozen=True)
class LengthsMember(results.Member):
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
        f'{metric}_by_length': {d: results.length_keys(by) for d, by in table.items()}
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
        tables[metric] = results.nested_by_length(
          results.require(data, key, dict, where), key, where
        )
    return cls(**head, by_length=tables)


@dataclasses.dataclass(frozen=True)
class LengthsResults(results.Evaluation):
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
    return results.finite_curve(member.by_length['exact_match'][self.score_distribution])

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> LengthsResults:
    distributions = tuple(str(d) for d in results.require(data, 'distributions', list, where))
    if not distributions:
      raise results.SchemaError(f'{where}: distributions is empty')
    lengths = results.ints(
      results.require(data, 'eval_lengths', list, where), 'eval_lengths', where
    )
    hints = results.require(data, 'hints', list, where) if 'hints' in data else []
    return cls(
      tuple(str(h) for h in hints),
      str(data.get('hint_schedule', 'alternate')),
      lengths,
      distributions,
      str(data.get('score_distribution', distributions[0])),
      results.ints(data.get('score_lengths', []), 'score_lengths', where),
      results.read_members(data, LengthsMember, where),
    )


# What the registry reads this kind's results.json by.
RECORD = LengthsResults
