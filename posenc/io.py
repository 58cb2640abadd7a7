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
import errno
import fcntl
import json
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
    if 'No space left on device' in str(error) or 'Disk quota exceeded' in str(error):
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


def append_jsonl(path: str, record: dict[str, Any]) -> None:
  """Appends one JSON line and flushes it to disk (a kill leaves at most a torn last line).

  On a store the object is rewritten whole with the line added (a kill leaves the old
  object or the new one)."""
  if store.is_url(path):
    old = read_text(path) if store.exists(path) else ''
    write_text_atomic(path, old + json.dumps(record) + '\n')
    return
  try:
    with open(path, 'a') as f:
      before_write(path)
      f.write(json.dumps(record) + '\n')
      f.flush()
      os.fsync(f.fileno())
  except OSError as e:
    _raise_named(e, path)


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

LOCK_FILE = 'lock'
# A holder on another host refreshes its lock file's mtime this often; one not refreshed
# for STALE_AFTER_S is taken to be dead (hosts share no process table, and some shared
# file systems do not carry flock between hosts).
HEARTBEAT_S = 30.0
STALE_AFTER_S = 300.0


class DirectoryBusy(RuntimeError):
  """Another live process holds the directory's lock; the message names it, and `holder`
  alone ('process 123 on host a', or 'another process') for summaries."""

  def __init__(self, message: str, holder: str = 'another process'):
    super().__init__(message)
    self.holder = holder


def _holder(fd: int) -> dict[str, Any]:
  try:
    os.lseek(fd, 0, os.SEEK_SET)
    return json.loads(os.read(fd, 4096).decode() or '{}')
  except (OSError, ValueError):
    return {}


def _who(holder: dict[str, Any]) -> str:
  if not holder:
    return 'another process'
  return f'process {holder.get("pid")} on host {holder.get("host")}'


def _describe(holder: dict[str, Any]) -> str:
  if not holder:
    return _who(holder)
  return (
    f'{_who(holder)} '
    f'(since {time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))})'
  )


class DirectoryLock:
  """An exclusive lock on a run directory: `with DirectoryLock(workdir): ...`.

  The lock is `workdir/lock`, held with flock and naming its holder (pid, host, start
  time) for the error message of a second process. The kernel drops a flock when its
  holder dies, so a lock left by a killed process is taken over; a holder on another host
  is also taken to be dead once its heartbeat (the file's mtime, refreshed every
  HEARTBEAT_S) is older than STALE_AFTER_S.

  Raises:
    DirectoryBusy: on entry, if a live process holds the lock.

  Example:
    >>> os.makedirs('runs/a', exist_ok=True)
    >>> with DirectoryLock('runs/a'):        # a second process here raises DirectoryBusy
    ...   train()                            # doctest: +SKIP
  """

  def __init__(self, directory: str):
    self.path = os.path.join(directory, LOCK_FILE)
    self._fd: int | None = None
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def __enter__(self) -> 'DirectoryLock':
    host, pid = socket.gethostname(), os.getpid()
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise DirectoryBusy(
          f'{os.path.dirname(self.path)} is in use by {_describe(holder)}; '
          'wait for it to end, or stop it',
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
    fresh = time.time() - os.fstat(fd).st_mtime < STALE_AFTER_S
    if holder and holder.get('host') != host and fresh:
      os.close(fd)
      raise DirectoryBusy(
        f'{os.path.dirname(self.path)} is in use by {_describe(holder)}; '
        f'its lock is taken over once {STALE_AFTER_S:.0f} s pass without '
        'a heartbeat',
        _who(holder),
      )
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps({'pid': pid, 'host': host, 'since': time.time()}).encode())
    os.fsync(fd)
    self._fd = fd
    self._thread = threading.Thread(target=self._heartbeat, daemon=True)
    self._thread.start()
    return self

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

# A lease is taken over once its holder has not renewed it for LEASE_S seconds (by the
# holder's clock: hosts are assumed to keep time, as NTP does); the holder renews it every
# LEASE_S / 4. The entry points may shorten it (tests of a preempted holder).
LEASE_S = 300.0
LEASE_PREFIX = 'lease.'


