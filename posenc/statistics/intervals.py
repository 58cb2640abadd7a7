"""The 95% intervals posenc prints: of a mean score over members, and of a success rate.

A member's score is itself an estimate: the mean of a [0, 1] metric (exact match,
accuracy) over a finite number of examples (cpu-v1: 13 lengths x 32 examples = 416). The
mean over n members then varies for two reasons, the members (seeds, data orders) and the
examples each member was scored on, and three members at 100% do not make the mean 100%
for certain. The interval of a mean is therefore built on the binomial scale:

1. Dispersion. phi = s^2 / (p~ (1 - p~)): the variance of a member's score relative to that
   of one example's outcome, with p~ = (k + 2) / (n N + 4) the mean moved towards 1/2 by
   two successes and two failures (Agresti-Coull), k = n N x the successes behind the mean.
   It is floored at 1/N: a member's score varies at least as a mean of N examples does.
2. Pooled floor. With few members s^2 is itself noisy (2 degrees of freedom at n = 3: one
   time in ten it is under a tenth of its expectation). The dispersions of a family of cells
   (a suite's stored baselines, a scorecard's rows) give a prior (phi0, d0), estimated as
   Smyth (2004) does for moderated t statistics: d0 from how much more the cells' log
   dispersions vary than sampling alone makes them. A cell's dispersion is then at least
   its moderated one, (d0 phi0 + (n - 1) phi) / (d0 + n - 1): never smaller than its own.
3. Level floor. Near 0 and 100% members are skewed: most sit at the boundary and a rare one
   falls towards the middle (cpu-v2's even_pairs: dape's 12 members are eleven at 97-100%
   and one at 79%). Most draws of n members miss such a member, look tight, and sit closer
   to the boundary than the cell's mean: more members do not cure it, and neither does the
   pool when the family's cells differ (cpu-v2: d0 = 1.4). The dispersion is therefore also
   at least the mean dispersion of the family's cells at the same level or nearer the
   middle: a one-sided Gaussian kernel of bandwidth LEVEL_BANDWIDTH on |logit p~|, over
   the cells whose |logit| is at most the sample's. The cells between a tight sample and the
   middle are the ones it could be a lucky draw of; a sample in the middle takes only the
   middle's cells, which skew does not hide. The bandwidth is the coverage test's choice
   (docs/benchmark.md: 1.0 leaves dape at 89% with 4 members; 2.0 widens more near 100).
4. Interval. Clopper-Pearson at the effective number of examples n_eff = n / phi x (z /
   t_{n-1})^2, with x n_eff successes (Korn and Graubard 1998, for proportions estimated from
   clustered samples: here each member is a cluster of N examples). It lies in [0, 1], is
   never zero-width (phi >= 1/N), and is asymmetric near 0 and 100%, where member scores are
   skewed.
5. Unseen failures. Runs fail: a run that learned nothing scores at the task's chance
   level while the others sit near 100 (cpu-v2's dape_v2 on even_pairs: ten members at
   98-100%, two at 88%), and n members may all have missed the failures: a rate seen 0
   times in n is up to u = the high end of its Jeffreys interval (18.5% at n = 12, 53.6%
   at n = 3). The low end is lowered to (1 - u) low + u chance (`with_failures`): a share u
   of runs failing unseen, at chance (`Evaluation.chance`: 1/C for a one-token answer of C
   classes, 0 where unknown). It moves a low end by u times its distance from chance: much
   near 100, little near chance. Twelve members at 100% on a task of chance 50% get
   [90.7, 100.0]. Failures only pull a mean down: the high end is step 4's.

Without the number of examples (a metric that is not a mean over examples, perplexity) the
interval is Student's t on the member scores. Success rates (the members whose score passes a
threshold) get the Wilson score interval with continuity correction.

`posenc.statistics.coverage` measures these choices against the alternatives; its table is in
docs/benchmark.md (`python -m launch.benchmark --coverage`).

Example:
  >>> mean_interval([1.0, 1.0, 1.0], examples=416, chance=None)   # three members at 100%
  [0.9858..., 1.0]
  >>> mean_interval([1.0] * 12, examples=928, chance=0.5)    # and runs that may fail unseen
  [0.9070..., 1.0]
  >>> success_interval(0, 3)                           # no member of 3 passes
  [0.0, 0.69...]
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats

LEVEL = 0.95
# Of the level floor's kernel, in logits (|logit p~|): chosen by the coverage test.
LEVEL_BANDWIDTH = 1.5
MEAN_METHOD = (
  'Clopper-Pearson at the effective number of examples (Korn-Graubard), the dispersion '
  'floored by the binomial error of the examples, by the pooled dispersion and by the '
  'dispersion of the stored cells at the same level or nearer the middle; its low end '
  "lowered by the failed runs the members may have missed, at the task's chance level "
  '(as many as the Jeffreys interval of a rate seen 0 times allows)'
)
MEAN_METHOD_T = "Student's t over the members"
SUCCESS_METHOD = 'Wilson score with continuity correction'


@dataclasses.dataclass(frozen=True)
class Pool:
  """The prior of a family of cells' dispersions (Smyth 2004): `dispersion` phi0 and its
  degrees of freedom `prior_df` d0 (inf when the cells' dispersions vary no more than
  sampling alone makes them), from `cells` cells; and for the level floor each cell's
  |logit p~| (`levels`) and floored dispersion (`dispersions`), empty: no level floor."""

  dispersion: float
  prior_df: float
  cells: int
  levels: tuple[float, ...] = ()
  dispersions: tuple[float, ...] = ()

  def to_json(self) -> dict[str, Any]:
    return {
      'dispersion': self.dispersion,
      'prior_df': None if math.isinf(self.prior_df) else self.prior_df,
      'cells': self.cells,
      'level_bandwidth': LEVEL_BANDWIDTH if self.levels else None,
    }


def dispersion(scores: np.ndarray, examples: float) -> np.ndarray:
  """phi of each row of `scores` ([..., n] with n >= 2, in [0, 1]), each member's score a
  mean over `examples` examples: the sample variance over the Agresti-Coull binomial
  variance of one example, floored at 1 / `examples`. Shape [...].

  Example: dispersion([[1.0, 1.0, 1.0]], 416) -> [1/416] (the floor).
  """
  x = np.asarray(scores, np.float64)
  p = _agresti(x, examples)
  return np.maximum(x.var(-1, ddof=1) / (p * (1 - p)), 1 / examples)


def _agresti(x: np.ndarray, examples: float) -> np.ndarray:
  """The mean of each row of `x` ([..., n]) moved towards 1/2 by two successes and two
  failures of the n x `examples` examples behind it. Shape [...]."""
  total = x.shape[-1] * examples
  return (total * x.mean(-1) + 2) / (total + 4)


def level(scores: np.ndarray, examples: float) -> np.ndarray:
  """|logit p~| of each row of `scores` ([..., n]): how far from the middle its mean lies
  (0 at 50%, 5.3 at 99.5%). Shape [...]."""
  p = _agresti(np.asarray(scores, np.float64), examples)
  return np.abs(np.log(p / (1 - p)))


def pool(cells: Sequence[tuple[Sequence[float], float]]) -> Pool | None:
  """The prior of the dispersions of `cells` ([(member scores, examples per member)]), by
  Smyth's (2004) moments of the log dispersions; None with fewer than 3 cells of 2 or more
  members.

  Each cell's log phi is, about its prior, log of a scaled chi^2 with n - 1 degrees of
  freedom plus the prior's own spread; the variance of log chi^2_d / d is trigamma(d / 2),
  so what the cells' log dispersions vary beyond the mean trigamma is the prior's, which
  gives d0 (inverse trigamma) and phi0. Each cell enters at its floored dispersion (at least
  1 / N): where many cells sit at that floor the pool lies above it, which widens the
  intervals (conservative).

  Example: 48 cells of 3 members whose log dispersions vary as 2-df chi^2 do -> d0 = inf.
  """
  used = [(np.asarray(s, np.float64), e) for s, e in cells if len(s) >= 2 and e]
  if len(used) < 3:
    return None
  d = np.array([len(s) - 1 for s, _ in used], np.float64)
  phis = [float(dispersion(s, e)) for s, e in used]
  by_level = {
    'levels': tuple(float(level(s, e)) for s, e in used),
    'dispersions': tuple(phis),
  }
  e = np.log(phis) - special.digamma(d / 2) + np.log(d / 2)
  mean = float(e.mean())
  excess = float(e.var(ddof=1) - special.polygamma(1, d / 2).mean())
  if excess <= 0:
    return Pool(float(np.exp(mean)), math.inf, len(used), **by_level)
  half = optimize.brentq(lambda h: special.polygamma(1, h) - excess, 1e-8, 1e8)
  phi0 = float(np.exp(mean + special.digamma(half) - np.log(half)))
  return Pool(phi0, 2 * half, len(used), **by_level)


def level_floor(at: np.ndarray, prior: Pool) -> np.ndarray:
  """The mean dispersion of `prior`'s cells at level `at` (|logit p~|, any shape) or nearer
  the middle, weighted by a Gaussian kernel of bandwidth LEVEL_BANDWIDTH in the level; 0
  where no cell is as near the middle. Shape of `at`.

  Example: cells at levels (0.2, 3.9, 5.4) with dispersions (0.001, 0.18, 0.04): at 5.7 the
  floor is about 0.09 (all three, the nearest weighing most); at 0.3 it is 0.001.
  """
  at = np.asarray(at, np.float64)[..., None]
  levels = np.asarray(prior.levels, np.float64)
  weight = np.exp(-0.5 * ((at - levels) / LEVEL_BANDWIDTH) ** 2) * (levels <= at)
  total = weight.sum(-1)
  mean = (weight * np.asarray(prior.dispersions, np.float64)).sum(-1)
  return np.where(total > 0, mean / np.where(total > 0, total, 1.0), 0.0)


def floored(phi: np.ndarray, n: int, prior: Pool | None, at: np.ndarray | None = None):
  """phi raised to its moderated value where the pool's is larger (d0 = inf: to phi0), and
  to the level floor at `at` (|logit p~| of each sample, phi's shape) when given."""
  if prior is None:
    return phi
  if math.isinf(prior.prior_df):
    out = np.maximum(phi, prior.dispersion)
  else:
    d0 = prior.prior_df
    out = np.maximum(phi, (d0 * prior.dispersion + (n - 1) * phi) / (d0 + n - 1))
  if at is None or not prior.levels:
    return out
  return np.maximum(out, level_floor(at, prior))


def effective_clopper_pearson(
  mean: np.ndarray, phi: np.ndarray, n: int, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
  """The Korn-Graubard interval of means `mean` over n members with dispersions `phi`
  (arrays of one shape): Clopper-Pearson with x n_eff successes of n_eff = n / phi (z /
  t_{n-1})^2. Returns (low, high), each of `mean`'s shape."""
  alpha = 1 - level
  n_eff = n / phi * (stats.norm.ppf(1 - alpha / 2) / stats.t.ppf(1 - alpha / 2, n - 1)) ** 2
  k = np.clip(mean, 0, 1) * n_eff
  # Clopper-Pearson's bounds are beta quantiles; at 0 or all successes the bound is 0 or 1.
  low = np.where(k > 0, stats.beta.ppf(alpha / 2, np.maximum(k, 1e-12), n_eff - k + 1), 0.0)
  high = np.where(
    k < n_eff, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n_eff - k, 1e-12)), 1.0
  )
  return low, high


