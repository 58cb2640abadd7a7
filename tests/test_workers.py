"""Worker processes on one host (`launch.sweep --jobs`, `launch.benchmark --jobs`): when
they run, that the cells they run equal one process's, that SIGTERM reaches them, and the
flag's bad values."""

import os
import signal
import subprocess
import sys
import time

import pytest

import processes

from launch import workers
from posenc.storage import io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
  'platform, cores, steps, cpu_devices, sharded, jobs',
  [
    ('cpu', 2, [2000, 2000], 0, False, 2),  # the main job
    ('cpu', 2, [2000, 2000, 2000], 0, False, 2),  # one per core
    ('cpu', 64, [1000] * 30, 0, False, workers.MAX_AUTO),
    ('cpu', 2, [2000], 0, False, 1),  # one cell to run
    ('cpu', 2, [2000, 20], 0, False, 1),  # a tiny cell: a worker's start costs more
    ('cpu', 2, [2000, 2000], 2, False, 1),  # the population uses the cores
    ('cpu', 2, [2000, 2000], 0, True, 1),  # a shard's processes divide the cells already
    ('gpu', 16, [2000, 2000], 0, False, 1),  # one accelerator: one process
    ('tpu', 96, [2000, 2000], 0, False, 1),
  ],
)
def test_auto_jobs(platform, cores, steps, cpu_devices, sharded, jobs):
  assert workers.auto_jobs(platform, cores, steps, cpu_devices, sharded) == jobs


def test_cells_are_dealt_in_turn():
  assert workers.split(['a', 'b', 'c'], 2) == [['a', 'c'], ['b']]
  assert workers.split(['a'], 3) == [['a']]
  assert workers.command('launch.sweep', ['--x=1'], '--cells=a')[1:] == [
    '-m',
    'launch.sweep',
    '--x=1',
    '--cells=a',
    '--jobs=1',
  ]


def _sweep_cmd(workdir, *extra):
  """The tiny sweep's two parity_check cells."""
  return processes.tiny_sweep_cmd(workdir, '--tasks=parity_check', *extra)


def _sweep(workdir, *extra, **kw):
  return subprocess.run(_sweep_cmd(workdir, *extra), cwd=ROOT, capture_output=True, text=True, **kw)


def _members(workdir, cell):
  return io.read_json(os.path.join(workdir, 'cells', cell, 'results.json'))['members']


def test_two_workers_run_the_cells_as_one_process_does(tmp_path):
  both, one = tmp_path / 'both', tmp_path / 'one'
  out = _sweep(both, '--jobs=2')
  assert out.returncode == 0, out.stderr[-2000:]
  assert 'sweep: 2 cells in 2 worker processes' in out.stdout
  assert '[1/2] cell parity_check__none' in out.stdout
  assert '[2/2] cell parity_check__randomized_relative' in out.stdout
  assert (both / 'report' / 'table1.md').exists()
  single = _sweep(one, '--jobs=1', '--cells=parity_check__randomized_relative', '--noreport')
  assert single.returncode == 0, single.stderr[-2000:]
  assert 'worker processes' not in single.stdout
  cell = 'parity_check__randomized_relative'
  assert _members(both, cell) == _members(one, cell)
  # Complete: a rerun starts no worker.
  again = _sweep(both, '--jobs=2', '--noreport')
  assert again.returncode == 0 and 'worker processes' not in again.stdout
  assert '2 already done, 0 to run' in again.stdout


@pytest.mark.parametrize(
  'extra, message',
  [
    (('--jobs=-1',), '--jobs=-1 must be an integer >= 0'),
    (('--jobs=2', '--shard=0/2'), '--jobs=2 runs worker processes on this host; a shard'),
    (('--cells=parity_check__nope',), "unknown cell 'parity_check__nope'"),
  ],
)
def test_bad_jobs_and_cells_are_one_line(tmp_path, extra, message):
  out = _sweep(tmp_path / 'w', *extra)
  assert out.returncode == 2 and message in out.stderr, out.stderr[-2000:]
  assert len(out.stderr.strip().splitlines()) == 1
  assert not (tmp_path / 'w').exists()


def test_sigterm_reaches_the_workers_and_the_rerun_resumes(tmp_path):
  workdir = tmp_path / 'w'
  cmd = _sweep_cmd(
    workdir,
    '--jobs=2',
    '--config.train.steps=1500',
    '--config.train.log_every=5',
    '--config.checkpoint_every=100000',
  )
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  metrics = [
    workdir / 'cells' / c / 'metrics.jsonl'
    for c in ('parity_check__none', 'parity_check__randomized_relative')
  ]
  deadline = time.time() + 120
  while not all(m.exists() and m.read_text().count('\n') >= 1 for m in metrics):
    assert proc.poll() is None and time.time() < deadline, proc.communicate()
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, err[-2000:]
  assert out.count('preempted at step') == 2, out[-3000:]
  assert 'rerun the same command to resume the sweep' in out
  for m in metrics:
    assert os.listdir(m.parent / 'checkpoints') and not (m.parent / 'results.json').exists()
  rerun = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert rerun.stdout.count('resumed from the checkpoint at step') == 2


def test_a_card_trained_by_two_workers_is_the_stored_one(tmp_path):
  from experiments import benchmarks
  from posenc import benchmark

  cmd = [sys.executable, '-m', 'launch.benchmark', '--encoding=rotary', '--suite=tiny']
  proc = subprocess.run(
    [*cmd, f'--workdir={tmp_path}', '--jobs=2'], cwd=ROOT, capture_output=True, text=True
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'card: 2 tasks in 2 worker processes' in proc.stdout
  assert '[1/2] cell even_pairs__rotary' in proc.stdout
  assert '[2/2] cell parity_check__rotary' in proc.stdout
  entry = io.read_json(str(tmp_path / 'entry.json'))
  stored = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']
  for task in stored['tasks']:
    assert entry['tasks'][task]['members'] == stored['tasks'][task]['members'], task
  assert io.read_json(str(tmp_path / 'seconds.json'))['seconds'] > 0
  bad = subprocess.run(
    [*cmd, f'--workdir={tmp_path}/x', '--train_only=nope'], cwd=ROOT, capture_output=True, text=True
  )
  assert bad.returncode == 2 and '--train_only=nope is not a task of tiny' in bad.stderr
  assert not (tmp_path / 'x').exists()


def test_cells_of_killed_workers_are_resumed_by_the_sweep(tmp_path):
  # Each worker kills itself (SIGKILL) right after its checkpoint at step 100: the sweep then
  # finds both cells partial and resumes them itself, and the report is written.
  env = dict(os.environ, POSENC_KILL_AFTER_CHECKPOINT='100')
  out = _sweep(
    tmp_path,
    '--jobs=2',
    '--config.train.steps=200',
    '--config.checkpoint_every=100',
    env=env,
  )
  assert out.returncode == 0, out.stderr[-2000:]
  assert 'the workers ended (exit [-9, -9])' in out.stdout
  assert out.stdout.count('resumed from the checkpoint at step 100') == 2
  assert '2 cells: 2 run, 0 already done, 0 held, 0 failed' in out.stdout
  assert (tmp_path / 'report' / 'table1.md').exists()
