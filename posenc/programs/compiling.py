"""Compiling a run's programs at once (`compile_all`: lowered one after another, compiled in
threads), and what a stretch of work compiled (`CompileStats`: programs JAX built, and those
it read from the persistent compilation cache instead, with the seconds spent compiling).

Example:
  >>> import jax
  >>> with CompileStats() as compiles:
  ...   y = jax.jit(lambda x: 2 * x)(1.0)
  >>> compiles.summary()   # the persistent cache on, a first run  # doctest: +SKIP
  {'cache_hits': 0, 'cache_misses': 1, 'compile_s': 0.12}
  >>> compiles.hits + compiles.misses <= 1   # one program: read from the cache or not
  True
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from typing import Any, Callable, Sequence

from jax import monitoring

from posenc import programs

HIT, MISS = '/jax/compilation_cache/cache_hits', '/jax/compilation_cache/cache_misses'
# Backend compilation, a cache read included: what a program costs before it runs.
COMPILE = '/jax/core/compile/backend_compile_duration'


class CompileStats:
  """Counts, while open, persistent-cache hits and misses and the backend's compile seconds.

  Misses are counted only while the cache is on (a program compiled with the cache off is
  neither); `compile_s` counts every backend compilation (a hit's is its cache read).
  """

  def __init__(self):
    self.hits = self.misses = 0
    self.compile_s = 0.0

  def _event(self, event: str, **kwargs: Any) -> None:
    del kwargs
    if event == HIT:
      self.hits += 1
    elif event == MISS:
      self.misses += 1

  def _duration(self, event: str, seconds: float, **kwargs: Any) -> None:
    del kwargs
    if event == COMPILE:
      self.compile_s += seconds

  def __enter__(self) -> CompileStats:
    monitoring.register_event_listener(self._event)
    monitoring.register_event_duration_secs_listener(self._duration)
    return self

  def __exit__(self, *exc: Any) -> None:
    monitoring.unregister_event_listener(self._event)
    monitoring.unregister_event_duration_listener(self._duration)

  def summary(self) -> dict[str, Any]:
    return {
      'cache_hits': self.hits,
      'cache_misses': self.misses,
      'compile_s': round(self.compile_s, 3),
    }


@dataclasses.dataclass(frozen=True)
class Program:
  """One program to compile: its name in the log ('train 40', 'eval 64'), its jitted
  function and the (abstract or concrete) arguments it is lowered for."""

  name: str
  fn: Any
  args: tuple[Any, ...]

  def lower(self) -> Any:
    return self.fn.lower(*self.args)


@dataclasses.dataclass(frozen=True)
class Compiled:
  """A stage's programs, compiled: its `plan` and {program width: compiled program}."""

  plan: programs.Plan
  fns: dict[int, Any]


def compile_all(
  programs: Sequence[Program],
  progress: Callable[[str], None],
  workers: int,
  lowered: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """Compiles `programs` at once: lowered one after another here (tracing is Python),
  compiled by `workers` threads as soon as each is lowered (XLA's compiler runs outside
  Python's lock). A lowering in `lowered` (by program name) is compiled, not redone.

  Prints 'compiling N programs (...) in T threads', a line as each is done ('compiled k/N:
  NAME | elapsed ...'), and returns {name: compiled program} (`jax.stages.Compiled`,
  called like the jitted function).
  """
  lowered = dict(lowered or {})
  total = len(programs)
  if not total:
    return {}
  workers = max(1, min(workers, total))
  by_stage: dict[str, int] = {}
  for p in programs:
    word = p.name.split()[0]
    by_stage[word] = by_stage.get(word, 0) + 1
  parts = ', '.join(f'{n} {w}' for w, n in by_stage.items())
  progress(
    f'compiling {total} program{"s" * (total > 1)} ({parts}) in {workers} thread'
    + 's' * (workers > 1)
  )
  t0 = time.time()
  lock, done = threading.Lock(), [0]

  def compile_one(name: str, low: Any) -> Any:
    compiled = low.compile()
    with lock:
      done[0] += 1
      progress(f'compiled {done[0]}/{total}: {name} | elapsed {time.time() - t0:.1f} s')
    return compiled

  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    futures = {}
    for p in programs:
      low = lowered.pop(p.name, None) or p.lower()
      futures[p.name] = pool.submit(compile_one, p.name, low)
    return {name: f.result() for name, f in futures.items()}
