"""Checkpoints of a population's training state, and what stops a run.

The state is checkpointed by orbax as host NumPy arrays of the real members only
(`Population.unpad`): a population lives on one process's local devices (orbax writes only
jax.Arrays that are global in a multi-process job), and without the padding members a
checkpoint written on D devices restores on any other count. Next to it, `run` records the
device counts the run has trained on: [{'from_step', 'devices', 'platform'}].

A checkpoint that does not restore (a truncated or missing file) is set aside and the
newest one that restores is used instead (`restore_newest`).

Example:
  >>> manager = checkpoint_manager(workdir)
  >>> save_state(manager, 100, state, population, [{'from_step': 0, 'devices': 1, ...}])
  >>> step, state, history, notes = restore_newest(manager, abstract, population,
  ...                                              lambda s: f'left in place: {s}')
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import jax
import numpy as np
import orbax.checkpoint as ocp

from posenc.population import Population


class Preempted(Exception):
  """The run stopped at a step boundary on request (SIGTERM) after writing a checkpoint;
  rerunning it resumes there."""

  def __init__(self, step: int, message: str):
    super().__init__(message)
    self.step = step


def checkpoint_manager(workdir: str) -> ocp.CheckpointManager:
  """Orbax manager of `workdir/checkpoints`: synchronous, the last three steps kept (a
  damaged newest one leaves two to fall back on: `restore_newest`).

  In a multi-process job each process trains its own populations (its shard of a sweep)
  on its local devices, so its manager involves only itself: no cross-process barriers.
  """
  kwargs = {}
  if jax.process_count() > 1:
    me = jax.process_index()
    kwargs['multiprocessing_options'] = ocp.options.MultiprocessingOptions(
      primary_host=me, active_processes={me}, barrier_sync_key_prefix=f'process{me}'
    )
  directory = os.path.abspath(os.path.join(workdir, 'checkpoints'))
  os.makedirs(directory, exist_ok=True)
  options = ocp.CheckpointManagerOptions(
    max_to_keep=3, create=False, enable_async_checkpointing=False, **kwargs
  )
  return ocp.CheckpointManager(directory, options=options)


def save_state(
  manager: ocp.CheckpointManager,
  step: int,
  state: Any,
  population: Population,
  history: list[dict[str, Any]],
) -> None:
  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave(population.unpad(state)),
      run=ocp.args.JsonSave({'device_history': history}),
    ),
  )


def restore_state(
  manager: ocp.CheckpointManager, step: int, abstract: Any, population: Population
) -> tuple[Any, list[dict[str, Any]]]:
  """(the checkpointed state at `step` padded and placed like `abstract`, device history)."""
  target = population.unpad(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), abstract))
  restored = manager.restore(
    step,
    args=ocp.args.Composite(state=ocp.args.StandardRestore(target), run=ocp.args.JsonRestore()),
  )
  return population.pad(restored['state'], abstract), restored['run']['device_history']


# What a damaged checkpoint raises on restore: tensorstore's read errors (a data file
# truncated or missing: OUT_OF_RANGE, FAILED_PRECONDITION) and orbax's structure errors (its
# metadata missing) are ValueErrors; a missing item directory is a KeyError ('Item "state"
# was not found'); a missing file elsewhere an OSError.
DAMAGED = (ValueError, KeyError, OSError)


def restore_newest(
  manager: ocp.CheckpointManager,
  abstract: Any,
  population: Population,
  set_aside: Callable[[int], str],
) -> tuple[int | None, Any, list[dict[str, Any]], list[str]]:
  """(step, state, device history, damage notes) of the newest checkpoint that restores,
  step None when none does (then state and history are None).

  Each checkpoint that fails to restore is handed to `set_aside(step)`, which returns where
  it now is (training moves it out of the manager's way; a reader leaves it), and noted as
  'checkpoint 40 (OUT_OF_RANGE: Error reading ...) kept in W/checkpoints_damaged/40'.
  """
  notes = []
  for step in sorted(manager.all_steps(), reverse=True):
    try:
      state, history = restore_state(manager, step, abstract, population)
      return step, state, history, notes
    except DAMAGED as e:
      _drop_closed_loop_callbacks()
      reason = ' '.join(str(e).split())
      reason = reason if len(reason) <= 100 else reason[:97] + '...'
      notes.append(f'checkpoint {step} ({type(e).__name__}: {reason}) kept in {set_aside(step)}')
  return None, None, None, notes


def _drop_closed_loop_callbacks() -> None:
  """Silences the reads a failed restore leaves in flight: when one read fails, orbax's
  event loop closes under the others, and each of their completions reports 'Event loop is
  closed' through sys.unraisablehook (milliseconds later, hundreds of tracebacks). Every
  other unraisable exception still reaches the previous hook. Installed once per process."""
  previous = sys.unraisablehook
  if getattr(previous, 'drops_closed_loop', False):
    return

  def hook(unraisable: Any) -> None:
    if not (
      unraisable.exc_type is RuntimeError and str(unraisable.exc_value) == 'Event loop is closed'
    ):
      previous(unraisable)

  hook.drops_closed_loop = True
  sys.unraisablehook = hook


def set_aside_damaged(workdir: str, step: int) -> str:
  """Moves `workdir/checkpoints/step` to `workdir/checkpoints_damaged/step` (a free name:
  step.1, step.2, ... if a damaged copy of that step is there already) and returns it."""
  aside = os.path.join(workdir, 'checkpoints_damaged')
  os.makedirs(aside, exist_ok=True)
  target, k = os.path.join(aside, str(step)), 0
  while os.path.exists(target):
    k += 1
    target = os.path.join(aside, f'{step}.{k}')
  os.replace(os.path.join(workdir, 'checkpoints', str(step)), target)
  return target


def saved_steps(workdir: str) -> list[int]:
  """The steps of `workdir/checkpoints` that orbax finished writing, ascending (read from
  the directory names, so nothing is created or opened; [] without checkpoints).

  Example: a run checkpointed at steps 10 and 20 -> [10, 20].
  """
  try:
    names = os.listdir(os.path.join(workdir, 'checkpoints'))
  except OSError:
    return []
  # Orbax writes a step under a temporary name and renames it to the bare number when done.
  return sorted(int(n) for n in names if n.isdigit())
