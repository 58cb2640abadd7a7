"""Multi-task training with task hints (Awasthi & Gupta 2023): one backbone, one output head
per task, the training budget split between the main task and its hints.

`config.task` is the main task (head 0) and `config.hints` its hint tasks (heads 1, 2, ...,
in that order), all of one vocabulary family (`tasks/hinting.py`). Two schedules
(`train.hint_schedule`):

- 'alternate' (the paper's): step s trains task s mod T only, on a whole batch of it, so with
  one hint the main task gets the even steps and the hint the odd ones;
- 'mixed': every step trains every task, the batch split into T near-equal parts (the first
  B mod T tasks one example more).

One Adam state serves every parameter, as in the paper's single optimizer: a head that
is not trained at a step gets a zero gradient, but its momentum still moves it a little.
Either way each task gets 1/T of the examples: the total budget `train.steps` x
`train.batch_size` is the same as without hints (the paper's "100k steps as before"; whether
its hinted runs took 100k steps in all or per task is not said).

Data: with `train.dataset_size` D = 0 every example is fresh; with D > 0 each task has a fixed
set of D / T examples (the paper's dataset sizes 1M..160M, split equally between the tasks),
example i of task t drawn from `fold_in(fold_in(dataset_key, t), i)`, and a batch draws its
examples uniformly with replacement from that set (our choice: the paper says "epochs" but
not how it orders them).

  >>> from experiments import sorting_hints
  >>> config = sorting_hints.get_config('hint=successor')
  >>> task_list = tasks_of(config)                  # [SortingHinted, Successor]
  >>> [task.name for task in task_list]             # the main task first
  ['sorting_hinted', 'successor']
  >>> batch = train_batch(run.train_settings, task_list, key, dataset_key, step, shape)  # doctest: +SKIP
  >>> batch['task']  # int32 [B]: each example's head  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections

from posenc import suggest
import tasks
from tasks import base

Array = jax.Array
SCHEDULES = ('alternate', 'mixed')


def tasks_of(config: ml_collections.ConfigDict) -> list[Any]:
  """[main task, *hint tasks] of `config`, each with the `task_options` it takes; without
  hints, [the task] (`tasks.get` with the options).

  With hints, an option applies to every task of the set that lists it in `OPTIONS` (the
  value range `num_values` must be the same for all: they share the vocabulary); an option
  that no task of the set takes is an error. Raises ValueError naming a bad name, hint or
  option.

  Example: task 'sorting_hinted', hints ['successor'], options {num_values: 50} ->
    [SortingHinted(num_values=50), Successor(num_values=50)].
  """
  hints = list(config.get('hints', []) or [])
  options = config.task_options.to_dict() if config.get('task_options') else {}
  if not hints:
    return [tasks.get(config.task, options or None)]
  main = tasks.get(config.task)
  valid = getattr(main, 'HINTS', ())
  for hint in hints:
    if hint not in valid:
      raise ValueError(
        f'unknown hint {hint!r}{suggest.did_you_mean(hint, valid)} for task {config.task!r}; valid hints: {", ".join(valid) or "none"}'
      )
  if len(set(hints)) != len(hints):
    raise ValueError(f'hints {hints} has duplicates')
  names = [config.task] + hints
  known = {o for name in names for o in getattr(tasks.get(name), 'OPTIONS', ())}
  for key in options:
    if key not in known:
      raise ValueError(
        f'unknown option {key!r} of tasks {", ".join(names)}; valid options: '
        f'{", ".join(sorted(known)) or "none"}'
      )
  out = []
  for name in names:
    mine = {k: v for k, v in options.items() if k in getattr(tasks.get(name), 'OPTIONS', ())}
    out.append(tasks.get(name, mine))
  return out


def train_shape(task_list: Sequence[Any], max_length: int) -> tuple[int, int]:
  """(prompt width, answer width) holding a training example of every task: the widest."""
  return (
    max(t.max_prompt(max_length) for t in task_list),
    max(t.max_answer(max_length) for t in task_list),
  )


def step_task(step: Array, num_tasks: int) -> Array:
  """The task an 'alternate' step trains: step mod T. Example: T = 2, steps 0..3 -> 0 1 0 1."""
  return (step % num_tasks).astype(jnp.int32)


def split_sizes(batch_size: int, num_tasks: int) -> list[int]:
  """A 'mixed' batch's examples per task. Example: split_sizes(10, 3) == [4, 3, 3]."""
  return [batch_size // num_tasks + (t < batch_size % num_tasks) for t in range(num_tasks)]


def _example_keys(key: Array, dataset_key: Array, task_index: Any, count: int, pool: int) -> Array:
  """`count` example keys of one task: fresh draws (pool 0), or draws with replacement from
  its fixed set of `pool` examples."""
  if pool == 0:
    return jax.random.split(jax.random.fold_in(key, task_index), count)
  index = base.uniform_below(
    jax.random.fold_in(key, task_index), jnp.full((count,), pool, jnp.int32)
  )
  own = jax.random.fold_in(dataset_key, task_index)
  return jax.vmap(lambda i: jax.random.fold_in(own, i))(index)


def train_batch(
  train: Any,
  task_list: Sequence[Any],
  key: Array,
  dataset_key: Array,
  step: Array,
  shape: tuple[int, int],
) -> dict[str, Array]:
  """The training batch of `step` (traced): the tasks' batch format plus 'task' int32 [B].

  Args:
    train: the run's `TrainSettings` (batch_size, max_length, hint_schedule, dataset_size).
    task_list: [main, *hints] (`tasks_of`).
    key: the step's batch key.
    dataset_key: the fixed training set's key (used when train.dataset_size > 0).
    step: the step number (traced int32).
    shape: (prompt width, answer width), e.g. `train_shape(task_list, n)`.
  """
  b, n, count = train.batch_size, train.max_length, len(task_list)
  pool = train.dataset_size // count if train.dataset_size else 0

  def sample(t, task, size):
    keys = _example_keys(key, dataset_key, t, size, pool)
    batch = task.sample_train_keys(keys, n, *shape)
    return {**batch, 'task': jnp.full((size,), t, jnp.int32)}

  if count == 1:
    return sample(0, task_list[0], b)
  if train.hint_schedule == 'alternate':
    t = step_task(step, count)
    return jax.lax.switch(
      t, [lambda i=i, task=task: sample(i, task, b) for i, task in enumerate(task_list)]
    )
  parts = [
    sample(i, task, size) for i, (task, size) in enumerate(zip(task_list, split_sizes(b, count)))
  ]
  return jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
