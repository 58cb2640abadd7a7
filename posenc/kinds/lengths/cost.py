"""What a task-hinting run costs (`posenc.training.cost_model.sequence`): one member's program of test
length n (the training size) measured, every test length's examples under every distribution
counted.

Example:
  >>> fn, args, widths = probe(run)   # doctest: +SKIP
  >>> groups(run)  # ([(tokens, examples) per length], tokens at n)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp

from posenc.training import cost_model
from posenc.training import run as run_lib
from posenc.kinds.lengths import protocol


def probe(run: run_lib.Run) -> tuple[Callable[..., Any], tuple[Any, ...], tuple[int, int]]:
  """The program of test length n (the training size), first distribution, for the cost
  model: it, its arguments after the parameters, and its widths."""
  n, task = run.train_settings.max_length, run.task
  fn = protocol.make_length_fn(run, n)
  return fn, (jnp.int32(0), run.population.eval_keys), (task.max_prompt(n), task.max_answer(n))


def groups(run: run_lib.Run) -> tuple[list[tuple[int, int]], int]:
  """Every test length's examples under every distribution, and the tokens at n."""
  task = run.task
  tokens = lambda n: task.max_prompt(n) + task.max_answer(n)
  count = run.eval_settings.examples_per_length * len(run.eval_settings.distributions)
  return (
    [(tokens(n), count) for n in run.eval_settings.lengths],
    tokens(run.train_settings.max_length),
  )


COST = cost_model.sequence(probe, groups)