def jeffreys(successes: np.ndarray, n: int, level: float = LEVEL) -> tuple[np.ndarray, ...]:
  """The equal-tailed Jeffreys interval of a rate, `successes` of n (any shape): the
  Beta(k + 1/2, n - k + 1/2) quantiles, 0 at k = 0 and 1 at k = n (Brown, Cai and DasGupta
  2001: near-nominal coverage, narrower than Clopper-Pearson). Returns (low, high).

  Example: jeffreys(np.array(0), 12) -> (0.0, 0.185...): a rate seen 0 times in 12.
  """
  k = np.asarray(successes, np.float64)
  alpha = 1 - level
  low = np.where(k > 0, stats.beta.ppf(alpha / 2, k + 0.5, n - k + 0.5), 0.0)
  high = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 0.5, n - k + 0.5), 1.0)
  return low, high


def unseen_failures(n: int, level: float = LEVEL) -> float:
  """The share of runs that may fail unseen by n members: the high end of the Jeffreys
  interval of a rate seen 0 times in n (18.5% at n = 12, 53.6% at n = 3)."""
  return float(jeffreys(np.zeros(()), n, level)[1])


def with_failures(low: np.ndarray, n: int, chance: float, level: float = LEVEL) -> np.ndarray:
  """The low end `low` (any shape) of a mean over n members lowered by the failures they
  may have missed: (1 - u) low + u chance with u = `unseen_failures(n)`, where that is
  lower (a low end under the chance level stays).

  Example: with_failures(0.99, 12, 0.5) -> 0.899.
  """
  u = unseen_failures(n, level)
  low = np.asarray(low, np.float64)
  return np.minimum(low, (1 - u) * low + u * chance)


