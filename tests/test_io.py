"""File modes: everything posenc writes gets 0666 & ~umask, as a file written by hand does."""

import contextlib
import os
import stat

import pytest

from posenc.storage import io
from posenc.storage import lease
from posenc.storage import processes
from posenc import report


@contextlib.contextmanager
def _umask(mask):
  old = os.umask(mask)
  try:
    yield
  finally:
    os.umask(old)


def _mode(path):
  return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize('mask', [0o022, 0o077, 0o002])
def test_every_writer_gives_the_usual_mode(tmp_path, mask):
  expected = 0o666 & ~mask
  with _umask(mask):
    io.write_json_atomic(tmp_path / 'a.json', {'x': 1})
    io.write_text_atomic(tmp_path / 'a.md', '# table\n')
    io.write_bytes_atomic(tmp_path / 'a.png', b'\x89PNG')
    io.append_jsonl(str(tmp_path / 'a.jsonl'), {'step': 1})
    io.append_jsonl(str(tmp_path / 'b.jsonl'), {'step': 1})
    io.read_jsonl(str(tmp_path / 'b.jsonl'), rewrite=True)
    report.write_files(tmp_path / 'report', {'table1.md': b'# t\n', 'figure4_x.png': b'png'})
    with lease.DirectoryLock(str(tmp_path)):
      assert _mode(tmp_path / lease.LOCK_FILE) == expected
  written = [
    'a.json',
    'a.md',
    'a.png',
    'a.jsonl',
    'b.jsonl',
    'report/table1.md',
    'report/figure4_x.png',
  ]
  assert {name: oct(_mode(tmp_path / name)) for name in written} == {
    name: oct(expected) for name in written
  }
  # No temporary file is left behind.
  assert sorted(os.listdir(tmp_path)) == ['a.json', 'a.jsonl', 'a.md', 'a.png', 'b.jsonl', 'report']


def test_rewriting_keeps_the_new_mode_not_the_old_files(tmp_path):
  path = tmp_path / 'a.json'
  io.write_json_atomic(path, {'x': 1})
  os.chmod(path, 0o600)
  with _umask(0o022):
    io.write_json_atomic(path, {'x': 2})
  assert _mode(path) == 0o644 and io.read_json(path) == {'x': 2}


def test_a_failed_atomic_write_leaves_nothing(tmp_path):
  with pytest.raises(TypeError):
    io.write_json_atomic(tmp_path / 'a.json', {'x': object()})
  assert not os.listdir(tmp_path)


def test_a_staging_directory_left_by_a_dead_process_is_removed_by_the_next(tmp_path):
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  dead = subprocess.Popen([sys.executable, '-c', 'pass'])
  dead.wait()
  me = processes.process_identity()
  ns = ''.join(c for c in me['pid_ns'] if c.isdigit())
  left = tmp_path / f'posenc-checkpoints-{dead.pid}.7.{ns}-abcd'  # killed: its PID is free
  reused = tmp_path / f'posenc-checkpoints-{me["pid"]}.{me["start_ticks"] + 1}.{ns}-abcd'
  other_kind = tmp_path / f'posenc-tensorboard-{dead.pid}.7.{ns}-abcd'
  # Another PID namespace's (a container sharing /tmp): its PID means nothing here.
  other_namespace = tmp_path / f'posenc-checkpoints-{dead.pid}.7.1-abcd'
  not_ours = tmp_path / 'posenc-checkpoints-notes'
  for directory in (left, reused, other_kind, other_namespace, not_ours):
    (directory / '10').mkdir(parents=True)
  mine = processes.staging_directory('checkpoints', root=str(tmp_path))
  assert os.path.basename(mine).startswith(
    f'posenc-checkpoints-{me["pid"]}.{me["start_ticks"]}.{ns}-'
  )
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
    [os.path.basename(mine), other_kind.name, other_namespace.name, not_ours.name]
  )
  # A live owner's directory stays.
  processes.staging_directory('checkpoints', root=str(tmp_path))
  assert os.path.isdir(mine)
