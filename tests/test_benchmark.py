"""The versioned benchmark (posenc/benchmark/__init__.py, launch.benchmark, experiments/benchmarks):
stored baselines cannot drift from their suite, the tiny suite reproduces its stored result
bit for bit, the card ranks a candidate, the conformance command, the outside example
package installed and benchmarked, and one line for every bad input."""

import copy
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from experiments import benchmarks
from posenc.benchmark import baselines as baselines_lib
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc import config as config_lib
from posenc.benchmark import leaderboard
from posenc import setup
from posenc.benchmark import submission

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / 'examples' / 'outside_encoding'


def stored_baselines():
  return [
    (suite, name)
    for suite in benchmarks.SUITES.values()
    if suite.measured
    for name in benchmark.read_baselines(suite)
  ]


@pytest.mark.parametrize('suite, name', stored_baselines(), ids=lambda x: getattr(x, 'name', x))
def test_a_stored_baseline_is_what_the_suite_runs_today(suite, name):
  entry = benchmark.read_baselines(suite)[name]
  assert set(entry['tasks']) == set(suite.tasks)
  for task, results in entry['tasks'].items():
    recorded = benchmark.recorded_config(results['config'])
    today = benchmark.recorded_config(suite.cell_config(task, name))
    assert config_lib.config_changes(recorded, today) == [], (task, name)


def test_every_measured_suite_ships_checksums_and_its_baselines():
  for suite in benchmarks.SUITES.values():
    if not suite.measured:
      continue
    stored = benchmark.checksums(suite)
    assert set(stored) == set(suite.tasks)
    # A suite names the baselines it promises; those not stored yet are listed in its
    # baselines.md (baselines.baselines_table) and the cards.
    assert set(benchmark.read_baselines(suite)) <= set(suite.baselines), suite.name
  tiny = benchmarks.get('tiny')
  assert set(benchmark.read_baselines(tiny)) == set(tiny.baselines)


def _benchmark(*args):
  """`launch.benchmark` as a user runs it: XLA's optimizations on (the tests turn most of
  them off, and the stored baselines were made with them on)."""
  return _launch('launch.benchmark', *args)


