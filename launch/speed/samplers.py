"""Throughput of the task samplers: examples/s per task and length, after compilation.

    python -m launch.speed samplers                       # all tasks, lengths 40 and 500
    python -m launch.speed samplers --tasks=parity_check --lengths=40 --repeats=5
    python -m launch.speed samplers --tasks=addition,sorting --digits=20

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
Their rows go to a second table and to `arithmetic_results` in the JSON. The timing is
`posenc.speed.samplers`.
"""

from __future__ import annotations

from absl import flags
import jax

from launch import common
from launch.speed import opening
from posenc import suggest
from posenc.speed import samplers
import tasks
from tasks import arithmetic

_STUDY = [name for name in tasks.NAMES if name not in arithmetic.TASKS]
_VALID = _STUDY + list(arithmetic.TASKS)

_TASKS = flags.DEFINE_string('tasks', ','.join(_VALID), 'Tasks, comma-separated.')
_LENGTHS = flags.DEFINE_string('lengths', '40,500', 'Input lengths, comma-separated.')
_DIGITS = flags.DEFINE_string(
  'digits', '20,100', 'Grid sizes n of the arithmetic tasks, comma-separated.'
)
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 512, 'Examples per call.')
_REPEATS = flags.DEFINE_integer('repeats', 7, 'Timed repetitions (median).')
_CALLS = flags.DEFINE_integer('calls', 4, 'Calls per repetition.')
_OPENING = opening.Opening('samplers')


def _positive_ints(text: str, flag: str) -> list[int]:
  try:
    values = [int(x) for x in text.split(',')]
  except ValueError:
    values = []
  if not values or min(values) < 1:
    common.fail(f'{flag}={text!r} must be comma-separated positive integers')
  return values


def main(argv: list[str]) -> None:
  common.run(_main, argv)


def _main(argv: list[str]) -> None:
  _OPENING.start(argv)
  for flag in (_BATCH_SIZE, _REPEATS, _CALLS):
    common.at_least(flag.value, f'--{flag.name}')
  names = _TASKS.value.split(',')
  for name in names:
    if name not in _VALID:
      common.fail(
        f'unknown task {name!r}{suggest.did_you_mean(name, _VALID)}; valid tasks: {", ".join(_VALID)}'
      )
  lengths = _positive_ints(_LENGTHS.value, '--lengths')
  grid_sizes = _positive_ints(_DIGITS.value, '--digits')
  arithmetic_names = [name for name in names if name in arithmetic.TASKS]
  names = [name for name in names if name not in arithmetic.TASKS]
  batch, repeats, calls = _BATCH_SIZE.value, _REPEATS.value, _CALLS.value
  rows = []
  if names:
    print(
      f'{"task":30s} {"L":>4s} {"exact ex/s":>12s} {"padded ex/s":>12s} '
      f'{"best ex/s":>12s} {"target":>8s} {"steal%":>6s}'
    )
  for name in names:
    for length in lengths:
      row = samplers.time_task(name, length, batch, repeats, calls)
      rows.append(row)
      flag = '' if row['meets_target'] else '  < target'
      steal = row['steal_percent']
      steal_s = '-' if steal is None else f'{steal:.0f}'
      print(
        f'{name:30s} {length:4d} {row["exact_examples_per_s"]:12,d} '
        f'{row["padded_examples_per_s"]:12,d} {row["best_examples_per_s"]:12,d} '
        f'{row["target_examples_per_s"]:8,d} {steal_s:>6s}{flag}',
        flush=True,
      )
  arithmetic_rows = []
  if arithmetic_names:
    print(
      f'{"arithmetic task":30s} {"n":>4s} {"train ex/s":>12s} {"cell ex/s":>12s} '
      f'{"best ex/s":>12s} {"target":>8s} {"steal%":>6s}'
    )
  for name in arithmetic_names:
    for n in grid_sizes:
      row = samplers.time_arithmetic(name, n, batch, repeats, calls)
      arithmetic_rows.append(row)
      flag = '  < target' if row['meets_target'] is False else ''
      steal, target = row['steal_percent'], row['target_examples_per_s']
      steal_s = '-' if steal is None else f'{steal:.0f}'
      target_s = '-' if target is None else f'{target:,d}'
      print(
        f'{name:30s} {n:4d} {row["train_examples_per_s"]:12,d} '
        f'{row["cell_examples_per_s"]:12,d} {row["best_examples_per_s"]:12,d} '
        f'{target_s:>8s} {steal_s:>6s}{flag}',
        flush=True,
      )
  result = {
    'backend': jax.default_backend(),
    'devices': len(jax.devices()),
    'jax_version': jax.__version__,
    'results': rows,
    'arithmetic_results': arithmetic_rows,
  }
  _OPENING.finish(result)
