"""The one-writer lease of a directory on a store (posenc/storage/lease.py `Lease`) with a fake clock,
against moto's S3 server (tests/stores.py): waiting for a holder and taking it over at
expiry, fencing (the local deadline, the token compared at renewal), the holder's identity,
and the wait of a flock (`DirectoryLock`).

The clock is fake (`lease_lib.Clock`): a wait of a minute costs nothing; every request goes to the
server.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from posenc.storage import io
from posenc.storage import lease as lease_lib
from posenc.storage import processes
from posenc.storage import store
import stores


class FakeClock:
  """Wall and monotonic time that move only when slept or advanced."""

  def __init__(self):
    self.now, self.mono, self.slept = 1.8e9, 100.0, []
    self.on_sleep = lambda: None

  def advance(self, seconds):
    self.now += seconds
    self.mono += seconds

  def sleep(self, seconds):
    self.slept.append(seconds)
    self.advance(seconds)
    self.on_sleep()

  def clock(self):
    return lease_lib.Clock(wall=lambda: self.now, monotonic=lambda: self.mono, sleep=self.sleep)


@pytest.fixture(scope='module')
def s3():
  with stores.s3_server() as env:
    yield env


@pytest.fixture
def url(s3, request):
  return f's3://{stores.BUCKET}/{request.node.name}-{time.monotonic_ns()}'


def _foreign(url, clock, number=0, **fields):
  """Writes lease.`number` as a process of another host that renewed it now would."""
  record = {
    'host': 'elsewhere',
    'pid': 7,
    'started': clock.now - 100,
    'start_ticks': 5,
    'boot_id': 'another-boot',
    'token': 'theirs',
    'since': clock.now - 50,
    'renewed': clock.now,
    'lease_s': 60.0,
    'released': False,
    **fields,
  }
  store.put(f'{url}/lease.{number}', json.dumps(record).encode())


def _holder(url, number):
  return json.loads(store.read_bytes(f'{url}/lease.{number}'))


def test_a_held_lease_is_refused_at_once_without_a_wait(url):
  fake = FakeClock()
  _foreign(url, fake)
  with pytest.raises(lease_lib.DirectoryBusy) as busy:
    lease_lib.Lease(url, wait_s=0, clock=fake.clock()).__enter__()
  assert str(busy.value).startswith(f'{url} is in use by process 7 on host elsewhere (started ')
  assert 'renewed its lease 0 s ago; it is taken over once it goes 60 s without renewal' in str(
    busy.value
  )
  assert busy.value.holder == 'process 7 on host elsewhere'
  assert store.listdir(url) == ['lease.0'] and fake.slept == []


def test_a_holder_that_stopped_renewing_is_waited_for_and_taken_over_at_expiry(url):
  fake = FakeClock()
  _foreign(url, fake)
  at = lambda t: time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))
  started, since = at(fake.now - 100), at(fake.now - 50)
  fake.advance(20)  # It died 20 s after its last renewal.
  lines = []
  with lease_lib.Lease(url, wait_s=None, progress=lines.append, clock=fake.clock()):
    mine = _holder(url, 1)
  # Taken over as its lease expired: 40 s later, not a poll earlier.
  assert 40 <= sum(fake.slept) < 40 + lease_lib.POLL_S
  assert lines == [
    'waiting at most 65 s: '
    f'{url} is in use by process 7 on host elsewhere (started {started}, holding it since '
    f'{since}), which renewed its lease 20 s ago; it is taken over once it goes 60 s without renewal '
    '(in 40 s at most)'
  ]
  # The old lease is deleted; the new one names this process and is released on exit.
  assert store.listdir(url) == ['lease.1']
  assert mine['pid'] == os.getpid() and mine['host'] == socket.gethostname()
  assert mine['start_ticks'] == processes.process_identity()['start_ticks'] and mine['token']
  assert _holder(url, 1)['released']


def test_a_holder_that_renews_is_waited_for_only_as_long_as_asked(url):
  fake = FakeClock()
  _foreign(url, fake)
  fake.on_sleep = lambda: _foreign(url, fake)  # It renews while the other waits.
  with pytest.raises(lease_lib.DirectoryBusy, match='renewed its lease 0 s ago'):
    lease_lib.Lease(url, wait_s=30, clock=fake.clock()).__enter__()
  assert sum(fake.slept) == pytest.approx(30)
  assert store.listdir(url) == ['lease.0'] and _holder(url, 0)['token'] == 'theirs'


def test_a_released_lease_or_a_dead_process_of_this_host_is_taken_at_once(url):
  fake = FakeClock()
  _foreign(url, fake, released=True)
  with lease_lib.Lease(url, clock=fake.clock()):
    assert store.listdir(url) == ['lease.1']
  # This host and boot, this PID, but another start time: a restarted container whose
  # PID 1 is not the holder's PID 1.
  me = processes.process_identity()
  _foreign(url, fake, number=2, **{**me, 'start_ticks': (me['start_ticks'] or 0) + 1})
  with lease_lib.Lease(url, clock=fake.clock()):
    assert store.listdir(url) == ['lease.3']
  assert fake.slept == []


def test_holder_identity_tells_a_reused_pid_from_its_process():
  me = processes.process_identity()
  assert me['pid'] == os.getpid() and me['host'] == socket.gethostname()
  assert me['boot_id'] and me['start_ticks'] is not None
  assert abs(me['started'] - time.time()) < 24 * 3600
  assert not processes.holder_gone(me)  # alive
  assert processes.holder_gone({**me, 'start_ticks': me['start_ticks'] + 1})  # PID reused
  dead = subprocess.Popen([sys.executable, '-c', 'pass'])
  dead.wait()
  assert processes.holder_gone({**me, 'pid': dead.pid})  # PID free
  assert not processes.holder_gone({**me, 'pid': dead.pid, 'host': 'elsewhere'})  # not judged
  assert not processes.holder_gone({**me, 'pid': dead.pid, 'boot_id': 'another boot'})
  # A container sharing the host's name and boot id, in a PID namespace of its own: its PID
  # means nothing here, nor does a record that names no namespace (an older posenc's).
  assert not processes.holder_gone({**me, 'pid': dead.pid, 'pid_ns': 'pid:[1]'})
  assert not processes.holder_gone({**me, 'pid': dead.pid, 'pid_ns': None})


def test_a_holder_past_its_deadline_writes_nothing_more(url):
  fake = FakeClock()
  lease = lease_lib.Lease(url, lease_s=60, clock=fake.clock())
  with pytest.raises(lease_lib.LeaseLost) as lost:
    with lease:
      store.put(f'{url}/metrics.jsonl', b'{"step": 5}\n')
      fake.advance(44)
      lease.check()  # 1 s before its deadline: still its own
      fake.advance(1)  # stalled: renewal due at 15 s missed for 45 s
      io.append_jsonl(f'{url}/metrics.jsonl', {'step': 10})
  assert str(lost.value) == (
    f'{url}: this process lost its lease (not renewed within 45 s (the process or its store '
    'stalled), so another process may take the directory over); it stops and writes '
    'nothing more there'
  )
  assert lost.value.holder == ''
  assert store.read_bytes(f'{url}/metrics.jsonl') == b'{"step": 5}\n'
  assert not _holder(url, 0)['released']  # Not even the lease object is written.


def test_renewals_move_the_deadline(url):
  fake = FakeClock()
  with lease_lib.Lease(url, lease_s=60, clock=fake.clock()) as lease:
    for _ in range(4):
      fake.advance(40)
      lease.renew()
      lease.check()
    assert _holder(url, 0)['renewed'] == fake.now
  assert _holder(url, 0)['released']


def test_a_lease_taken_over_is_lost_at_the_next_renewal_and_not_written_back(url):
  fake = FakeClock()
  with pytest.raises(lease_lib.LeaseLost) as lost:
    with lease_lib.Lease(url, lease_s=60, clock=fake.clock()) as lease:
      # Another host took it over (as after a stall: it created lease.1, deleted lease.0).
      _foreign(url, fake, number=1)
      store.remove(f'{url}/lease.0')
      lease.renew()
      store.put(f'{url}/results.json', b'{}')
  assert 'lost its lease (taken over by process 7 on host elsewhere)' in str(lost.value)
  assert lost.value.holder == 'process 7 on host elsewhere'
  assert store.listdir(url) == ['lease.1']  # No result; lease.0 not written back.


def test_a_renewal_compares_the_token(url):
  fake = FakeClock()
  with pytest.raises(lease_lib.LeaseLost, match='its lease object was changed or deleted'):
    with lease_lib.Lease(url, lease_s=60, clock=fake.clock()) as lease:
      record = {**_holder(url, 0), 'token': 'someone else'}
      store.put(f'{url}/lease.0', json.dumps(record).encode())
      lease.renew()
      lease.check()
  assert _holder(url, 0)['token'] == 'someone else'


def test_a_store_error_at_renewal_keeps_the_lease_until_its_deadline(url, monkeypatch):
  fake = FakeClock()
  with lease_lib.Lease(url, lease_s=60, clock=fake.clock()) as lease:
    fake.advance(15)
    with monkeypatch.context() as patch:
      patch.setattr(store, 'read_bytes', _refuse)
      lease.renew()  # The store is down: nothing changes.
    fake.advance(29)
    lease.check()
    lease.renew()  # Up again, 1 s before the deadline.
    fake.advance(40)
    lease.check()


def _refuse(url):
  raise store.StoreError(f'{url}: reading failed: 503 Slow Down')


def test_a_flock_held_by_a_live_process_is_waited_for_only_when_asked(tmp_path):
  fake = FakeClock()
  lines = []
  with lease_lib.DirectoryLock(str(tmp_path)):
    with pytest.raises(lease_lib.DirectoryBusy, match=f'in use by process {os.getpid()}'):
      lease_lib.DirectoryLock(str(tmp_path), wait_s=None, clock=fake.clock()).__enter__()
    assert fake.slept == []
    with pytest.raises(lease_lib.DirectoryBusy):
      lease_lib.DirectoryLock(
        str(tmp_path), wait_s=12, progress=lines.append, clock=fake.clock()
      ).__enter__()
    assert fake.slept == [5.0, 5.0, 2.0]
    assert lines[0].startswith(f'waiting at most 12 s: {tmp_path} is in use by process ')
  with lease_lib.DirectoryLock(str(tmp_path), wait_s=12, clock=fake.clock()):
    pass
