"""What a work directory on S3 costs a run, against a local one: the whole `launch.train`
command, timed, on a local directory and on moto's S3 server with key checks
(tests/stores.py), for each source tree given (e.g. before and after a change), runs
alternating so that a loaded machine loads each alike. The figures of docs/scaling.md.

  python tests/scripts/store_timings.py --trees=/tmp/before,. --steps=80,2000 --repeats=3

Prints one line per run and the medians, and writes them as JSON (--out).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, 'tests')]

import stores  # noqa: E402

CONFIG = '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_rotary,tiny'


def run(tree, steps, workdir, env):
  """Seconds the whole command took, in `tree` (its code first on the path)."""
  start = time.perf_counter()
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.train',
      CONFIG,
      f'--config.train.steps={steps}',
      '--config.train.log_every=5',
      f'--workdir={workdir}',
    ],
    cwd=tree,
    env={**os.environ, **env, 'PYTHONPATH': tree},
    capture_output=True,
    text=True,
  )
  seconds = time.perf_counter() - start
  if proc.returncode != 0:
    raise RuntimeError(f'{tree} {workdir}: {proc.stderr[-2000:]}')
  return seconds


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--trees', default='.')
  parser.add_argument('--steps', default='80,2000')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--out', default='store_timings.json')
  args = parser.parse_args()
  trees = [os.path.abspath(t) for t in args.trees.split(',')]
  results = {'load_before': os.getloadavg(), 'runs': []}
  local = tempfile.mkdtemp(prefix='posenc-store-timings-')
  with stores.s3_server_checking_keys() as env:
    for tree in trees:  # Warm JAX's compilation cache: no run below compiles.
      run(tree, 20, os.path.join(local, f'warm-{len(results["runs"])}-{time.monotonic_ns()}'), env)
    for steps in map(int, args.steps.split(',')):
      for repeat in range(args.repeats):
        for tree in trees:
          for where in ('local', 's3'):
            name = f'{os.path.basename(tree)}-{steps}-{repeat}-{where}-{time.monotonic_ns()}'
            workdir = (
              os.path.join(local, name) if where == 'local' else f's3://{stores.BUCKET}/{name}'
            )
            seconds = run(tree, steps, workdir, env)
            row = {'tree': tree, 'steps': steps, 'where': where, 'seconds': round(seconds, 2)}
            results['runs'].append(row)
            print(json.dumps({**row, 'load': os.getloadavg()[0]}), flush=True)
  medians = {}
  for row in results['runs']:
    key = f'{row["tree"]} {row["steps"]} steps {row["where"]}'
    medians.setdefault(key, []).append(row['seconds'])
  results['medians_s'] = {k: round(statistics.median(v), 2) for k, v in medians.items()}
  results['load_after'] = os.getloadavg()
  for key, value in results['medians_s'].items():
    print(f'{key}: {value} s (median of {len(medians[key])})')
  with open(args.out, 'w') as f:
    json.dump(results, f, indent=1)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
