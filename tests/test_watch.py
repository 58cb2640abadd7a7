"""Runs one can watch and rerun fast: JAX's persistent compilation cache (a rerun in a fresh
workdir loads its programs and ends equal; two runs share a cache; off; unwritable),
TensorBoard event files (one curve per member, read back by TensorBoard's own reader; a
resumed run continues them with no step twice; without the extra, one line), and training
curves in the report."""

import json
import os
import subprocess
import sys

import pytest

from experiments import rpe_table1
from posenc import config as config_lib
from posenc import setup
from posenc.training import log as log_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = '--config=experiments/rpe_table1.py:task=parity_check,tiny'


def _train(workdir, cache, *extra):
  env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(cache))
  return subprocess.Popen(
    [sys.executable, '-m', 'launch.train', TINY, f'--workdir={workdir}', *extra],
    cwd=ROOT,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def _results(workdir):
  with open(os.path.join(workdir, 'results.json')) as f:
    return json.load(f)


def _scalars(directory):
  """{tag: [(step, value)]} of a member's event files, read by TensorBoard's own reader (the
  test dependency `tensorboard`, optional: without it the test skips at this point)."""
  reader = pytest.importorskip(
    'tensorboard.backend.event_processing.event_accumulator',
    reason="TensorBoard's reader comes with the tensorboard package (pip install tensorboard)",
  )
  accumulator = reader.EventAccumulator(str(directory), size_guidance={reader.SCALARS: 0})
  accumulator.Reload()
  return {
    tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
    for tag in accumulator.Tags()['scalars']
  }


def test_a_rerun_loads_its_programs_from_the_cache_and_ends_equal(tmp_path):
  cache = tmp_path / 'cache'
  # Two runs at once share a cold cache (JAX's writes are atomic).
  first = [_train(tmp_path / name, cache, '--config.tensorboard=True') for name in ('a', 'b')]
  for proc in first:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
  a, b = _results(tmp_path / 'a'), _results(tmp_path / 'b')
  assert a['members'] == b['members']
  compiled = a['compiled_programs']['cache_misses'] + a['compiled_programs']['cache_hits']
  assert compiled >= 4  # the training buckets, the evaluation buckets, the helpers
  # A third run in a fresh workdir compiles nothing: every program comes from the cache.
  again = _train(tmp_path / 'c', cache, '--config.tensorboard=True')
  out, err = again.communicate(timeout=900)
  assert again.returncode == 0, err[-2000:]
  c = _results(tmp_path / 'c')
  assert c['compiled_programs']['cache_misses'] == 0
  assert c['compiled_programs']['cache_hits'] == compiled
  assert c['members'] == a['members']
  # One TensorBoard run per member, with its training and evaluation curves.
  members = config_lib.members(rpe_table1.get_config('task=parity_check,tiny'))
  assert sorted(os.listdir(tmp_path / 'c' / 'tensorboard')) == sorted(
    log_lib.label(m) for m in members
  )
  scalars = _scalars(tmp_path / 'c' / 'tensorboard' / log_lib.label(members[0]))
  assert [s for s, _ in scalars['train/loss']] == [5, 10, 15, 20]
  assert {'train/accuracy', 'train/learning_rate', 'train/steps_per_s'} <= set(scalars)
  by_length = c['members'][0]['accuracy_by_length']
  assert [s for s, _ in scalars['eval/accuracy_by_length']] == [int(n) for n in by_length]
  assert [v for _, v in scalars['eval/accuracy_by_length']] == pytest.approx(
    list(by_length.values())
  )


@pytest.mark.parametrize(
  'args, env, warning',
  [
    (['--config.compilation_cache=False'], {}, None),
    pytest.param([], {'POSENC_COMPILATION_CACHE': '0'}, None, marks=pytest.mark.slow),
    ([], {'JAX_COMPILATION_CACHE_DIR': '/proc/posenc-no-such-dir/jax'}, True),
  ],
)
def test_the_cache_off_or_unwritable(cli, tmp_path, args, env, warning):
  env = {'JAX_COMPILATION_CACHE_DIR': str(tmp_path / 'cache'), **env}
  proc = cli.run(
    ['launch.train', TINY, f'--workdir={tmp_path}/run', '--config.train.steps=5', *args], env=env
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  compiled = _results(tmp_path / 'run')['compiled_programs']
  assert compiled['cache_hits'] == compiled['cache_misses'] == 0
  lines = proc.stderr.strip().splitlines()
  if warning:
    assert lines == [
      'warning: the compilation cache /proc/posenc-no-such-dir/jax cannot be written (No such '
      'file or directory); compiling without it'
    ]
  else:
    assert not lines


def test_a_resumed_run_continues_its_curves_without_a_step_twice(
  kill_after_checkpoint, cli, tmp_path
):
  workdir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', TINY, f'--workdir={workdir}']
  cmd.append('--config.tensorboard=True')
  kill_after_checkpoint(cmd, str(workdir), 10)
  done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  # The report draws every member's training curve, and the scorecard says where.
  report = cli.run(['launch.report', str(workdir), f'--out={tmp_path}/report', '--scorecard'])
  assert report.returncode == 0, report.stderr
  assert (tmp_path / 'report' / 'training_parity_check.png').read_bytes()[:4] == b'\x89PNG'
  assert '1 training figure' in report.stdout
  card = json.loads((tmp_path / 'report' / 'scorecard.json').read_text())
  assert card['rows'][0]['member_scores'][0]['training_curve'] == {
    'file': 'training_parity_check.png',
    'series': 'seed 0, lr 0.001',
  }
  # Every member's events are those of an uninterrupted run: each logged step once, with the
  # values of metrics.jsonl (which a resumed run redoes bit for bit, tests/test_train.py),
  # and the evaluation's curve.
  with open(workdir / 'metrics.jsonl') as f:
    logged = [json.loads(line) for line in f]
  assert [r['step'] for r in logged] == [5, 10, 15, 20]
  results = _results(workdir)
  members = config_lib.members(rpe_table1.get_config('task=parity_check,tiny'))
  for i, member in enumerate(members):
    scalars = _scalars(workdir / 'tensorboard' / log_lib.label(member))
    for tag, values in (
      ('train/loss', [r['loss'][i] for r in logged]),
      ('train/accuracy', [r['accuracy'][i] for r in logged]),
      ('train/steps_per_s', [r['steps_per_s'] for r in logged]),
    ):
      assert [s for s, _ in scalars[tag]] == [r['step'] for r in logged], tag
      assert [v for _, v in scalars[tag]] == pytest.approx(values, rel=1e-6), tag
    assert [v for _, v in scalars['train/learning_rate']] == pytest.approx([1e-3] * 4)
    by_length = results['members'][i]['accuracy_by_length']
    assert scalars['eval/accuracy_by_length'] == [
      (int(n), pytest.approx(v, rel=1e-6)) for n, v in by_length.items()
    ]


def test_asking_for_event_files_without_the_extra_is_one_line(monkeypatch):
  monkeypatch.setattr(log_lib, 'tensorboardX', None)
  config = rpe_table1.get_config('task=parity_check,tiny')
  config.tensorboard = True
  with pytest.raises(config_lib.ConfigError, match=r"pip install -e '\.\[tensorboard\]'"):
    setup.build(config)
