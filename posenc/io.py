"""Small file helpers: atomic writes, crash-tolerant JSON-lines logs, the lock that keeps a
run directory to one writer, and the full disk (`no_space`).

Each takes a local path or an object-store URL (`gs://`, `s3://`: `posenc.store`). On a
store a write is one whole-object put (atomic as a rename is on a disk), an append to a
JSON-lines log rewrites its object (read, add the line, put: the run's one writer makes this
safe, and a log holds one line per log interval or evaluated cell), and a directory's one
writer holds a lease object (`Lease`) instead of a flock.

Every file written here gets the mode an ordinary `open(path, 'w')` gives it, 0666 & ~umask:
the temporary file of an atomic write is created with mode 0666 and the kernel applies the
process's umask at creation (`tempfile.mkstemp` would give 0600, which colleagues sharing a
machine cannot read). Nothing reads the umask, so nothing races with a thread that creates
files while it is being read.

Example:
  >>> os.makedirs('run', exist_ok=True)
  >>> write_json_atomic('run/results.json', {'score': 0.9})   # mode 0644 under umask 022
  >>> append_jsonl('run/eval.jsonl', {'length': 41, 'accuracy': 0.5})
  >>> read_jsonl('run/eval.jsonl')
  [{'length': 41, 'accuracy': 0.5}]
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import math
import os
import secrets
import socket
import threading
import time
from typing import Any, Callable

from posenc import store

# The mode of every file posenc creates, before the umask: that of open(path, 'w').
FILE_MODE = 0o666


def _no_check(path: str) -> None:
  del path


# Called with the path of every file about to be written here: the entry points install a
# check that simulates a full disk at a chosen file (their tests); by default it does nothing.
before_write: Callable[[str], None] = _no_check


# How a full disk reads in a library's message that carries no errno.
NO_SPACE_TEXTS = ('No space left on device', 'Disk quota exceeded')


def no_space(error: BaseException) -> OSError | None:
  """The 'no space left on device' (ENOSPC, or EDQUOT: a quota) error behind `error`, if any.

  Libraries wrap it (orbax and tensorstore raise their own errors with the OS message in
  the text), so the chain of causes is searched and the text read as well; a wrapped
  error comes back as an OSError without a file name.

  Example:
    >>> no_space(OSError(errno.ENOSPC, 'No space left on device', 'run/eval.jsonl')).filename
    'run/eval.jsonl'
  """
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
      return error
    if any(text in str(error) for text in NO_SPACE_TEXTS):
      return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    error = error.__cause__ or error.__context__
  return None


def _raise_named(error: OSError, path: str) -> None:
  """Raises `error`, naming the file `path` when it names none (a failed write does not)."""
  if error.filename is None and error.errno is not None:
    raise OSError(error.errno, error.strerror, path) from error
  raise error


def _create_temporary(directory: str, prefix: str, suffix: str) -> tuple[int, str]:
  """(fd, path) of a new file in `directory`, created exclusively with mode FILE_MODE & ~umask.

  Like `tempfile.mkstemp`, but with the usual mode instead of 0600.
  """
  for _ in range(100):
    path = os.path.join(directory, f'{prefix}{secrets.token_hex(6)}{suffix}')
    try:
      return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), path
    except FileExistsError:
      continue
  raise FileExistsError(f'no free temporary file name in {directory}')


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
  """Writes `data` so that `path` holds either the old or the new file, never half of one.

  The temporary file lives in the same directory (hidden, `.NAME.*.tmp`), so `os.replace`
  is a rename; it is removed again if the write fails. The file gets mode 0666 & ~umask.

  Example:
    >>> os.makedirs('report', exist_ok=True)
    >>> write_bytes_atomic('report/figure.png', b'PNG')  # a reader sees the old or the new one
  """
  path = os.fspath(path)
  if store.is_url(path):
    try:
      before_write(path)
    except OSError as e:
      _raise_named(e, path)
    store.put(path, data)
    return
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = _create_temporary(directory, f'.{os.path.basename(path)}.', '.tmp')
  try:
    with os.fdopen(fd, 'wb') as f:
      before_write(path)
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    if os.path.exists(tmp):
      os.unlink(tmp)
    if isinstance(e, OSError):
      _raise_named(e, path)
    raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
  """`write_bytes_atomic` of `text` in UTF-8."""
  write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
  """Writes `obj` as indented JSON (one trailing newline) with `write_bytes_atomic`.

  Example:
    >>> os.makedirs('run', exist_ok=True)
    >>> write_json_atomic('run/config.json', {'task': 'parity_check'})
    >>> read_json('run/config.json')
    {'task': 'parity_check'}
  """
  write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=False) + '\n')


def read_bytes(path: str) -> bytes:
  """The bytes of the file (or object) `path`; FileNotFoundError if there is none."""
  if store.is_url(path):
    return store.read_bytes(path)
  with open(path, 'rb') as f:
    return f.read()


def read_text(path: str) -> str:
  """The text of the file (or object) `path`; FileNotFoundError if there is none."""
  if store.is_url(path):
    return store.read_bytes(path).decode()
  with open(path) as f:
    return f.read()


def read_json(path: str) -> Any:
  if store.is_url(path):
    return json.loads(read_text(path))
  with open(path) as f:
    return json.load(f)


def exists(path: str) -> bool:
  return store.exists(path) if store.is_url(path) else os.path.exists(path)


def isfile(path: str) -> bool:
  return store.isfile(path) if store.is_url(path) else os.path.isfile(path)


def makedirs(path: str) -> None:
  """Creates directory `path` and its parents; nothing on a store (it has no folders)."""
  if not store.is_url(path):
    os.makedirs(path, exist_ok=True)


def listdir(path: str) -> list[str]:
  return store.listdir(path) if store.is_url(path) else os.listdir(path)


def remove(path: str) -> None:
  """Deletes the file (or object) `path`."""
  if store.is_url(path):
    store.remove(path)
  else:
    os.unlink(path)


def append_jsonl(
  path: str,
  record: dict[str, Any],
  replaces: Callable[[dict[str, Any]], bool] | None = None,
) -> None:
  """Appends one JSON line and flushes it to disk (a kill leaves at most a torn last line).

  On a store the object is rewritten whole with the line added (a kill leaves the old
  object or the new one), only if it is still the version read (`store.replace`: else
  store.Conflict); the old lines that `replaces` matches are dropped from it. A lease
  cannot stop a write already past its check when its process stalls (`Lease`), so a
  process that lost the directory may have put one line more; `replaces` makes the new
  holder's line take its place (a local file has one writer: its flock)."""
  if store.is_url(path):
    line = json.dumps(record) + '\n'
    try:
      before_write(path)
    except OSError as e:
      _raise_named(e, path)
    try:
      old, version = store.read_versioned(path)
    except FileNotFoundError:
      if not store.create(path, line.encode()):
        raise store.Conflict(f'{path}: created by another writer meanwhile') from None
      return
    if replaces is not None:
      kept = [
        text for text in old.decode().splitlines(keepends=True) if not _matches(text, replaces)
      ]
      old = ''.join(kept).encode()
    # Conditional: a writer that lost the directory cannot put back a log the new holder
    # has rewritten since it read it.
    store.replace(path, old + line.encode(), version)
    return
  try:
    with open(path, 'a') as f:
      before_write(path)
      f.write(json.dumps(record) + '\n')
      f.flush()
      os.fsync(f.fileno())
  except OSError as e:
    _raise_named(e, path)


