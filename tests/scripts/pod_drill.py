"""A pod drill: a small sweep run by several hosts that share only a bucket, with faults.

  python tests/scripts/pod_drill.py [--hosts=3] [--rounds=1] [--kills=3] [--stops=3]
      [--fault_rate=0.03] [--lease=20] [--gap=25] [--seed=0] [--json=FILE]

Each round starts moto's S3 server, and in front of it an HTTP proxy (stores.FaultProxy)
that forwards every request and can hold a response back (3 s, or past the client's read
timeout, `store.READ_S`) or lose it (the request lands, the connection is closed
unanswered), at `--fault_rate` of the requests, never twice the same request within a
minute (the client's second sending passes). `--hosts` hosts (`tests/scripts/on_host.py`: each its own host name) each run
`launch.sweep` of experiments/sweep_tiny.py (40 steps, a checkpoint every 10) into one
`s3://` directory through the proxy, again whenever it ends unfinished (exit 75: cells
another host holds) or killed, until a run of it ends with every cell complete. Meanwhile
the drill kills a host's run with SIGKILL up to `--kills` times and stops one with SIGSTOP
past its lease (`--lease` seconds, `POSENC_LEASE_S`) up to `--stops` times, at random
moments `--gap` / 5 to `--gap` seconds apart, while any host still runs.

Then it checks:
- the sweep's report (`launch.sweep --report`) equals, file for file and byte for byte, the
  report of the same sweep run once on a local disk without faults;
- every exit status is one the entry points document: 0 (done), 75 (cells held by others,
  or the lease lost) and -9 (the drill's own kills); anything else (1 a failed cell, 2 a
  store failure, a traceback) is counted as unexpected;
- no holder wrote after its takeover: the proxy logs who sent each request (every run its
  own access key), so for each cell directory it knows when each `lease.N` was created and
  by whom; a write (PUT, POST, DELETE answered 2xx) under the directory by a process after
  another took the lease over from it is a write after takeover.

It prints one line per round (faults injected of each kind, host runs, how many times a
cell's lease passed to another run, exit statuses, writes after takeover, report equal) and a total, and with --json writes them. Exit status 0 when
every round holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, ROOT)

import stores  # noqa: E402
from posenc.storage import store  # noqa: E402

CONFIG = [
  '--config=experiments/sweep_tiny.py',
  '--config.train.steps=40',
  '--config.checkpoint_every=10',
  '--config.train.log_every=5',
]
# What an entry point's exit status may be in this drill (launch/common.py): done, cells
# held by another host or the lease lost, and the drill's own SIGKILL.
DOCUMENTED = {0, 75, -signal.SIGKILL}
WRITES = {'PUT', 'POST', 'DELETE'}


def writes_after_takeover(log: list[dict], prefix: str) -> tuple[list[dict], int]:
  """(the writes, 2xx PUT, POST, DELETE, under a cell's directory by a process after another
  created a newer lease there, having held an older one itself; how many times a cell's
  lease passed from one run to another)."""
  cells = collections.defaultdict(list)
  pattern = re.compile(re.escape(prefix) + r'cells/([^/]+)/(.*)')
  for row in sorted(log, key=lambda r: r['t']):
    match = pattern.match(row['path'])
    if match and row['method'] in WRITES and 200 <= row['status'] < 300:
      cells[match.group(1)].append((row, match.group(2)))
  stray, handovers = [], 0
  for rows in cells.values():
    holders: list[str] = []  # who created each lease, in order
    for row, name in rows:
      if re.fullmatch(r'lease\.\d+', name) and row['create']:
        handovers += bool(holders) and holders[-1] != row['who']
        holders.append(row['who'])
        continue
      if row['who'] in holders and holders[-1] != row['who']:
        stray.append(row)
  return stray, handovers


def _files(directory: str) -> dict[str, bytes]:
  out = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        out[os.path.relpath(path, directory)] = f.read()
  return out


def clean_report(scratch: str, env: dict[str, str]) -> dict[str, bytes]:
  """The report of the sweep run once on a local disk, without faults."""
  workdir = os.path.join(scratch, 'clean')
  for extra in ([], ['--report']):
    subprocess.run(
      [sys.executable, '-m', 'launch.sweep', *CONFIG, f'--workdir={workdir}', *extra],
      cwd=ROOT,
      env=env,
      check=True,
      capture_output=True,
    )
  return _files(os.path.join(workdir, 'report'))


class Hosts:
  """The hosts' runs of the sweep, each rerun until one ends with every cell complete."""

  def __init__(self, count: int, url: str, env: dict[str, str], lease: float, logs: str):
    self.url, self.env, self.lease, self.logs = url, env, lease, logs
    self.lock = threading.Lock()
    self.running: dict[int, subprocess.Popen] = {}
    self.statuses: list[int] = []
    self.unexpected: list[str] = []  # the last line of each run that ended otherwise
    self.runs = 0
    self.threads = [threading.Thread(target=self._host, args=(h,)) for h in range(count)]

  def start(self) -> None:
    for thread in self.threads:
      thread.start()

  def join(self, timeout: float) -> bool:
    end = time.time() + timeout
    for thread in self.threads:
      thread.join(max(0.0, end - time.time()))
    return not any(t.is_alive() for t in self.threads)

  def _host(self, h: int) -> None:
    for attempt in range(100):
      key = f'H{h}R{attempt}'  # every run its own access key: the proxy's log names it
      env = {**self.env, 'AWS_ACCESS_KEY_ID': key, 'POSENC_LEASE_S': str(self.lease)}
      with open(os.path.join(self.logs, f'{key}.log'), 'w') as out:
        proc = subprocess.Popen(
          [
            sys.executable,
            os.path.join(TESTS, 'scripts', 'on_host.py'),
            f'host{h}',
            '-m',
            'launch.sweep',
            *CONFIG,
            f'--workdir={self.url}',
          ],
          cwd=ROOT,
          env=env,
          stdout=out,
          stderr=subprocess.STDOUT,
        )
        with self.lock:
          self.running[h] = proc
          self.runs += 1
        status = proc.wait()
        with self.lock:
          self.running.pop(h, None)
          self.statuses.append(status)
      if status not in DOCUMENTED:
        with open(os.path.join(self.logs, f'{key}.log')) as f:
          lines = f.read().strip().splitlines()
        self.unexpected.append(f'{key} exit {status}: {lines[-1] if lines else ""}')
      if status == 0:
        return
      time.sleep(1.0)

  def victim(self, rng: random.Random, started_before: float) -> subprocess.Popen | None:
    with self.lock:
      live = [p for p in self.running.values() if p.poll() is None]
    return rng.choice(live) if live else None


