"""What a grid run costs (`posenc.training.cost_model.sequence`): one member's program of the cell (n, n)
at the training size measured, every cell's samples at their padded widths counted.

Example:
  >>> fn, args, widths = probe(run)   # doctest: +SKIP
  >>> groups(run)  # ([(tokens, samples) per cell], tokens of (n, n))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp

from posenc.training import cost_model
from posenc.training import run as run_lib
from posenc.kinds.grid import protocol


def probe(run: run_lib.Run) -> tuple[Callable[..., Any], tuple[Any, ...], tuple[int, int]]:
  """The program of the cell (n, n) at the training size n, its arguments after the
  parameters, and its widths (for the cost model)."""
  n = run.train_settings.max_length
  shape = protocol.widths(run.task, n, n, run.eval_settings.bucket_size)
  fn = protocol.make_cell_fn(run, shape)
  return fn, (jnp.int32(n), jnp.int32(n), run.population.eval_keys), shape


def groups(run: run_lib.Run) -> tuple[list[tuple[int, int]], int]:
  """Every cell's samples at its padded widths, and the tokens of the cell (n, n)."""
  task, n, size = run.task, run.train_settings.max_length, run.eval_settings.bucket_size
  samples = run.eval_settings.samples_per_cell
  evaluated = [(sum(protocol.widths(task, a, b, size)), samples) for a, b in protocol.cells(run)]
  return evaluated, sum(protocol.widths(task, n, n, size))


COST = cost_model.sequence(probe, groups)
