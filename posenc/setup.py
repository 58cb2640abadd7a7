"""A run of any kind of evaluation, from its config (`build(config) -> posenc.training.run.Run`) or
from a saved work directory (`restore(workdir)`).

The config's task names its kind (`task.protocol`); the kinds' registry (`posenc.kinds`)
gives the kind's protocol, whose `task_type` says what the kind reads off a task (a
`typing.Protocol` in the kind's protocol.py). A task that lacks part of it is refused here,
in one line naming what it lacks, before anything is built; then `posenc.training.run.build` parses
the rest of the config and builds the run.

Example:
  >>> from posenc import config as config_lib
  >>> config = config_lib.base_config()     # the study's cell: an encoder, 30 members
  >>> run = build(config)                   # ConfigError (one line) for a bad config
  >>> run.protocol.name, run.family.causal, run.population.size
  ('range', False, 30)
  >>> run, state, step = restore('runs/parity')  # the newest checkpoint  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable

import ml_collections

from posenc.training import checkpoint
from posenc import config as config_lib
from posenc.training import protocol as protocol_lib
from posenc.storage import io
from posenc import kinds
from posenc.training import run as run_lib
import tasks

ConfigError = config_lib.ConfigError


class RunError(ValueError):
  """A saved run that cannot be restored (no config, no checkpoint that restores); one line."""


def build(
  config: ml_collections.ConfigDict, devices: list[Any] | None = None, platform: str | None = None
) -> run_lib.Run:
  """The run of `config` on `devices` (default: every local device), its programs built for
  `platform` (default: the devices'), judged by the protocol of its task's kind
  (`protocol_of`).

  Raises:
    ConfigError: the config cannot run (one line naming the bad value).
  """
  if config.task not in tasks.REGISTRY:
    raise config_lib.choices(config.task, 'task', list(tasks.REGISTRY))
  protocol = protocol_of(tasks.REGISTRY[config.task])
  return run_lib.build(config, protocol, devices, platform)


def protocol_of(task: Any) -> protocol_lib.Protocol:
  """The protocol of the kind of evaluation `task` names (`task.protocol`, 'range' by
  default: `posenc.kinds`), once the task is seen to have what the kind reads
  (`Protocol.task_type`).

  Example: a range task without `sample_padded` and `output_length` is refused with
  "task 'x' (kind 'range') lacks output_length, sample_padded; a range task needs:
  vocab_size, num_classes, output_length, sample, sample_padded
  (posenc.kinds.range.protocol.RangeTask)".

  Raises:
    ConfigError: a kind not registered, or a task that lacks part of its kind's task type
      (one line naming the task, its kind and what it lacks).
  """
  kind = getattr(task, 'protocol', 'range')
  name = getattr(task, 'name', None) or type(task).__name__
  if kind not in kinds.KINDS:
    raise ConfigError(
      f'task {name!r} names an unknown kind of evaluation {kind!r}; valid: {", ".join(kinds.KINDS)}'
    )
  protocol = kinds.protocol(kind)
  needs = protocol_lib.members(protocol.task_type)
  lacks = [member for member in needs if not hasattr(task, member)]
  if lacks:
    raise ConfigError(
      f'task {name!r} (kind {kind!r}) lacks {", ".join(lacks)}; a {kind} task needs: '
      f'{", ".join(needs)} ({protocol.task_type.__module__}.{protocol.task_type.__name__})'
    )
  return protocol


def read_config(workdir: str) -> ml_collections.ConfigDict:
  """The config recorded in `workdir/config.json` (RunError if there is none)."""
  path = os.path.join(workdir, 'config.json')
  if not io.isfile(path):
    raise RunError(f'{workdir} holds no run (no config.json)')
  return ml_collections.ConfigDict(io.read_json(path))


def restore(
  workdir: str,
  devices: list[Any] | None = None,
  progress: Callable[[str], None] = lambda line: None,
) -> tuple[run_lib.Run, Any, int]:
  """(the run, its state, the step) of `workdir` at its newest checkpoint that restores.

  A reader: a damaged checkpoint is named to `progress` and left where it is (training sets
  it aside), and a run without checkpoints is left without a checkpoint directory.

  Raises:
    RunError: no config.json, no checkpoint, or none that restores; ConfigError: the
      recorded config no longer runs.
  """
  run = build(read_config(workdir), devices)
  # Asked before the manager, which would create the checkpoint directory of a bare run.
  if not checkpoint.saved_steps(workdir):
    raise RunError(f'{workdir} has no checkpoint (train it first)')
  with contextlib.closing(checkpoint.checkpoint_manager(workdir)) as manager:
    step, state, _, damaged = checkpoint.restore_newest(
      manager,
      run.abstract_state,
      run.population,
      lambda step: os.path.join(workdir, 'checkpoints', str(step)),
    )
  if step is None:
    raise RunError(f'no checkpoint of {workdir} restores: ' + '; '.join(damaged))
  if damaged:
    progress(f'damaged: {"; ".join(damaged)}; reading the checkpoint at step {step}')
  return run, state, step
