"""The sweep: sharding of cells, failure recording, kill-and-rerun, the report of a sweep."""

import os
import signal
import subprocess
import sys
import time

import pytest

from experiments import rpe_table1
from experiments import sweep_tiny
from posenc import config as config_lib
from posenc import io
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
  assert [sweep.cell_name(c) for c in cells] == ['reverse_string__none',
                                                 'reverse_string__relative']
  with pytest.raises(config_lib.ConfigError, match="unknown task 'reverse' in the sweep filter; valid tasks"):
    sweep.select_cells(rpe_table1.grid(), ['reverse'], None)
  with pytest.raises(config_lib.ConfigError, match='bad shard'):
    sweep.parse_shard('2/2')


def _fake_results(config, workdir):
  os.makedirs(workdir, exist_ok=True)
  io.write_json_atomic(os.path.join(workdir, 'config.json'), {})
  if config.encoding == 'none' and config.task == 'reverse_string':
    raise RuntimeError('boom')
  io.write_json_atomic(os.path.join(workdir, 'results.json'), {'task': config.task})


def test_failing_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
  cells = sweep_tiny.grid()
  calls = []
  run = lambda config, workdir: (calls.append(config.encoding), _fake_results(config, workdir))
  rows = sweep.run_sweep(sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run,
                         progress=lambda _: None)
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
  sweep.run_sweep(sweep_tiny.get_config(), cells, str(tmp_path), run_cell=run,
                  progress=lambda _: None)
  assert calls == ['none']


def _sweep_cmd(workdir, *extra):
  return [sys.executable, '-m', 'launch.sweep', '--config=experiments/sweep_tiny.py',
          f'--workdir={workdir}', *extra]


def test_killed_sweep_reruns_exactly_the_missing_cells(tmp_path):
  straight, killed = tmp_path / 'straight', tmp_path / 'killed'
  subprocess.run(_sweep_cmd(straight), cwd=ROOT, check=True, capture_output=True)
  proc = subprocess.Popen(_sweep_cmd(killed), cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
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
  out = subprocess.run(_sweep_cmd(killed), cwd=ROOT, check=True, capture_output=True,
                       text=True).stdout
  assert f'{len(done_before)} already done, {4 - len(done_before)} to run' in out
  for name, mtime in mtimes.items():
    assert os.path.getmtime(killed / 'cells' / name / 'results.json') == mtime
  a = report.build_report([straight / 'cells'], figures=False)
  b = report.build_report([killed / 'cells'], figures=False)
  assert a.table1 == b.table1 and a.table4 == b.table4
  assert (killed / 'report' / 'table1.md').exists()
