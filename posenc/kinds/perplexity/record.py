"""The perplexity kind's record in results.json: every member's perplexity per window mode
and length (language models, Qin et al. 2023), its score the first mode's at the longest
length.

Example (a member as results.json holds it):
  >>> data = {'seed': 0, 'learning_rate': 1e-4, 'diverged': False, 'score': 3.2,
  ...         'degradation': 0.4, 'perplexity_by_length': {'sliding': {'128': 2.3, '512': 3.2}}}
  >>> member = PerplexityMember.from_json(data, 'results.json')
  >>> member.perplexity_by_length['sliding'][512], member.degradation
  (3.2, 0.4)
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from posenc import results


@dataclasses.dataclass(frozen=True)
class PerplexityMember(results.Member):
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
        mode: results.length_keys(by) for mode, by in self.perplexity_by_length.items()
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
      degradation=results.number_or_none(data.get('degradation'), 'degradation', where),
      perplexity_by_length=results.nested_by_length(
        results.require(data, 'perplexity_by_length', dict, where), 'perplexity_by_length', where
      ),
    )


@dataclasses.dataclass(frozen=True)
class PerplexityResults(results.Evaluation):
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
    return results.finite_curve(next(iter(member.perplexity_by_length.values())))

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> PerplexityResults:
    return cls(
      results.ints(results.require(data, 'eval_lengths', list, where), 'eval_lengths', where),
      data.get('corpus') or {},
      data.get('eval_seconds') or {},
      results.read_members(data, PerplexityMember, where),
    )


# What the registry reads this kind's results.json by.
RECORD = PerplexityResults
