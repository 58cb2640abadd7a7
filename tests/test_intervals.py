"""The intervals posenc prints (posenc/statistics/intervals.py) and their coverage, measured by
simulation (posenc/statistics/coverage.py) at every number of members a suite or a scorecard
study compares: a few hundred draws here, the table's thousands in the slow test."""

import math

import numpy as np
import pytest
from scipy import stats

from experiments import benchmarks
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.statistics import coverage
from posenc.statistics import intervals

# Every n the suites and the scorecard studies use, and every n from 2 to 16 (a new suite's
# members, whatever it picks, are among them).
NS = sorted(set(range(2, 17)) | set(benchmarks.member_counts()))


def stored_cells(name: str = 'cpu-v1'):
  suite = benchmarks.get(name)
  return card_lib.baseline_cells(suite, benchmark.read_baselines(suite))


def test_three_members_at_100_do_not_make_a_zero_width_interval():
  low, high = intervals.mean_interval([1.0, 1.0, 1.0], examples=416, chance=None)
  assert high == 1.0 and 0.97 < low < 0.995
  # Fewer examples behind each score: a wider interval.
  assert intervals.mean_interval([1.0, 1.0, 1.0], examples=32, chance=None)[0] < low
  # With the pool of cpu-v1, where members at 100% sit beside members at 87%, wider still.
  prior = intervals.pool([(s, e) for _, s, e in stored_cells()])
  assert intervals.mean_interval([1.0, 1.0, 1.0], 416, prior, chance=None)[0] < low
  low, high = intervals.mean_interval([0.0, 0.0, 0.0], examples=416)
  assert low == 0.0 and 0.005 < high < 0.03
  assert intervals.mean_interval([0.5], examples=416) is None


def test_members_may_have_missed_the_failed_runs():
  # A rate seen 0 times in 12: up to 18.5% (the Jeffreys interval's high end).
  assert intervals.unseen_failures(12) == pytest.approx(stats.beta.ppf(0.975, 0.5, 12.5))
  assert intervals.unseen_failures(3) > intervals.unseen_failures(12) > 0.18
  u = intervals.unseen_failures(12)
  low, high = intervals.mean_interval([1.0] * 12, 928, chance=0.5)
  kg_low = intervals.mean_interval([1.0] * 12, 928, chance=None)[0]
  assert high == 1.0 and low == pytest.approx((1 - u) * kg_low + u * 0.5, rel=1e-12)
  # Failures at 0 (a task of unknown chance): lower still.
  assert intervals.mean_interval([1.0] * 12, 928)[0] < low
  # Near chance the low end hardly moves; under it, not at all; the high end never does.
  middle = [0.55, 0.57, 0.6, 0.58] * 3
  near, plain = (
    intervals.mean_interval(middle, 928, chance=0.5),
    intervals.mean_interval(middle, 928, chance=None),
  )
  assert plain[0] - 0.02 < near[0] < plain[0] and near[1] == plain[1]
  assert intervals.with_failures(0.4, 12, 0.5) == 0.4
  # Monotone: a member lower never raises the low end.
  one_low = [1.0] * 11 + [0.88]
  assert intervals.mean_interval(one_low, 928, chance=0.5)[0] < low


def test_the_dispersion_is_floored_by_the_examples_of_one_member():
  assert intervals.dispersion(np.array([[1.0, 1.0, 1.0]]), 416)[0] == pytest.approx(1 / 416)
  x = np.array([[0.4, 0.5, 0.6]])
  p = (3 * 416 * 0.5 + 2) / (3 * 416 + 4)
  assert intervals.dispersion(x, 416)[0] == pytest.approx(0.01 / (p * (1 - p)))


def test_the_interval_is_korn_graubards_clopper_pearson_at_the_effective_size():
  scores = [0.62, 0.7, 0.55, 0.66]
  phi = float(intervals.dispersion(np.array([scores]), 416)[0])
  n_eff = 4 / phi * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, 3)) ** 2
  k = np.mean(scores) * n_eff
  expected = [stats.beta.ppf(0.025, k, n_eff - k + 1), stats.beta.ppf(0.975, k + 1, n_eff - k)]
  assert intervals.mean_interval(scores, 416, chance=None) == pytest.approx(expected)
  # At an integer effective size it is scipy's exact binomial interval.
  low, high = intervals.effective_clopper_pearson(
    np.array([0.25]), np.array([4 / 20 * (1.959963984540054 / stats.t.ppf(0.975, 3)) ** 2]), 4
  )
  exact = stats.binomtest(5, 20).proportion_ci(0.95, method='exact')
  assert [low[0], high[0]] == pytest.approx([exact.low, exact.high])


