"""The log of a training run (`posenc.train.train`): every `train.log_every` steps one
metrics.jsonl line with the members' mean loss and accuracy over the interval, TensorBoard's
scalars and a progress line.

Example (what `train` does each log interval):
  >>> log = TrainLog(run, workdir, restored, board, print)     # doctest: +SKIP
  >>> state = log(state, done=200)  # writes the line; the state, its sums reset  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from posenc import evaluate
from posenc import io
from posenc import state as state_lib


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
    elapsed, duration = now - self.t_start, evaluate.core.duration
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
