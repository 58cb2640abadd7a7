"""The sweep: sharding of cells, failure recording, kill-and-rerun, the report of a sweep."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

import processes

from experiments import rpe_table1
from experiments import sweep_tiny
from posenc import config as config_lib
from posenc.storage import io
from posenc.storage import lease
from posenc import report
from posenc import sweep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_full_grid_is_15_by_13():
  grid = rpe_table1.grid()
  assert len(grid) == 195 and len({sweep.cell_name(c) for c in grid}) == 195


@pytest.mark.parametrize('count', [1, 2, 3, 7])
def test_shards_cover_every_cell_exactly_once(count):
  cells = rpe_table1.grid()
  seen = [sweep.cell_name(c) for i in range(count) for c in sweep.shard_cells(cells, i, count)]
  assert sorted(seen) == sorted(sweep.cell_name(c) for c in cells)


def test_filters_and_bad_filters():
  cells = sweep.select_cells(rpe_table1.grid(), ['reverse_string'], ['none', 'relative'])
  assert [sweep.cell_name(c) for c in cells] == ['reverse_string__none', 'reverse_string__relative']
  with pytest.raises(
    config_lib.ConfigError, match="unknown task 'reverse' in the sweep filter; valid tasks"
  ):
    sweep.select_cells(rpe_table1.grid(), ['reverse'], None)
  with pytest.raises(config_lib.ConfigError, match='bad shard'):
    sweep.parse_shard('2/2')


def _fake_results(run, workdir):
  config = run.config
  os.makedirs(workdir, exist_ok=True)
  io.write_json_atomic(os.path.join(workdir, 'config.json'), config_lib.as_json(config))
  if config.encoding == 'none' and config.task == 'reverse_string':
    raise RuntimeError('boom')
  io.write_json_atomic(os.path.join(workdir, 'results.json'), {'task': config.task})


def test_failing_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
  cells = sweep_tiny.grid()
  calls = []
  run = lambda cell, workdir: (calls.append(cell.config.encoding), _fake_results(cell, workdir))
  rows = sweep.run_sweep(
    sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run, progress=lambda _: None
  )
  assert len(calls) == 4
  states = {r['cell']: r['state'] for r in rows}
  assert states.pop('reverse_string__none') == sweep.FAILED
  assert set(states.values()) == {sweep.COMPLETE}
  failed = [r for r in rows if r['state'] == sweep.FAILED][0]
  assert failed['error'] == 'RuntimeError: boom'
  index = io.read_json(str(tmp_path / 'index' / 'shard-0-of-1.json'))
  assert {c['cell']: c['state'] for c in index['cells']} == {r['cell']: r['state'] for r in rows}
  # A rerun runs only what is not complete: the failed cell.
  calls.clear()
  sweep.run_sweep(
    sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run, progress=lambda _: None
  )
  assert calls == ['none']


_sweep_cmd = processes.tiny_sweep_cmd


def test_killed_sweep_reruns_exactly_the_missing_cells(tmp_path):
  straight, killed = tmp_path / 'straight', tmp_path / 'killed'
  subprocess.run(_sweep_cmd(straight), cwd=ROOT, check=True, capture_output=True)
  proc = subprocess.Popen(
    _sweep_cmd(killed), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
  )
  first = killed / 'cells' / 'parity_check__none' / 'results.json'
  deadline = time.time() + 300
  while not first.exists():
    assert proc.poll() is None and time.time() < deadline
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  done_before = {c.name for c in (killed / 'cells').iterdir() if (c / 'results.json').exists()}
  assert 'parity_check__none' in done_before and len(done_before) < 4
  mtimes = {n: os.path.getmtime(killed / 'cells' / n / 'results.json') for n in done_before}
  out = subprocess.run(
    _sweep_cmd(killed), cwd=ROOT, check=True, capture_output=True, text=True
  ).stdout
  assert f'{len(done_before)} already done, {4 - len(done_before)} to run' in out
  for name, mtime in mtimes.items():
    assert os.path.getmtime(killed / 'cells' / name / 'results.json') == mtime
  a = report.build_report([straight / 'cells'], figures=False)
  b = report.build_report([killed / 'cells'], figures=False)
  assert a.texts['table1'] == b.texts['table1'] and a.texts['table4'] == b.texts['table4']
  assert (killed / 'report' / 'table1.md').exists()


def _complete_tiny_sweep(sweep_dir, base=None):
  base = base or sweep_tiny.get_config()
  sweep.run_sweep(
    base, sweep_tiny.grid(), str(sweep_dir), run_cell=_fake_results, progress=lambda _: None
  )
  return base


def test_a_changed_override_is_refused_before_anything_runs(tmp_path):
  _complete_tiny_sweep(tmp_path)
  changed = sweep_tiny.get_config()
  changed.train.steps = 12
  calls = []
  with pytest.raises(config_lib.ConfigError) as e:
    sweep.run_sweep(
      changed,
      sweep_tiny.grid(),
      str(tmp_path),
      run_cell=lambda run, workdir: calls.append(workdir),
      progress=lambda _: None,
    )
  message = str(e.value)
  assert calls == [] and '\n' not in message
  assert message.startswith(
    f'4 of 4 cells in {tmp_path} hold runs of a different config: '
    'parity_check__none, parity_check__randomized_relative, '
    'reverse_string__none and 1 more (train.steps 10 -> 12)'
  )
  assert 'fresh --workdir' in message
  rows = sweep.status(str(tmp_path), sweep_tiny.grid(), changed)
  assert {r['state'] for r in rows} == {sweep.DIFFERS}
  assert rows[0]['changes'] == 'train.steps 10 -> 12'
  # Without the requested config, the state is read from the files alone.
  assert {r['state'] for r in sweep.status(str(tmp_path), sweep_tiny.grid())} == {
    sweep.COMPLETE,
    sweep.FAILED,
  }


def test_resumable_fields_may_change_and_the_cells_stay_done(tmp_path):
  _complete_tiny_sweep(tmp_path)
  changed = sweep_tiny.get_config()
  changed.train.log_every = 3
  lines, calls = [], []
  sweep.run_sweep(
    changed,
    sweep_tiny.grid(),
    str(tmp_path),
    retry_failed=False,
    run_cell=lambda run, workdir: calls.append(workdir),
    progress=lines.append,
  )
  assert calls == []
  assert lines[0] == (
    'sweep shard 0/1: 4 cells, 3 already done, 1 failed before (not retried), 0 to run'
  )


def test_closing_summary_counts_run_done_held_and_failed(tmp_path):
  cells = sweep_tiny.grid()
  _complete_tiny_sweep(tmp_path)  # reverse_string__none fails; the other three complete.
  done = tmp_path / 'cells' / 'parity_check__none'
  os.unlink(done / 'results.json')  # Two cells to run again, one held by "another" process.
  held = tmp_path / 'cells' / 'parity_check__randomized_relative'
  os.unlink(held / 'results.json')

  def run(cell, workdir):
    with lease.DirectoryLock(workdir):  # As training does.
      _fake_results(cell, workdir)

  lines = []
  with lease.DirectoryLock(str(held)):
    rows = sweep.run_sweep(
      sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run, progress=lines.append
    )
  who = f'process {os.getpid()} on host {socket.gethostname()}'
  assert lines[-1] == (
    f'sweep shard 0/1: 4 cells: 1 run, 1 already done, 1 held (by {who}), 1 failed'
  )
  # The held cell was tried again after the others, and is still held.
  name = 'parity_check__randomized_relative'
  assert f'cell {name}: held by {who} when tried; trying it again' in lines
  assert [r.get('held') for r in rows] == [None, who, None, None]
  assert sweep.missing_from_report(rows, {r['cell']: r['held'] for r in rows if 'held' in r}) == [
    f'parity_check__randomized_relative: held by {who} (another sweep or run is training it)',
    'reverse_string__none: failed: RuntimeError: boom',
  ]


@pytest.fixture(scope='module')
def one_cell_sweep(tmp_path_factory):
  """A tiny sweep directory whose cell parity_check__none is complete, trained under umask
  077; each test copies it."""
  workdir = tmp_path_factory.mktemp('one_cell') / 'sweep'
  subprocess.run(
    _sweep_cmd(workdir, '--tasks=parity_check', '--encodings=none'),
    cwd=ROOT,
    check=True,
    capture_output=True,
    preexec_fn=lambda: os.umask(0o077),
  )
  return workdir


def _modes(directory):
  return {
    oct(os.stat(os.path.join(d, n)).st_mode & 0o777)
    for d, _, names in os.walk(directory)
    for n in names
  }


def test_files_of_a_sweep_under_umask_077_are_private(one_cell_sweep):
  # Training (config, metrics, checkpoints, results), the index and the report.
  assert _modes(one_cell_sweep) == {'0o600'}


def test_sweep_with_a_changed_override_refuses_and_status_says_config_differs(
  one_cell_sweep, tmp_path
):
  workdir = tmp_path / 'sweep'
  shutil.copytree(one_cell_sweep, workdir)
  changed = subprocess.run(
    _sweep_cmd(workdir, '--tasks=parity_check', '--config.train.steps=12'),
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert changed.returncode == 2 and changed.stdout == ''
  assert changed.stderr == (
    f'error: 1 of 2 cells in {workdir} holds a run of a different config: '
    'parity_check__none (train.steps 10 -> 12); a sweep neither counts nor reruns them: '
    'give a fresh --workdir for the new runs (or the recorded config to resume these); '
    '--status lists them\n'
  )
  assert not (workdir / 'cells' / 'parity_check__randomized_relative').exists()
  status = subprocess.run(
    _sweep_cmd(workdir, '--tasks=parity_check', '--status', '--config.train.steps=12'),
    cwd=ROOT,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  assert status.splitlines()[0].split() == [
    'parity_check__none',
    'config',
    'differs',
    'train.steps',
    '10',
    '->',
    '12',
  ]
  assert status.splitlines()[-1].endswith('config differs: 1')
  # The same config, but for a resumable field: the cell is done.
  same = subprocess.run(
    _sweep_cmd(workdir, '--tasks=parity_check', '--encodings=none', '--config.train.log_every=3'),
    cwd=ROOT,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  assert '1 cells, 1 already done, 0 to run' in same


def test_a_held_cell_leaves_the_sweep_unfinished_and_a_report_only_partial(
  one_cell_sweep, tmp_path
):
  workdir = tmp_path / 'sweep'
  shutil.copytree(one_cell_sweep, workdir)
  held = workdir / 'cells' / 'parity_check__randomized_relative'
  held.mkdir()
  with lease.DirectoryLock(str(held)):
    procs = [
      subprocess.run(
        _sweep_cmd(workdir, '--tasks=parity_check', *extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
      )
      for extra in ([], ['--partial'])
    ]
  who = f'process {os.getpid()} on host {socket.gethostname()}'
  why = f'parity_check__randomized_relative: held by {who} (another sweep or run is training it)'
  for proc in procs:
    # Never called done: exit status 75, the held cell named on stderr's one line.
    assert proc.returncode == 75, proc.stderr
    assert proc.stderr == (
      'error: 1 of 2 cells of shard 0/1 are not complete: parity_check__randomized_relative; '
      'rerun the same command once their holders have ended (or with a longer --lease_wait)\n'
    )
    assert f'sweep shard 0/1: 2 cells: 0 run, 1 already done, 1 held (by {who}), 0 failed' in (
      proc.stdout
    )
    assert f'unfinished: {why}' in proc.stdout
  # Without --partial, no report.
  assert 'no report: 1 of 2 cells are not complete (listed above); --partial' in procs[0].stdout
  out = procs[1].stdout
  assert (
    f'## Not in this report\n\n1 cell of the grid is not in the tables and figures '
    f'above:\n- {why}\n'
  ) in out
  assert 'report written to' in out and '(partial: from 1 of 2 cells' in out
  partial = ' (partial: 1 cell of the grid missing, listed at the end)'
  for name in ('table1.md', 'table4.md', 'lengths_parity_check.md'):
    text = (workdir / 'report' / name).read_text()
    assert text.splitlines()[0].endswith(partial)
    assert text.endswith(
      f'## Not in this report\n\n1 cell of the grid is not in the tables '
      f'and figures above:\n- {why}\n'
    )
    tables = text.split('## Not in this report')[0]
    assert 'randomized_relative' not in tables
    header = '| level | task | none |' if name.startswith('table') else '| length | none |'
    assert header in tables.splitlines()
  assert _modes(workdir / 'report') == {'0o644'}


def test_status_names_a_cell_another_host_holds(tmp_path):
  """--status reads who holds a cell not complete (its lock file's record, a heartbeat
  fresh), taking nothing: 'held' with the holder, not 'pending'."""
  cells = sweep_tiny.grid()
  held = tmp_path / 'cells' / sweep.cell_name(cells[0])
  held.mkdir(parents=True)
  record = {'host': 'elsewhere', 'pid': 7, 'since': time.time()}
  (held / lease.LOCK_FILE).write_text(json.dumps(record))
  rows = sweep.status(str(tmp_path), cells, holders=True)
  assert [r['state'] for r in rows] == ['held', 'pending', 'pending', 'pending']
  assert rows[0]['held'] == 'process 7 on host elsewhere'
  assert [r['state'] for r in sweep.status(str(tmp_path), cells)] == ['pending'] * 4
  # A heartbeat gone stale (a host that died): not held any more.
  old = time.time() - lease.STALE_AFTER_S - 1
  os.utime(held / lease.LOCK_FILE, (old, old))
  assert sweep.status(str(tmp_path), cells, holders=True)[0]['state'] == 'pending'


def test_closing_summary_counts_a_cell_another_process_completed(tmp_path):
  cells = sweep_tiny.grid()[:2]
  other = tmp_path / 'cells' / sweep.cell_name(cells[1])
  other.mkdir(parents=True)

  def run(cell, workdir):
    if workdir == str(other):  # held when tried; its holder completes it meanwhile
      _fake_results(cell, workdir)
      raise lease.DirectoryBusy('busy', 'process 7 on host h')
    _fake_results(cell, workdir)

  lines = []
  sweep.run_sweep(
    sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run, progress=lines.append
  )
  assert lines[-1] == (
    'sweep shard 0/1: 2 cells: 1 run, 0 already done, 1 completed by another process, 0 held, '
    '0 failed'
  )
