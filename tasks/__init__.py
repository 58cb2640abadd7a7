"""The tasks: the study's 15 length-generalization tasks and the arithmetic study's sequence
tasks, as on-device jittable samplers.

  >>> import jax
  >>> task = get('parity_check')
  >>> batch = task.sample(jax.random.key(0), batch_size=128, length=40)
  >>> batch['inputs'].shape, batch['targets'].shape
  ((128, 40), (128, 1))
  >>> batch = task.sample_padded(jax.random.key(0), 128, 13, max_length=64)  # length traceable
  >>> batch['inputs'].shape, int(batch['length'])
  ((128, 64), 13)

`NAMES` lists the study's tasks in its order (regular, dcf, cs), `ARITHMETIC` the arithmetic
study's sequence tasks, `REGISTRY` maps every name to its task, `get(name, options)` looks
one up (options: `get`'s docstring). Every study task follows `tasks.base.Task`; the padding
convention of `sample_padded` (one compiled program for every length <= max_length, zeros
and zero masks past the valid part, the valid part distributed exactly as `sample`) is
described in `tasks/base.py`. `HINTING` lists the task-hinting study's tasks (tasks/hinting.py),
`LATER` the tasks of the later literature in the study's interface (tasks/later.py:
flip_flop, associative_recall, copy).

Adding a task: subclass `base.Task` (fields, `_target`, `_sample_inputs` or `_sample`) and
add one entry to `REGISTRY`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from posenc import suggest
from tasks import arithmetic
from tasks import corpus
from tasks import cs
from tasks import dcf
from tasks import hinting
from tasks import later
from tasks import regular
from tasks.base import Task

# Every task, by name: the one registry. Each module of a study contributes its tasks.
REGISTRY: dict[str, Any] = {
  # The randomized-encoding study's 15 (Ruoss et al. 2023), in its order: regular, dcf, cs.
  'even_pairs': regular.EvenPairs(),
  'modular_arithmetic': regular.ModularArithmetic(),
  'parity_check': regular.ParityCheck(),
  'cycle_navigation': regular.CycleNavigation(),
  'stack_manipulation': dcf.StackManipulation(),
  'reverse_string': dcf.ReverseString(),
  'modular_arithmetic_brackets': dcf.ModularArithmeticBrackets(),
  'solve_equation': dcf.SolveEquation(),
  'duplicate_string': cs.DuplicateString(),
  'missing_duplicate_string': cs.MissingDuplicateString(),
  'odds_first': cs.OddsFirst(),
  'binary_addition': cs.BinaryAddition(),
  'binary_multiplication': cs.BinaryMultiplication(),
  'compute_sqrt': cs.ComputeSqrt(),
  'bucket_sort': cs.BucketSort(),
  # The arithmetic study's sequence tasks (McLeish et al. 2024; tasks/arithmetic.py):
  # prompt, answer and EOS as one token sequence, for decoders.
  **arithmetic.TASKS,
  # Language modelling on the Python standard library's source (tasks/corpus.py).
  **corpus.TASKS,
  # The task-hinting study's tasks (Awasthi & Gupta 2023; tasks/hinting.py): sorting and
  # increment, and their hint tasks, as `prompt answer` sequences without EOS.
  **hinting.TASKS,
  # Tasks of the later literature in the study's interface (tasks/later.py): flip-flop
  # (Liu et al. 2023), multi-query associative recall (Arora et al. 2023), copying (Jelassi
  # et al. 2024).
  **later.TASKS,
}
# Each study's names, in registry order. NAMES is the study's 15 alone, though the later
# tasks share their interface.
LATER: tuple[str, ...] = tuple(later.TASKS)
NAMES: tuple[str, ...] = tuple(
  n for n, t in REGISTRY.items() if isinstance(t, Task) and n not in later.TASKS
)
ARITHMETIC: tuple[str, ...] = tuple(arithmetic.TASKS)
LANGUAGE: tuple[str, ...] = tuple(corpus.TASKS)
HINTING: tuple[str, ...] = tuple(hinting.TASKS)


def get(name: str, options: Mapping[str, Any] | None = None) -> Task:
  """The task called `name`, with `options` replacing its option fields.

  A task's options are the fields it lists in `OPTIONS` (the study's tasks have none; the
  arithmetic tasks take `pad_probability`, sorting also `num_index_symbols`; the later
  tasks theirs, tasks/later.py). Raises
  ValueError naming a bad name or option and listing the valid ones.

    >>> get('sorting', {'num_index_symbols': 100}).vocab_size
    119
  """
  try:
    task = REGISTRY[name]
  except KeyError:
    raise ValueError(
      f"unknown task {name!r}{suggest.did_you_mean(name, REGISTRY)}; valid tasks: {', '.join(REGISTRY)}"
    ) from None
  if not options:
    return task
  valid = getattr(task, 'OPTIONS', ())
  for key in options:
    if key not in valid:
      raise ValueError(
        f"unknown option {key!r}{suggest.did_you_mean(key, valid)} of task {name!r}; valid options: {', '.join(valid) or 'none'}"
      )
  return dataclasses.replace(task, **options)