def _matches(text: str, replaces: Callable[[dict[str, Any]], bool]) -> bool:
  """Whether the complete JSON line `text` is a record `replaces` matches."""
  if not text.endswith('\n'):
    return True  # A torn last line goes as well.
  try:
    record = json.loads(text)
  except json.JSONDecodeError:
    return True
  return isinstance(record, dict) and replaces(record)


def open_lines(path: str) -> Any:
  """The open file `path`, or the lines of the object `path` (split at newlines only)."""
  if store.is_url(path):
    text = read_text(path)
    return contextlib.nullcontext(
      [line + '\n' for line in text.split('\n')[:-1]] + [text.split('\n')[-1]]
    )
  return open(path)


def read_jsonl(
  path: str, keep: Callable[[dict[str, Any]], bool] = lambda r: True, rewrite: bool = False
) -> list[dict[str, Any]]:
  """Reads the complete lines of a JSON-lines file that satisfy `keep`.

  A torn last line (a process killed mid-write) is dropped. With `rewrite`, the file
  is atomically rewritten to hold exactly the returned records, so appends continue
  from a clean state (used on resume: records after the restored checkpoint go).
  """
  if not exists(path):
    return []
  records = []
  with open_lines(path) as f:
    for line in f:
      if not line.endswith('\n'):
        break
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        break
      if keep(record):
        records.append(record)
  if rewrite:
    write_text_atomic(path, ''.join(json.dumps(record) + '\n' for record in records))
  return records


