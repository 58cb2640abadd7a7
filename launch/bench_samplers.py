"""Throughput of the task samplers: examples/s per task and length, after compilation.

    python -m launch.bench samplers                       # all tasks, lengths 40 and 500
    python -m launch.bench samplers --tasks=parity_check --lengths=40 --repeats=5
    python -m launch.bench samplers --tasks=addition,sorting --digits=20

For each task of the study and length it times `sample` (exact shape) and `sample_padded`
with max_length = length (the program training uses; same code path), batch 512 by default,
each call followed by `block_until_ready`, and reports the median over repetitions (the
target check uses the lower median of the two) and the best repetition of either. This VM's
throughput varies up to 2x with the hypervisor's steal time, so each row also gives the
steal share of the CPU time while it ran. Prints a table and writes it as JSON (`--out`).

The arithmetic tasks (`tasks.arithmetic`) are timed the same way for each grid size n of
`--digits` (operand digits; for sorting the count and digits, for bitwise_or the vector
lengths), alternating `sample_train` over the grid [1..n]**2 (the training program, which
the target check uses) with `sample` at the largest cell (n, n) in the same widths (the
evaluation program). Sorting with n above its 64 index symbols is timed with n symbols.
Their rows go to a second table and to `arithmetic_results` in the JSON.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Sequence

import jax

from launch import common
from posenc import io
import tasks
from tasks import arithmetic

# Examples/s at L = 500 that the samplers are held to (the fast tasks and the others).
TARGETS = {'fast': 200_000, 'other': 50_000}
# Examples/s of `sample_train` that arithmetic samplers are held to, by (task, n).
ARITHMETIC_TARGETS = {('addition', 20): 100_000}
_FAST = (
  'even_pairs',
  'parity_check',
  'cycle_navigation',
  'reverse_string',
  'duplicate_string',
  'missing_duplicate_string',
  'odds_first',
  'bucket_sort',
)


def examples_per_second(
  fns: dict, batch_size: int, repeats: int, calls: int, warmup_s: float = 0.5
) -> dict:
  """(median, best) examples/s of each `fn(key)` in `fns`, after compilation and warm-up.

  The functions are timed in alternating rounds (a, b, a, b, ...), so that whichever is
  measured first does not carry the drift of the machine alone (measured here: the first
  function timed after a compile ran up to a third slower than the same program timed
  next: bucket_sort at L = 500, 152,840 vs 227,181 examples/s).
  """
  for i, fn in enumerate(fns.values()):  # the first call compiles
    jax.block_until_ready(fn(jax.random.key(10**6 + i)))
  start = time.perf_counter()
  while time.perf_counter() - start < warmup_s:  # settle allocations, caches, clocks
    for fn in fns.values():
      jax.block_until_ready(fn(jax.random.key(10**6)))
  times = {name: [] for name in fns}
  for r in range(repeats):
    for name, fn in fns.items():
      keys = [jax.random.key(1000 * r + i) for i in range(calls)]
      start = time.perf_counter()
      for key in keys:
        jax.block_until_ready(fn(key))
      times[name].append((time.perf_counter() - start) / calls)
  return {
    name: (batch_size / statistics.median(t), batch_size / min(t)) for name, t in times.items()
  }


def _positive_ints(parser, text: str, flag: str) -> list[int]:
  try:
    values = [int(x) for x in text.split(',')]
  except ValueError:
    values = []
  if not values or min(values) < 1:
    parser.error(f'{flag}={text!r} must be comma-separated positive integers')
  return values


def _arithmetic_rows(
  names: list[str], grid_sizes: list[int], batch: int, repeats: int, calls: int
) -> list[dict]:
  """Times and prints the arithmetic tasks' samplers (see the module docstring)."""
  rows = []
  print(
    f'{"arithmetic task":30s} {"n":>4s} {"train ex/s":>12s} {"cell ex/s":>12s} '
    f'{"best ex/s":>12s} {"target":>8s} {"steal%":>6s}'
  )
  for name in names:
    for n in grid_sizes:
      task = tasks.get(name)
      if isinstance(task, arithmetic.Sorting) and n > task.num_index_symbols:
        task = dataclasses.replace(task, num_index_symbols=n)
      widths = task.max_prompt(n, n), task.max_answer(n, n)
      cpu = common.cpu_times()
      rates = examples_per_second(
        {
          'train': lambda k, t=task, n=n, w=widths: t.sample_train(k, batch, n, *w),
          'cell': lambda k, t=task, n=n, w=widths: t.sample(k, batch, n, n, *w),
        },
        batch,
        repeats,
        calls,
      )
      steal = common.steal_percent(cpu, common.cpu_times())
      (train, best_train), (cell, best_cell) = rates['train'], rates['cell']
      best = max(best_train, best_cell)
      target = ARITHMETIC_TARGETS.get((name, n))
      rows.append(
        {
          'task': name,
          'n': n,
          'batch_size': batch,
          'train_examples_per_s': round(train),
          'cell_examples_per_s': round(cell),
          'best_examples_per_s': round(best),
          'target_examples_per_s': target,
          'meets_target': None if target is None else train >= target,
          'steal_percent': steal,
        }
      )
      flag = '  < target' if rows[-1]['meets_target'] is False else ''
      steal_s = '-' if steal is None else f'{steal:.0f}'
      target_s = '-' if target is None else f'{target:,d}'
      print(
        f'{name:30s} {n:4d} {train:12,.0f} {cell:12,.0f} {best:12,.0f} '
        f'{target_s:>8s} {steal_s:>6s}{flag}',
        flush=True,
      )
  return rows


