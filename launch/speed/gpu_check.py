"""One prepared check of a GPU machine: `python -m launch.speed gpu_check --out=DIR`.

Runs, each as a subprocess under its own time limit (so that one slow step cannot eat the
others' time), from the source tree this module is in and with the machine's own JAX:

  smoke            every encoding of the study trains (P = 1) and evaluates: `launch.sweep`
                   over the 13 cells of parity_check at the tiny size
  train_float32    `launch.speed train` at P = 1, 30, 120: first update, floor, steady state
  train_bfloat16   the same in bfloat16
  train_cudnn      bfloat16 with cuDNN's flash attention, where the cell's encoding runs
                   through `jax.nn.dot_product_attention` (not NDR's geometric attention)
  eval             `launch.speed eval` at lengths 41, 100, 250, 500 against the floor
  main_job         the README's main job, `launch.sweep --config=experiments/quickstart.py`
  main_job_warm    the main job again in a fresh directory, its programs in the cache now

The limits add up to at most 7 minutes (`--limits=NAME=SECONDS,...` changes them). The
steps share one compilation cache, empty at the start (DIR/jax_cache, removed at the end).
Written after every step, also when steps fail or time out (each says which):
DIR/gpu_check.json (machine, versions, each step's command, limit, status, seconds, quoted
lines, output tail and the JSON its command wrote) and DIR/gpu_check.md (the same as a
table); each step's whole output is DIR/logs/NAME.log.

`--size=tiny` runs the same steps at a tiny size in seconds on a CPU (what the tests run):
the smoke on one encoding, speed train on a tiny cell at P = 1; the steps that have no tiny
size are listed as skipped.

Example:
  PYTHONPATH=. python -m launch.speed gpu_check --out=gpu_check
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from absl import flags

from launch import cli
from launch import common
from posenc import encodings
from posenc.storage import io
from posenc.storage import store

_OUT = flags.DEFINE_string('out', 'gpu_check', 'Directory of the results and the logs.')
_SIZE = flags.DEFINE_enum('size', 'full', ['full', 'tiny'], 'full: the GPU check; tiny: seconds.')
_STEPS = flags.DEFINE_list('steps', [], 'Only these steps (default: all).')
_LIMITS = flags.DEFINE_list('limits', [], 'NAME=SECONDS,...: other time limits.')

# The whole check stays within this on one GPU: the sum of the full limits.
BUDGET_S = 420
# The cell `launch.speed train` times by default, and whether cuDNN applies to it.
TRAIN_CELL_ENCODING = 'randomized_relative'
SMOKE = [
  'launch.sweep',
  '--config=experiments/rpe_table1.py:tiny',
  '--tasks=parity_check',
  '--workdir={out}/smoke',
  '--config.seeds=[0]',
  '--config.train.steps=20',
  '--config.train.log_every=10',
  '--config.train.bucket_size=8',
  '--config.eval.lengths=[12]',
  '--noreport',
]
TRAIN = ['launch.speed', 'train', '--populations=1,30,120', '--steps=50']
TINY_TRAIN = [
  'launch.speed',
  'train',
  '--cell=task=parity_check,encoding=none,tiny',
  '--populations=1',
  '--steps=2',
  '--nofloor',
  '--skip_first_update',
]
MAIN_JOB = ['launch.sweep', '--config=experiments/quickstart.py']


def _sweep_lines(lines: list[str]) -> list[str]:
  """A sweep's last progress line, its summary, and Table 1's row (the main job's)."""
  last = lambda prefix: [l for l in lines if l.startswith(prefix)][-1:]
  table1 = [l for l in lines if l.startswith('| R |')][:1]
  errors = [l for l in lines if l.startswith('error')]
  return last('sweep: ') + last('sweep shard ') + table1 + errors


def _speed_lines(lines: list[str]) -> list[str]:
  """A speed measurement's figures: first update, floor, each population or length."""
  pattern = r'^(time to first update|dense-product floor|P=|length |total|error)'
  return [l for l in lines if re.match(pattern, l)][-10:]


# What a step's table row quotes of its output, by the kind of command.
QUOTED = {'sweep': _sweep_lines, 'speed': _speed_lines}

# Each step: its command after `python -m` ({out}: the output directory; `--out` added for
# speed measurements), the same at the tiny size (None: not run there), its limit in seconds,
# which lines it quotes, and whether it needs the cell's attention in
# `jax.nn.dot_product_attention` (cuDNN's flash attention replaces that call).
STEPS: dict[str, dict[str, Any]] = {
  'smoke': {
    'full': SMOKE,
    'tiny': [*SMOKE, '--encodings=none', '--config.train.steps=5'],
    'limit_s': 75,
    'quoted': 'sweep',
  },
  'train_float32': {'full': TRAIN, 'tiny': TINY_TRAIN, 'limit_s': 105, 'quoted': 'speed'},
  'train_bfloat16': {
    'full': [*TRAIN, '--dtype=bfloat16', '--skip_first_update', '--nofloor'],
    'tiny': None,
    'limit_s': 45,
    'quoted': 'speed',
  },
  'train_cudnn': {
    'full': [
      *TRAIN,
      '--dtype=bfloat16',
      '--fused_implementation=cudnn',
      '--skip_first_update',
      '--nofloor',
    ],
    'tiny': None,
    'limit_s': 45,
    'quoted': 'speed',
    'fused_attention': True,
  },
  'eval': {
    'full': ['launch.speed', 'eval'],
    'tiny': None,
    'limit_s': 50,
    'quoted': 'speed',
  },
  'main_job': {
    'full': [*MAIN_JOB, '--workdir={out}/quickstart'],
    'tiny': None,
    'limit_s': 55,
    'quoted': 'sweep',
  },
  'main_job_warm': {
    'full': [*MAIN_JOB, '--workdir={out}/quickstart_warm'],
    'tiny': None,
    'limit_s': 25,
    'quoted': 'sweep',
  },
}
PACKAGES = (
  'jax',
  'jaxlib',
  'jax-cuda12-plugin',
  'jax-cuda13-plugin',
  'flax',
  'optax',
  'orbax-checkpoint',
  'chex',
  'numpy',
)


def main(argv):
  cli.run(_main, argv)


def _main(argv):
  cli.flags_only(argv)
  names = _STEPS.value or list(STEPS)
  unknown = [n for n in names if n not in STEPS]
  if unknown:
    common.fail(f'--steps: unknown step {unknown[0]!r}; valid: {", ".join(STEPS)}')
  limits = _limits(_LIMITS.value)
  out = _OUT.value
  if store.is_url(out):
    common.fail(f'--out={out}: give a local directory (the steps write their logs there)')
  common.make_dir(out, '--out')
  os.makedirs(os.path.join(out, 'logs'), exist_ok=True)
  cache = os.path.join(out, 'jax_cache')
  shutil.rmtree(cache, ignore_errors=True)  # empty: the figures of a first run
  report = {
    'started': datetime.datetime.now().isoformat(timespec='seconds'),
    'size': _SIZE.value,
    'machine': machine(),
    'steps': [],
  }
  start = time.monotonic()
  try:
    for name in STEPS:
      if name in names:
        row = run_step(name, STEPS[name], out, cache, limits.get(name))
        report['steps'].append(row)
        report['elapsed_s'] = round(time.monotonic() - start, 1)
        write(report, out)
        print(f'{name}: {row["status"]}' + (f' after {row["seconds"]} s' if row['seconds'] else ''))
  finally:
    shutil.rmtree(cache, ignore_errors=True)
  print(f'wrote {os.path.join(out, "gpu_check.json")} and {os.path.join(out, "gpu_check.md")}')


def _limits(values: list[str]) -> dict[str, float]:
  """`NAME=SECONDS` pairs as a dict, or one line naming the bad one."""
  out = {}
  for value in values:
    name, _, seconds = value.partition('=')
    try:
      out[name] = float(seconds)
    except ValueError:
      out[name] = -1.0
    if name not in STEPS:
      common.fail(f'--limits={value}: unknown step {name!r}; valid: {", ".join(STEPS)}')
    if not out[name] > 0:
      common.fail(f'--limits={value}: give NAME=SECONDS with SECONDS > 0')
  return out


def machine() -> dict[str, Any]:
  """The GPUs (nvidia-smi, without starting JAX on them), the CPU count, Python and the
  versions of the installed packages that decide speed."""
  gpus = None
  if shutil.which('nvidia-smi'):
    query = ['nvidia-smi', '--query-gpu=name,memory.total,driver_version', '--format=csv,noheader']
    try:
      gpus = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
      gpus = f'nvidia-smi failed: {e}'
  versions = {}
  for package in PACKAGES:
    try:
      versions[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      pass
  return {
    'gpus': gpus,
    'cpu_count': os.cpu_count(),
    'python': platform.python_version(),
    'versions': versions,
  }


def run_step(
  name: str, step: dict[str, Any], out: str, cache: str, limit: float | None
) -> dict[str, Any]:
  """Runs one step under its time limit (its process group killed at the limit); returns
  its row: status ok | failed | timed out | skipped, seconds, quoted lines, output tail and
  the JSON its command wrote."""
  limit_s = limit or step['limit_s']
  args = step[_SIZE.value]
  row = {'name': name, 'limit_s': limit_s, 'status': 'skipped', 'seconds': None}
  if args is None:
    return {**row, 'reason': f'no {_SIZE.value} size'}
  if step.get('fused_attention') and encodings.get(TRAIN_CELL_ENCODING).kind == 'geometric':
    return {**row, 'reason': f'{TRAIN_CELL_ENCODING} does not run dot_product_attention'}
  args = [a.format(out=out) for a in args]
  figures = None
  if args[0] == 'launch.speed':
    figures = os.path.join(out, f'{name}.json')
    args.append(f'--out={figures}')
  command = [sys.executable, '-m', *args]
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = {
    **os.environ,
    'PYTHONPATH': os.pathsep.join([root, *filter(None, [os.environ.get('PYTHONPATH')])]),
    'JAX_COMPILATION_CACHE_DIR': cache,
  }
  log = os.path.join(out, 'logs', f'{name}.log')
  t0 = time.monotonic()
  with open(log, 'w') as f:
    proc = subprocess.Popen(
      command, cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
      returncode = proc.wait(timeout=limit_s)
      status = 'ok' if returncode == 0 else 'failed'
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)  # the step and anything it started
      returncode = proc.wait()
      status = 'timed out'
  with open(log, errors='replace') as f:
    output = f.read()
  quoted = QUOTED[step['quoted']](output.splitlines())
  row.update(
    command=' '.join(['python', '-m', *args]),
    status=status,
    returncode=returncode,
    seconds=round(time.monotonic() - t0, 1),
    lines=quoted,
    output_tail=output[-4000:],
    log=log,
  )
  if figures and os.path.exists(figures):
    with open(figures) as f:
      row['figures'] = json.load(f)
  workdir = next((a.split('=', 1)[1] for a in args if a.startswith('--workdir=')), None)
  if workdir:
    row['cells'] = cells(workdir)
  return row


def cells(workdir: str) -> dict[str, dict[str, Any]]:
  """What each finished cell of a sweep recorded: the seconds to its first update (init
  and the first compiles) and of its training, its compile seconds, its best score."""
  root = os.path.join(workdir, 'cells')
  out = {}
  for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
    path = os.path.join(root, name, 'results.json')
    if os.path.exists(path):
      results = io.read_json(path)
      out[name] = {
        'first_update_s': round(results['timing']['first_update_s'], 1),
        'train_s': round(results['timing']['train_s'], 1),
        'compile_s': round(results['compiled_programs'].get('compile_s', 0.0), 1),
        'score': max(
          (m['score'] for m in results['members'] if m['score'] is not None), default=None
        ),
      }
  return out


def write(report: dict[str, Any], out: str) -> None:
  """DIR/gpu_check.json and DIR/gpu_check.md, each written whole."""
  io.write_json_atomic(os.path.join(out, 'gpu_check.json'), report)
  io.write_text_atomic(os.path.join(out, 'gpu_check.md'), markdown(report))


def markdown(report: dict[str, Any]) -> str:
  """The report as a page: the machine, then one table row per step."""
  m = report['machine']
  versions = ', '.join(f'{k} {v}' for k, v in m['versions'].items())
  ran = [r for r in report['steps'] if r['status'] != 'skipped']
  lines = [
    f'# GPU check ({report["size"]} size), {report["started"]}',
    '',
    f'Machine: {m["gpus"] or "no NVIDIA GPU found (nvidia-smi)"}; {m["cpu_count"]} CPU cores; '
    f'Python {m["python"]}; {versions}.',
    '',
    f'{len(ran)} steps ran in {report.get("elapsed_s", 0)} s, their limits adding up to '
    f'{sum(r["limit_s"] for r in ran):.0f} s; '
    + (
      ', '.join(f'{r["name"]} {r["status"]}' for r in ran if r['status'] != 'ok')
      or 'every one finished'
    )
    + '.',
    '',
    '| step | limit (s) | status | seconds | command | what it printed |',
    '|---|---|---|---|---|---|',
  ]
  for r in report['steps']:
    shown = '<br>'.join(l.replace('|', '\\|') for l in r.get('lines', [])) or r.get('reason', '')
    command = f'`{r["command"]}`' if 'command' in r else ''
    seconds = '' if r['seconds'] is None else r['seconds']
    lines.append(
      f'| {r["name"]} | {r["limit_s"]:g} | {r["status"]} | {seconds} | {command} | {shown} |'
    )
  for r in report['steps']:
    if r.get('cells'):
      lines += [
        '',
        f'{r["name"]}: the cells that finished',
        '',
        '| cell | first update (s) | training (s) | compiling (s) | best score |',
        '|---|---|---|---|---|',
      ]
      lines += [
        f'| {name} | {c["first_update_s"]} | {c["train_s"]} | {c["compile_s"]} | '
        f'{"-" if c["score"] is None else round(100 * c["score"], 1)} |'
        for name, c in r['cells'].items()
      ]
  return '\n'.join(lines) + '\n'
