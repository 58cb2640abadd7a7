"""The verdict procedure (posenc/report/verdicts.py): the permutation test against scipy's,
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
from posenc import card as card_lib
from posenc.report import verdicts

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
  a, b = rng.normal(0.5, 0.1, 12), rng.normal(0.4, 0.1, 12)
  first, again = verdicts.shift_test(a, b), verdicts.shift_test(a, b)
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
  assert verdicts.test_name(first).endswith('100,000 random splits')


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
