"""The robustness scorecard (posenc/report/scorecard.py, its statistics in statistics.py):
statistics against numpy on fabricated results, success rates and longest lengths on
hand-built curves, and the command line."""

import json
import pathlib

import numpy as np
import pytest

from posenc import results
from posenc.report import scorecard as sc
from posenc.statistics import intervals
from posenc.report import statistics
from posenc.kinds.range import record as range_records
from posenc.kinds.perplexity import record as perplexity_record

LENGTHS = tuple(range(1, 9))  # Trained up to 4.


def range_member(seed, curve, data_seed=None, diverged=False):
  """A member whose accuracy by length is `curve` (a list over LENGTHS)."""
  by_length = dict(zip(LENGTHS, curve))
  score = None if diverged else float(np.mean([by_length[n] for n in LENGTHS if n > 4]))
  return range_records.RangeMember(
    seed=seed,
    learning_rate=1e-3,
    diverged=diverged,
    score=score,
    data_seed=data_seed,
    accuracy_by_length=by_length,
  )


def range_record(encoding, members, task='parity_check'):
  return results.Results(
    task=task,
    encoding=encoding,
    family='encoder',
    encoding_options={},
    num_params=1,
    architecture='standard',
    train_steps=10,
    train_length=4,
    evaluation=range_records.RangeResults(LENGTHS, (5, 8), tuple(members)),
  )


def flat(seed, value, **kw):
  return range_member(seed, [1.0] * 4 + [value] * 4, **kw)


