"""The figures of docs/scaling.md on preemption, measured against moto's S3 server with key
checks (tests/stores.py): a run killed hard (SIGKILL: no release of its lease) and rerun
"on another host", a sweep in the same case, and a holder stalled past its lease (SIGSTOP)
then woken (SIGCONT) after another host took over; and what a lease costs in requests.

  python tests/scripts/preemption_timings.py [--lease=60] [--out=preemption.json]

"Another host": as root, each process runs in a UTS namespace of its own with its own host
name (`unshare -u`); otherwise tests/scripts/on_host.py gives it the name. Prints one line
per figure and writes them as JSON.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]

from posenc.training import checkpoint  # noqa: E402
from posenc.storage import io  # noqa: E402
from posenc.storage import lease as lease_lib  # noqa: E402
from posenc.storage import store  # noqa: E402
import stores  # noqa: E402

CONFIG = '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_rotary,tiny'
LONG = [
  'launch.train',
  CONFIG,
  '--config.train.steps=3000',
  '--config.train.log_every=5',
  '--config.checkpoint_every=50',
]


class Process:
  """`python -m argv` as host `host`, its stdout lines kept with the time each arrived."""

  def __init__(self, host, argv, env):
    if os.geteuid() == 0:
      command = [
        'unshare',
        '-u',
        'sh',
        '-c',
        f'hostname {host} && exec "$0" "$@"',
        sys.executable,
        '-m',
        *argv,
      ]
    else:
      command = [sys.executable, os.path.join(ROOT, 'tests', 'scripts', 'on_host.py'), host]
      command += ['-m', *argv]
    self.started = time.time()
    self.proc = subprocess.Popen(
      command,
      cwd=ROOT,
      env={**os.environ, **env, 'PYTHONPATH': ROOT},
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    self.lines = []
    self.err = ''
    threading.Thread(target=self._read, daemon=True).start()
    threading.Thread(target=self._read_err, daemon=True).start()

  def _read(self):
    for line in self.proc.stdout:
      self.lines.append((time.time(), line.rstrip('\n')))

  def _read_err(self):
    self.err = self.proc.stderr.read()

  def first(self, prefix, after=0.0):
    """The time of the first stdout line starting with `prefix` (None if none yet)."""
    for t, line in self.lines:
      if t >= after and line.startswith(prefix):
        return t
    return None

  def wait(self, timeout=1800):
    self.proc.wait(timeout=timeout)
    self.ended = time.time()
    time.sleep(0.2)
    return self.proc.returncode


def _until(condition, timeout=600):
  deadline = time.time() + timeout
  while not condition():
    if time.time() > deadline:
      raise TimeoutError
    time.sleep(0.05)


def _last_renewal(url):
  numbers = sorted(
    int(n.split('.')[1]) for n in store.listdir(url) if n.startswith('lease.') and n[6:].isdigit()
  )
  return json.loads(store.read_bytes(f'{url}/lease.{numbers[-1]}'))['renewed']


def restart(env, name):
  """Kill -9 a run on host-a after its first uploaded checkpoint; start it on host-b at once."""
  url = f's3://{stores.BUCKET}/{name}'
  first = Process('host-a', [*LONG, f'--workdir={url}'], env)
  _until(lambda: checkpoint.saved_steps(url))
  time.sleep(2.0)
  renewed = _last_renewal(url)
  first.proc.kill()
  killed = time.time()
  first.wait()
  second = Process('host-b', [*LONG, f'--workdir={url}'], env)
  _until(lambda: second.first('resumed from') or second.proc.poll() is not None)
  resumed = second.first('resumed from')
  if resumed is None:
    second.wait()
    raise RuntimeError(f'no resume: {second.lines[-5:]} {second.err[-3000:]}')
  _until(lambda: second.first('step ', resumed) or second.proc.poll() is not None)
  step = second.first('step ', resumed)
  second.proc.kill()
  second.wait()
  waited = [line for _, line in second.lines if line.startswith('waiting at most')]
  return {
    'killed_s_after_last_renewal': round(killed - renewed, 1),
    'restart_to_takeover_s': round(resumed - second.started, 1),
    'kill_to_training_resumed_s': round(step - killed, 1),
    'restart_to_training_resumed_s': round(step - second.started, 1),
    'wait_line': waited[0] if waited else None,
    'resumed_line': [line for _, line in second.lines if line.startswith('resumed from')][0],
  }


def sweep(env, name):
  """Kill -9 a sweep on host-a inside its second cell (the first complete); rerun it on
  host-b at once, with --lease_wait=0 --partial, then with the default wait."""
  url = f's3://{stores.BUCKET}/{name}'
  argv = [
    'launch.sweep',
    '--config=experiments/sweep_tiny.py',
    f'--workdir={url}',
    '--tasks=parity_check',
    '--config.train.steps=1000',
    '--config.checkpoint_every=50',
  ]
  first = Process('host-a', argv, env)
  _until(lambda: checkpoint.saved_steps(f'{url}/cells/parity_check__randomized_relative'))
  time.sleep(2.0)
  first.proc.kill()
  killed = time.time()
  first.wait()
  now = Process('host-b', [*argv, '--lease_wait=0', '--partial'], env)
  now_rc = now.wait()
  later = Process('host-b', argv, env)
  later_rc = later.wait()
  resumed = later.first('resumed from')
  lines = lambda p, *heads: [line for _, line in p.lines if line.startswith(heads)]
  return {
    'lease_wait_0_partial': {
      'exit': now_rc,
      'seconds': round(now.ended - now.started, 1),
      'stderr': now.err.strip(),
      'lines': lines(now, 'sweep shard', 'unfinished', 'report written', 'no report', '# '),
    },
    'default_wait': {
      'exit': later_rc,
      'kill_to_cell_resumed_s': round(resumed - killed, 1) if resumed else None,
      'stderr': later.err.strip(),
      'lines': lines(later, 'waiting', 'resumed', 'sweep shard', 'unfinished', 'report', '# '),
    },
  }


def fencing(env, name, lease_s):
  """SIGSTOP a run on host-a past its lease; host-b takes it over; SIGCONT host-a."""
  url = f's3://{stores.BUCKET}/{name}'
  steps = ['--config.train.steps=1500']
  local = f'/tmp/posenc-fencing-straight-{os.getpid()}'
  straight = subprocess.run(
    [sys.executable, '-m', *LONG, *steps, f'--workdir={local}'],
    cwd=ROOT,
    env={**os.environ, **env, 'PYTHONPATH': ROOT},
    capture_output=True,
  )
  assert straight.returncode == 0, straight.stderr[-2000:]
  first = Process('host-a', [*LONG, *steps, f'--workdir={url}'], env)
  _until(lambda: checkpoint.saved_steps(url))
  os.kill(first.proc.pid, signal.SIGSTOP)
  stopped = time.time()
  second = Process('host-b', [*LONG, *steps, f'--workdir={url}'], env)
  _until(lambda: second.first('resumed from'))
  time.sleep(2.0)
  os.kill(first.proc.pid, signal.SIGCONT)
  woken = time.time()
  first_rc = first.wait()
  exited = time.time()
  second_rc = second.wait()
  rows = lambda path: [
    {k: v for k, v in r.items() if k != 'steps_per_s'}
    for r in io.read_jsonl(f'{path}/metrics.jsonl')
  ]
  steps_logged = [r['step'] for r in rows(url)]
  members = lambda path: io.read_json(f'{path}/results.json')['members']
  return {
    'stopped_s': round(woken - stopped, 1),
    'first_exit': first_rc,
    'first_exit_s_after_sigcont': round(exited - woken, 1),
    'first_stderr': first.err.strip().splitlines(),
    'first_lines_after_sigcont': [line for t, line in first.lines if t >= woken],
    'second_exit': second_rc,
    'metrics_lines': len(steps_logged),
    'steps_once_in_order': steps_logged == sorted(set(steps_logged)),
    'metrics_equal_uninterrupted': rows(url) == rows(local),
    'results_equal_uninterrupted': members(url) == members(local),
    'lease_objects': [n for n in store.listdir(url) if n.startswith('lease.')],
  }


def lease_requests(env, name, lease_s, renewals=8):
  """Requests a holder makes per renewal, and a renewal's time, on this server."""
  url = f's3://{stores.BUCKET}/{name}'
  counted = []
  original = {f: getattr(store, f) for f in ('read_bytes', 'replace', 'listdir', 'put', 'create')}
  for f, call in original.items():
    setattr(store, f, lambda *a, _f=f, _c=call, **k: (counted.append(_f), _c(*a, **k))[1])
  try:
    with lease_lib.Lease(url, lease_s=3600) as lease:
      counted.clear()
      times = []
      for _ in range(renewals):
        t = time.perf_counter()
        lease.renew()
        times.append(time.perf_counter() - t)
      per_renewal = len(counted) / renewals
  finally:
    for f, call in original.items():
      setattr(store, f, call)
  rows = []
  for length in (15, 30, 60, 120, 300):
    rows.append(
      {
        'lease_s': length,
        'renewal_every_s': length / 4,
        'requests_per_hour': round(per_renewal * 3600 / (length / 4)),
        'restart_waits_at_most_s': length,
        'stall_tolerated_s': length * 3 / 4,
      }
    )
  return {
    'requests_per_renewal': per_renewal,
    'renewal_ms_median': round(1000 * sorted(times)[len(times) // 2], 1),
    'renewal_ms_max': round(1000 * max(times), 1),
    'waiter_requests_per_poll': 2,
    'poll_s': lease_lib.POLL_S,
    'table': rows,
  }


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--lease', type=float, default=lease_lib.LEASE_S)
  parser.add_argument('--out', default='preemption.json')
  parser.add_argument('--only', default='requests,restart,sweep,fencing')
  args = parser.parse_args()
  env = {} if args.lease == lease_lib.LEASE_S else {'POSENC_LEASE_S': str(args.lease)}
  out = {'lease_s': args.lease, 'load_before': os.getloadavg()}
  tag = f'{os.getpid()}-{time.monotonic_ns()}'
  with stores.s3_server_checking_keys() as server:
    env = {**server, **env}
    for part in args.only.split(','):
      t = time.time()
      if part == 'requests':
        out[part] = lease_requests(env, f'requests-{tag}', args.lease)
      elif part == 'restart':
        out[part] = restart(env, f'restart-{tag}')
      elif part == 'sweep':
        out[part] = sweep(env, f'sweep-{tag}')
      elif part == 'fencing':
        out[part] = fencing(env, f'fencing-{tag}', args.lease)
      print(part, f'({time.time() - t:.0f} s):', json.dumps(out[part], indent=1), flush=True)
  out['load_after'] = os.getloadavg()
  with open(args.out, 'w') as f:
    json.dump(out, f, indent=1)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
