"""The range kind's record in results.json: every member's accuracy and exact match at
each evaluated length (the study's protocol, Ruoss et al. 2023), its scores their means over
the lengths past training.

Example:
  >>> member = RangeMember(seed=0, learning_rate=1e-3, diverged=False, score=0.5,
  ...                      accuracy_by_length={4: 1.0, 8: 0.5})
  >>> record = RangeResults((4, 8), (8, 8), (member,))   # evaluated at 4 and 8, scored at 8
  >>> record.score_basis()['lengths'], record.metric_of('decoder')
  ([8], 'exact match')
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from posenc.models import families
from posenc import results
import tasks as tasks_lib


@dataclasses.dataclass(frozen=True)
class RangeMember(results.Member):
  """Per-length accuracy and exact match ({length: value}); the scores are their means over
  the lengths past training."""

  accuracy_by_length: Mapping[int, float | None] = dataclasses.field(default_factory=dict)
  exact_match_score: float | None = None
  exact_match_by_length: Mapping[int, float | None] | None = None

  def to_json(self) -> dict[str, Any]:
    out = {
      **self._head(),
      'accuracy_by_length': results.length_keys(self.accuracy_by_length),
      'exact_match_score': self.exact_match_score,
      'exact_match_by_length': (
        None
        if self.exact_match_by_length is None
        else results.length_keys(self.exact_match_by_length)
      ),
    }
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> RangeMember:
    head, where = cls._read_head(data, where)
    accuracy = results.by_length_of(
      results.require(data, 'accuracy_by_length', dict, where), 'accuracy_by_length', where
    )
    # Files written before the exact-match metric have neither field.
    missing = head.pop('missing') + tuple(
      k for k in ('exact_match_score', 'exact_match_by_length') if k not in data
    )
    exact = data.get('exact_match_by_length')
    if exact is not None:
      exact = results.by_length_of(exact, 'exact_match_by_length', where)
    return cls(
      **head,
      missing=missing,
      accuracy_by_length=accuracy,
      exact_match_score=results.number_or_none(
        data.get('exact_match_score'), 'exact_match_score', where
      ),
      exact_match_by_length=exact,
    )


@dataclasses.dataclass(frozen=True)
class RangeResults(results.Evaluation):
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

  def examples_per_score(self, config: Any) -> int | None:
    """The examples of every length the score averages: `examples_per_length` rounded down
    to whole sub-batches (the evaluation draws them so), times those lengths."""
    evaluation = (config or {}).get('eval') or {}
    per_length, batch = evaluation.get('examples_per_length'), evaluation.get('batch_size')
    lengths = len(self.score_basis()['lengths'])
    if not isinstance(per_length, int) or not isinstance(batch, int) or batch <= 0:
      return None
    return (per_length // batch) * batch * lengths or None

  def metric_name(self, family: str, metric: str | None = None) -> str:
    """A decoder generates its outputs: exact match; an encoder: per-token accuracy."""
    return self._chosen(metric, 'exact_match' if families.of(family).generates else 'accuracy')

  def chance(self, task: str, family: str, metric: str | None = None) -> float:
    """1/C for a task of the study with C output classes, read by per-token accuracy or by
    the exact match of its one-token answer (a classification task); else 0 (the exact match
    of a longer answer: chance vanishes with the length).

    Example: even_pairs (2 classes) by exact match -> 0.5; bucket_sort by exact match -> 0.
    """
    name = self.metric_name(family, metric)
    spec = tasks_lib.REGISTRY.get(task)
    if spec is None or not spec.num_classes:
      return 0.0
    if name == 'accuracy' or spec.is_classification:
      return 1.0 / spec.num_classes
    return 0.0

  def score_of(self, member: RangeMember, family: str, metric: str | None = None) -> float | None:
    return getattr(member, self.FIELDS[self.metric_name(family, metric)][0])

  def curve(
    self, member: RangeMember, family: str = 'encoder', metric: str | None = None
  ) -> dict[int, float]:
    """The member's `metric_name(family, metric)` by length, sorted (NaN where none was
    recorded; {} for a file from before the exact-match metric)."""
    return results.finite_curve(
      getattr(member, self.FIELDS[self.metric_name(family, metric)][1]) or {}
    )

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> RangeResults:
    lengths = results.ints(
      results.require(data, 'eval_lengths', list, where), 'eval_lengths', where
    )
    score_lengths = data.get('score_lengths')
    if score_lengths is not None:
      score_lengths = results.ints(score_lengths, 'score_lengths', where)
    return cls(lengths, score_lengths, results.read_members(data, RangeMember, where))


# What the registry reads this kind's results.json by.
RECORD = RangeResults
