"""TensorBoard event files of a run, one curve per member (`config.tensorboard=True`).

Training writes under `workdir/tensorboard/<member>/` (e.g. `seed0_lr0.001`, with
`_data1` for a data seed) at every logged step: `train/loss`, `train/accuracy`,
`train/learning_rate` (the member's rate times the schedule's factor) and
`train/steps_per_s`; after the evaluation, `eval/<metric>_by_length` with the length as the
step. `tensorboard --logdir runs/` then shows every member of every run. The writer is
tensorboardX's event protocol and record writer (no TensorFlow), an optional extra: `pip install -e '.[tensorboard]'`.

A resumed run restarts its curves at the checkpoint: its first event tells TensorBoard to
drop the events it wrote past that step before it stopped (a purge step), so a curve has no
step twice. `read(directory)` reads a member's scalars back the way TensorBoard does.

Example:
  >>> writer = Writer('runs/parity', members, start_step=0)   # doctest: +SKIP
  >>> writer.train(100, loss=[0.7], accuracy=[0.5], learning_rates=[1e-3], steps_per_s=9.)
  >>> writer.close()
  >>> read('runs/parity/tensorboard/seed0_lr0.001')['train/loss']
  [(100, 0.7)]
"""

from __future__ import annotations

import glob
import os
import socket
import struct
import time
from typing import Any, Mapping, Sequence

from posenc import config as config_lib

try:  # The optional extra: without it, asking for event files is one line (`check`).
  import tensorboardX
  from tensorboardX import record_writer
  import tensorboardX.summary
  from tensorboardX.proto import event_pb2
except ImportError:
  tensorboardX = record_writer = event_pb2 = None

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
  """Event files of a population: one directory per member under `workdir/tensorboard`,
  written as they come (no writer thread), so `flush` makes them durable.

  `start_step` is the step training resumes from (0 for a fresh run); what an earlier
  process wrote past it is purged."""

  def __init__(self, workdir: str, members: Sequence[Mapping[str, Any]], start_step: int):
    if tensorboardX is None:
      raise config_lib.ConfigError(NEEDS_EXTRA)
    self._files = []
    # A name per process: a restart within the same second gets a file of its own.
    name = (
      f'events.out.tfevents.{int(time.time())}.{socket.gethostname()}'
      f'.from{start_step}.{os.getpid()}'
    )
    for member in members:
      directory = os.path.join(workdir, DIRECTORY, label(member))
      os.makedirs(directory, exist_ok=True)
      record = record_writer.RecordWriter(os.path.join(directory, name))
      self._files.append(record)
      self._write(record, event_pb2.Event(wall_time=time.time(), file_version='brain.Event:2'))
      # TensorBoard drops an earlier file's events at or past a restart's START step.
      purge = event_pb2.Event(wall_time=time.time(), step=start_step + 1)
      purge.session_log.status = event_pb2.SessionLog.START
      self._write(record, purge)

  @staticmethod
  def _write(record: Any, event: Any) -> None:
    record.write(event.SerializeToString())

  def _scalar(self, i: int, tag: str, value: float, step: int) -> None:
    event = event_pb2.Event(
      wall_time=time.time(), step=int(step), summary=tensorboardX.summary.scalar(tag, float(value))
    )
    self._write(self._files[i], event)

  def train(
    self,
    step: int,
    loss: Sequence[float | None],
    accuracy: Sequence[float | None],
    learning_rates: Sequence[float],
    steps_per_s: float,
  ) -> None:
    """One logged step of every member (None: a diverged member's value, not written)."""
    for i in range(len(self._files)):
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
    for record in self._files:
      record.flush()

  def close(self) -> None:
    for record in self._files:
      record.flush()
      record.close()


def _records(path: str):
  """The records of a TFRecord file: [8-byte length][4-byte CRC][data][4-byte CRC]."""
  with open(path, 'rb') as f:
    data = f.read()
  at = 0
  while at + 12 <= len(data):
    (size,) = struct.unpack('<Q', data[at : at + 8])
    yield data[at + 12 : at + 12 + size]
    at += 12 + size + 4


def read(directory: str) -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value)]} of the event files in `directory`, as TensorBoard reads them:
  files in order, a restart's purge step dropping the earlier events at or past it."""
  if event_pb2 is None:
    raise config_lib.ConfigError(NEEDS_EXTRA)
  scalars: dict[str, list[tuple[int, float]]] = {}
  for path in sorted(glob.glob(os.path.join(directory, 'events.out.tfevents.*'))):
    for record in _records(path):
      event = event_pb2.Event.FromString(record)
      if event.HasField('session_log') and event.session_log.status == event.session_log.START:
        scalars = {
          tag: [(s, v) for s, v in points if s < event.step] for tag, points in scalars.items()
        }
      elif event.HasField('summary'):
        for value in event.summary.value:
          scalars.setdefault(value.tag, []).append((int(event.step), value.simple_value))
  return scalars
