"""Who this process is (`process_identity`: host, PID, start time, boot id, PID namespace),
whether the process a record names is provably gone (`holder_gone`: one of this host, boot
and PID namespace whose PID is free, or reused since), and the local staging directories of
what goes to a store, named after their process so that a later process removes those a kill
left behind (`staging_directory`).

Containers on one host may share its host name and boot id (host networking, `--uts=host`)
while each has a PID namespace of its own, where each may be PID 1: a PID names a process
only within its namespace, so a holder in another namespace (or of a record that names none)
is never judged gone here, and its lease is waited out instead.

Example:
  >>> me = process_identity()
  >>> holder_gone(me)
  False
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from typing import Any


def _proc(path: str) -> str | None:
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return None


def _start_ticks(pid: int) -> int | None:
  """The start time of process `pid` in clock ticks since boot (/proc/PID/stat, field 22);
  None if there is no such process (or no /proc)."""
  text = _proc(f'/proc/{pid}/stat')
  if text is None:
    return None
  try:
    return int(text[text.rindex(')') + 2 :].split()[19])
  except (ValueError, IndexError):
    return None


def _pid_namespace() -> str | None:
  """This process's PID namespace ('pid:[4026531836]'), None without /proc."""
  try:
    return os.readlink('/proc/self/ns/pid')
  except OSError:
    return None


def process_identity() -> dict[str, Any]:
  """Who this process is, as a lock records it: host name, PID, its start time (epoch
  seconds, and in clock ticks since boot), the kernel's boot id and the PID namespace. A PID
  names one process only within its namespace and together with its start time: a
  restarted container often gets the PID (1) and the host name of its predecessor, never
  its start time.

  Example: {'host': 'vm', 'pid': 4242, 'started': 1764311000.2, 'start_ticks': 18211,
  'boot_id': '8aef5d62-...', 'pid_ns': 'pid:[4026531836]'} (start_ticks, boot_id, started
  and pid_ns are None without /proc).
  """
  pid = os.getpid()
  ticks = _start_ticks(pid)
  boot = _proc('/proc/sys/kernel/random/boot_id')
  started = None
  btime = [line for line in (_proc('/proc/stat') or '').splitlines() if line.startswith('btime ')]
  if ticks is not None and btime:
    started = int(btime[0].split()[1]) + ticks / os.sysconf('SC_CLK_TCK')
  return {
    'host': socket.gethostname(),
    'pid': pid,
    'started': started,
    'start_ticks': ticks,
    'boot_id': boot.strip() if boot else None,
    'pid_ns': _pid_namespace(),
  }


def process_gone(pid: int, start_ticks: int | None) -> bool:
  """True if no process of this host runs as `pid` started at `start_ticks` (None: any
  start): the PID is free, or reused by a process started at another time."""
  ticks = _start_ticks(pid)
  if ticks is not None:
    return start_ticks is not None and ticks != start_ticks
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  except OSError:
    return False  # It runs, as another user.
  return False


def holder_gone(holder: dict[str, Any]) -> bool:
  """True only if `holder` (a lock's record) is provably a process of this host, boot and PID
  namespace that no longer runs: its PID is free, or now names a process started at another
  time (a PID reused, as by a process restarted in the same container). A holder of another
  host, boot or PID namespace, or a record that does not name them (an older posenc's), is
  not judged: it may be a live process in another container on this host.

  Example: {'host': socket.gethostname(), 'pid': 7, 'start_ticks': 5, 'boot_id': <this
  boot>, 'pid_ns': <this namespace>} of a process gone since -> True; the same record with
  another 'pid_ns' (a second container's PID 7) -> False.
  """
  me = process_identity()
  if holder.get('host') != me['host'] or not isinstance(holder.get('pid'), int):
    return False
  for key in ('boot_id', 'pid_ns'):
    if not holder.get(key) or holder[key] != me[key]:
      return False
  return process_gone(holder['pid'], holder.get('start_ticks'))


STAGING_PREFIX = 'posenc-'


def staging_directory(kind: str, root: str | None = None) -> str:
  """A new local directory for files on their way to a store (`kind`: 'checkpoints',
  'tensorboard'), in `root` (default: the system's temporary directory), named after this
  process (PID, start time and PID namespace) so that the next call on this machine, in any
  process of the same PID namespace, removes one whose process is gone (a kill leaves its
  staging directory behind); one of another namespace (a container sharing the directory)
  is left to its own.

  Example: staging_directory('checkpoints') ->
    '/tmp/posenc-checkpoints-4242.18211.4026531836-k2j3h4' (removed by its owner's close)
  """
  root = root or tempfile.gettempdir()
  prefix = f'{STAGING_PREFIX}{kind}-'
  namespace = ''.join(c for c in _pid_namespace() or '' if c.isdigit()) or '0'
  for name in os.listdir(root):
    if not name.startswith(prefix):
      continue
    owner = name[len(prefix) :].split('-', 1)[0].split('.')
    if len(owner) != 3 or owner[2] != namespace:
      continue  # Another namespace's, or not a name this function gives.
    try:
      pid, ticks = int(owner[0]), int(owner[1])
    except ValueError:
      continue
    if process_gone(pid, ticks):
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
  me = process_identity()
  ticks = me['start_ticks'] or 0
  return tempfile.mkdtemp(prefix=f'{prefix}{me["pid"]}.{ticks}.{namespace}-', dir=root)