def drill_round(args, index: int, scratch: str, clean: dict[str, bytes]) -> dict:
  rng = random.Random(args.seed + index)
  logs = os.path.join(scratch, f'round{index}')
  os.makedirs(logs)
  with stores.s3_server() as env:
    upstream = env['AWS_ENDPOINT_URL'].split('//')[1].split(':')
    prefix = f'/{stores.BUCKET}/drill{index}/'
    proxy = stores.FaultProxy(
      (upstream[0], int(upstream[1])), prefix, args.fault_rate, args.seed + index
    )
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    url = f's3://{stores.BUCKET}/drill{index}'
    through = {**os.environ, **env, 'AWS_ENDPOINT_URL': f'http://127.0.0.1:{proxy.server_port}'}
    through['JAX_COMPILATION_CACHE_DIR'] = os.path.join(scratch, 'jax')
    hosts = Hosts(args.hosts, url, through, args.lease, logs)
    start = time.time()
    hosts.start()
    kills = stops = 0
    plan = ['kill'] * args.kills + ['stop'] * args.stops
    rng.shuffle(plan)
    for fault in plan:
      time.sleep(rng.uniform(args.gap / 5, args.gap))
      proc = hosts.victim(rng, time.time())
      if proc is None:
        break
      if fault == 'kill':
        proc.send_signal(signal.SIGKILL)
        kills += 1
      else:
        proc.send_signal(signal.SIGSTOP)
        stops += 1
        time.sleep(args.lease + 5)  # past its lease: another host may take its cell over
        proc.send_signal(signal.SIGCONT)
    finished = hosts.join(args.timeout - (time.time() - start))
    report = subprocess.run(
      [sys.executable, '-m', 'launch.sweep', *CONFIG, f'--workdir={url}', '--report'],
      cwd=ROOT,
      env={**os.environ, **env, 'JAX_COMPILATION_CACHE_DIR': through['JAX_COMPILATION_CACHE_DIR']},
      capture_output=True,
      text=True,
    )
    local = os.path.join(scratch, f'report{index}')
    store.download_tree(f'{url}/report', local)
    got = _files(local)
    proxy.shutdown()
  stray, handovers = writes_after_takeover(proxy.log, prefix)
  statuses = collections.Counter(hosts.statuses)
  return {
    'round': index,
    'seconds': round(time.time() - start, 1),
    'finished': finished,
    'kills': kills,
    'stops': stops,
    'slow_responses': proxy.faults['slow'],
    'held_past_timeout': proxy.faults['timeout'],
    'lost_responses': proxy.faults['lost'],
    'requests': len(proxy.log),
    'runs': hosts.runs,
    'handovers': handovers,
    'statuses': {str(k): v for k, v in sorted(statuses.items())},
    'unexpected_statuses': sum(v for k, v in statuses.items() if k not in DOCUMENTED),
    'unexpected': hosts.unexpected,
    'writes_after_takeover': len(stray),
    'stray': stray[:10],
    'report_equal': report.returncode == 0 and got == clean,
    'report_files': sorted(got),
  }


