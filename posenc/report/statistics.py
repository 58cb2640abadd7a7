"""The statistics of the robustness scorecard (`posenc.report.scorecard`), each on plain
lists: bootstrap intervals, summaries of scores, Wilson intervals of success rates, rank
tests, the longest length generalized, and seed and data-order variance apart.

Intervals of means are percentile bootstraps of `RESAMPLES` resamples from a fixed generator
(`np.random.default_rng(0)`), so every statistic is reproducible; with one member there is no
interval (None). Standard deviations are sample ones (ddof 1).

Example:
  >>> summarize([0.5, 0.9])['published']
  0.9
  >>> rank_test(range(12), range(12, 24))['u']
  0.0
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy import stats

RESAMPLES = 2000
# The rank test with ties: exact over every split of the pooled scores, counted by rank sums,
# up to this many members in all; past it, this many random splits.
EXACT_MEMBERS = 100
PERMUTATIONS = 20_000


def bootstrap_interval(
  statistic: Callable[..., Any], *samples: Sequence[float]
) -> list[float] | None:
  """The percentile bootstrap 95% interval of `statistic(*samples, axis=-1)`; None when a
  sample has fewer than two values.

  Example: bootstrap_interval(np.mean, [0.5, 0.9, 0.7]) -> [0.5667, 0.8333] (about).
  """
  if any(len(s) < 2 for s in samples):
    return None
  data = tuple(np.asarray(s, np.float64) for s in samples)
  if all(np.all(d == d[0]) for d in data):
    value = float(statistic(*data, axis=-1))
    return [value, value]
  result = stats.bootstrap(
    data,
    statistic,
    n_resamples=RESAMPLES,
    confidence_level=0.95,
    method='percentile',
    vectorized=True,
    rng=np.random.default_rng(0),
  )
  return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


def summarize(scores: Sequence[float], higher_is_better: bool = True) -> dict[str, Any] | None:
  """Mean, sd (ddof 1), its bootstrap interval, median, quartiles, IQR, min, max and the
  published statistic (the best member) of the scores; None without scores.

  Example:
    >>> summarize([0.5, 0.9])['published']
    0.9
  """
  if not scores:
    return None
  x = np.asarray(scores, np.float64)
  q25, median, q75 = np.percentile(x, [25, 50, 75])
  return {
    'n': len(x),
    'mean': float(x.mean()),
    'sd': float(x.std(ddof=1)) if len(x) > 1 else None,
    'mean_ci': bootstrap_interval(np.mean, x),
    'median': float(median),
    'q25': float(q25),
    'q75': float(q75),
    'iqr': float(q75 - q25),
    'min': float(x.min()),
    'max': float(x.max()),
    'published': float(x.max() if higher_is_better else x.min()),
  }


def success_interval(successes: int, n: int) -> list[float] | None:
  """The Wilson score 95% interval of a success rate `successes` / `n` (None when n = 0).

  Unlike a bootstrap of 0/1 outcomes it is never zero-width: all or none of a finite
  sample passing leaves the rate uncertain.

  Example: success_interval(0, 12) -> [0.0, 0.2425]; success_interval(11, 12) -> [0.6461,
  0.9851] (about).
  """
  if n <= 0:
    return None
  ci = stats.binomtest(successes, n).proportion_ci(confidence_level=0.95, method='wilson')
  return [float(ci.low), float(ci.high)]


def tied_rank_sum_p(a: Sequence[float], b: Sequence[float]) -> float:
  """The exact two-sided p-value of a's rank sum (midranks for ties) over every split of the
  pooled scores into groups of len(a) and len(b): twice the smaller tail, at most 1.

  The splits are counted by rank sum, not listed: count[k, s] is the number of k-subsets of
  the pooled midranks (doubled, so integers) summing to s, built one score at a time; 12 +
  12 members (2.7 million splits) take a [13, 601] table.

  Example: tied_rank_sum_p([1, 1, 0.9, 0.8], [1, 0.7, 0.7, 0.6]) -> 0.143 (about).
  """
  pooled = np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)])
  doubled = np.rint(2 * stats.rankdata(pooled)).astype(np.int64)
  n_a, total = len(a), int(doubled.sum())
  count = np.zeros((n_a + 1, total + 1))
  count[0, 0] = 1.0
  for r in doubled:
    count[1:, r:] = count[1:, r:] + count[:-1, : total + 1 - r]
  dist = count[n_a] / count[n_a].sum()
  observed = int(doubled[:n_a].sum())
  return float(min(1.0, 2 * min(dist[: observed + 1].sum(), dist[observed:].sum())))


def rank_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
  """The two-sided Mann-Whitney U test of a against b: U (the pairs a wins, ties counted
  half) out of n_a n_b, its p-value and the test used.

  The p-value is exact: without ties scipy's exact null distribution; with ties the
  permutation distribution over every split of the pooled scores (`tied_rank_sum_p`), up to
  `EXACT_MEMBERS` members, past which `PERMUTATIONS` random splits (a fixed generator).

  Example: rank_test(range(12), range(12, 24)) -> U = 0 of 144, p = 7.4e-7 ('exact').
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  pooled = np.concatenate([a, b])
  u = float(stats.mannwhitneyu(a, b, method='asymptotic').statistic)
  out = {'u': u, 'u_max': len(a) * len(b)}
  if min(len(a), len(b)) < 2:
    # One member against the rest says little a rank test could (p >= 2 / (n + 1)).
    return {**out, 'p_value': None, 'test': 'none (a column with one member)'}
  if len(np.unique(pooled)) == len(pooled):
    p = stats.mannwhitneyu(a, b, alternative='two-sided', method='exact').pvalue
    return {**out, 'p_value': float(p), 'test': 'Mann-Whitney, exact'}
  if len(pooled) <= EXACT_MEMBERS:
    return {
      **out,
      'p_value': tied_rank_sum_p(a, b),
      'test': 'Mann-Whitney, exact permutation test (ties)',
    }
  test = stats.mannwhitneyu(
    a,
    b,
    alternative='two-sided',
    method=stats.PermutationMethod(n_resamples=PERMUTATIONS, rng=np.random.default_rng(0)),
  )
  return {
    **out,
    'p_value': float(test.pvalue),
    'test': f'Mann-Whitney, permutation test, {PERMUTATIONS:,} random splits (ties)',
  }