# ---------------------------------------------------------------------------------------
# One writer per directory.


@dataclasses.dataclass(frozen=True)
class Clock:
  """The clocks a lock reads: wall time (a lease's expiry is written in it, for other hosts to
  read), a monotonic clock (this process's own deadline) and sleep. Tests pass a fake one."""

  wall: Callable[[], float] = time.time
  monotonic: Callable[[], float] = time.monotonic
  sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()


class DirectoryBusy(RuntimeError):
  """Another live process holds the directory; the message names it, and `holder` alone
  ('process 123 on host a', or 'another process') for summaries."""

  def __init__(self, message: str, holder: str = 'another process', stale_in: float | None = None):
    super().__init__(message)
    self.holder = holder
    self.stale_in = stale_in  # seconds until a lock without heartbeat is taken over, if known


class LeaseLost(DirectoryBusy):
  """This process's lease was taken over, or not renewed by its deadline: it may write
  nothing more in the directory (every write there raises this), and stops. `holder` is the
  process that took it over ('' if none is known: the lease may only have run out)."""


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


def process_identity() -> dict[str, Any]:
  """Who this process is, as a lock records it: host name, PID, its start time (epoch
  seconds, and in clock ticks since boot) and the kernel's boot id. A PID names one process
  only together with its start time: a restarted container often gets the PID (1) and the
  host name of its predecessor, never its start time.

  Example: {'host': 'vm', 'pid': 4242, 'started': 1764311000.2, 'start_ticks': 18211,
  'boot_id': '8aef5d62-...'} (start_ticks, boot_id and started are None without /proc).
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
  """True if `holder` (a lock's record) names a process of this host and boot that no longer
  runs: its PID is free, or now names a process started at another time (a PID reused, as by
  a restarted container). A holder of another host, or of this host name under another boot
  id (a reboot, or another machine of that name: the two are not told apart), is not judged.

  Example: {'host': socket.gethostname(), 'pid': 1, 'start_ticks': 5, 'boot_id': ...} of a
  container restarted since -> True (its PID 1 started later).
  """
  me = process_identity()
  if holder.get('host') != me['host'] or not isinstance(holder.get('pid'), int):
    return False
  if holder.get('boot_id') and me['boot_id'] and holder['boot_id'] != me['boot_id']:
    return False
  return process_gone(holder['pid'], holder.get('start_ticks'))


# ---------------------------------------------------------------------------------------
# Local staging directories of what goes to a store.

STAGING_PREFIX = 'posenc-'


def staging_directory(kind: str, root: str | None = None) -> str:
  """A new local directory for files on their way to a store (`kind`: 'checkpoints',
  'tensorboard'), in `root` (default: the system's temporary directory), named after this
  process (PID and start time) so that the next call on this machine, in any process,
  removes one whose process is gone (a kill leaves its staging directory behind).

  Example: staging_directory('checkpoints') ->
    '/tmp/posenc-checkpoints-4242.18211-k2j3h4' (removed by its owner's close)
  """
  import shutil  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top

  root = root or tempfile.gettempdir()
  prefix = f'{STAGING_PREFIX}{kind}-'
  for name in os.listdir(root):
    if not name.startswith(prefix):
      continue
    owner = name[len(prefix) :].split('-', 1)[0].split('.')
    try:
      pid, ticks = int(owner[0]), int(owner[1]) if len(owner) > 1 else None
    except ValueError:
      continue  # Not a name this function gives.
    if process_gone(pid, ticks):
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
  me = process_identity()
  return tempfile.mkdtemp(prefix=f'{prefix}{me["pid"]}.{me["start_ticks"] or 0}-', dir=root)


def _who(holder: dict[str, Any]) -> str:
  if not holder:
    return 'another process'
  return f'process {holder.get("pid")} on host {holder.get("host")}'


def _clock_time(seconds: Any) -> str:
  if not isinstance(seconds, (int, float)):
    return '?'
  return time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(seconds))


def _describe(holder: dict[str, Any]) -> str:
  """'process 7 on host a (started 2026-11-28 06:01:02, holding it since 06:01:09)'."""
  if not holder:
    return _who(holder)
  started = holder.get('started')
  return (
    f'{_who(holder)} ('
    + (f'started {_clock_time(started)}, ' if started else '')
    + f'holding it since {_clock_time(holder.get("since"))})'
  )


LOCK_FILE = 'lock'
# A holder on another host refreshes its lock file's mtime this often; one not refreshed
# for STALE_AFTER_S is taken to be dead (hosts share no process table, and some shared
# file systems do not carry flock between hosts).
HEARTBEAT_S = 30.0
STALE_AFTER_S = 300.0
# How often a process waiting for a held directory looks again.
POLL_S = 5.0


def _holder(fd: int) -> dict[str, Any]:
  try:
    os.lseek(fd, 0, os.SEEK_SET)
    return json.loads(os.read(fd, 4096).decode() or '{}')
  except (OSError, ValueError):
    return {}


class DirectoryLock:
  """An exclusive lock on a run directory: `with DirectoryLock(workdir): ...`.

  The lock is `workdir/lock`, held with flock and naming its holder (`process_identity`) for
  the error message of a second process. The kernel drops a flock when its holder dies, so a
  lock left by a killed process is taken over; a holder on another host is also taken to be
  dead once its heartbeat (the file's mtime, refreshed every HEARTBEAT_S) is older than
  STALE_AFTER_S. A flock is not lost while its holder lives, so `check` has nothing to say.

  With `wait_s`, a held lock is waited for that long (looked at every POLL_S, the wait said
  once through `progress`) before DirectoryBusy; None waits for a holder of another host
  until its heartbeat goes stale, and not for a live process of this host.

  Raises:
    DirectoryBusy: on entry, if a live process holds the lock (after `wait_s`).

  Example:
    >>> os.makedirs('runs/a', exist_ok=True)
    >>> with DirectoryLock('runs/a'):        # a second process here raises DirectoryBusy
    ...   train()                            # doctest: +SKIP
  """

  def __init__(
    self,
    directory: str,
    wait_s: float | None = 0.0,
    progress: Callable[[str], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
  ):
    self.path = os.path.join(directory, LOCK_FILE)
    self.wait_s, self._progress, self._clock = wait_s, progress, clock
    self._fd: int | None = None
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def check(self) -> None:
    """Nothing: a flock stays its holder's while it lives."""

  def __enter__(self) -> 'DirectoryLock':
    start = self._clock.monotonic()
    told = False
    while True:
      try:
        self._fd = self._try()
        break
      except DirectoryBusy as e:
        if self.wait_s is None:  # Until a holder of another host goes stale, once.
          left = e.stale_in + POLL_S if e.stale_in is not None else 0.0
          left -= self._clock.monotonic() - start
        else:
          left = start + self.wait_s - self._clock.monotonic()
        if left <= 0:
          raise
        if self._progress and not told:
          self._progress(f'waiting at most {left:.0f} s: {e}')
          told = True
        self._clock.sleep(min(POLL_S, left))
    self._thread = threading.Thread(target=self._heartbeat, daemon=True)
    self._thread.start()
    return self

  def _try(self) -> int:
    """The locked file descriptor, the holder's record written; DirectoryBusy if held."""
    directory = os.path.dirname(self.path)
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise DirectoryBusy(
          f'{directory} is in use by {_describe(holder)}; wait for it to end, or stop it',
          _who(holder),
        ) from None
      # Its previous holder may have removed the file between our open and our flock.
      try:
        if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
          break
      except FileNotFoundError:
        pass
      os.close(fd)
    holder = _holder(fd)
    stale_in = os.fstat(fd).st_mtime + STALE_AFTER_S - self._clock.wall()
    if holder and holder.get('host') != socket.gethostname() and stale_in > 0:
      os.close(fd)
      raise DirectoryBusy(
        f'{directory} is in use by {_describe(holder)}; its lock is taken over once '
        f'{STALE_AFTER_S:.0f} s pass without a heartbeat',
        _who(holder),
        stale_in,
      )
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    record = {**process_identity(), 'since': self._clock.wall()}
    os.write(fd, json.dumps(record).encode())
    os.fsync(fd)
    return fd

  def _heartbeat(self) -> None:
    while not self._stop.wait(HEARTBEAT_S):
      try:
        os.utime(self.path)
      except OSError:
        pass

  def __exit__(self, *exc_info) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    try:
      os.unlink(self.path)
    except OSError:
      pass
    fcntl.flock(self._fd, fcntl.LOCK_UN)
    os.close(self._fd)
    self._fd = None


# ---------------------------------------------------------------------------------------
# One writer per directory on an object store.

# How long a lease lasts without renewal: the longest a restart on another host waits for a
# holder that died without releasing it. Its holder renews it every LEASE_S / 4 and stops
# writing LEASE_S / 4 before it would expire. 60 s: docs/scaling.md gives the measurement
# (requests per hour against the wait of a restart) behind the choice.
LEASE_S = 60.0
LEASE_PREFIX = 'lease.'


class Lease:
  """The one writer of a directory on an object store: `with Lease('gs://b/run'): ...`.

  A lease is the object `DIR/lease.N`, created with the store's conditional write (of two
  writers racing for N one gets it), naming its holder (`process_identity`), a token of its
  own, when it was last renewed (wall time) and its length `lease_s`. On exit it is marked
  released.

  Taking it: the newest lease.N is free if released, expired (not renewed for its holder's
  lease_s, by this host's clock), or held by a process of this host that is gone
  (`holder_gone`); then lease.N+1 is created, conditionally again, and the older ones
  deleted. A held one is waited for up to `wait_s` (looked at every POLL_S; the wait is said
  through `progress` with the holder, its last renewal and the time left), then
  DirectoryBusy; `wait_s` None waits long enough for the holder's lease to expire once.

  Holding it (fencing): the holder keeps a deadline on its monotonic clock, lease_s / 4 short
  of the lease's expiry as its last renewal stamped it (the margin absorbs clock differences
  between hosts and a write in flight). A background thread renews every lease_s / 4: it
  reads lease.N, compares the token, and rewrites it only if it is unchanged since its own
  last write (`store.replace`), moving the deadline. Every write under the directory checks
  the lease first (`store.fence`, `check`): past the deadline, or once a renewal found the
  lease gone, changed or someone else's, the holder has lost it and every write raises
  LeaseLost: no result, no log line, no lease object.

  Hosts must keep time (NTP) to within lease_s / 4: the expiry is read from the holder's
  stamp by another host's clock.

  Raises:
    DirectoryBusy: on entry, if a live process holds the lease (after `wait_s`).

  Example:
    >>> with Lease('s3://bucket/sweep/cells/a'):   # doctest: +SKIP
    ...   train(...)                    # a second process here: DirectoryBusy
  """

  def __init__(
    self,
    directory: str,
    lease_s: float = LEASE_S,
    wait_s: float | None = 0.0,
    progress: Callable[[str], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
  ):
    self.directory = directory.rstrip('/')
    self.lease_s, self.wait_s = lease_s, wait_s
    self.period = lease_s / 4  # between renewals; also the margin before expiry
    self._progress, self._clock = progress, clock
    self._number: int | None = None
    self._token = ''
    self._version = ''
    self._since = 0.0
    self._deadline = -math.inf
    self._lost: str | None = None
    self._taken_by = ''
    self._guard = threading.Lock()
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None
    self._fence: Any = None

  def _url(self, number: int) -> str:
    return f'{self.directory}/{LEASE_PREFIX}{number}'

  def _numbers(self) -> list[int]:
    names = store.listdir(self.directory)
    return sorted(
      int(n[len(LEASE_PREFIX) :])
      for n in names
      if n.startswith(LEASE_PREFIX) and n[len(LEASE_PREFIX) :].isdigit()
    )

  def _read(self, number: int) -> dict[str, Any]:
    try:
      record = json.loads(store.read_bytes(self._url(number)))
    except (FileNotFoundError, ValueError):
      return {}  # Deleted meanwhile, or torn by a foreign writer: not a live holder.
    return record if isinstance(record, dict) else {}

  def _record(self, renewed: float, released: bool = False) -> bytes:
    return json.dumps(
      {
        **process_identity(),
        'token': self._token,
        'since': self._since,
        'renewed': renewed,
        'lease_s': self.lease_s,
        'released': released,
      }
    ).encode()

  def _left(self, holder: dict[str, Any]) -> float:
    """Seconds until `holder`'s lease expires by this host's clock (<= 0: free)."""
    if not holder or holder.get('released') or holder_gone(holder):
      return 0.0
    length = holder.get('lease_s', self.lease_s)
    renewed = holder.get('renewed', 0)
    if not isinstance(length, (int, float)) or not isinstance(renewed, (int, float)):
      return 0.0
    return renewed + length - self._clock.wall()

  def _busy(self, holder: dict[str, Any], left: float) -> str:
    ago = self._clock.wall() - holder.get('renewed', 0)
    return (
      f'{self.directory} is in use by {_describe(holder)}, which renewed its lease {ago:.0f} s '
      f'ago; it is taken over once it goes {holder.get("lease_s", self.lease_s):.0f} s '
      f'without renewal (in {left:.0f} s at most)'
    )

  def __enter__(self) -> 'Lease':
    clock = self._clock
    give_up = None if self.wait_s is None else clock.monotonic() + self.wait_s
    told = None
    for _ in range(1000):
      numbers = self._numbers()
      holder = self._read(numbers[-1]) if numbers else {}
      left = self._left(holder)
      if left <= 0:
        if self._create(numbers[-1] + 1 if numbers else 0, numbers):
          break
        continue  # Another process created it first: look again.
      if give_up is None:  # Long enough for this holder's lease to expire once.
        give_up = clock.monotonic() + holder.get('lease_s', self.lease_s) + POLL_S
      remaining = give_up - clock.monotonic()
      if remaining <= 0:
        raise DirectoryBusy(self._busy(holder, left), _who(holder))
      if self._progress and told != (holder.get('token'), holder.get('pid')):
        self._progress(f'waiting at most {remaining:.0f} s: {self._busy(holder, left)}')
        told = (holder.get('token'), holder.get('pid'))
      clock.sleep(max(0.01, min(left + 0.01, POLL_S, remaining)))
    else:
      raise DirectoryBusy(f'{self.directory}: its lease changed hands 1000 times meanwhile')
    self._fence = store.fence(self.directory, self.check)
    self._fence.__enter__()
    self._thread = threading.Thread(target=self._renew_periodically, daemon=True)
    self._thread.start()
    return self

  def _create(self, number: int, older: list[int]) -> bool:
    """Creates lease.`number` as this process's; False if another process was first."""
    start = self._clock.monotonic()
    self._since = self._clock.wall()
    self._token = secrets.token_hex(8)
    version = store.create(self._url(number), self._record(self._since))
    if not version:
      return False
    self._number, self._version = number, version
    self._deadline = start + self.lease_s - self.period
    for old in older:  # A stalled holder's conditional renewal of it then fails.
      store.remove(self._url(old))
    return True

  def check(self) -> None:
    """Raises LeaseLost unless the lease is still this process's (called before every
    write under the directory)."""
    if self._lost is None and self._clock.monotonic() >= self._deadline:
      self._expired()
    if self._lost is not None:
      raise LeaseLost(self._lost, self._taken_by)

  def _expired(self) -> None:
    """Loses the lease past its deadline, naming the process that took it over if one did
    (a read: nothing is written)."""
    try:
      newer = [n for n in self._numbers() if n > self._number]
    except store.StoreError:
      newer = []
    holder = self._read(newer[-1]) if newer else {}
    if holder:
      self._lose(f'taken over by {_who(holder)}', _who(holder))
    else:
      self._lose(
        f'not renewed within {self.lease_s - self.period:.0f} s (the process or its store '
        'stalled), so another process may take the directory over'
      )

  def _lose(self, why: str, by: str = '') -> None:
    with self._guard:
      if self._lost is None:
        self._taken_by = by
        self._lost = (
          f'{self.directory}: this process lost its lease ({why}); it stops and writes nothing '
          'more there'
        )

  def _taken(self) -> None:
    """Loses the lease to its taker: 'taken over by process 8 on host b', or 'its lease
    object was deleted' if no newer lease names one."""
    try:
      numbers = self._numbers()
    except store.StoreError:
      numbers = []
    newer = [n for n in numbers if n != self._number]
    holder = self._read(newer[-1]) if newer else {}
    if holder:
      self._lose(f'taken over by {_who(holder)}', _who(holder))
    else:
      self._lose('its lease object was changed or deleted by another process')

  def renew(self) -> None:
    """One renewal (the background thread's): compare the token, rewrite the lease if it is
    unchanged since this process's last write, move the deadline. A store error leaves the
    deadline where it is (the next renewal tries again); a lease found gone or taken is lost."""
    if self._lost is not None:
      return
    start = self._clock.monotonic()
    if start >= self._deadline:
      self._expired()
      return
    renewed = self._clock.wall()
    url = self._url(self._number)
    try:
      record = json.loads(store.read_bytes(url))
    except FileNotFoundError:
      self._taken()
      return
    except (store.StoreError, OSError, ValueError):
      return
    if record.get('token') != self._token:
      self._taken()
      return
    try:
      self._version = store.replace(url, self._record(renewed), self._version)
    except store.Conflict:
      self._taken()
      return
    except (LeaseLost, store.StoreError, OSError):
      return
    self._deadline = start + self.lease_s - self.period

  def _renew_periodically(self) -> None:
    while not self._stop.wait(self.period):
      self.renew()
      if self._lost is not None:
        return

  def __exit__(self, *exc_info) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    if self._fence is not None:
      self._fence.__exit__(None, None, None)
    if self._lost is None and self._clock.monotonic() < self._deadline:
      try:
        store.replace(
          self._url(self._number), self._record(self._clock.wall(), released=True), self._version
        )
      except (store.StoreError, OSError):
        pass  # The lease then expires by itself.
    self._number = None


def lock(
  directory: str,
  lease_s: float = LEASE_S,
  wait_s: float | None = 0.0,
  progress: Callable[[str], None] | None = None,
) -> DirectoryLock | Lease:
  """The one-writer lock of `directory`: a flock on a disk, a lease on an object store;
  held ones waited for up to `wait_s` seconds (said through `progress`).

  Example:
    >>> with lock('runs/a', wait_s=60, progress=print):   # doctest: +SKIP
    ...   train(...)
  """
  if store.is_url(directory):
    return Lease(directory, lease_s, wait_s, progress)
  return DirectoryLock(directory, wait_s, progress)