class Lease:
  """The one writer of a directory on an object store: `with Lease('gs://b/run'): ...`.

  A lease is the object `DIR/lease.N`, created with the store's conditional write (one of two
  writers racing for N gets it; the other is refused), naming its holder (pid, host, since)
  and when it was last renewed. Its holder renews it in a background thread; on exit it marks
  it released. A second process finds the newest lease.N: held and fresh, it is refused
  (DirectoryBusy naming the holder); released, not renewed for the holder's LEASE_S (a
  preempted or killed host), or held by a process of this host that is gone (a kill, as a
  flock is dropped), it takes the directory over by creating lease.N+1, conditionally again, so
  of two processes taking over one expired lease exactly one wins. Older leases are deleted
  by the winner. A holder that finds a newer lease than its own stops renewing: it was taken
  for dead.

  Raises:
    DirectoryBusy: on entry, if a live process holds the lease.

  Example:
    >>> with Lease('s3://bucket/sweep/cells/a'):   # doctest: +SKIP
    ...   train(...)                    # a second process here: DirectoryBusy
  """

  def __init__(self, directory: str, lease_s: float | None = None):
    self.directory = directory.rstrip('/')
    self.lease_s = LEASE_S if lease_s is None else lease_s
    self._number: int | None = None
    self._since = 0.0
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def _url(self, number: int) -> str:
    return f'{self.directory}/{LEASE_PREFIX}{number}'

  def _numbers(self) -> list[int]:
    names = store.listdir(self.directory)
    return sorted(
      int(n[len(LEASE_PREFIX) :])
      for n in names
      if n.startswith(LEASE_PREFIX) and n[len(LEASE_PREFIX) :].isdigit()
    )

  def _record(self, released: bool = False) -> bytes:
    return json.dumps(
      {
        'pid': os.getpid(),
        'host': socket.gethostname(),
        'since': self._since,
        'renewed': time.time(),
        'lease_s': self.lease_s,
        'released': released,
      }
    ).encode()

  def __enter__(self) -> 'Lease':
    for _ in range(100):
      numbers = self._numbers()
      number = numbers[-1] + 1 if numbers else 0
      if numbers:
        try:
          holder = json.loads(store.read_bytes(self._url(numbers[-1])))
        except (FileNotFoundError, ValueError):
          holder = {}  # Deleted meanwhile, or torn by a foreign writer: not a live holder.
        left = holder.get('renewed', 0) + holder.get('lease_s', self.lease_s) - time.time()
        if holder and not holder.get('released') and left > 0 and not _dead_here(holder):
          raise DirectoryBusy(
            f'{self.directory} is in use by {_describe(holder)}; its lease is taken over '
            f'once it goes {holder.get("lease_s", self.lease_s):.0f} s without renewal '
            f'(in {left:.0f} s at most)',
            _who(holder),
          )
      self._since = time.time()
      if store.create(self._url(number), self._record()):
        break
    else:
      raise DirectoryBusy(f'{self.directory}: its lease changed hands 100 times meanwhile')
    self._number = number
    for old in numbers:
      store.remove(self._url(old))
    self._thread = threading.Thread(target=self._renew, daemon=True)
    self._thread.start()
    return self

  def _renew(self) -> None:
    while not self._stop.wait(self.lease_s / 4):
      try:
        if self._numbers()[-1:] != [self._number]:
          return  # Taken over: this process was taken for dead.
        store.put(self._url(self._number), self._record())
      except (store.StoreError, OSError):
        pass  # The next renewal tries again; the lease lasts 4 renewals.

  def __exit__(self, *exc_info) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    try:
      if self._numbers()[-1:] == [self._number]:
        store.put(self._url(self._number), self._record(released=True))
    except (store.StoreError, OSError):
      pass  # The lease then expires by itself.
    self._number = None


def _dead_here(holder: dict[str, Any]) -> bool:
  """True if `holder` names a process of this host that no longer runs."""
  if holder.get('host') != socket.gethostname() or not isinstance(holder.get('pid'), int):
    return False
  try:
    os.kill(holder['pid'], 0)
  except ProcessLookupError:
    return True
  except OSError:
    return False  # It runs, as another user.
  return False


def lock(directory: str) -> DirectoryLock | Lease:
  """The one-writer lock of `directory`: a flock on a disk, a lease on an object store."""
  return Lease(directory) if store.is_url(directory) else DirectoryLock(directory)
