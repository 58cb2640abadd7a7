"""The machine under measurement: glibc's allocator setting and the hypervisor's steal time.

Standard library only: `launch.speed` applies the allocator setting before JAX starts its
threads.

Example:
  >>> start = cpu_times()
  >>> work = sum(range(10**6))              # the work measured
  >>> steal_percent(start, cpu_times())     # None off Linux  # doctest: +SKIP
  3.1
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys


def keep_freed_memory() -> bool:
  """Opt-in (`POSENC_KEEP_FREED_MEMORY=1`): glibc's malloc keeps freed memory for reuse.

  XLA's CPU runtime allocates each execution's temporaries as one large block that glibc
  maps and unmaps every time; one arena without mmap or trimming keeps it mapped. Its
  effect on this project's measurements is mixed (docs/speed.md), so it is off by default.
  Process-wide, so only the speed entry point calls it, before the JAX backend starts its
  threads. Returns whether it was applied.
  """
  if not sys.platform.startswith('linux') or os.environ.get('POSENC_KEEP_FREED_MEMORY') != '1':
    return False
  try:
    mallopt = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6').mallopt
  except (OSError, AttributeError):
    return False
  m_trim_threshold, m_top_pad, m_mmap_max, m_arena_max = -1, -2, -4, -8
  return all(
    mallopt(option, value) == 1
    for option, value in (
      (m_arena_max, 1),
      (m_mmap_max, 0),
      (m_trim_threshold, 2**31 - 1),
      (m_top_pad, 256 << 20),
    )
  )


def cpu_times() -> tuple[int, int] | None:
  """(steal, total) CPU jiffies of the machine from /proc/stat, or None off Linux.

  On a shared VM the hypervisor's steal time moves wall-clock measurements by up to 2x; the
  samplers' measurement reports the steal share of its own run next to the figures.
  """
  try:
    with open('/proc/stat') as f:
      fields = [int(x) for x in f.readline().split()[1:]]
  except (OSError, ValueError):
    return None
  return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_percent(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
  """The steal share (%) of the CPU time between two `cpu_times()` readings."""
  if start is None or end is None or end[1] <= start[1]:
    return None
  return round(100.0 * (end[0] - start[0]) / (end[1] - start[1]), 1)
