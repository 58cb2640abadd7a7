"""The statistics of the robustness scorecard (`posenc.report.scorecard`), each on plain
lists: summaries of scores, the longest length generalized, and seed and data-order variance
apart. Intervals are `posenc.statistics.intervals`', comparisons `posenc.statistics.verdicts`'.

Standard deviations are sample ones (ddof 1).

Example:
  >>> summarize([0.5, 0.9])['published']
  0.9
  >>> longest_generalized({1: 1.0, 2: 0.97, 3: 0.5}, lambda v: v >= 0.95)
  2
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np


def summarize(scores: Sequence[float], higher_is_better: bool = True) -> dict[str, Any] | None:
  """Mean, sd (ddof 1), median, quartiles, IQR, min, max and the published statistic (the
  best member) of the scores; None without scores.

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
    'median': float(median),
    'q25': float(q25),
    'q75': float(q75),
    'iqr': float(q75 - q25),
    'min': float(x.min()),
    'max': float(x.max()),
    'published': float(x.max() if higher_is_better else x.min()),
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
