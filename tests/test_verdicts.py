"""The verdict procedure (posenc/statistics/verdicts.py): the permutation test against scipy's,
its difference interval consistent with its decision, Holm written out, the procedure on
constructed members (a clear difference is separated, equal draws are separated at no more
than the nominal rate), the minimum detectable difference's power by simulation, and the
pairs the stored cpu-v1 baselines separate."""

import math

import numpy as np
import pytest
from scipy import stats

from experiments import benchmarks
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.statistics import verdicts

LEADERS = (
  'dape_v2',
  'fire',
  'stick_breaking',
  'relative',
  'kerple_log',
  'alibi',
  'forgetting',
  'dape',
  'cope',
  'randomized_rotary',
)


def scipy_p(a, b):
  result = stats.permutation_test(
    (np.asarray(a), np.asarray(b)),
    lambda x, y, axis: x.mean(axis) - y.mean(axis),
    permutation_type='independent',
    vectorized=True,
    n_resamples=np.inf,
  )
  return result.pvalue


@pytest.mark.parametrize('n_a, n_b', [(3, 3), (4, 5), (5, 5), (2, 6), (6, 6)])
def test_the_p_value_is_scipys_exact_permutation_test(n_a, n_b):
  rng = np.random.default_rng(n_a * 10 + n_b)
  for _ in range(4):
    # Rounded scores: ties inside and across the groups, as member scores have.
    a, b = np.round(rng.uniform(0, 1, n_a), 1), np.round(rng.uniform(0, 1, n_b), 1)
    test = verdicts.shift_test(a, b)
    assert test.exact and test.total == math.comb(n_a + n_b, n_a)
    assert test.p_value() == pytest.approx(scipy_p(a, b), abs=1e-12)
    assert test.difference == pytest.approx(a.mean() - b.mean())


