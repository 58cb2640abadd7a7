"""Benchmark entry points: bad input is one `error:` line, exit status 2, nothing written."""

import os
import subprocess
import sys

import pytest

from launch import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('args, needle', [
    (['nope'], "unknown benchmark 'nope'; choose one of"),
    (['samplers', '--tasks=nope'], "unknown task 'nope'; valid tasks: even_pairs"),
    (['samplers', '--lengths=x'], "--lengths='x' must be comma-separated positive integers"),
    (['samplers', '--bogus'], 'unrecognized arguments: --bogus'),
    (['forward', '--encodings=nope'], "unknown encoding 'nope'; valid encodings: none"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, needle):
  out = tmp_path / 'out.json'
  extra = [f'--out={out}'] if args[0] in ('samplers', 'forward') else []
  proc = subprocess.run([sys.executable, '-m', 'launch.bench', *args, *extra], cwd=ROOT,
                        capture_output=True, text=True)
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert not out.exists()


def test_keep_freed_memory_is_opt_in(monkeypatch):
  monkeypatch.delenv('POSENC_KEEP_FREED_MEMORY', raising=False)
  assert common.keep_freed_memory() is False
  if sys.platform.startswith('linux'):  # applied in a child process: it is process-wide
    env = dict(os.environ, POSENC_KEEP_FREED_MEMORY='1')
    out = subprocess.run([sys.executable, '-c', 'from launch import common; '
                          'print(common.keep_freed_memory())'], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == 'True'
