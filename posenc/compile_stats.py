"""What a stretch of work compiled: programs JAX built, and those it read from the persistent
compilation cache instead, with the seconds spent compiling (JAX's monitoring events).

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

from typing import Any

from jax import monitoring

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