def _launch(module, *args):
  env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS='false')
  return subprocess.run(
    [sys.executable, '-m', module, *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )


def test_the_tiny_suite_reproduces_its_stored_result_bit_for_bit(cli, tmp_path):
  proc = _benchmark('--encoding=rotary', '--suite=tiny', f'--workdir={tmp_path}')
  assert proc.returncode == 0, proc.stderr[-2000:]
  # Progress: what the card trains and what the baselines took, then after each task the
  # time so far and the card's ETA.
  lines = proc.stdout.splitlines()
  assert lines[0].startswith('card of rotary on tiny: even_pairs (20 steps), parity_check')
  assert 'its 2 stored baselines took' in lines[0]
  assert any(line.startswith('card: 1/2 tasks done (even_pairs) | elapsed ') for line in lines)
  assert any(line.startswith('card: 2/2 tasks done') and 'ETA 0.0 min' in line for line in lines)
  entry = json.loads((tmp_path / 'entry.json').read_text())
  stored = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']
  for task in stored['tasks']:
    assert entry['tasks'][task]['members'] == stored['tasks'][task]['members'], task
  card = json.loads((tmp_path / 'card.json').read_text())
  assert card['suite'] == {**card['suite'], 'name': 'tiny', 'version': 1}
  assert card['candidate'] == 'rotary' and card['baselines'] == ['none']
  assert card['run']['posenc_version'] and card['run']['packages']['jax']
  assert (tmp_path / 'card.png').read_bytes()[:4] == b'\x89PNG'
  assert '# Benchmark card: rotary on tiny (version 1)' in (tmp_path / 'card.md').read_text()
  # A rerun resumes: nothing is trained again, the card is the same.
  again = _benchmark('--encoding=rotary', '--suite=tiny', f'--workdir={tmp_path}')
  assert again.returncode == 0 and '0 to run' in again.stdout
  assert json.loads((tmp_path / 'card.json').read_text())['tasks'] == card['tasks']
  # The card directory is a leaderboard's entry, under a name apart from the stored rotary.
  suite = benchmarks.get('tiny')
  mine = leaderboard.read_card_dir(suite, str(tmp_path))
  (name,) = leaderboard.candidate_names([str(tmp_path)], [mine], ['none', 'rotary'])
  assert name == f'rotary ({tmp_path})'
  board = leaderboard.leaderboard(suite, benchmark.read_baselines(suite), {name: mine})
  rows = {e['name']: e for e in board['entries']}
  # The same members as the stored rotary: the same rows and the same rank.
  assert (
    rows[name]['tasks']['even_pairs']['row']['score']
    == (rows['rotary']['tasks']['even_pairs']['row']['score'])
  )
  assert rows[name]['mean_rank'] == rows['rotary']['mean_rank']
  # A card that does not say what its run says fails its check, exit status 1, and nothing
  # is trained (`test_a_card_passes_the_checks_of_a_submission` trains its rerun).
  card_json = tmp_path / 'card.json'
  card = json.loads(card_json.read_text())
  row = next(r for r in card['tasks']['parity_check']['rows'] if r['column'] == 'rotary')
  row['member_scores'][0]['score'] = 0.99
  card_json.write_text(json.dumps(card))
  # The suite is the card's own: no --suite to repeat.
  tampered = cli.run(['launch.check_card', str(tmp_path), f'--workdir={tmp_path / "check"}'])
  assert tampered.returncode == 1
  assert 'card       FAIL  parity_check seed 0: card.json says 0.99' in tampered.stdout
  assert 'rerun      FAIL  not run: an earlier check failed' in tampered.stdout
  # Bad input is one line, exit status 2.
  check = str(tmp_path / 'check')
  for args, needle in [
    (
      ['--suite=cpu-v2', f'--workdir={check}'],
      f"--suite=cpu-v2, but the card in {tmp_path} is of suite 'tiny'",
    ),
    (['--suite=cpu-v9', f'--workdir={check}'], "unknown suite 'cpu-v9'"),
    (
      ['--suite=tiny', f'--workdir={check}', '--member=even_pair:0:'],
      "(did you mean 'even_pairs'?)",
    ),
    (['--suite=tiny', f'--workdir={check}', '--member=even_pairs:7:'], 'has no member seed 7'),
  ]:
    bad = cli.run(['launch.check_card', str(tmp_path), *args])
    assert bad.returncode == 2 and needle in bad.stderr.strip().splitlines()[-1], (args, bad.stderr)


@pytest.mark.slow
def test_a_card_passes_the_checks_of_a_submission(tmp_path):
  proc = _benchmark('--encoding=rotary', '--suite=tiny', f'--workdir={tmp_path}')
  assert proc.returncode == 0, proc.stderr[-2000:]
  # Its rerun member is equal to the last bit.
  check = _launch('launch.check_card', str(tmp_path), f'--workdir={tmp_path / "check"}')
  assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
  lines = [
    line
    for line in check.stdout.splitlines()
    if line.split()[:1] in (['suite'], ['config'], ['card'], ['checksums'], ['rerun'])
  ]
  assert [line.split()[:2] for line in lines] == [[c, 'ok'] for c in submission.CHECKS]
  assert 'largest difference 0 points' in lines[-1]
  assert 'ready for the leaderboard' in check.stdout.splitlines()[-1]


def test_the_checks_of_a_submission_compare_what_they_say():
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)['rotary']
  assert submission.check_config(suite, stored).passed
  longer = copy.deepcopy(stored)
  longer['tasks']['parity_check']['config']['train']['steps'] += 1
  failed = submission.check_config(suite, longer)
  assert not failed.passed and 'parity_check' in failed.detail and 'train.steps' in failed.detail
  card = card_lib.make_card(suite, stored, {})
  assert submission.check_card(card, stored).passed
  member = submission.member_of(stored, 'even_pairs', 1, None)
  assert submission.compare_member('even_pairs', member, member, 0.0).passed
  off = copy.deepcopy(member)
  off['exact_match_by_length']['12'] += 0.005
  assert not submission.compare_member('even_pairs', member, off, 0.0).passed
  close = submission.compare_member('even_pairs', member, off, 1.0)
  assert close.passed and '(length 12)' in close.detail
  with pytest.raises(ValueError, match=r'has no member seed 9; its members \(seed:data\): 0:, 1:'):
    submission.member_of(stored, 'even_pairs', 9, None)


