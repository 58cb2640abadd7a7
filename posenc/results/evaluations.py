"""What every evaluation record of results.json gives its readers (`Evaluation`; each kind of
evaluation's record subclasses it in its folder of `posenc.kinds`): what the kind measured for
every member, the metric (`metrics`, `metric_of`), a member's score and curve in it
(`score_of`, `curve`) and what the score is taken over (`score_basis`). The metric is chosen
by the records and nowhere else: the report's tables, the scorecard and the interventions
all read members through these.

Example (a range record, `posenc.kinds.range.record`: the tiny suite's stored rotary run of
even_pairs, trained on lengths 1..8 and tested on 1..12):
  >>> from experiments import benchmarks
  >>> from posenc import benchmark, kinds
  >>> data = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']['tasks']['even_pairs']
  >>> record = kinds.from_json(data).evaluation
  >>> record.score_basis()['lengths']
  [9, 10, 11, 12]
  >>> record.metric_of('decoder'), record.metric_of('decoder', 'accuracy')
  ('exact match', 'accuracy')
  >>> curve = record.curve(record.members[0], 'decoder', 'exact_match')  # {length: exact match}
  >>> curve[8], curve[12]
  (0.5625, 0.5625)
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from posenc.results.members import Member

# Every metric a record can be read in, by the name a reader chooses it by, and how titles and
# axis labels name it.
METRICS: dict[str, str] = {
  'accuracy': 'accuracy',
  'exact_match': 'exact match',
  'perplexity': 'perplexity',
}


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
    """How titles name that metric, e.g. 'exact match' (a metric not in METRICS: its name
    with spaces)."""
    name = self.metric_name(family, metric)
    return METRICS.get(name, name.replace('_', ' '))

  def score_of(self, member: Member, family: str, metric: str | None = None) -> float | None:
    self.metric_name(family, metric)
    return member.score

  def examples_per_score(self, config: Any) -> int | None:
    """How many examples a member's score is the mean of a [0, 1] metric over, from the run's
    `config` (results.json's, a dict): the binomial error of a score
    (`posenc.statistics.intervals`). None where unknown or where a score is no such mean."""
    del config
    return None

  def chance(self, task: str, family: str, metric: str | None = None) -> float:
    """The score of a member that learned nothing (a run that failed), in the metric
    `score_of` reads: where the intervals put the failed runs a sample may have missed
    (`posenc.statistics.intervals.with_failures`). 0 unless the kind knows better (the worst
    case of a [0, 1] metric)."""
    del task
    self.metric_name(family, metric)
    return 0.0

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