def main(argv: Sequence[str]) -> None:
  study = [name for name in tasks.NAMES if name not in arithmetic.TASKS]
  valid = study + list(arithmetic.TASKS)
  parser = common.ArgumentParser(prog='python -m launch.bench samplers')
  parser.add_argument('--tasks', default=','.join(valid), help='comma-separated')
  parser.add_argument('--lengths', default='40,500', help='comma-separated input lengths')
  parser.add_argument(
    '--digits', default='20,100', help='comma-separated grid sizes n of the arithmetic tasks'
  )
  parser.add_argument('--batch_size', type=int, default=512)
  parser.add_argument('--repeats', type=int, default=7, help='timed repetitions (median)')
  parser.add_argument('--calls', type=int, default=4, help='calls per repetition')
  parser.add_argument('--out', default='bench_samplers.json')
  args = parser.parse_args(argv[1:])
  common.check_output_file(args.out, '--out')
  for flag in ('--batch_size', '--repeats', '--calls'):
    common.at_least(getattr(args, flag[2:]), flag)
  names = args.tasks.split(',')
  for name in names:
    if name not in valid:
      parser.error(f'unknown task {name!r}; valid tasks: {", ".join(valid)}')
  lengths = _positive_ints(parser, args.lengths, '--lengths')
  grid_sizes = _positive_ints(parser, args.digits, '--digits')
  arithmetic_names = [name for name in names if name in arithmetic.TASKS]
  names = [name for name in names if name not in arithmetic.TASKS]
  batch = args.batch_size
  rows = []
  if names:
    print(
      f'{"task":30s} {"L":>4s} {"exact ex/s":>12s} {"padded ex/s":>12s} '
      f'{"best ex/s":>12s} {"target":>8s} {"steal%":>6s}'
    )
  for name in names:
    task = tasks.get(name)
    for length in lengths:
      cpu = common.cpu_times()
      rates = examples_per_second(
        {
          'exact': lambda k, t=task, n=length: t.sample(k, batch, n),
          'padded': lambda k, t=task, n=length: t.sample_padded(k, batch, n, n),
        },
        batch,
        args.repeats,
        args.calls,
      )
      steal = common.steal_percent(cpu, common.cpu_times())
      (exact, best_exact), (padded, best_padded) = rates['exact'], rates['padded']
      best = max(best_exact, best_padded)
      target = TARGETS['fast' if name in _FAST else 'other']
      rows.append(
        {
          'task': name,
          'length': length,
          'batch_size': batch,
          'exact_examples_per_s': round(exact),
          'padded_examples_per_s': round(padded),
          'best_examples_per_s': round(best),
          'target_examples_per_s': target,
          'meets_target': min(exact, padded) >= target,
          'steal_percent': steal,
        }
      )
      flag = '' if rows[-1]['meets_target'] else '  < target'
      steal_s = '-' if steal is None else f'{steal:.0f}'
      print(
        f'{name:30s} {length:4d} {exact:12,.0f} {padded:12,.0f} {best:12,.0f} '
        f'{target:8,d} {steal_s:>6s}{flag}',
        flush=True,
      )
  arithmetic_rows = (
    _arithmetic_rows(arithmetic_names, grid_sizes, batch, args.repeats, args.calls)
    if arithmetic_names
    else []
  )
  result = {
    'backend': jax.default_backend(),
    'devices': len(jax.devices()),
    'jax_version': jax.__version__,
    'results': rows,
    'arithmetic_results': arithmetic_rows,
  }
  io.write_json_atomic(args.out, result)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  import sys

  main(sys.argv)
