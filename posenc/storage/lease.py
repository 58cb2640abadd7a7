"""The one writer of a run directory: a flock (`DirectoryLock`) on a disk, a lease object
(`Lease`) on an object store (`gs://`, `s3://`), both recording who holds them
(`processes.process_identity`) so that a dead holder is recognized, and waited for up to a bound.

Example:
  >>> with lock('runs/a', wait_s=60, progress=print):   # doctest: +SKIP
  ...   train(...)
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import secrets
import socket
import threading
import time
from typing import Any, Callable

from posenc.storage import io
from posenc.storage import processes
from posenc.storage import store


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


class Preempted(Exception):
  """A run stopped on request (SIGTERM): at a step boundary after writing a checkpoint, or
  while waiting for its directory before taking anything over; rerunning it resumes."""

  def __init__(self, step: int | None, message: str):
    super().__init__(message)
    self.step = step  # None: stopped while waiting for the directory, before any step


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
# How often a process waiting for a held directory looks again, and how soon a wait asked
# to stop (SIGTERM) leaves.
POLL_S = 5.0
STOP_S = 0.1


def _wait(
  clock: Clock, seconds: float, should_stop: Callable[[], bool] | None, directory: str
) -> None:
  """Sleeps `seconds`, looking at `should_stop` (if any) every STOP_S: once it says so, the
  wait ends with Preempted before anything was taken over or written."""
  if should_stop is None:
    clock.sleep(seconds)
    return
  end = clock.monotonic() + seconds
  while True:
    if should_stop():
      raise Preempted(None, f'stopped while waiting for {directory}: nothing taken over or written')
    left = end - clock.monotonic()
    if left <= 0:
      return
    clock.sleep(min(STOP_S, left))


def _holder(fd: int) -> dict[str, Any]:
  try:
    os.lseek(fd, 0, os.SEEK_SET)
    return json.loads(os.read(fd, 4096).decode() or '{}')
  except (OSError, ValueError):
    return {}


class DirectoryLock:
  """An exclusive lock on a run directory: `with DirectoryLock(workdir): ...`.

  The lock is `workdir/lock`, held with flock and naming its holder (`processes.process_identity`) for
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
    should_stop: Callable[[], bool] | None = None,
  ):
    self.path = os.path.join(directory, LOCK_FILE)
    self.wait_s, self._progress, self._clock = wait_s, progress, clock
    self._should_stop = should_stop
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
        _wait(self._clock, min(POLL_S, left), self._should_stop, os.path.dirname(self.path))
    self._thread = threading.Thread(target=self._heartbeat, daemon=True)
    self._thread.start()
    return self

  def _try(self) -> int:
    """The locked file descriptor, the holder's record written; DirectoryBusy if held."""
    directory = os.path.dirname(self.path)
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, io.FILE_MODE)
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
    record = {**processes.process_identity(), 'since': self._clock.wall()}
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
# The shortest lease a user may ask for (POSENC_LEASE_S): renewed every 0.5 s and given up
# 0.5 s before it ends, it leaves each renewal (a read and a conditional write) a few round
# trips of a store that answers within 0.1 s. Shorter ones could never be held.
MIN_LEASE_S = 2.0
LEASE_PREFIX = 'lease.'


class Lease:
  """The one writer of a directory on an object store: `with Lease('gs://b/run'): ...`.

  A lease is the object `DIR/lease.N`, created with the store's conditional write (of two
  writers racing for N one gets it), naming its holder (`processes.process_identity`), a token of its
  own, when it was last renewed (wall time) and its length `lease_s`. On exit it is marked
  released.

  Taking it: the newest lease.N is free if released, expired (not renewed for its holder's
  lease_s, by this host's clock), or held by a process of this host that is gone
  (`processes.holder_gone`); then lease.N+1 is created, conditionally again, and the older ones
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
    should_stop: Callable[[], bool] | None = None,
  ):
    if not 0 < lease_s < math.inf or not (wait_s is None or 0 <= wait_s < math.inf):
      raise ValueError(f'a lease of {lease_s!r} s waited for {wait_s!r} s: both must be finite')
    self.directory = directory.rstrip('/')
    self.lease_s, self.wait_s = lease_s, wait_s
    self.period = lease_s / 4  # between renewals; also the margin before expiry
    self._progress, self._clock, self._should_stop = progress, clock, should_stop
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
        **processes.process_identity(),
        'token': self._token,
        'since': self._since,
        'renewed': renewed,
        'lease_s': self.lease_s,
        'released': released,
      }
    ).encode()

  def _left(self, holder: dict[str, Any]) -> float:
    """Seconds until `holder`'s lease expires by this host's clock (<= 0: free)."""
    if not holder or holder.get('released') or processes.holder_gone(holder):
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
      _wait(
        clock, max(0.01, min(left + 0.01, POLL_S, remaining)), self._should_stop, self.directory
      )
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


def holder(directory: str, clock: Clock = SYSTEM_CLOCK) -> str | None:
  """Who holds `directory` now ('process 7 on host a'), read without taking or writing
  anything; None if no live process does. On a store: its newest lease, unless released,
  expired or of a process known gone. On a disk: its lock file's record (the file is removed
  when its holder ends), unless the process is known gone or, on another host, its heartbeat
  is stale.

  Example: holder('sweeps/t/cells/a') -> 'process 7 on host a' while a run trains there.
  """
  if store.is_url(directory):
    reader = Lease(directory, clock=clock)
    numbers = reader._numbers()  # pylint: disable=protected-access
    record = reader._read(numbers[-1]) if numbers else {}  # pylint: disable=protected-access
    return _who(record) if reader._left(record) > 0 else None  # pylint: disable=protected-access
  path = os.path.join(directory, LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    record, mtime = _holder(fd), os.fstat(fd).st_mtime
  finally:
    os.close(fd)
  if not record or processes.holder_gone(record):
    return None
  if record.get('host') != socket.gethostname() and mtime + STALE_AFTER_S <= clock.wall():
    return None
  return _who(record)


def lock(
  directory: str,
  lease_s: float = LEASE_S,
  wait_s: float | None = 0.0,
  progress: Callable[[str], None] | None = None,
  should_stop: Callable[[], bool] | None = None,
) -> DirectoryLock | Lease:
  """The one-writer lock of `directory`: a flock on a disk, a lease on an object store;
  held ones waited for up to `wait_s` seconds (said through `progress`), a wait left at once
  (Preempted, nothing taken over) when `should_stop` says so.

  Example:
    >>> with lock('runs/a', wait_s=60, progress=print):   # doctest: +SKIP
    ...   train(...)
  """
  store.check_path(directory)  # 's3:/b/run' is no local directory to lock
  if store.is_url(directory):
    return Lease(directory, lease_s, wait_s, progress, should_stop=should_stop)
  return DirectoryLock(directory, wait_s, progress, should_stop=should_stop)
