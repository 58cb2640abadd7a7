"""The versioned benchmark (posenc/benchmark.py, launch.benchmark, experiments/benchmarks):
stored baselines cannot drift from their suite, the tiny suite reproduces its stored result
bit for bit, the card ranks a candidate, the conformance command, the outside example
package installed and benchmarked, and one line for every bad input."""

import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from experiments import benchmarks
from posenc import benchmark
from posenc import config as config_lib
from posenc import setup

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
    # baselines.md (benchmark.baselines_table) and the cards.
    assert set(benchmark.read_baselines(suite)) <= set(suite.baselines), suite.name
  tiny = benchmarks.get('tiny')
  assert set(benchmark.read_baselines(tiny)) == set(tiny.baselines)


def _benchmark(*args):
  """`launch.benchmark` as a user runs it: XLA's optimizations on (the tests turn most of
  them off, and the stored baselines were made with them on)."""
  env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS='false')
  return subprocess.run(
    [sys.executable, '-m', 'launch.benchmark', *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )


def test_the_tiny_suite_reproduces_its_stored_result_bit_for_bit(tmp_path):
  proc = _benchmark('--encoding=rotary', '--suite=tiny', f'--workdir={tmp_path}')
  assert proc.returncode == 0, proc.stderr[-2000:]
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


def test_the_card_ranks_the_candidate_and_tests_it_against_each_baseline():
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)
  entry = copy.deepcopy(stored['rotary'])
  entry['encoding'] = 'mine'
  for results in entry['tasks'].values():  # A candidate that passes everything.
    results['encoding'] = 'mine'
    for member in results['members']:
      member['score'] = member['exact_match_score'] = 1.0
      member['exact_match_by_length'] = {n: 1.0 for n in member['exact_match_by_length']}
  card = benchmark.make_card(suite, entry, stored)
  for task in suite.tasks:
    t = card['tasks'][task]
    assert (t['rank'], t['of'], t['order'][0]) == (1, 3, 'mine')
    assert {c['b'] for c in t['comparisons']} == {'none', 'rotary'}
    assert all(c['a'] == 'mine' and c['mean_difference'] > 0 for c in t['comparisons'])
  assert card['mean_rank'] == 1.0
  assert '| 1 | **mine** (candidate) | 100.0 ± 0.0' in benchmark.markdown(card)


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
      "unknown suite 'cpu-v9'; valid suites: cpu-v1, tiny, gpu-v1",
    ),
    (['--encoding=nope', '--suite=tiny'], "unknown encoding 'nope'; valid encodings: none"),
    (['--encoding=no_such_pkg.mod:ENC', '--suite=tiny'], "no module named 'no_such_pkg.mod'"),
    (
      ['--encoding=posenc.encodings:ENCODINGS', '--suite=tiny'],
      'is a dict, not a posenc Encoding record',
    ),
    (['--encoding=abacus', '--suite=tiny'], 'abacus'),
    (['--encoding=alibi', '--suite=gpu-v1'], 'suite gpu-v1 is defined on paper'),
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
  assert lines[2].startswith('alibi: 2 of 2 invariants pass')
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
  assert 'xpos: 3 of 3 invariants pass' in proc.stdout


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
  assert check.returncode == 0 and 'xpos: 8 of 8 invariants pass' in check.stdout, check.stdout
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
  assert benchmark._ranks(rows) == {'a': 1, 'b': 2, 'c': 2, 'd': 4}


@pytest.mark.slow
def test_cost_says_what_a_card_takes(cli):
  proc = cli.run(['launch.benchmark', '--encoding=alibi', '--suite=tiny', '--cost'])
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  assert lines[0].startswith('suite tiny: 2 tasks; its 2 stored baselines took')
  assert lines[1].startswith('even_pairs: 20 steps x 2 members: train')
  assert lines[-1].startswith('alibi on tiny: about')