def test_without_examples_the_interval_is_students_t():
  scores = [3.1, 2.7, 3.6, 2.9]
  expected = stats.t.interval(0.95, 3, loc=np.mean(scores), scale=stats.sem(scores))
  assert intervals.mean_interval(scores, None, bounded=False) == pytest.approx(list(expected))


def test_the_pool_is_smyths_prior_of_the_dispersions():
  rng = np.random.default_rng(0)
  # Cells whose members differ only as binomial means of 400 examples: one dispersion, 1/400,
  # whatever the mean, so no spread beyond sampling: d0 large. Each cell enters floored at
  # 1/400, which moves the pool up (conservatively) from 1/400.
  same = [(list(rng.binomial(400, p, 3) / 400), 400) for p in rng.uniform(0.2, 0.8, 60)]
  prior = intervals.pool(same)
  assert prior.cells == 60 and prior.prior_df > 10
  assert 1 / 400 <= prior.dispersion <= 3 / 400
  # Cells of very different spreads: a small prior weight.
  spread = [
    (list(np.clip(rng.normal(0.5, sd, 3), 0, 1)), 400) for sd in np.geomspace(0.01, 0.3, 60)
  ]
  assert intervals.pool(spread).prior_df < 5
  assert intervals.pool(same[:2]) is None
  # The floor never lowers a dispersion, and with d0 = inf it is phi0.
  phi = np.array([0.001, 0.5])
  assert np.all(intervals.floored(phi, 3, prior) >= phi)
  flat = intervals.Pool(0.03, math.inf, 10)
  assert list(intervals.floored(phi, 3, flat)) == [0.03, 0.5]


def chances(name: str = 'cpu-v1'):
  suite = benchmarks.get(name)
  return card_lib.task_chances(suite, benchmark.read_baselines(suite))


def fast_truths():
  """The normal and stylized truths, and three stored cells: near 100, near 0, middle (the
  failure families are the slow test's)."""
  truths, prior = coverage.truths_of(stored_cells(), 416, chance=chances())
  keep = {'dape/even_pairs', 'stick_breaking/bucket_sort', 'none/cycle_navigation'}
  truths = [t for t in truths if t.family not in coverage.FAILURE_FAMILIES]
  return [t for t in truths if t.family != 'stored cells' or t.name in keep], prior


def test_the_coverage_table_covers_every_n_the_suites_and_scorecards_use():
  assert {2, 3, 16}.issubset(benchmarks.member_counts()) and set(range(4, 17)) <= set(NS)
  truths, prior = fast_truths()
  truths = [t for t in truths if not t.stress]
  result = coverage.simulate(
    truths,
    prior,
    NS,
    draws=300,
    examples=416,
    methods=[coverage.CHOSEN, "Student's t", 'percentile bootstrap (before)'],
  )
  s = coverage.summary(result)
  for n in map(str, NS):
    # 300 draws: the chosen method's 95% is measured within about +-2.5 points.
    assert all(s[f][coverage.CHOSEN][n]['coverage'] >= 0.9 for f in s), n
  normal = s['normal 50 ± 10']
  # The bootstrap the card printed before: far under 95% with few members.
  assert normal['percentile bootstrap (before)']['3']['coverage'] < 0.8
  assert normal["Student's t"]['3']['coverage'] > 0.9
  assert 'success' in result and '| Wilson, continuity correction |' in coverage.markdown(result)


def test_the_success_interval_covers_at_every_rate_and_n():
  result = coverage.success_coverage(NS)
  for n in map(str, NS):
    assert result['Wilson, continuity correction'][n]['coverage'] >= 0.95
  # Wilson's interval without the correction does not: it dips far under 95% near 0 and 1.
  assert min(result['Wilson'][n]['coverage'] for n in map(str, NS)) < 0.9