def test_the_card_s_eta_scales_the_time_so_far_by_the_baselines_shares():
  suite = benchmarks.get('cpu-v2')
  plan = benchmark.expected(suite, benchmark.read_baselines(suite))
  assert sum(plan.shares.values()) == pytest.approx(1.0)
  # flip_flop trains 1,500 steps to even_pairs' 600: most of a card.
  assert 0.25 < plan.shares['even_pairs'] < 0.4
  assert len(plan.seconds) == 16 and 60 < plan.median() < 600
  share = plan.shares['even_pairs']
  eta = plan.remaining(60.0, ['even_pairs'], ['flip_flop'])
  assert eta == pytest.approx(60 * (1 - share) / share)
  # A resumed run whose even_pairs was done before: no time to scale yet.
  assert plan.remaining(0.0, [], ['flip_flop']) is None


def candidate_entry(stored, name, scores_by_task):
  """A copy of a stored entry renamed `name`, each task's members replaced by one member per
  score of `scores_by_task[task]` (every length at that score)."""
  entry = copy.deepcopy(stored)
  entry['encoding'] = name
  for task, results in entry['tasks'].items():
    results['encoding'] = name
    template = results['members'][0]
    results['members'] = []
    for seed, score in enumerate(scores_by_task[task]):
      member = copy.deepcopy(template)
      member['seed'] = seed
      member['score'] = member['exact_match_score'] = score
      member['exact_match_by_length'] = {n: score for n in member['exact_match_by_length']}
      results['members'].append(member)
  return entry


def test_the_card_ranks_the_candidate_and_says_two_members_cannot_separate():
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)
  # A candidate that passes everything, 2 members like the suite's.
  entry = candidate_entry(stored['rotary'], 'mine', dict.fromkeys(suite.tasks, [1.0, 1.0]))
  card = card_lib.make_card(suite, entry, stored)
  for task in suite.tasks:
    t = card['tasks'][task]
    assert (t['rank'], t['of'], t['order'][0]) == (1, 3, 'mine')
    assert {c['b'] for c in t['comparisons']} == {'none', 'rotary'}
    assert all(c['a'] == 'mine' and c['mean_difference'] > 0 for c in t['comparisons'])
    # 2 against 2: p >= 1/3, never separated; the interval is the whole range.
    assert all(c['verdict'] == 'not separated' for c in t['comparisons'])
    assert all(c['ci'] == [-1.0, 1.0] for c in t['comparisons'])
    assert t['detectable']['difference'] is None
  assert card['mean_rank'] == 1.0
  assert card['statistics']['decidable'] is False and card['statistics']['comparisons'] == 4
  text = card_lib.markdown(card)
  assert '| 1 | **mine** (candidate) | 100.0 ± 0.0 [' in text
  assert '**No comparison on this card can be separated.**' in text
  assert 'none: the smallest two-sided p-value is 0.33' in text
  assert 'Korn-Graubard' in text and 'Holm' in text