def longest_generalized(curve: Mapping[int, float], passes: Callable[[float], bool]) -> int:
  """The largest length n such that every evaluated length up to n passes (0 when the
  shortest fails).

  Example: {1: 1.0, 2: 0.97, 3: 0.5, 4: 1.0} at >= 0.95 -> 2.
  """
  longest = 0
  for n in sorted(curve):
    if not passes(curve[n]):
      break
    longest = n
  return longest


def variance_components(scores: Mapping[tuple[int, int], float]) -> dict[str, Any] | None:
  """Seed and data-order variance apart, from scores by (seed, data seed) in a complete
  two-way design (every seed with every data seed; None otherwise or with fewer than two of
  either): the sample variance of the seed means, of the data-seed means, and the residual
  mean square.

  Example: scores {(s, d): s + 10 d} -> the data seeds explain the most.
  """
  seeds = sorted({s for s, _ in scores})
  data = sorted({d for _, d in scores})
  if len(seeds) < 2 or len(data) < 2 or len(scores) != len(seeds) * len(data):
    return None
  x = np.array([[scores[s, d] for d in data] for s in seeds], np.float64)
  residual = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + x.mean()
  dof = (len(seeds) - 1) * (len(data) - 1)
  return {
    'seeds': len(seeds),
    'data_seeds': len(data),
    'seed_variance': float(x.mean(1).var(ddof=1)),
    'data_order_variance': float(x.mean(0).var(ddof=1)),
    'residual_variance': float((residual**2).sum() / dof),
  }


def compare(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
  """Difference of means (a - b) with its bootstrap 95% interval, and the two-sided
  Mann-Whitney U test (`rank_test`)."""
  out = {
    'n_a': len(a),
    'n_b': len(b),
    'mean_difference': None,
    'ci': None,
    'u': None,
    'u_max': None,
    'p_value': None,
    'test': None,
  }
  if not a or not b:
    return out
  out['mean_difference'] = float(np.mean(a) - np.mean(b))
  out['ci'] = bootstrap_interval(
    lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis), a, b
  )
  out.update(rank_test(a, b))
  return out


def longest_summary(
  longest: Sequence[int], censored: Sequence[bool], train_length: int
) -> dict[str, Any] | None:
  """`summarize` of the members' longest lengths generalized, with which statistics are only
  lower bounds: those that move when the censored members (every evaluated length passed)
  are put further out. Adds the censored count and the median's ratio to `train_length`.

  Example: longest [8, 8, 5] of which the two 8s censored, train 4 -> median 8 and max 8
  flagged lower bounds, min 5 not; ratio 2.0 (a lower bound too).
  """
  stats_now = summarize(list(longest))
  if stats_now is None:
    return None
  far = summarize([n + 10**9 if c else n for n, c in zip(longest, censored)])
  keys = ('mean', 'median', 'q25', 'q75', 'min', 'max')
  bound = {k: bool(far[k] != stats_now[k]) for k in keys}
  return {
    **stats_now,
    'censored': int(sum(censored)),
    'lower_bound': bound,
    'ratio_to_train_length': stats_now['median'] / max(train_length, 1),
  }
