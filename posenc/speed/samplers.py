"""Throughput of the task samplers: examples/s of one task at one length, after compilation.

A study task is timed with `sample` (exact shape) and `sample_padded` with max_length =
length (the program training uses; same code path); an arithmetic task with `sample_train`
over the grid [1..n]**2 (the training program) and `sample` at its largest cell (n, n) in
the same widths (the evaluation program). The two are timed in alternating rounds, each
call followed by `block_until_ready`; a row gives the median over repetitions of each, the
best repetition of either, the target it is held to and the hypervisor's steal share of the
CPU time while it ran (this VM's throughput varies up to 2x with it).

Example (`launch.speed samplers --tasks=parity_check --lengths=40`):
  >>> time_task('parity_check', 40, batch_size=512, repeats=7, calls=4)
  {'task': 'parity_check', 'length': 40, 'batch_size': 512, 'exact_examples_per_s': ...,
   'padded_examples_per_s': ..., 'best_examples_per_s': ..., 'target_examples_per_s':
   200000, 'meets_target': True, 'steal_percent': ...}
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import jax

from posenc.speed import machine
import tasks
from tasks import arithmetic

# Examples/s at L = 500 that the samplers are held to (the fast tasks and the others).
TARGETS = {'fast': 200_000, 'other': 50_000}
# Examples/s of `sample_train` that arithmetic samplers are held to, by (task, n).
ARITHMETIC_TARGETS = {('addition', 20): 100_000}
FAST = (
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
  fns: dict[str, Callable[[jax.Array], Any]],
  batch_size: int,
  repeats: int,
  calls: int,
  warmup_s: float = 0.5,
) -> dict[str, tuple[float, float]]:
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


def time_task(name: str, length: int, batch_size: int, repeats: int, calls: int) -> dict:
  """One study task's row at `length` (see the module docstring)."""
  task = tasks.get(name)
  cpu = machine.cpu_times()
  rates = examples_per_second(
    {
      'exact': lambda k: task.sample(k, batch_size, length),
      'padded': lambda k: task.sample_padded(k, batch_size, length, length),
    },
    batch_size,
    repeats,
    calls,
  )
  steal = machine.steal_percent(cpu, machine.cpu_times())
  (exact, best_exact), (padded, best_padded) = rates['exact'], rates['padded']
  target = TARGETS['fast' if name in FAST else 'other']
  return {
    'task': name,
    'length': length,
    'batch_size': batch_size,
    'exact_examples_per_s': round(exact),
    'padded_examples_per_s': round(padded),
    'best_examples_per_s': round(max(best_exact, best_padded)),
    'target_examples_per_s': target,
    'meets_target': min(exact, padded) >= target,
    'steal_percent': steal,
  }


def time_arithmetic(name: str, n: int, batch_size: int, repeats: int, calls: int) -> dict:
  """One arithmetic task's row at grid size `n` (operand digits; for sorting the count and
  digits, for bitwise_or the vector lengths). Sorting with n above its index symbols is
  timed with n symbols."""
  task = tasks.get(name)
  if isinstance(task, arithmetic.Sorting) and n > task.num_index_symbols:
    task = dataclasses.replace(task, num_index_symbols=n)
  widths = task.max_prompt(n, n), task.max_answer(n, n)
  cpu = machine.cpu_times()
  rates = examples_per_second(
    {
      'train': lambda k: task.sample_train(k, batch_size, n, *widths),
      'cell': lambda k: task.sample(k, batch_size, n, n, *widths),
    },
    batch_size,
    repeats,
    calls,
  )
  steal = machine.steal_percent(cpu, machine.cpu_times())
  (train, best_train), (cell, best_cell) = rates['train'], rates['cell']
  target = ARITHMETIC_TARGETS.get((name, n))
  return {
    'task': name,
    'n': n,
    'batch_size': batch_size,
    'train_examples_per_s': round(train),
    'cell_examples_per_s': round(cell),
    'best_examples_per_s': round(max(best_train, best_cell)),
    'target_examples_per_s': target,
    'meets_target': None if target is None else train >= target,
    'steal_percent': steal,
  }