def test_a_card_of_eight_members_separates_a_clear_difference():
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)
  high = [0.9, 0.92, 0.95, 0.97, 0.91, 0.93, 0.96, 0.94]
  low = [0.5, 0.55, 0.52, 0.58, 0.51, 0.57, 0.53, 0.56]
  baselines = {
    'none': candidate_entry(stored['none'], 'none', {'even_pairs': low, 'parity_check': high}),
  }
  entry = candidate_entry(stored['rotary'], 'mine', dict.fromkeys(suite.tasks, high))
  card = card_lib.make_card(suite, entry, baselines)
  even, parity = (card['tasks'][t]['comparisons'][0] for t in ('even_pairs', 'parity_check'))
  assert even['verdict'] == 'better' and even['ci'][0] > 0
  assert parity['verdict'] == 'not separated' and parity['ci'][0] < 0 < parity['ci'][1]
  assert card['statistics']['decidable'] is True
  detectable = card['tasks']['even_pairs']['detectable']
  assert detectable['n_candidate'] == detectable['n_baseline'] == 8
  assert 0 < detectable['difference'] < 0.4
  # One line, one verdict: every row's interval excludes 0 exactly when it separates.
  text = card_lib.markdown(card)
  rows = [line for line in text.splitlines() if line.startswith('| ') and '| none |' in line]
  assert len(rows) == 2
  for line in rows:
    cells = [c.strip() for c in line.split('|')]
    low_end, high_end = map(float, cells[6].split('[')[1].rstrip(']').split(','))
    assert (low_end > 0 or high_end < 0) == (cells[7] != 'not separated'), line
  assert 'points; a smaller true difference is often "not separated"' in text


def test_a_card_of_an_old_suite_version_says_it_is_one():
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)
  old = dataclasses.replace(suite, superseded_by='tiny-v2')
  card = card_lib.make_card(old, stored['rotary'], stored)
  assert card['suite']['superseded_by'] == 'tiny-v2'
  assert '**An old version of the benchmark:** tiny is superseded by tiny-v2' in (
    card_lib.markdown(card)
  )
  assert 'tiny is superseded by tiny-v2' in baselines_lib.baselines_table(old, stored)
  current = card_lib.make_card(suite, stored['rotary'], stored)
  assert 'An old version' not in card_lib.markdown(current)
  # The suite a plain run uses is the newest of its family.
  assert benchmarks.SUITES[benchmarks.DEFAULT].superseded_by is None


def test_the_stored_baselines_md_are_what_the_stored_baselines_give_today():
  for suite in benchmarks.SUITES.values():
    if suite.measured:
      path = os.path.join(suite.directory, 'baselines.md')
      table = baselines_lib.baselines_table(suite, benchmark.read_baselines(suite))
      assert open(path).read() == table, (
        f'rerun launch.benchmark --suite={suite.name} --write_baselines_md'
      )


def test_a_tampered_frozen_set_is_one_line_and_runs_nothing(cli, tmp_path):
  suite = benchmarks.get('tiny')
  expected = benchmark.checksums(suite)
  for task in suite.tasks:  # The sets a run writes first, checked against the suite's.
    benchmark.prepare_eval_set(
      suite, task, suite.cell_config(task, 'none'), expected, str(tmp_path)
    )
  manifest = tmp_path / 'eval_sets' / 'even_pairs' / 'manifest.json'
  data = json.loads(manifest.read_text())
  data['cells'][0]['sha256'] = '0' * 64
  manifest.write_text(json.dumps(data))
  proc = cli.run(['launch.benchmark', '--encoding=none', '--suite=tiny', f'--workdir={tmp_path}'])
  assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
  assert 'the frozen evaluation set of even_pairs does not match suite tiny: length_1.npz' in (
    proc.stderr
  )
  assert not (tmp_path / 'runs').exists()


def test_a_baseline_of_another_suite_version_is_refused(tmp_path):
  suite = benchmarks.get('tiny')
  shutil.copytree(suite.directory, tmp_path / 'tiny')
  moved = benchmark.Suite(**{**suite.__dict__, 'directory': str(tmp_path / 'tiny')})
  path = tmp_path / 'tiny' / 'baselines' / 'rotary.json'
  entry = json.loads(path.read_text())
  entry['suite']['version'] = 0
  path.write_text(json.dumps(entry))
  with pytest.raises(
    benchmark.BenchmarkError,
    match=r'rotary.json is of suite \'tiny\' '
    'version 0, not tiny version 1; rerun its command for this version',
  ):
    benchmark.read_baselines(moved)


def test_an_encoder_suite_refuses_a_causal_only_encoding():
  suite = benchmarks.get('tiny')
  encoder = lambda task, encoding: config_lib.shrink_to_tiny(config_lib.base_config())
  with pytest.raises(config_lib.ConfigError, match="'stick_breaking' is causal by definition"):
    setup.build(
      benchmark.Suite(**{**suite.__dict__, 'config': encoder}).cell_config(
        'even_pairs', 'stick_breaking'
      )
    )


