"""Runs that survive what happens to jobs: a second writer, preemption, a move of devices."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from experiments import rpe_table1
from experiments import sweep_tiny
from posenc import analysis
from posenc.training import checkpoint
from posenc.storage import io
from posenc.storage import lease
from posenc.training import state as state_lib
from posenc import sweep
from posenc.training import train
from posenc import setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_rotary,tiny'


def _train_cmd(workdir, *extra):
  return [
    sys.executable,
    '-m',
    'launch.train',
    CONFIG,
    f'--workdir={workdir}',
    '--config.train.steps=80',
    '--config.train.log_every=5',
    *extra,
  ]


def _wait_for(path, proc, seconds=120):
  deadline = time.time() + seconds
  while not os.path.exists(path):
    assert proc.poll() is None, proc.communicate()
    assert time.time() < deadline, f'{path} did not appear'
    time.sleep(0.05)


def _final_params(workdir, config):
  run = setup.build(config)
  manager = checkpoint.checkpoint_manager(workdir)
  state, _ = checkpoint.restore_state(
    manager, manager.latest_step(), run.abstract_state, run.population
  )
  return jax.device_get(state.params)


# ---------------------------------------------------------------------------------------
# One writer per workdir.


def test_second_process_on_a_live_workdir_is_refused(tmp_path):
  workdir = tmp_path / 'run'
  first = subprocess.Popen(
    _train_cmd(workdir, '--config.train.steps=100000'),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    _wait_for(workdir / 'metrics.jsonl', first)
    second = subprocess.run(
      _train_cmd(workdir, '--config.train.steps=100000'),
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
    )
    # Busy, not bad input: a live process of this host is not waited for.
    assert second.returncode == 75, second.stderr
    lines = second.stderr.strip().splitlines()
    assert (
      len(lines) == 1
      and f'in use by process {first.pid} on host {socket.gethostname()}' in lines[0]
    ), lines
  finally:
    first.send_signal(signal.SIGKILL)
    first.wait()
  # The killed holder left its lock file behind; it is taken over.
  assert json.loads((workdir / lease.LOCK_FILE).read_text())['pid'] == first.pid
  with lease.DirectoryLock(str(workdir)):
    pass


def test_lock_of_a_dead_holder_is_taken_over(tmp_path):
  dead = subprocess.Popen([sys.executable, '-c', 'pass'])
  dead.wait()
  (tmp_path / lease.LOCK_FILE).write_text(
    json.dumps({'pid': dead.pid, 'host': socket.gethostname(), 'since': time.time()})
  )
  with lease.DirectoryLock(str(tmp_path)):
    holder = json.loads((tmp_path / lease.LOCK_FILE).read_text())
    assert holder['pid'] == os.getpid()
  assert not (tmp_path / lease.LOCK_FILE).exists()


def test_lock_of_another_host_is_kept_while_its_heartbeat_is_fresh(tmp_path):
  lock = tmp_path / lease.LOCK_FILE
  lock.write_text(json.dumps({'pid': 1, 'host': 'elsewhere', 'since': time.time()}))
  with pytest.raises(lease.DirectoryBusy, match='in use by process 1 on host elsewhere'):
    with lease.DirectoryLock(str(tmp_path)):
      pass
  old = time.time() - lease.STALE_AFTER_S - 1
  os.utime(lock, (old, old))
  with lease.DirectoryLock(str(tmp_path)):
    assert json.loads(lock.read_text())['host'] == socket.gethostname()


def test_lock_held_in_this_process_refuses_a_second_holder(tmp_path):
  with lease.DirectoryLock(str(tmp_path)):
    with pytest.raises(lease.DirectoryBusy, match=f'process {os.getpid()}'):
      with lease.DirectoryLock(str(tmp_path)):
        pass


def test_sweep_skips_a_cell_another_process_holds(tmp_path):
  cells = sweep.select_cells(sweep_tiny.grid(), ['parity_check'], None)
  held = tmp_path / 'cells' / sweep.cell_name(cells[0])
  held.mkdir(parents=True)
  lines = []
  with lease.DirectoryLock(str(held)):
    rows = sweep.run_sweep(sweep_tiny.get_config(), cells, str(tmp_path), progress=lines.append)
  states = {r['cell']: r['state'] for r in rows}
  assert states == {
    sweep.cell_name(cells[0]): sweep.PENDING,
    sweep.cell_name(cells[1]): sweep.COMPLETE,
  }
  assert any('is held' in line and 'in use by process' in line for line in lines), lines
  assert rows[0]['held'] == f'process {os.getpid()} on host {socket.gethostname()}'
  assert not (held / 'error.json').exists()


# ---------------------------------------------------------------------------------------
# Preemption.


def test_sigterm_checkpoints_where_it_stopped_and_the_rerun_equals_a_straight_run(tmp_path):
  straight, stopped = tmp_path / 'straight', tmp_path / 'stopped'
  # No periodic checkpoint before the end: only the preemption writes one.
  extra = ('--config.checkpoint_every=1000',)
  assert subprocess.run(_train_cmd(straight, *extra), cwd=ROOT, capture_output=True).returncode == 0
  proc = subprocess.Popen(
    _train_cmd(stopped, *extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  metrics = stopped / 'metrics.jsonl'
  deadline = time.time() + 120
  while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
    assert proc.poll() is None and time.time() < deadline, proc.communicate()
    time.sleep(0.02)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, err
  step = int(out.split('preempted at step ')[1].split()[0].rstrip(':'))
  assert 10 <= step < 80
  assert sorted(os.listdir(stopped / 'checkpoints')) == [str(step)]
  assert not (stopped / 'results.json').exists() and not (stopped / lease.LOCK_FILE).exists()
  rerun = subprocess.run(_train_cmd(stopped, *extra), cwd=ROOT, capture_output=True, text=True)
  assert rerun.returncode == 0, rerun.stderr
  assert f'resumed from the checkpoint at step {step}' in rerun.stdout
  config = rpe_table1.get_config('task=parity_check,encoding=randomized_rotary,tiny')
  config.train.steps, config.train.log_every, config.checkpoint_every = 80, 5, 1000
  for a, b in zip(
    jax.tree.leaves(_final_params(str(straight), config)),
    jax.tree.leaves(_final_params(str(stopped), config)),
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  a, b = (io.read_json(str(d / 'results.json')) for d in (straight, stopped))
  assert a['members'] == b['members']
  strip = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  assert strip(io.read_jsonl(str(straight / 'metrics.jsonl'))) == strip(io.read_jsonl(str(metrics)))


# ---------------------------------------------------------------------------------------
# Moving between device counts.


def _phase(workdir, phase, devices):
  env = {**os.environ, 'XLA_FLAGS': f'--xla_force_host_platform_device_count={devices}'}
  proc = subprocess.run(
    [sys.executable, 'tests/scripts/resume_devices.py', str(workdir), phase],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


# Slow both ways: moving a checkpoint between device counts (the default suite restores on
# the same count in every other resume test).
@pytest.mark.slow
@pytest.mark.parametrize('before, after', [(1, 8), (8, 1)])
def test_run_checkpointed_on_one_device_count_resumes_on_another(tmp_path, before, after):
  stopped = _phase(tmp_path, 'stop', before)
  assert stopped == {'preempted_at': 10, 'devices': before}
  finished = _phase(tmp_path, 'finish', after)
  assert finished['resumed_from_step'] == 10
  assert finished['devices']['count_changed']
  assert [h['devices'] for h in finished['devices']['history']] == [before, after]
  assert [h['from_step'] for h in finished['devices']['history']] == [0, 10]
  assert len(finished['members']) == 6


# ---------------------------------------------------------------------------------------
# A damaged checkpoint: the run falls back to the newest one that restores.


def _damage_config():
  config = rpe_table1.get_config('task=parity_check,encoding=randomized_rotary,tiny')
  config.train.steps, config.checkpoint_every, config.train.log_every = 30, 10, 5
  return config


@pytest.fixture(scope='module')
def straight_run(tmp_path_factory):
  """An uninterrupted run: checkpoints 10, 20, 30, metrics, evaluation, results."""
  workdir = str(tmp_path_factory.mktemp('straight'))
  train.train_and_evaluate(setup.build(_damage_config()), workdir)
  return workdir


def _largest_data_file(step_dir):
  files = [
    os.path.join(root, f)
    for root, _, fs in os.walk(os.path.join(step_dir, 'state'))
    for f in fs
    if os.sep + 'd' + os.sep in os.path.join(root, f) + os.sep
  ]
  return max(files, key=os.path.getsize)


DAMAGE = {
  'truncated_data_file': lambda d: os.truncate(_largest_data_file(d), 10),
  'missing_data_file': lambda d: os.remove(_largest_data_file(d)),
  'missing_metadata': lambda d: os.remove(os.path.join(d, 'state', '_METADATA')),
  'missing_state': lambda d: shutil.rmtree(os.path.join(d, 'state')),
}


@pytest.mark.parametrize(
  'damage',
  [
    d if d in ('truncated_data_file', 'missing_state') else pytest.param(d, marks=pytest.mark.slow)
    for d in sorted(DAMAGE)
  ],
)
def test_damaged_latest_checkpoint_falls_back_and_ends_equal(tmp_path, straight_run, damage):
  # Killed after its last checkpoint (no results yet), the newest checkpoint then damaged:
  # the rerun sets it aside, resumes from the one before and ends as the straight run did.
  workdir = str(tmp_path / 'run')
  shutil.copytree(straight_run, workdir)
  os.remove(os.path.join(workdir, 'results.json'))
  DAMAGE[damage](os.path.join(workdir, 'checkpoints', '30'))
  lines = []
  train.train_and_evaluate(setup.build(_damage_config()), workdir, progress=lines.append)
  assert lines[0].startswith('damaged: checkpoint 30 (') and lines[0].endswith(
    'resumed from the checkpoint at step 20'
  ), lines[0]
  assert os.path.isdir(os.path.join(workdir, 'checkpoints_damaged', '30'))
  config = _damage_config()
  for x, y in zip(
    jax.tree.leaves(_final_params(straight_run, config)),
    jax.tree.leaves(_final_params(workdir, config)),
  ):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  strip = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  read = lambda d, f: io.read_jsonl(os.path.join(d, f))
  assert strip(read(workdir, 'metrics.jsonl')) == strip(read(straight_run, 'metrics.jsonl'))
  members = lambda d: io.read_json(os.path.join(d, 'results.json'))['members']
  assert members(workdir) == members(straight_run)


def test_no_checkpoint_restores_then_the_run_starts_again(tmp_path, straight_run):
  workdir = str(tmp_path / 'run')
  shutil.copytree(straight_run, workdir)
  os.remove(os.path.join(workdir, 'results.json'))
  for step in ('10', '20', '30'):
    if os.path.isdir(os.path.join(workdir, 'checkpoints', step)):
      DAMAGE['missing_metadata'](os.path.join(workdir, 'checkpoints', step))
  lines = []
  train.train_and_evaluate(setup.build(_damage_config()), workdir, progress=lines.append)
  assert lines[0].endswith('no other checkpoint: started from scratch'), lines[0]
  assert sorted(os.listdir(os.path.join(workdir, 'checkpoints_damaged'))) == sorted(
    s for s in ('10', '20', '30') if os.path.isdir(os.path.join(straight_run, 'checkpoints', s))
  )
  members = lambda d: io.read_json(os.path.join(d, 'results.json'))['members']
  assert members(workdir) == members(straight_run)


def test_analysis_reads_the_newest_checkpoint_that_restores_and_moves_nothing(
  tmp_path, straight_run
):
  workdir = str(tmp_path / 'run')
  shutil.copytree(straight_run, workdir)
  DAMAGE['missing_metadata'](os.path.join(workdir, 'checkpoints', '30'))
  lines = []
  run = analysis.load_run(workdir, progress=lines.append)
  assert run.step == 20 and len(lines) == 1 and 'reading the checkpoint at step 20' in lines[0]
  assert os.path.isdir(os.path.join(workdir, 'checkpoints', '30'))


# ---------------------------------------------------------------------------------------
# The checkpoint's layout of the state.


def _set_layout(step_dir, layout):
  """Rewrites the layout a checkpoint names: None drops it (as checkpoints of the plain
  dict state were written: the same arrays under the same keys, and no layout named)."""
  path = os.path.join(step_dir, 'run', 'metadata')
  run = json.loads(open(path).read())
  run.pop('state_layout', None)
  if layout is not None:
    run['state_layout'] = layout
  with open(path, 'w') as f:
    f.write(json.dumps(run))


def test_checkpoint_that_names_no_layout_restores_as_the_plain_dict(tmp_path, straight_run):
  workdir = str(tmp_path / 'run')
  shutil.copytree(straight_run, workdir)
  _set_layout(os.path.join(workdir, 'checkpoints', '30'), None)
  config = _damage_config()
  for x, y in zip(
    jax.tree.leaves(_final_params(straight_run, config)),
    jax.tree.leaves(_final_params(workdir, config)),
  ):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_checkpoint_of_another_layout_is_refused_in_one_line_and_kept(tmp_path, straight_run):
  workdir = str(tmp_path / 'run')
  shutil.copytree(straight_run, workdir)
  os.remove(os.path.join(workdir, 'results.json'))
  _set_layout(os.path.join(workdir, 'checkpoints', '30'), 2)
  with pytest.raises(state_lib.LayoutError) as e:
    train.train_and_evaluate(setup.build(_damage_config()), workdir)
  assert str(e.value).startswith('checkpoint 30 holds training state layout 2; ')
  assert '\n' not in str(e.value)
  assert not os.path.exists(os.path.join(workdir, 'checkpoints_damaged'))
  assert os.path.isdir(os.path.join(workdir, 'checkpoints', '30'))