def main() -> int:
  import logging  # pylint: disable=g-import-not-at-top

  logging.getLogger('werkzeug').setLevel(logging.ERROR)  # moto's server: a line a request
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--hosts', type=int, default=3)
  parser.add_argument('--rounds', type=int, default=1)
  parser.add_argument('--kills', type=int, default=3)
  parser.add_argument('--stops', type=int, default=3)
  parser.add_argument('--fault_rate', type=float, default=0.03)
  parser.add_argument('--lease', type=float, default=20.0)
  parser.add_argument('--gap', type=float, default=25.0)  # most seconds between faults
  parser.add_argument('--timeout', type=float, default=1800.0)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--json', default='')
  args = parser.parse_args()
  scratch = tempfile.mkdtemp(prefix='pod-drill-')
  try:
    clean = clean_report(scratch, dict(os.environ))
    rows = []
    for index in range(args.rounds):
      row = drill_round(args, index, scratch, clean)
      rows.append(row)
      for line in row['unexpected']:
        print(f'  {line}')
      print(
        f'round {index}: {row["seconds"]} s, {row["kills"]} kills, {row["stops"]} stops past '
        f'the lease, {row["slow_responses"]} slow responses, {row["held_past_timeout"]} held '
        f'past the read timeout, {row["lost_responses"]} lost responses ({row["requests"]} '
        f'requests); {row["runs"]} host runs, {row["handovers"]} cell leases passed to another '
        f'run, exit statuses {row["statuses"]}, '
        f'{row["unexpected_statuses"]} unexpected; {row["writes_after_takeover"]} writes after '
        f'a takeover; report equal: {row["report_equal"]}',
        flush=True,
      )
    total = {
      k: sum(r[k] for r in rows)
      for k in (
        'kills',
        'stops',
        'slow_responses',
        'held_past_timeout',
        'lost_responses',
        'requests',
        'runs',
        'handovers',
        'unexpected_statuses',
        'writes_after_takeover',
      )
    }
    total['reports_equal'] = sum(r['report_equal'] for r in rows)
    total['rounds'] = len(rows)
    print(f'total: {json.dumps(total)}')
    if args.json:
      with open(args.json, 'w') as f:
        json.dump({'rounds': rows, 'total': total}, f, indent=1)
    ok = all(
      r['finished']
      and r['report_equal']
      and not r['unexpected_statuses']
      and not r['writes_after_takeover']
      for r in rows
    )
    return 0 if ok else 1
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == '__main__':
  sys.exit(main())