def test_the_level_floor_takes_the_cells_between_a_sample_and_the_middle():
  prior = intervals.Pool(0.004, 1.4, 3, (0.2, 3.9, 5.4), (0.001, 0.18, 0.04))
  # In the middle only the middle's cell counts: skew near 100 does not widen it.
  assert intervals.level_floor(0.3, prior) == pytest.approx(0.001)
  assert intervals.level_floor(0.1, prior) == 0.0
  weights = np.exp(-0.5 * ((5.7 - np.array([0.2, 3.9, 5.4])) / intervals.LEVEL_BANDWIDTH) ** 2)
  expected = (weights * [0.001, 0.18, 0.04]).sum() / weights.sum()
  assert intervals.level_floor(5.7, prior) == pytest.approx(expected)
  # Symmetric about 50%: the level is |logit|.
  x = np.array([[0.99, 1.0, 1.0], [0.01, 0.0, 0.0]])
  assert intervals.level(x, 416)[0] == pytest.approx(intervals.level(x, 416)[1])
  # It only ever raises a dispersion.
  phi = np.array([0.001, 0.5])
  at = np.array([5.7, 5.7])
  assert np.all(intervals.floored(phi, 3, prior, at) >= intervals.floored(phi, 3, prior))


def test_a_tight_sample_near_100_is_not_trusted_where_the_suite_hides_tails():
  # cpu-v2's dape on even_pairs: eleven members at 97-100%, one at 79%. Most draws of 12
  # members from it miss the low one; the pooled floor alone then covers about 82%.
  truths, prior = coverage.truths_of(stored_cells('cpu-v2'), 928)
  dape = [t for t in truths if t.family == 'stored cells' and t.name == 'dape/even_pairs']
  result = coverage.simulate(
    dape, prior, [12], 1000, 928, methods=[coverage.CHOSEN, 'Korn-Graubard, pooled floor']
  )
  got = result['cells'][0]['methods']
  assert got[coverage.CHOSEN]['coverage'] >= 0.92
  assert got['Korn-Graubard, pooled floor']['coverage'] < 0.87
  # Middle cells keep their width: none's 12 members on even_pairs (50-59%).
  none = [s for name, s, _ in stored_cells('cpu-v2') if name == 'none/even_pairs'][0]
  low, high = intervals.mean_interval(none, 928, prior)
  no_level = intervals.Pool(prior.dispersion, prior.prior_df, prior.cells)
  assert [low, high] == pytest.approx(intervals.mean_interval(none, 928, no_level))


@pytest.mark.slow
@pytest.mark.parametrize('suite, examples', [('cpu-v1', 416), ('cpu-v2', 928)])
def test_the_chosen_interval_covers_93_percent_everywhere(suite, examples):
  """The tables of docs/benchmark.md (`python -m launch.benchmark --coverage --suite=S`),
  asserted: every suite's own pool (its members per score: cpu-v1 13 lengths x 32 examples,
  cpu-v2 29 x 32), the failure families' rows (each stored cell's own members resampled,
  runs failing at chance) included."""
  truths, prior = coverage.truths_of(stored_cells(suite), examples, chance=chances(suite))
  result = coverage.simulate(truths, prior, NS, draws=4000, examples=examples)
  assert coverage.failures(result) == []
  # The floors alone did not cover the families of failed runs.
  s = coverage.summary(result)
  before = [
    s[family][coverage.BEFORE][str(n)]['coverage']
    for family in coverage.FAILURE_FAMILIES
    for n in range(6, 17)
  ]
  assert min(before) < 0.85


def test_failed_runs_are_covered_where_the_level_floor_alone_is_not():
  """The two failure families on a sample of their truths (the whole rows are the slow
  test's): cpu-v2's dape_v2 on even_pairs (ten members at 98-100%, two at 88%) resampled,
  judged by the other cells' pool, and a fifth of the runs failing at chance."""
  truths, prior = coverage.truths_of(stored_cells('cpu-v2'), 928, chance=chances('cpu-v2'))
  picked = [
    t
    for t in truths
    if (t.family, t.name)
    in {(coverage.OWN_MEMBERS, 'dape_v2/even_pairs'), (coverage.MIXTURES, '20% at chance 50%')}
  ]
  assert len(picked) == 2 and all(t.chance == 0.5 for t in picked)
  result = coverage.simulate(
    picked, prior, [6, 10], 1000, 928, methods=[coverage.CHOSEN, coverage.BEFORE]
  )
  for row in result['cells']:
    got = row['methods']
    assert got[coverage.CHOSEN]['coverage'] >= 0.9, row
  # The floors alone: about 80% at n = 6 on dape_v2's members and on the mixture.
  before = [r['methods'][coverage.BEFORE]['coverage'] for r in result['cells'] if r['n'] == 6]
  assert max(before) < 0.86, before
  assert coverage.failures(result) == []
  assert '| stored cells, own members |' in coverage.markdown(result)
