"""Local processes for the tests: a free port on 127.0.0.1, and the tiny sweep run by two
processes of one `jax.distributed` job (each writes its own cells and index shard)."""

import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def tiny_sweep_cmd(workdir, *extra: str) -> list[str]:
  """`python -m launch.sweep` of experiments/sweep_tiny.py into `workdir`, then `extra`."""
  return [
    sys.executable,
    '-m',
    'launch.sweep',
    '--config=experiments/sweep_tiny.py',
    f'--workdir={workdir}',
    *extra,
  ]


def two_process_sweep(workdir: str, env: dict[str, str] | None = None) -> None:
  """`launch.sweep` of experiments/sweep_tiny.py's parity_check cells into `workdir` (a path
  or a URL) by processes 0 and 1 of a two-process job; asserts both exit 0."""
  port = free_port()
  procs = [
    subprocess.Popen(
      tiny_sweep_cmd(
        workdir,
        '--tasks=parity_check',
        '--distributed',
        f'--coordinator_address=127.0.0.1:{port}',
        '--num_processes=2',
        f'--process_id={i}',
      ),
      cwd=ROOT,
      env={**os.environ, **(env or {})},
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for i in range(2)
  ]
  outs = [p.communicate(timeout=600) for p in procs]
  assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