def test_three_against_three_can_never_be_separated():
  test = verdicts.shift_test([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
  assert test.smallest_p() == pytest.approx(0.1) and test.p_value() == pytest.approx(0.1)
  assert not test.rejects(0.05)
  assert test.interval(0.05) == (-math.inf, math.inf)
  (d,) = verdicts.decide([test])
  assert (d['rejected'], d['sign'], d['ci']) == (False, None, [-1.0, 1.0])


@pytest.mark.parametrize('n_a, n_b', [(4, 4), (5, 6), (8, 8), (12, 12)])
def test_the_interval_excludes_zero_exactly_when_the_test_rejects(n_a, n_b):
  rng = np.random.default_rng(n_a + 100 * n_b)
  for trial in range(6):
    a = np.round(rng.normal(0.3 * trial / 5, 0.2, n_a), 2)
    b = np.round(rng.normal(0, 0.2, n_b), 2)
    test = verdicts.shift_test(a, b)
    for level in (0.5, 0.1, 0.05, 0.01, 0.05 / 45, 1e-4):
      low, high = test.interval(level)
      assert (low <= 0 <= high) == (not test.rejects(level)), (trial, level)
      assert (test.p_value() > level) == (not test.rejects(level))
      # The ends are where the test of a - shift starts to reject.
      for end, step in ((low, -1e-9), (high, 1e-9)):
        if math.isfinite(end):
          assert not test.rejects(level, end) and test.rejects(level, end + step)
      # The observed difference is never rejected against itself.
      assert low <= test.difference <= high


def test_random_splits_past_the_exact_limit_are_reproducible():
  rng = np.random.default_rng(3)
  a, b = rng.normal(0.5, 0.1, 20), rng.normal(0.4, 0.1, 20)
  first, again = verdicts.shift_test(a, b), verdicts.shift_test(a, b)
  assert not verdicts.is_exact(20, 20)
  assert not first.exact and first.total == verdicts.RANDOM_SPLITS + 1
  assert first.p_value() == again.p_value()
  # About scipy's permutation test with as many random splits.
  assert first.p_value() == pytest.approx(
    stats.permutation_test(
      (a, b),
      lambda x, y, axis: x.mean(axis) - y.mean(axis),
      vectorized=True,
      n_resamples=verdicts.RANDOM_SPLITS,
      rng=np.random.default_rng(0),
    ).pvalue,
    abs=0.01,
  )
  q = min(first.counts()) / first.total
  assert first.p_se() == pytest.approx(2 * math.sqrt(q * (1 - q) / first.total))
  assert verdicts.test_name(first).endswith('100,000 random splits')


def enumerated_counts(a, b, shifts):
  """(upper, lower) counts at each shift over every split, enumerated as a matrix of splits."""
  member, exact = verdicts._splits(len(a), len(b), limit=10**6)
  assert exact
  gap, slope = verdicts._gaps(member, len(a), np.asarray(a)[None], np.asarray(b)[None])
  out = []
  for d in shifts:
    # Each split's statistic at shift d, less the observed one: slope x d - gap.
    past = slope * d - gap[0]
    out.append((int((past >= 0).sum()), int((past <= 0).sum())))
  return out


@pytest.mark.parametrize('n_a, n_b', [(9, 9), (1, 12), (11, 10), (6, 20)])
def test_the_exact_test_counts_every_split_by_subset_sums(n_a, n_b):
  rng = np.random.default_rng(n_a * 100 + n_b)
  a, b = np.round(rng.normal(0.6, 0.1, n_a), 2), np.round(rng.normal(0.5, 0.1, n_b), 2)
  test = verdicts.shift_test(a, b)
  assert test.exact and test.total == math.comb(n_a + n_b, n_a)
  # Past MATRIX_SPLITS the counts are searches over the subset sums, else over every
  # split's threshold, sorted.
  assert bool(test.sums) == (test.total > verdicts.MATRIX_SPLITS)
  # Shifts off the scores' 0.01 grid (on it, a tie is a matter of rounding), and 0, where
  # both count ties as at least as extreme.
  shifts = [0.0, 0.0503, -0.1007, 0.2011, float(test.difference) + 0.0013]
  assert [test.counts(d) for d in shifts] == enumerated_counts(a, b, shifts)


def test_twelve_against_twelve_is_exact_in_milliseconds():
  rng = np.random.default_rng(5)
  a, b = np.round(rng.normal(0.55, 0.1, 12), 2), np.round(rng.normal(0.45, 0.1, 12), 2)
  test = verdicts.shift_test(a, b)
  assert test.exact and test.total == 2_704_156 and test.p_se() == 0
  assert test.smallest_p() == pytest.approx(2 / 2_704_156)
  # scipy's exact test over the 2,704,156 splits (25 s; `-m slow` checks it) gives this.
  assert test.p_value() == pytest.approx(0.002465834071702964, rel=1e-12)
  assert verdicts.test_name(test).endswith('exact (2,704,156 splits)')
  assert verdicts.is_exact(16, 16) and verdicts.splits_count(16, 16) == math.comb(32, 16)


@pytest.mark.slow
def test_twelve_against_twelve_is_scipys_exact_test():
  rng = np.random.default_rng(5)
  a, b = np.round(rng.normal(0.55, 0.1, 12), 2), np.round(rng.normal(0.45, 0.1, 12), 2)
  assert verdicts.shift_test(a, b).p_value() == pytest.approx(scipy_p(a, b), abs=1e-12)


# 12 members against 12 whose exact p (0.00816) lies under 0.05 / 6 = 0.00833 while the
# Monte-Carlo estimate from the seeded random splits (0.00862) lies over it.
NEAR_A = [0.63, 0.59, 0.59, 0.68, 0.63, 0.69, 0.57, 0.68, 0.67, 0.47, 0.62, 0.7]
NEAR_B = [0.59, 0.53, 0.54, 0.48, 0.56, 0.46, 0.5, 0.61, 0.55, 0.53, 0.54, 0.69]


def test_exact_and_monte_carlo_verdicts_differ_near_the_holm_step():
  level = 0.05 / 6
  exact = verdicts.shift_test(NEAR_A, NEAR_B)
  noisy = verdicts.shift_test(NEAR_A, NEAR_B, exact=False)
  assert exact.p_value() < level < noisy.p_value()
  assert abs(noisy.p_value() - level) < verdicts.SE_MARGIN * noisy.p_se()
  # The exact test decides; the Monte-Carlo one is within three standard errors of its
  # Holm step: undecided, whatever its estimate says.
  (d,) = verdicts.decide([exact], level)
  assert (d['rejected'], d['undecided'], d['sign'], d['p_se']) == (True, False, 'higher', 0.0)
  assert d['ci'][0] > 0
  (d,) = verdicts.decide([noisy], level)
  assert (d['rejected'], d['undecided'], d['sign']) == (False, True, None)
  # A family of two at 0.05 / 3: Holm's first step (0.0083) decides the near comparison,
  # and only if it separates does the second step (0.0167) reach the other one (Monte-Carlo
  # p 0.0129 ± 0.0005, exact 0.0132). Exact: both separated. Monte-Carlo: the second's
  # decision rests on the first's, so both are undecided.
  other = (
    [0.72, 0.61, 0.64, 0.66, 0.69, 0.55, 0.6, 0.6, 0.6, 0.5, 0.61, 0.47],
    [0.56, 0.58, 0.58, 0.49, 0.6, 0.51, 0.49, 0.5, 0.51, 0.56, 0.59, 0.44],
  )
  family = verdicts.decide([exact, verdicts.shift_test(*other)], 0.05 / 3)
  assert [(d['rejected'], d['undecided']) for d in family] == [(True, False), (True, False)]
  family = verdicts.decide([noisy, verdicts.shift_test(*other, exact=False)], 0.05 / 3)
  assert [(d['rejected'], d['undecided']) for d in family] == [(False, True), (False, True)]
  # The card's verdicts: one word for each.
  assert card_lib._verdict('higher', True, undecided=True) == 'undecided'
  assert card_lib.p_text({'p_value': noisy.p_value(), 'p_se': noisy.p_se()}) == '0.0086 ± 0.0004'


def test_pairs_separated_counts_undecided_pairs_apart(monkeypatch):
  scores = {'x': {'t': NEAR_A}, 'y': {'t': NEAR_B}}
  exact = verdicts.pairs_separated(scores, alpha=0.05 / 6)
  assert exact['exact'] and len(exact['separated']) == 1 and exact['undecided'] == []
  # The same members where the groups are too large to count every split: Monte-Carlo.
  monkeypatch.setattr(verdicts, 'EXACT_SUBSETS', 0)
  noisy = verdicts.pairs_separated(scores, alpha=0.05 / 6)
  assert not noisy['exact'] and noisy['separated'] == []
  assert noisy['undecided'] == [{'a': 'x', 'b': 'y', 'tasks': ['t']}]


def holm_written_out(p, alpha):
  """Holm (1979): reject the sorted p_(1..j) while p_(i) <= alpha / (m - i + 1)."""
  order = np.argsort(p, kind='stable')
  rejected = np.zeros(len(p), bool)
  for i, k in enumerate(order):
    if p[k] > alpha / (len(p) - i):
      break
    rejected[k] = True
  return rejected


def test_holm_is_holms_procedure_and_its_levels_keep_the_intervals_consistent():
  rng = np.random.default_rng(0)
  tests = [
    verdicts.shift_test(rng.normal(shift, 1, 6), rng.normal(0, 1, 6))
    for shift in (0, 0, 0.5, 1, 2, 3, 4, 0)
  ]
  got = verdicts.holm(tests, 0.05)
  expected = holm_written_out(np.array([t.p_value() for t in tests]), 0.05)
  assert [g['rejected'] for g in got] == list(expected)
  assert 0 < sum(expected) < len(tests)
  for test, g, d in zip(tests, got, verdicts.decide(tests, 0.05, None)):
    low, high = test.interval(g['level'])
    assert (low <= 0 <= high) == (not g['rejected']) == (d['sign'] is None)
    assert (g['adjusted_p'] <= 0.05) == g['rejected']


def test_a_clear_difference_is_better_and_equal_draws_are_not_separated():
  rng = np.random.default_rng(1)
  # A card of 8 members against 15 baselines on 3 tasks (45 comparisons): one baseline far
  # below the candidate on one task, every other drawn from the candidate's distribution.
  candidate = {task: rng.normal(0.8, 0.05, 8) for task in range(3)}
  tests, keys = [], []
  for baseline in range(15):
    for task in range(3):
      mean = 0.4 if (baseline, task) == (0, 0) else 0.8
      tests.append(verdicts.shift_test(candidate[task], rng.normal(mean, 0.05, 8)))
      keys.append((baseline, task))
  decided = dict(zip(keys, verdicts.decide(tests, 0.05)))
  assert decided[0, 0]['sign'] == 'higher' and decided[0, 0]['ci'][0] > 0
  assert all(d['sign'] is None for k, d in decided.items() if k != (0, 0))


def test_equal_draws_are_separated_at_no_more_than_the_nominal_rate():
  rng = np.random.default_rng(2)
  # One test at 0.05 (5 against 5: the attainable level is 12 / 252 = 0.0476) ...
  single = np.mean(
    [
      verdicts.shift_test(rng.normal(0, 1, 5), rng.normal(0, 1, 5)).rejects(0.05)
      for _ in range(1000)
    ]
  )
  assert abs(single - 12 / 252) < 3 * math.sqrt(0.05 * 0.95 / 1000)
  # ... and families of 6 tests under Holm: any false separation in at most 5% of them.
  families = 400
  false = sum(
    any(
      d['rejected']
      for d in verdicts.decide(
        [verdicts.shift_test(rng.normal(0, 1, 6), rng.normal(0, 1, 6)) for _ in range(6)]
      )
    )
    for _ in range(families)
  )
  assert false / families <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / families)


@pytest.mark.parametrize('n, level', [(6, 0.05 / 4), (8, 0.05 / 45)])
def test_the_minimum_detectable_difference_has_its_power(n, level):
  sd = 0.07
  mdd = verdicts.minimum_detectable_difference(sd, n, n, level)
  rng = np.random.default_rng(11)  # Draws of their own, not the ones it was found on.
  draws = 400
  power = np.mean(
    [
      verdicts.shift_test(rng.normal(mdd, sd, n), rng.normal(0, sd, n)).rejects(level)
      for _ in range(draws)
    ]
  )
  assert abs(power - verdicts.POWER) < 3 * math.sqrt(0.8 * 0.2 / draws), (mdd, power)
  # Half the difference is seldom detected; 3 against 3 detects nothing.
  half = np.mean(
    [
      verdicts.shift_test(rng.normal(mdd / 2, sd, n), rng.normal(0, sd, n)).rejects(level)
      for _ in range(200)
    ]
  )
  assert half < 0.5
  assert verdicts.minimum_detectable_difference(sd, 3, 3, 0.05) is None


def test_pooled_sd_weights_each_group_by_its_degrees_of_freedom():
  groups = [[0.1, 0.2, 0.3], [0.5, 0.9], [0.4]]
  expected = math.sqrt((np.var(groups[0], ddof=1) * 2 + np.var(groups[1], ddof=1)) / 3)
  assert verdicts.pooled_sd(groups) == pytest.approx(expected)
  assert verdicts.pooled_sd([[0.4]]) is None


def test_pairs_separated_on_constructed_scores():
  rng = np.random.default_rng(4)
  scores = {
    'low': {'t1': rng.normal(0.2, 0.02, 8), 't2': rng.normal(0.5, 0.02, 8)},
    'mid': {'t1': rng.normal(0.2, 0.02, 8), 't2': rng.normal(0.5, 0.02, 8)},
    'high': {'t1': rng.normal(0.9, 0.02, 8), 't2': rng.normal(0.5, 0.02, 8)},
  }
  result = verdicts.pairs_separated(scores)
  assert (result['pairs'], result['comparisons']) == (3, 6)
  found = {(s['a'], s['b']): s for s in result['separated']}
  assert set(found) == {('high', 'low'), ('high', 'mid')}
  assert found['high', 'low'] == {'a': 'high', 'b': 'low', 'tasks': ['t1'], 'higher': ['high']}


def test_the_stored_cpu_v1_baselines_separate_no_pair():
  suite = benchmarks.get('cpu-v1')
  scores = card_lib.baseline_scores(suite, benchmark.read_baselines(suite))
  every = verdicts.pairs_separated(scores)
  assert (every['pairs'], every['comparisons'], every['separated']) == (120, 360, [])
  assert every['smallest_p'] == pytest.approx(0.1)
  leaders = verdicts.pairs_separated(scores, LEADERS)
  assert (leaders['pairs'], leaders['comparisons'], leaders['separated']) == (45, 135, [])