def t_interval(
  scores: np.ndarray, bounded: bool = True, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
  """Student's t interval of the mean of each row of `scores` ([..., n]), clipped to [0, 1]
  when `bounded`."""
  x = np.asarray(scores, np.float64)
  n = x.shape[-1]
  half = stats.t.ppf(0.5 + level / 2, n - 1) * x.std(-1, ddof=1) / np.sqrt(n)
  low, high = x.mean(-1) - half, x.mean(-1) + half
  return (np.clip(low, 0, 1), np.clip(high, 0, 1)) if bounded else (low, high)


def floored_interval(
  x: np.ndarray, examples: float, prior: Pool | None, chance: float | None
) -> tuple[np.ndarray, np.ndarray]:
  """The interval `mean_interval` gives each row of `x` ([..., n], n >= 2, each a mean over
  `examples` examples): Korn-Graubard with the floored dispersion, its low end lowered by
  the failures the members may have missed (`with_failures`) at the task's `chance` level
  (None: not lowered). Returns (low, high), each [...]."""
  phi = floored(dispersion(x, examples), x.shape[-1], prior, level(x, examples))
  low, high = effective_clopper_pearson(x.mean(-1), phi, x.shape[-1])
  if chance is None:
    return low, high
  return with_failures(low, x.shape[-1], chance), high


def mean_interval(
  scores: Sequence[float],
  examples: float | None = None,
  prior: Pool | None = None,
  bounded: bool = True,
  chance: float | None = 0.0,
) -> list[float] | None:
  """The 95% interval of the mean of `scores` (one per member): when each score is a mean
  over `examples` examples of a [0, 1] metric, Korn-Graubard with the floored dispersion,
  its low end lowered by the failures the members may have missed, at the task's `chance`
  level (the score of a run that learned nothing, `Evaluation.chance`; 0 where unknown;
  None: not lowered); else Student's t (clipped to [0, 1] when `bounded`). None with fewer
  than 2 scores.

  Example: mean_interval([0.5, 0.6, 0.7], 416, chance=0.5) -> [0.32, 0.84] (about);
  twelve members at 100% with chance 1/2 -> [0.907, 1.0] (up to 18.5% of runs failing
  unseen, at chance).
  """
  if len(scores) < 2:
    return None
  x = np.asarray(scores, np.float64)[None]
  if examples:
    low, high = floored_interval(x, examples, prior, chance)
  else:
    low, high = t_interval(x, bounded)
  return [float(low[0]), float(high[0])]


def method_of(examples: float | None) -> str:
  """The name of the method `mean_interval` uses with or without `examples`."""
  return MEAN_METHOD if examples else MEAN_METHOD_T


def success_interval(successes: int, n: int) -> list[float] | None:
  """The 95% Wilson score interval with continuity correction of `successes` / `n` (None
  when n = 0). Never zero-width: all or none of a finite sample passing leaves the rate
  uncertain; unlike Wilson's without correction it covers >= 95% at every rate and n the
  suites use (docs/benchmark.md).

  Example: success_interval(0, 3) -> [0.0, 0.7...]; success_interval(3, 3) -> [0.3..., 1.0].
  """
  if n <= 0:
    return None
  ci = stats.binomtest(successes, n).proportion_ci(confidence_level=LEVEL, method='wilsoncc')
  return [float(ci.low), float(ci.high)]
