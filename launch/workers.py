"""A sweep's cells in worker processes on one host: `launch.sweep --jobs=N` (and a card's
tasks: `launch.benchmark --jobs=N`).

A sweep's cells are independent, so on a CPU host they can run side by side, each in a
process of its own. One process keeps about 1.5 of this machine's 2 cores busy (XLA's CPU
backend splits its larger operations over threads; the small ones run on one). The README's
main job took 193 s for its two cells one after another and 133 s for both at once, with the
same Table 1. Each worker is the same command for a share of the cells (`--cells`, without
the report); the parent sweep then finds them complete and writes the report.

`auto` (`--jobs=0`) runs workers only where they pay:
  - on a CPU (an accelerator is one device, shared by nothing: 1 there);
  - in a sweep that is neither a shard nor distributed, and asks for no `cpu_devices`
    (the population already uses the cores then);
  - with at least two cells to run, each of at least `MIN_STEPS` training steps: a worker
    spends about 4 s importing JAX and building its cells, a large part of a tiny cell;
  - one worker per CPU core, at most `MAX_AUTO`: each holds its own JAX runtime and
    programs (about 0.9 GB for the main job), and more than two at once were not measured.

Example:
  >>> from launch.workers import auto_jobs
  >>> auto_jobs('cpu', cores=2, steps=[2000, 2000], cpu_devices=0, sharded=False)
  2
  >>> auto_jobs('cpu', cores=2, steps=[20, 20], cpu_devices=0, sharded=False)
  1
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from typing import Callable, Sequence

from launch import cli

MIN_STEPS = 1000
MAX_AUTO = 8


def auto_jobs(
  platform: str, cores: int, steps: Sequence[int], cpu_devices: int, sharded: bool
) -> int:
  """The worker processes `--jobs=0` runs: see the module's docstring.

  Args:
    platform: JAX's default backend ('cpu', 'gpu', 'tpu').
    cores: CPU cores this process may use.
    steps: the training steps of each cell still to run.
    cpu_devices: the most CPU devices a cell asks for (0: JAX's default).
    sharded: a shard (`--shard=i/n`, n > 1) or a distributed sweep.
  """
  if platform != 'cpu' or sharded or cpu_devices > 1 or len(steps) < 2:
    return 1
  if min(steps) < MIN_STEPS:
    return 1
  return max(1, min(len(steps), cores, MAX_AUTO))


def check(jobs: int, platform: Callable[[], str]) -> None:
  """One line, exit 2, for a --jobs below 0, or workers asked of an accelerator: one
  process uses its devices (the population is spread over them), and a second would find
  their memory taken. `platform` (JAX's default backend) is asked only for workers: it
  starts JAX's backend, which a distributed job must not have started yet."""
  if jobs < 0:
    cli.fail(f'--jobs={jobs} must be an integer >= 0 (0: chosen for this host)')
  if jobs > 1 and platform() != 'cpu':
    cli.fail(
      f'--jobs={jobs} runs worker processes on a CPU-only host; this one runs JAX on '
      f'{platform()}, whose devices one process uses (the population is spread over them): '
      'give --jobs=1 or 0'
    )


def split(names: Sequence[str], jobs: int) -> list[list[str]]:
  """`names` dealt to `jobs` workers in turn (cells of one grid cost about the same).

  Example: split(['a', 'b', 'c'], 2) == [['a', 'c'], ['b']].
  """
  return [list(names[i::jobs]) for i in range(jobs) if names[i::jobs]]


def run(
  commands: Sequence[list[str]], out: Callable[[str], None], err: Callable[[str], None]
) -> list[int]:
  """Runs `commands` at once and returns their exit statuses, in order.

  Each line a worker writes is passed on prefixed with its number ('[2/3] step 100/2000
  ...'): stdout to `out`, stderr to `err`. SIGTERM and SIGINT received meanwhile are passed
  to every worker still running (a sweep checkpoints its cell and exits 143), and the
  handlers in place before are restored at the end.
  """
  procs = [
    subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    for c in commands
  ]

  def forward(signum, frame):
    del frame
    for p in procs:
      if p.poll() is None:
        p.send_signal(signum)

  before = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
  lock = threading.Lock()

  def pump(stream, write, tag):
    for line in stream:
      with lock:
        write(f'{tag} {line.rstrip()}')

  readers = []
  for i, p in enumerate(procs):
    tag = f'[{i + 1}/{len(procs)}]'
    for stream, write in ((p.stdout, out), (p.stderr, err)):
      readers.append(threading.Thread(target=pump, args=(stream, write, tag), daemon=True))
      readers[-1].start()
  try:
    codes = [p.wait() for p in procs]
    for t in readers:
      t.join()
  finally:
    for s, handler in before.items():
      signal.signal(s, handler)
  return codes


def command(module: str, argv: Sequence[str], *extra: str) -> list[str]:
  """A worker's command: `python -m module` with this process's flags (`argv`), then
  `extra` and `--jobs=1` (absl: a later flag overrides an earlier one).

  Example: command('launch.sweep', ['--config=q.py'], '--cells=a,c', '--noreport')[1:] ==
  ['-m', 'launch.sweep', '--config=q.py', '--cells=a,c', '--noreport', '--jobs=1'].
  """
  return [sys.executable, '-m', module, *argv, *extra, '--jobs=1']