def wilson_cc(k, n, z=1.959963984540054):
  """Wilson's score interval with continuity correction, written out (Newcombe 1998)."""
  p = k / n
  low = (2 * n * p + z * z - 1 - z * np.sqrt(z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (
    2 * (n + z * z)
  )
  high = (2 * n * p + z * z + 1 + z * np.sqrt(z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (
    2 * (n + z * z)
  )
  return [0.0 if k == 0 else low, 1.0 if k == n else high]


@pytest.mark.parametrize(
  'k, n, expected', [(0, 12, [0.0, 0.301]), (12, 12, [0.699, 1.0]), (2, 3, [0.125, 0.982])]
)
def test_success_interval_is_wilson_with_continuity_correction(k, n, expected):
  ci = intervals.success_interval(k, n)
  assert ci == pytest.approx(wilson_cc(k, n)) and ci == pytest.approx(expected, abs=5e-4)
  assert ci[1] - ci[0] > 0.25
  assert intervals.success_interval(0, 0) is None


def test_summary_statistics_are_numpy_s():
  x = [0.2, 0.9, 0.55, 0.7, 0.61]
  s = statistics.summarize(x)
  assert s['mean'] == pytest.approx(np.mean(x)) and s['sd'] == pytest.approx(np.std(x, ddof=1))
  assert s['median'] == pytest.approx(np.median(x))
  assert [s['q25'], s['q75']] == pytest.approx(np.percentile(x, [25, 75]))
  assert s['iqr'] == pytest.approx(np.subtract(*np.percentile(x, [75, 25])))
  assert (s['min'], s['max'], s['published']) == (0.2, 0.9, 0.9)
  assert statistics.summarize(x, higher_is_better=False)['published'] == 0.2
  one = statistics.summarize([0.4])
  assert one['sd'] is None and one['published'] == 0.4
  assert statistics.summarize([]) is None


def test_longest_generalized_on_hand_built_curves():
  passes = lambda v: v >= 0.95
  assert statistics.longest_generalized({1: 1.0, 2: 0.97, 3: 0.5, 4: 1.0}, passes) == 2
  assert statistics.longest_generalized({1: 0.9, 2: 1.0}, passes) == 0
  assert statistics.longest_generalized({1: 1.0, 5: 1.0, 9: 0.96}, passes) == 9
  assert statistics.longest_generalized({1: 1.0, 2: float('nan')}, lambda v: v >= 0.95) == 1


def test_variance_components_of_an_additive_design():
  a, b = {0: 0.1, 1: 0.3, 2: 0.2}, {10: 0.0, 11: 0.4}
  scores = {(s, d): a[s] + b[d] for s in a for d in b}
  v = statistics.variance_components(scores)
  assert v['seed_variance'] == pytest.approx(np.var(list(a.values()), ddof=1))
  assert v['data_order_variance'] == pytest.approx(np.var(list(b.values()), ddof=1))
  assert v['residual_variance'] == pytest.approx(0, abs=1e-12)
  del scores[0, 10]
  assert statistics.variance_components(scores) is None  # Incomplete design.
  assert statistics.variance_components({(0, 1): 0.5, (1, 1): 0.6}) is None  # One data seed.


def test_comparisons_are_decided_together_and_agree_with_their_intervals():
  a = [flat(s, v) for s, v in enumerate([0.9, 0.8, 0.95, 0.7, 0.92])]
  b = [flat(s, v) for s, v in enumerate([0.5, 0.6, 0.55, 0.52, 0.58])]
  c = [flat(s, v) for s, v in enumerate([0.51, 0.61, 0.54, 0.5, 0.6])]
  card = sc.scorecard(
    [
      ('a', range_record('alibi', a)),
      ('b', range_record('rotary', b)),
      ('c', range_record('none', c)),
    ]
  )
  by = {(x['a'], x['b']): x for x in card['comparisons']}
  assert len(by) == 3
  first = by['alibi', 'none']
  assert first['mean_difference'] == pytest.approx(0.854 - 0.552)
  # 5 against 5: 252 splits, the smallest two-sided p 2/252, three tests: Holm's first step
  # is 0.05 / 3.
  assert first['p_value'] == pytest.approx(2 / 252) and first['verdict'] == 'alibi better'
  assert by['none', 'rotary']['verdict'] == 'not separated'
  for x in card['comparisons']:
    lo, hi = x['ci']
    assert (lo > 0 or hi < 0) == (x['verdict'] != 'not separated'), x
  text = sc.markdown(card)
  assert '| alibi | none | encoder | 0.001 | 30.2 [' in text and '| alibi better |' in text
  assert 'Holm over every pair of the scorecard' in text


def test_scorecard_intervals_count_the_examples_and_name_their_method():
  members = [flat(s, 1.0) for s in range(3)]
  record = range_record('alibi', members)
  config = {'eval': {'examples_per_length': 32, 'batch_size': 16}}
  record = results.Results(**{**record.__dict__, 'config': config})
  row = sc.scorecard([('a', record)])['rows'][0]
  # Three members at 100% on 4 lengths x 32 examples: not [1, 1]. Three runs leave up to
  # 54% of runs failing unseen, at parity_check's chance of 50%.
  assert row['examples_per_score'] == 128 and row['chance'] == 0.5
  low, high = row['score']['mean_ci']
  assert high == 1.0 and 0.6 < low < 0.8
  assert [low, high] == intervals.mean_interval([1.0] * 3, 128, None, chance=0.5)
  without = intervals.mean_interval([1.0] * 3, 128, None, chance=None)
  assert 0.9 < without[0] < 1.0
  assert row['score']['interval'] == intervals.MEAN_METHOD
  # Without the number of examples (results that predate the config): Student's t.
  bare = sc.scorecard([('a', range_record('alibi', members))])['rows'][0]
  assert bare['score']['interval'] == intervals.MEAN_METHOD_T


def test_longest_at_the_last_evaluated_length_is_a_lower_bound():
  # Trained to 4, evaluated to 8: two members pass every length (censored at 8).
  members = [flat(0, 1.0), flat(1, 1.0), flat(2, 0.5)]
  row = sc.scorecard([('a', range_record('randomized_rotary', members))])['rows'][0]
  lg = row['longest_generalized']
  assert [m['longest_censored'] for m in row['member_scores']] == [True, True, False]
  assert (lg['median'], lg['max'], lg['min'], lg['censored']) == (8, 8, 4, 2)
  assert lg['lower_bound'] == {
    'mean': True,
    'median': True,
    'q25': True,
    'q75': True,
    'min': False,
    'max': True,
  }
  assert '≥ 8 [≥ 6, ≥ 8] (≥ 2.00×); 2/3 pass every evaluated length' in sc.markdown(
    {**sc.scorecard([('a', range_record('randomized_rotary', members))])}
  )
  every = sc.scorecard([('a', range_record('rotary', members[:2]))])
  assert '≥ 8 (every evaluated length)' in sc.markdown(every)
  exact = statistics.longest_summary([2, 3, 8], [False, False, True], 4)
  assert exact['median'] == 3 and not exact['lower_bound']['median']


def test_scorecard_names_the_lengths_a_score_averages():
  card = sc.scorecard([('a', range_record('rotary', [flat(0, 1.0)]))])
  assert card['rows'][0]['score_basis'] == {
    'what': 'mean over the evaluated lengths past training',
    'lengths': [5, 6, 7, 8],
  }
  assert 'Score: mean over the evaluated lengths past training, lengths 5, 6, 7, 8.' in (
    sc.markdown(card)
  )


def test_scorecard_rows_success_and_longest():
  good = [
    flat(0, 1.0),
    flat(1, 0.92),
    flat(2, 0.5),
    range_member(3, [1.0, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0]),
    range_member(4, [0.0] * 8, diverged=True),
  ]
  card = sc.scorecard(
    [
      ('a', range_record('randomized_rotary', good)),
      ('b', range_record('rotary', [flat(0, 0.6)])),
      ('c', range_record('alibi', [flat(0, 0, diverged=True)])),
    ]
  )
  rows = {r['column']: r for r in card['rows']}
  r = rows['randomized_rotary']
  scores = [1.0, 0.92, 0.5, 1.0]
  assert r['members'] == 5 and r['diverged'] == 1
  assert r['score']['mean'] == pytest.approx(np.mean(scores))
  assert r['score']['published'] == 1.0
  # Success: score >= 0.9, the diverged member failing: 3 of 5.
  assert r['success']['rate'] == pytest.approx(3 / 5)
  assert r['success']['ci'] == pytest.approx(wilson_cc(3, 5))
  # Longest: 8 (all pass), 4 (0.92 < 0.95 past training), 4, 2 (length 3 fails).
  assert [m['longest'] for m in r['member_scores']] == [8, 4, 4, 2, None]
  assert (
    r['longest_generalized']['median'] == 4
    and r['longest_generalized']['ratio_to_train_length'] == 1.0
  )
  assert r['success_by_length']['8'] == pytest.approx(2 / 5)
  assert r['success_by_length']['1'] == pytest.approx(4 / 5)
  one = rows['rotary']
  assert one['score']['sd'] is None and one['score']['mean_ci'] is None
  assert one['success']['rate'] == 0.0 and one['success']['ci'] == pytest.approx(wilson_cc(0, 1))
  dead = rows['alibi']
  assert dead['score'] is None and dead['longest_generalized'] is None
  assert dead['success']['rate'] == 0.0
  pairs = {(c['a'], c['b']): c for c in card['comparisons']}
  assert pairs['alibi', 'randomized_rotary']['mean_difference'] is None
  c = pairs['randomized_rotary', 'rotary']
  assert c['mean_difference'] == pytest.approx(np.mean(scores) - 0.6)
  text = sc.markdown(card)
  assert '| alibi | encoder | 0.001 | 0/1 | all diverged |' in text
  assert '| randomized_rotary | encoder | 0.001 | 4/5 | 85.5 ± ' in text
  json.dumps(card)  # JSON-able.


def test_seed_and_data_order_variance_apart():
  members = [flat(s, 0.5 + 0.1 * s + 0.3 * d, data_seed=d) for s in range(3) for d in range(2)]
  row = sc.scorecard([('a', range_record('rotary', members))])['rows'][0]
  v = row['variance']
  assert (v['seeds'], v['data_seeds']) == (3, 2)
  assert v['seed_variance'] == pytest.approx(np.var([0.65, 0.75, 0.85], ddof=1))
  assert v['data_order_variance'] == pytest.approx(np.var([0.6, 0.9], ddof=1))


def test_perplexity_lower_is_better():
  def member(seed, ppl):
    return perplexity_record.PerplexityMember(
      seed=seed,
      learning_rate=1e-3,
      diverged=False,
      score=ppl[64],
      degradation=None,
      perplexity_by_length={'non_overlapping': ppl},
    )

  members = [member(0, {16: 10.0, 32: 10.5, 64: 10.9}), member(1, {16: 10.0, 32: 12.0, 64: 30.0})]
  record = results.Results(
    task='python_stdlib',
    encoding='alibi',
    family='decoder',
    encoding_options={},
    num_params=1,
    architecture='standard',
    train_steps=1,
    train_length=16,
    evaluation=perplexity_record.PerplexityResults((16, 32, 64), {}, {}, tuple(members)),
  )
  row = sc.scorecard([('a', record)])['rows'][0]
  assert row['score']['published'] == 10.9 and not row['higher_is_better']
  # Within 10% of the perplexity at length 16: member 0 everywhere, member 1 at 16 only.
  assert [m['longest'] for m in row['member_scores']] == [64, 16]
  assert row['success']['rate'] == 0.5


def test_bad_thresholds_are_one_line():
  with pytest.raises(ValueError, match=r'scorecard score threshold 1.5 must be in \(0, 1\]'):
    sc.Thresholds(score=1.5).check()
  with pytest.raises(ValueError, match='tolerance -1 must be >= 0'):
    sc.Thresholds(tolerance=-1).check()


def test_report_scorecard_from_the_command_line(cli, tmp_path):
  out = tmp_path / 'out'
  proc = cli.run(['launch.report', 'tests/data/results_v1', f'--out={out}', '--scorecard'])
  assert proc.returncode == 0, proc.stderr
  card = json.loads((out / 'scorecard.json').read_text())
  assert card['schema_version'] == 3
  assert {r['evaluation'] for r in card['rows']} == {'range', 'grid', 'lengths', 'perplexity'}
  assert '# Robustness scorecard' in (out / 'scorecard.md').read_text()
  assert (out / 'scorecard_even_pairs.png').read_bytes()[:4] == b'\x89PNG'
  assert 'scorecard figures' in proc.stdout
  bad = cli.run(
    [
      'launch.report',
      'tests/data/results_v1',
      f'--out={tmp_path / "bad"}',
      '--scorecard',
      '--length_threshold=2',
    ]
  )
  assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
  assert '--length_threshold=2.0 must be in (0, 1]' in bad.stderr
  assert not pathlib.Path(tmp_path / 'bad').exists()


def test_a_decoder_is_judged_by_exact_match():
  """Generated answers: the decoder's scores and curves are its exact match."""
  member = range_records.RangeMember(
    seed=0,
    learning_rate=1e-3,
    diverged=False,
    score=0.99,
    accuracy_by_length=dict.fromkeys(LENGTHS, 0.99),
    exact_match_score=0.5,
    exact_match_by_length={**dict.fromkeys(LENGTHS[:5], 1.0), **dict.fromkeys(LENGTHS[5:], 0.5)},
  )
  record = range_record('rotary', [member])
  decoder = results.Results(**{**record.__dict__, 'family': 'decoder'})
  rows = {r['family']: r for r in sc.scorecard([('e', record), ('d', decoder)])['rows']}
  assert rows['decoder']['metric'] == 'exact match' and rows['encoder']['metric'] == 'accuracy'
  assert rows['decoder']['score']['mean'] == 0.5 and rows['encoder']['score']['mean'] == 0.99
  assert rows['decoder']['member_scores'][0]['longest'] == 5
  assert rows['encoder']['member_scores'][0]['longest'] == 8
