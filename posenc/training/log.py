"""The log of a training run (`posenc.training.train.train`): every `train.log_every` steps
one metrics.jsonl line with the members' mean loss and accuracy over the interval, a progress
line and, with `config.tensorboard=True`, TensorBoard's scalars (`Writer`).

Example (what `train` does each log interval):
  >>> log = TrainLog(run, workdir, restored, board, print)     # doctest: +SKIP
  >>> state = log(state, done=200)  # writes the line; the state, its sums reset  # doctest: +SKIP

TensorBoard's event files, one curve per member: training writes under
`workdir/tensorboard/<member>/` (e.g. `seed0_lr0.001`, with `_data1` for a data seed) at
every logged step: `train/loss`, `train/accuracy`, `train/learning_rate` (the member's rate
times the schedule's factor) and `train/steps_per_s`; after the evaluation,
`eval/<metric>_by_length` with the length as the step. `tensorboard --logdir runs/` then shows every member of every run. The writer is
tensorboardX's `SummaryWriter` (no TensorFlow), an optional extra: `pip install -e
'.[tensorboard]'`.

A resumed run restarts its curves at the checkpoint: its writer's `purge_step` tells
TensorBoard to drop the events an earlier process wrote past that step before it stopped,
so a curve has no step twice. `flush` (at every checkpoint) closes the member's event file,
the one call that puts every queued event on disk, and the next logged step opens a new
file: a member's directory holds one file per checkpoint interval that logged something.

A work directory on a store (gs://, s3://) gets the same files: each is written in a local
staging directory (`processes.staging_directory`) and put to the store, streamed, once
`flush` or `close` has closed it (TensorBoard reads gs:// and s3:// log directories itself); `close`
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

import math
import os
import time
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from posenc import config as config_lib
from posenc.storage import io
from posenc.storage import processes
from posenc.storage import store
from posenc.training import protocol
from posenc.training import state as state_lib

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


# ---------------------------------------------------------------------------------------
# The log.


def finite_or_none(x: float) -> float | None:
  return float(x) if math.isfinite(x) else None


class TrainLog:
  """The log of training: every `train.log_every` steps one metrics.jsonl line (the members'
  mean loss and accuracy over the interval), TensorBoard's scalars and a progress line."""

  def __init__(self, run, workdir, restored, board, progress):
    start = restored.step
    self.run, self.board, self.progress, self.start = run, board, progress, start
    self.path = os.path.join(workdir, 'metrics.jsonl')
    # Lines logged after the restored checkpoint are redone identically.
    io.read_jsonl(self.path, keep=lambda r: r['step'] <= start, rewrite=True)
    self.t_start = self.t_log = time.time()
    self.step_log = start
    # The ETA's rate: steps after the first update (which may wait on a program).
    self.t_steady, self.step_steady = self.t_start, start
    # The metric sums restart each log interval; jitted so the state keeps its shardings
    # (a host-made zero would change the update's input types and retrace it).
    self.reset = jax.jit(
      lambda s: s.replace(sums=jax.tree.map(jnp.zeros_like, s.sums), count=jnp.zeros_like(s.count)),
      donate_argnums=0,
      out_shardings=run.population.state_sharding(restored.state),
    )

  def steady_from(self, done: int) -> None:
    """Counts the ETA's rate from step `done` on (after the first update)."""
    self.t_steady, self.step_steady = time.time(), done

  def __call__(self, state: Any, done: int) -> Any:
    """Logs the interval ending at step `done`; returns the state with its sums reset."""
    population = self.run.population
    sums, count = jax.device_get(state.sums), int(state.count)
    now = time.time()
    rate = (done - self.step_log) / max(now - self.t_log, 1e-9)
    loss = sums.loss[: population.size] / count
    accuracy = sums.accuracy[: population.size] / count
    finite = lambda values: [finite_or_none(x) for x in values]
    io.append_jsonl(
      self.path,
      {'step': done, 'loss': finite(loss), 'accuracy': finite(accuracy), 'steps_per_s': rate},
      replaces=lambda r: r['step'] >= done,  # a line a fenced holder put as it stalled
    )
    state = self.reset(state)
    if self.board:
      scale = float(state_lib.learning_rate_scale(self.run.train_settings, jnp.int32(done)))
      rates = np.asarray(population.learning_rates)[: population.size] * scale
      self.board.train(done, finite(loss), finite(accuracy), list(rates), rate)
    elapsed, duration = now - self.t_start, protocol.duration
    if done > self.step_steady:
      eta = (
        (self.run.train_settings.steps - done) * (now - self.t_steady) / (done - self.step_steady)
      )
    else:
      eta = (self.run.train_settings.steps - done) / max(rate, 1e-9)
    self.progress(
      f'step {done}/{self.run.train_settings.steps} | {rate:.1f} steps/s ({rate * population.size:.1f} '
      f'model-updates/s) | elapsed {duration(elapsed)} | ETA {duration(eta)} | '
      f'loss {np.nanmean(loss):.4f} | acc {np.nanmean(accuracy):.4f}'
    )
    self.t_log, self.step_log = now, done
    return state