@pytest.mark.parametrize(
  'args, needle',
  [
    (
      ['--encoding=alibi', '--suite=cpu-v9'],
      "unknown suite 'cpu-v9' (did you mean 'cpu-v2'?); valid suites: cpu-v2, cpu-v1, tiny, gpu-v1",
    ),
    (
      ['--encoding=nope', '--suite=tiny'],
      "unknown encoding 'nope' (did you mean 'none'?); valid encodings: none",
    ),
    (['--encoding=no_such_pkg.mod:ENC', '--suite=tiny'], "no module named 'no_such_pkg.mod'"),
    (
      ['--encoding=posenc.encodings:ENCODINGS', '--suite=tiny'],
      'is a dict, not a posenc Encoding record',
    ),
    (['--encoding=abacus', '--suite=tiny'], 'abacus'),
    (['--encoding=alibi', '--suite=gpu-v1'], 'suite gpu-v1 is defined on paper'),
    (
      ['--encoding=alibi', '--suite=tiny', '--alpha=0.05'],
      '--alpha=0.05 cannot be reached on suite tiny: 2 members against 2 give p >= 0.33',
    ),
    (['--encoding=alibi', '--suite=tiny', '--alpha=1.5'], '--alpha=1.5 must be in (0, 1)'),
    (['--suite=cpu-v1', '--separated', '--alpha=0.01'], '--alpha=0.01 cannot be reached'),
    (['--suite=cpu-v1', '--separated', '--among=alibi,nope'], "--among names ['nope']"),
    (['--suite=cpu-v9', '--coverage'], "unknown suite 'cpu-v9'"),
    (['--coverage', '--draws=100000000000000000000'], 'must be an integer in [10, 100,000]'),
    (['--coverage', '--draws=9'], '--draws=9 must be an integer in [10, 100,000]'),
    (['--coverage', '--draws=1e20'], '--draws=1e20: invalid literal for int()'),
    (['--encoding=alibi', '--suite=tiny', '--alpha=nan'], '--alpha=nan must be in (0, 1)'),
    (['--suite=cpu-v1', '--separated', '--alpha=-1'], '--alpha=-1.0 must be in (0, 1)'),
    (['--suite=tiny'], '--encoding is required'),
    (['--encoding=alibi', '--suite=tiny', '--workdir={tmp}/file'], 'is a file'),
  ],
)
def test_bad_benchmark_input_is_one_line(cli, tmp_path, args, needle):
  (tmp_path / 'file').write_text('x')
  before = sorted(tmp_path.rglob('*'))
  proc = cli.run(
    ['launch.benchmark', f'--workdir={tmp_path}/run'] + [a.format(tmp=tmp_path) for a in args]
  )
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert sorted(tmp_path.rglob('*')) == before


def test_check_encoding_prints_one_line_per_invariant(cli):
  proc = cli.run(['launch.check_encoding', 'alibi', '--checks=causal,step'])
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  assert lines[0].startswith('causal       pass  max |difference|')
  assert lines[1].startswith('step         pass  max |difference|')
  assert lines[2].startswith('alibi: 2 of 2 checks pass')
  bad = cli.run(['launch.check_encoding', 'no_such_pkg.mod:ENC'])
  assert bad.returncode == 2 and "no module named 'no_such_pkg.mod'" in bad.stderr
  wrong = cli.run(['launch.check_encoding', 'alibi', '--checks=speed'])
  assert wrong.returncode == 2 and "unknown checks ['speed']" in wrong.stderr


@pytest.fixture(scope='module')
def installed_example(tmp_path_factory):
  """examples/outside_encoding installed by pip (its entry point in its dist-info) into a
  directory the subprocesses put on their path."""
  target = tmp_path_factory.mktemp('site')
  subprocess.run(
    [
      sys.executable,
      '-m',
      'pip',
      'install',
      '-q',
      '--no-deps',
      '--no-build-isolation',
      '--target',
      str(target),
      str(EXAMPLE),
    ],
    check=True,
    capture_output=True,
    cwd=tmp_path_factory.mktemp('build'),
  )
  return dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT)]))


