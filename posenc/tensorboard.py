"""TensorBoard event files of a run, one curve per member (`config.tensorboard=True`).

Training writes under `workdir/tensorboard/<member>/` (e.g. `seed0_lr0.001`, with
`_data1` for a data seed) at every logged step: `train/loss`, `train/accuracy`,
`train/learning_rate` (the member's rate times the schedule's factor) and
`train/steps_per_s`; after the evaluation, `eval/<metric>_by_length` with the length as the
step. `tensorboard --logdir runs/` then shows every member of every run. The writer is
tensorboardX's `SummaryWriter` (no TensorFlow), an optional extra: `pip install -e
'.[tensorboard]'`.

A resumed run restarts its curves at the checkpoint: its writer's `purge_step` tells
TensorBoard to drop the events an earlier process wrote past that step before it stopped,
so a curve has no step twice. `flush` (at every checkpoint) closes the member's event file,
the one call that puts every queued event on disk, and the next logged step opens a new
file: a member's directory holds one file per checkpoint interval that logged something.

A work directory on a store (gs://, s3://) gets the same files: each is written in a local
staging directory (`processes.staging_directory`) and put to the store, streamed, once `flush` or
`close` has closed it (TensorBoard reads gs:// and s3:// log directories itself); `close`
removes the staging directory.

Example (a population of one member):
  >>> members = [{'seed': 0, 'learning_rate': 1e-3}]
  >>> writer = Writer('runs/parity', members, start_step=0)
  >>> writer.train(100, loss=[0.7], accuracy=[0.5], learning_rates=[1e-3], steps_per_s=9.0)
  >>> writer.close()
  >>> os.listdir('runs/parity/tensorboard/seed0_lr0.001')
  ['events.out.tfevents...']
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from posenc import config as config_lib
from posenc import processes
from posenc import store

try:  # The optional extra: without it, asking for event files is one line (`check`).
  import tensorboardX
except ImportError:
  tensorboardX = None

DIRECTORY = 'tensorboard'
NEEDS_EXTRA = (
  "config.tensorboard=True needs TensorBoard's event writer, the tensorboard "
  "extra: pip install -e '.[tensorboard]' (tensorboardX)"
)


def check(config: Any) -> None:
  """ConfigError (one line) if the config asks for event files and the extra is missing."""
  if config.get('tensorboard', False) and tensorboardX is None:
    raise config_lib.ConfigError(NEEDS_EXTRA)


def label(member: Mapping[str, Any]) -> str:
  """A member's run name. Example: {'seed': 0, 'learning_rate': 1e-3} -> 'seed0_lr0.001'."""
  data = '' if member.get('data_seed') is None else f'_data{member["data_seed"]}'
  return f'seed{member["seed"]}{data}_lr{member["learning_rate"]:g}'


class Writer:
  """Event files of a population: one `tensorboardX.SummaryWriter` per member, in
  `workdir/tensorboard/<label>`.

  `start_step` is the step training resumes from (0 for a fresh run); the first file of each
  member purges what an earlier process wrote past it."""

  def __init__(self, workdir: str, members: Sequence[Mapping[str, Any]], start_step: int):
    if tensorboardX is None:
      raise config_lib.ConfigError(NEEDS_EXTRA)
    # On a store: written locally, put there once closed.
    self._remote = os.path.join(workdir, DIRECTORY) if store.is_url(workdir) else None
    self._staging = processes.staging_directory('tensorboard') if self._remote else None
    root = self._staging or os.path.join(workdir, DIRECTORY)
    self._directories = [os.path.join(root, label(m)) for m in members]
    self._start = start_step
    self._opened = [0] * len(members)  # event files this process opened, per member
    self._writers: list[Any] = [None] * len(members)
    for i in range(len(members)):  # The purge is written now, whatever is logged later.
      self._writer(i)

  def _writer(self, i: int) -> Any:
    """Member i's open writer, opened with a new file if `flush` closed the last one."""
    if self._writers[i] is None:
      # Names sort in writing order (TensorBoard reads a directory's files in name order),
      # and a restart within the same second gets files of its own: the step it resumed
      # from, the process and the file's number follow tensorboardX's time and host.
      number = self._opened[i]
      self._opened[i] += 1
      self._writers[i] = tensorboardX.SummaryWriter(
        self._directories[i],
        # TensorBoard drops an earlier file's events at or past a restart's purge step.
        purge_step=self._start + 1 if number == 0 else None,
        filename_suffix=f'.from{self._start:010d}.{os.getpid()}.{number:06d}',
      )
    return self._writers[i]

  def _scalar(self, i: int, tag: str, value: float, step: int) -> None:
    self._writer(i).add_scalar(tag, float(value), int(step))

  def train(
    self,
    step: int,
    loss: Sequence[float | None],
    accuracy: Sequence[float | None],
    learning_rates: Sequence[float],
    steps_per_s: float,
  ) -> None:
    """One logged step of every member (None: a diverged member's value, not written)."""
    for i in range(len(self._writers)):
      for tag, value in (
        ('train/loss', loss[i]),
        ('train/accuracy', accuracy[i]),
        ('train/learning_rate', learning_rates[i]),
        ('train/steps_per_s', steps_per_s),
      ):
        if value is not None:
          self._scalar(i, tag, value, step)

  def evaluation(self, metric: str, curves: Sequence[Mapping[int, float]]) -> None:
    """Each member's evaluation metric by length (the length as the step)."""
    tag = f'eval/{metric.replace(" ", "_")}_by_length'
    for i, curve in enumerate(curves):
      for length, value in sorted(curve.items()):
        if value == value:  # not NaN
          self._scalar(i, tag, value, length)

  def flush(self) -> None:
    """Every event so far on disk (a crash after it loses none): each open file is closed.

    `SummaryWriter.flush` writes out only what its writer thread has taken from the queue;
    `close` drains the queue, then flushes and syncs the file."""
    self._close_files()

  def close(self) -> None:
    """Closes every open file (on a store: puts the closed files there and removes the
    staging directory)."""
    try:
      self._close_files()
    finally:
      if self._staging:
        import shutil  # pylint: disable=g-import-not-at-top

        shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None

  def _close_files(self) -> None:
    for i, writer in enumerate(self._writers):
      if writer is not None:
        writer.close()
        self._writers[i] = None
    if self._remote and self._staging:
      for directory in self._directories:
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
          file = os.path.join(directory, name)
          store.put_file(file, f'{self._remote}/{os.path.basename(directory)}/{name}')
          os.unlink(file)  # Put: the next flush puts only the files opened since.
