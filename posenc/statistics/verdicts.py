"""Verdicts with family-wise error control: two sets of member scores compared by one
procedure, whose decision and difference interval always agree.

Each comparison is a two-sided permutation test of the difference of means, a - b. It is
exact, over every split of the pooled members into groups of len(a) and len(b), whenever
the subsets of each group number at most `EXACT_SUBSETS` in all (up to 17 members against
17, and 3 against 100: 12 against 12 is 2,704,156 splits, 16 against 16 601,080,390): a
split that moves j members of a for j of b reaches the observed statistic at the shift
mean(the j of a) - mean(the j of b), so counting the splits past a shift is counting pairs of
j-subset sums, one sorted search per j. Otherwise it is Monte-Carlo, over `RANDOM_SPLITS`
random splits (a generator seeded by the group sizes) and the observed one, and its p-value
has a standard error, 2 sqrt(q (1 - q) / splits) with q the smaller tail's share.

A family of comparisons (a card: every baseline on every task) is decided by Holm's
step-down procedure at family-wise level `ALPHA`: a comparison is separated (better or
worse) or not separated. A Monte-Carlo comparison is undecided when another draw of splits
could decide it otherwise: Holm run again with every Monte-Carlo p-value `SE_MARGIN`
standard errors lower separates it and run with every one that many higher does not (Holm
only separates more as p-values fall, so a comparison both runs separate, or neither, is
decided). An exact comparison is never undecided.

The difference interval inverts the same test: the shifts d for which a - d against b is not
rejected, at the level Holm decided the comparison at (a rejected one: alpha / (m - j + 1),
its step; one not rejected: the level of the step where Holm stopped). The test of a - d is
monotone in d (each split's statistic moves by a non-negative multiple of d), so the set is
an interval whose ends are where the counts of splits past the shift cross the level, and
it excludes 0 exactly when the comparison is rejected, by the same counts. With 3 members
against 3 there are 20 splits, the smallest two-sided p is 0.1, and no comparison can be
separated: the interval is then every difference.

The minimum detectable difference is the difference of means the permutation test at the
first Holm level, alpha / m, detects with 80% power when the members' scores are normal with
the pooled within-encoding standard deviation (simulated: `minimum_detectable_difference`).

Example:
  >>> tests = [shift_test([0.9, 0.95, 1.0, 0.97, 0.92], [0.5, 0.6, 0.55, 0.58, 0.52])]
  >>> decide(tests, alpha=0.05)[0]['rejected'], tests[0].p_value()
  (True, 0.0079...)
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, Mapping, Sequence

import numpy as np

ALPHA = 0.05
POWER = 0.8
# Exact whenever both groups' subsets (of every size up to the smaller group's) number at
# most this many in all: 2 x 65,535 for 16 against 16, about a tenth of a second a test.
EXACT_SUBSETS = 300_000
RANDOM_SPLITS = 100_000
SE_MARGIN = 3.0  # a Monte-Carlo verdict this many standard errors from deciding otherwise
# The minimum detectable difference simulates the test with every split up to this many,
# else with the random splits (`_detectable`).
MATRIX_SPLITS = 200_000
TEST_NAME = 'two-sided permutation test of the difference of means'
# Subset sums equal up to rounding (the same members summed in another order) are ties: the
# split's statistic is the observed one, counted as at least as extreme (as scipy's
# permutation_test counts); relative to the scores' size.
_TIE = 1e-12


def subsets(n_a: int, n_b: int) -> int:
  """How many j-subset sums the exact test of n_a against n_b members sorts: those of a
  and of b for j = 1..min(n_a, n_b)."""
  return sum(math.comb(n_a, j) + math.comb(n_b, j) for j in range(1, min(n_a, n_b) + 1))


def is_exact(n_a: int, n_b: int) -> bool:
  """Whether the test of n_a against n_b members enumerates every split."""
  return subsets(n_a, n_b) <= EXACT_SUBSETS


@functools.lru_cache(maxsize=32)
def _splits(n_a: int, n_b: int, limit: int = MATRIX_SPLITS) -> tuple[np.ndarray, bool]:
  """The splits of n_a + n_b pooled members as a [splits, n_a + n_b] bool matrix (True: in
  the first group), and whether they are every split: every one up to `limit` of them, else
  `RANDOM_SPLITS` random ones from a generator seeded by the sizes, with the observed split
  appended."""
  n = n_a + n_b
  if math.comb(n, n_a) <= limit:
    index = np.array(list(itertools.combinations(range(n), n_a)), np.int64).reshape(-1, n_a)
    member = np.zeros((len(index), n), bool)
    np.put_along_axis(member, index, True, axis=1)
    return member, True
  rng = np.random.default_rng([n_a, n_b])
  order = rng.permuted(np.tile(np.arange(n), (RANDOM_SPLITS, 1)), axis=1)
  member = np.zeros((RANDOM_SPLITS + 1, n), bool)
  np.put_along_axis(member[:-1], order[:, :n_a], True, axis=1)
  member[-1, :n_a] = True
  return member, False


def _subset_sums(x: np.ndarray, largest: int) -> list[np.ndarray]:
  """The sums of every j-subset of x for j = 1..`largest`, each sorted ([C(len(x), j)]),
  built one member at a time (each sum in one order, whatever the scores)."""
  by_size = [np.zeros(1)] + [np.zeros(0)] * largest
  for value in x:
    for j in range(largest, 0, -1):
      by_size[j] = np.concatenate([by_size[j], by_size[j - 1] + value])
  return [np.sort(s) for s in by_size[1:]]


def _ordered(x: float) -> int:
  """An integer key of a float64 that orders as the floats do (-0.0 and 0.0 alike)."""
  bits = int(np.float64(x).view(np.int64))
  return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _unordered(key: int) -> float:
  bits = key if key >= 0 else (-key) | (1 << 63)
  return float(np.array(bits, np.uint64).view(np.float64))


def _first(holds, low: float, high: float) -> float:
  """The smallest float in [low, high] where `holds` (monotone: False, then True; True at
  high), by bisection over the floats themselves (at most 64 steps)."""
  a, b = _ordered(low), _ordered(high)
  while a < b:
    middle = (a + b) // 2
    if holds(_unordered(middle)):
      b = middle
    else:
      a = middle + 1
  return _unordered(a)


@dataclasses.dataclass(frozen=True)
class ShiftTest:
  """The permutation test of a - d against b for every shift d.

  Attributes:
    difference: mean(a) - mean(b).
    always: the splits whose statistic is the observed one at every shift (the observed
      split, and random splits that repeat it).
    total: the splits counted (the observed one included).
    exact: every split counted, not a random subset.
    n_a, n_b: the group sizes.
    sums: exact with more than MATRIX_SPLITS splits: per j = 1..min(n_a, n_b) the sorted
      j-subset sums of a and of b, and the tie tolerance of a sum; else ().
    thresholds: otherwise: per split that moves with d (every one, or the random ones),
      sorted, the shift from which its statistic is at least the observed one.
  """

  difference: float
  always: int
  total: int
  exact: bool
  n_a: int
  n_b: int
  sums: tuple[tuple[np.ndarray, np.ndarray, float], ...] = ()
  thresholds: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
  span: tuple[float, float] = (-1.0, 1.0)  # every threshold lies strictly inside

  def counts(self, shift: float = 0.0) -> tuple[int, int]:
    """(splits at least as large as observed, splits at most as large) for a - shift."""
    if not self.sums:
      upper = self.always + int(np.searchsorted(self.thresholds, shift, side='right'))
      lower = self.always + len(self.thresholds) - int(np.searchsorted(self.thresholds, shift))
      return upper, lower
    upper = lower = self.always
    for j, (sa, sb, tie) in enumerate(self.sums, 1):
      # The split moving subsets of sums sa and sb is at least as large at shift d when
      # sa - sb <= j d (up to the tie tolerance): sb >= sa - j d.
      at = sa - j * shift
      upper += sb.size * sa.size - int(np.searchsorted(sb, at - tie, side='left').sum())
      lower += int(np.searchsorted(sb, at + tie, side='right').sum())
    return upper, lower

  def p_value(self, shift: float = 0.0) -> float:
    """Two-sided: twice the smaller tail, at most 1 (scipy.stats.permutation_test's)."""
    return min(1.0, 2 * min(self.counts(shift)) / self.total)

  def p_se(self) -> float:
    """The standard error of the Monte-Carlo p-value (0 when exact): 2 sqrt(q (1 - q) /
    splits), q the smaller tail's share of the splits counted."""
    if self.exact:
      return 0.0
    q = min(self.counts()) / self.total
    return 2 * math.sqrt(q * (1 - q) / self.total)

  def smallest_p(self) -> float:
    return min(1.0, 2 * self.always / self.total)

  def rejects(self, level: float, shift: float = 0.0) -> bool:
    """Whether the test of a - shift rejects at `level`, by counts (p <= level)."""
    return min(self.counts(shift)) <= level * self.total / 2

  def interval(self, level: float) -> tuple[float, float]:
    """The shifts the test does not reject at `level` (-inf / inf where every shift that
    way is kept): a 1 - level interval of the difference, containing 0 exactly when
    `rejects(level)` is False."""
    need = math.floor(level * self.total / 2) + 1
    if need <= self.always:
      return -math.inf, math.inf
    if not self.sums:
      need -= self.always
      return float(self.thresholds[need - 1]), float(self.thresholds[len(self.thresholds) - need])
    # The smallest shift whose upper count reaches `need`, and the largest whose lower count
    # does, found on the counts themselves (so that the ends agree with `rejects` exactly).
    low, high = self.span
    first = _first(lambda d: self.counts(d)[0] >= need, low, high)
    last = -_first(lambda d: self.counts(-d)[1] >= need, -high, -low)
    return first, last


def _gaps(member: np.ndarray, n_a: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
  """For datasets a [rows, n_a] and b [rows, n_b]: per split the observed statistic minus
  the split's ([rows, splits]), and the split's slope in the shift ([splits])."""
  pooled = np.concatenate([a, b], axis=1)
  n_b = pooled.shape[1] - n_a
  sums = pooled @ member.T.astype(np.float64)
  statistic = sums / n_a - (pooled.sum(1, keepdims=True) - sums) / n_b
  gap = (a.mean(1) - b.mean(1))[:, None] - statistic
  # Splits with the observed statistic up to rounding (the same members summed in another
  # order) are ties: they count as at least as extreme, as scipy's permutation_test counts.
  scale = 1 + np.abs(pooled).max(1, keepdims=True)
  gap[np.abs(gap) <= 1e-12 * scale] = 0.0
  c = member[:, :n_a].sum(1)
  return gap, 1 - c / n_a + (n_a - c) / n_b


def shift_test(a: Sequence[float], b: Sequence[float], exact: bool | None = None) -> ShiftTest:
  """The permutation test of `a` against `b` (each >= 1 score) for every shift of a: exact
  when `is_exact(len(a), len(b))`, else Monte-Carlo (`exact` given: as it says).

  Shifting a by -d moves the statistic of a split with c of a's members in the first group
  by -d (c / n_a - (n_a - c) / n_b), and the observed one by -d: the split reaches the
  observed statistic from d >= (T_obs - T_split) / (1 - c / n_a + (n_a - c) / n_b), which
  is the mean of the n_a - c members of a it moves out less the mean of the members of b
  it moves in.

  Example: shift_test([1, 2, 3], [4, 5, 6]) -> difference -3, p 0.1, 20 splits (exact).
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  difference = float(a.mean() - b.mean())
  # Every shift that can matter lies within the scores' range of differences.
  reach = float(np.ptp(np.concatenate([a, b]))) + 1.0
  span = (min(difference, 0.0) - 2 * reach, max(difference, 0.0) + 2 * reach)
  if is_exact(len(a), len(b)) if exact is None else exact:
    largest = min(len(a), len(b))
    scale = 1 + max(float(np.abs(a).max()), float(np.abs(b).max()))
    sums = tuple(
      (sa, sb, _TIE * scale * j)
      for j, (sa, sb) in enumerate(zip(_subset_sums(a, largest), _subset_sums(b, largest)), 1)
    )
    total = math.comb(len(a) + len(b), len(a))
    if total > MATRIX_SPLITS:
      return ShiftTest(difference, 1, total, True, len(a), len(b), sums=sums, span=span)
    # Few enough splits to hold every one's threshold, sorted: counts are then one search.
    thresholds = []
    for j, (sa, sb, tie) in enumerate(sums, 1):
      gap = sa[:, None] - sb[None, :]
      gap[np.abs(gap) <= tie] = 0.0
      thresholds.append((gap / j).ravel())
    return ShiftTest(
      difference, 1, total, True, len(a), len(b), thresholds=np.sort(np.concatenate(thresholds))
    )
  member, _ = _splits(len(a), len(b), 0)
  gap, slope = _gaps(member, len(a), a[None], b[None])
  moves = slope > 0
  return ShiftTest(
    difference=difference,
    always=int((~moves).sum()),
    total=len(member),
    exact=False,
    n_a=len(a),
    n_b=len(b),
    thresholds=np.sort(gap[0, moves] / slope[moves]),
    span=span,
  )


def test_name(test: ShiftTest) -> str:
  if test.exact:
    return f'{TEST_NAME}, exact ({test.total:,} splits)'
  return f'{TEST_NAME}, {test.total - 1:,} random splits'


def holm(
  tests: Sequence[ShiftTest], alpha: float = ALPHA, p_values: Sequence[float] | None = None
) -> list[dict[str, Any]]:
  """Holm's step-down procedure over `tests` at family-wise level `alpha`: per test whether
  it is rejected, the level it was decided at and its Holm-adjusted p-value. With
  `p_values` the steps compare those instead of the tests' own (p <= level)."""
  m = len(tests)
  p = [t.p_value() for t in tests] if p_values is None else list(p_values)
  order = sorted(range(m), key=lambda i: (p[i], i))
  out: list[dict[str, Any]] = [{} for _ in tests]
  stopped = None
  adjusted = 0.0
  for step, i in enumerate(order):
    level = alpha / (m - step)
    adjusted = max(adjusted, min(1.0, (m - step) * p[i]))
    rejects = tests[i].rejects(level) if p_values is None else p[i] <= level
    if stopped is None and rejects:
      out[i] = {'rejected': True, 'level': level}
    else:
      stopped = level if stopped is None else stopped
      out[i] = {'rejected': False, 'level': stopped}
    out[i]['adjusted_p'] = adjusted
  return out


def undecided(tests: Sequence[ShiftTest], alpha: float = ALPHA) -> list[bool]:
  """Per test whether its decision rests on Monte-Carlo noise: Holm with every p-value
  SE_MARGIN standard errors lower rejects it and Holm with every one that many higher does
  not (exact tests have no standard error; with none Monte-Carlo, nothing is undecided)."""
  if all(t.exact for t in tests):
    return [False] * len(tests)
  p = [t.p_value() for t in tests]
  margin = [SE_MARGIN * t.p_se() for t in tests]
  low = holm(tests, alpha, [max(0.0, x - e) for x, e in zip(p, margin)])
  high = holm(tests, alpha, [min(1.0, x + e) for x, e in zip(p, margin)])
  return [lo['rejected'] and not hi['rejected'] for lo, hi in zip(low, high)]


def decide(
  tests: Sequence[ShiftTest],
  alpha: float = ALPHA,
  bounds: Sequence[tuple[float, float] | None] | tuple[float, float] | None = (-1.0, 1.0),
  intervals: bool = True,
) -> list[dict[str, Any]]:
  """Holm over `tests`, and per test its difference, p-value (with its standard error, 0
  when exact), decision, whether it is undecided (`undecided`), the difference interval at
  its level (ends clipped to `bounds`, the differences the metric allows: one pair for every
  test or one per test; None ends where unbounded; not computed without `intervals`) and
  the sign ('higher', 'lower' or None when not separated). An undecided test keeps the
  decision and sign of its estimated p-value; its verdict is undecided.

  Example: decide([shift_test([1, 1, 1], [0, 0, 0])]) -> not separated, interval [-1, 1].
  """
  if bounds is None or (len(bounds) == 2 and not isinstance(bounds[0], (tuple, list))):
    bounds = [bounds] * len(tests)
  out = []
  for test, h, limits, noise in zip(tests, holm(tests, alpha), bounds, undecided(tests, alpha)):
    ci = None
    if intervals:
      low, high = test.interval(h['level'])
      if limits is not None:
        low, high = max(low, limits[0]), min(high, limits[1])
      ci = [None if math.isinf(low) else low, None if math.isinf(high) else high]
    sign = ('higher' if test.difference > 0 else 'lower') if h['rejected'] else None
    out.append(
      {
        'mean_difference': test.difference,
        'p_value': test.p_value(),
        'p_se': test.p_se(),
        'adjusted_p': h['adjusted_p'],
        'level': h['level'],
        'rejected': h['rejected'],
        'undecided': noise,
        'sign': sign,
        'ci': ci,
        'smallest_p': test.smallest_p(),
        'test': test_name(test),
      }
    )
  return out


def splits_count(n_a: int, n_b: int) -> int:
  """The splits a test of n_a against n_b members counts (the observed one included): the
  smallest two-sided p-value it can give is 2 / that."""
  return math.comb(n_a + n_b, n_a) if is_exact(n_a, n_b) else RANDOM_SPLITS + 1


@functools.lru_cache(maxsize=64)
def _detectable(n_a: int, n_b: int, level: float, power: float, draws: int) -> float | None:
  """The minimum detectable difference at sd 1 (`minimum_detectable_difference`)."""
  member, _ = _splits(n_a, n_b)
  total = len(member)
  # The observed split, and random splits that repeat it, are at the observed statistic.
  c = member[:, :n_a].sum(1)
  always = int((c == n_a).sum())
  need = math.floor(level * total / 2) + 1 - always
  if need <= 0:
    return None
  rng = np.random.default_rng([n_a, n_b, draws])
  a, b = rng.standard_normal((draws, n_a)), rng.standard_normal((draws, n_b))
  low = np.empty(draws)
  chunk = max(1, 2_000_000 // total)  # bounded memory: chunk x splits gaps at a time
  for start in range(0, draws, chunk):
    gap, slope = _gaps(member, n_a, a[start : start + chunk], b[start : start + chunk])
    moves = slope > 0
    thresholds = gap[:, moves] / slope[moves]
    low[start : start + chunk] = np.partition(thresholds, need - 1, axis=1)[:, need - 1]
  # Data shifted by d > 0 are rejected when -d lies below the interval of the null draw,
  # d > -low: the power at d is the share of draws with -low < d. (Rejections on the other
  # side, -d above the interval, need d < 0.)
  return float(np.quantile(-low, power, method='higher'))


def minimum_detectable_difference(
  sd: float, n_a: int, n_b: int, level: float, power: float = POWER, draws: int = 1000
) -> float | None:
  """The smallest difference of means that the permutation test at `level` detects with
  `power` when the members' scores are normal with standard deviation `sd`, in groups of
  n_a and n_b: simulated on `draws` seeded draws (the test is scale-equivariant, so once
  per group sizes and level). None when the test cannot reject at `level` at all.

  Example: minimum_detectable_difference(0.1, 8, 8, 0.05 / 45) -> 0.27 (about).
  """
  found = _detectable(n_a, n_b, level, power, draws)
  return None if found is None else sd * found


def pooled_sd(groups: Sequence[Sequence[float]]) -> float | None:
  """The within-group standard deviation pooled over `groups` (each weighted by its n - 1);
  None without a group of 2 or more."""
  used = [np.asarray(g, np.float64) for g in groups if len(g) >= 2]
  if not used:
    return None
  return float(
    math.sqrt(sum(g.var(ddof=1) * (len(g) - 1) for g in used) / sum(len(g) - 1 for g in used))
  )


def pairs_separated(
  scores: Mapping[str, Mapping[str, Sequence[float]]],
  encodings: Sequence[str] | None = None,
  alpha: float = ALPHA,
) -> dict[str, Any]:
  """Which pairs of `encodings` (default: all of `scores`, {encoding: {task: member scores}})
  a suite separates: every pair on every task it has both on is one comparison, Holm over
  the whole family at `alpha`; a pair is separated when one of its tasks is, and undecided
  on the tasks whose Monte-Carlo verdict is (`undecided`; never with exact tests).

  Example: 16 encodings of cpu-v1 -> 120 pairs x 3 tasks = 360 comparisons, 0 separated (3
  members against 3: p >= 0.1).
  """
  names = sorted(scores) if encodings is None else list(encodings)
  keys, tests = [], []
  for x, y in itertools.combinations(names, 2):
    for task in scores[x]:
      if task in scores[y] and len(scores[x][task]) and len(scores[y][task]):
        keys.append((x, y, task))
        tests.append(shift_test(scores[x][task], scores[y][task]))
  decided = decide(tests, alpha, intervals=False) if tests else []
  separated: dict[tuple[str, str], list[dict[str, Any]]] = {}
  noisy: dict[tuple[str, str], list[str]] = {}
  for (x, y, task), d in zip(keys, decided):
    if d['undecided']:
      noisy.setdefault((x, y), []).append(task)
    elif d['rejected']:
      separated.setdefault((x, y), []).append(
        {'task': task, 'higher': x if d['sign'] == 'higher' else y, **d}
      )
  return {
    'encodings': names,
    'pairs': math.comb(len(names), 2),
    'comparisons': len(tests),
    'alpha': alpha,
    'first_level': alpha / len(tests) if tests else None,
    'smallest_p': min((t.p_value() for t in tests), default=None),
    # The smallest p-value any of the comparisons could give, whatever the scores.
    'smallest_possible_p': min((t.smallest_p() for t in tests), default=None),
    'exact': all(t.exact for t in tests),
    'separated': [
      {'a': x, 'b': y, 'tasks': [s['task'] for s in found], 'higher': [s['higher'] for s in found]}
      for (x, y), found in sorted(separated.items())
    ],
    # Comparisons whose Monte-Carlo p-value lies within SE_MARGIN standard errors of
    # deciding otherwise: neither separated nor not.
    'undecided': [{'a': x, 'b': y, 'tasks': tasks} for (x, y), tasks in sorted(noisy.items())],
  }