def test_the_example_package_is_found_by_its_entry_point(installed_example):
  proc = subprocess.run(
    [sys.executable, '-m', 'launch.check_encoding', 'xpos', '--checks=backends,step,generation'],
    cwd=ROOT,
    env=installed_example,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert 'xpos: 3 of 3 checks pass' in proc.stdout


@pytest.mark.slow
def test_the_example_package_conforms_and_gets_its_card(installed_example, tmp_path):
  check = subprocess.run(
    [sys.executable, '-m', 'launch.check_encoding', 'xpos'],
    cwd=ROOT,
    env=installed_example,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert check.returncode == 0 and 'xpos: 9 of 9 checks pass' in check.stdout, check.stdout
  card = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.benchmark',
      '--encoding=xpos',
      '--suite=tiny',
      f'--workdir={tmp_path}',
    ],
    cwd=ROOT,
    env=installed_example,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert card.returncode == 0, card.stderr[-2000:]
  data = json.loads((tmp_path / 'card.json').read_text())
  assert data['candidate'] == 'xpos' and set(data['baselines']) == {'none', 'rotary'}


def test_equal_scores_share_a_rank():
  row = lambda c, m: {'column': c, 'higher_is_better': True, 'score': {'mean': m, 'median': m}}
  rows = [row('a', 0.9), row('b', 0.5), row('c', 0.5 + 1e-12), row('d', 0.1)]
  assert card_lib.ranks(rows) == {'a': 1, 'b': 2, 'c': 2, 'd': 4}


@pytest.mark.slow
def test_cost_says_what_a_card_takes(cli):
  proc = cli.run(['launch.benchmark', '--encoding=alibi', '--suite=tiny', '--cost'])
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  assert lines[0].startswith('suite tiny: 2 tasks; its 2 stored baselines took')
  assert lines[1].startswith('even_pairs: 20 steps x 2 members: train')
  assert lines[-1].startswith('alibi on tiny: about')


def test_the_selection_table_rescores_shorter_test_ranges_from_the_stored_curves():
  from posenc.benchmark import selection

  assert selection._doublings(17, 128) == [32, 64, 128]
  assert selection._doublings(17, 64) == [32, 64]
  suite = benchmarks.get('cpu-v1')
  baselines = benchmark.read_baselines(suite)
  stored = card_lib.baseline_scores(suite, baselines)
  # Up to the suite's own last length the rescored members are the stored scores.
  full = selection.scores_up_to(suite, baselines, 'even_pairs', 64)
  for name, scores in full.items():
    np.testing.assert_allclose(scores, stored[name]['even_pairs'], atol=1e-6)
  shorter = selection.scores_up_to(suite, baselines, 'even_pairs', 32)
  assert any(not np.allclose(shorter[n], stored[n]['even_pairs'], atol=1e-6) for n in shorter)
  rows = selection.selection(suite, baselines, among=['alibi', 'fire', 'rotary'])
  assert [(r['task'], r['lengths'][1]) for r in rows[:2]] == [
    ('even_pairs', 32),
    ('even_pairs', 64),
  ]
  assert rows[-1]['task'] == 'all tasks' and rows[-1]['among_pairs'] == 3
  # 3 members against 3 cannot reject at any level Holm asks for.
  assert all(r['separated'] == 0 for r in rows)
  table = selection.selection_markdown(rows)
  assert '| even_pairs | **17..64** | 0 of 120 | 0 of 3 |' in table


def test_a_work_directory_of_another_suite_is_one_line_and_untouched(cli, tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'suite.json').write_text('{"suite": "cpu-v1", "version": 1, "encoding": "alibi"}')
  before = sorted(tmp_path.rglob('*'))
  proc = cli.run(['launch.benchmark', '--encoding=alibi', '--suite=tiny', f'--workdir={run}'])
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and "holds the run of 'alibi' on suite cpu-v1 (version 1)" in lines[0]
  assert sorted(tmp_path.rglob('*')) == before
