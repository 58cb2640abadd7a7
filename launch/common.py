"""What every entry point shares: one-line errors with exit status 2 for bad input, and the
process's allocator setting (`keep_freed_memory`)."""

import argparse
import ctypes
import ctypes.util
import os
import sys
from typing import Callable, NoReturn

from absl import app
from absl import flags


def fail(message: str) -> NoReturn:
  """Prints `error: message` as one line on stderr and exits with status 2."""
  print('error: ' + ' '.join(str(message).split()), file=sys.stderr)
  sys.exit(2)


def _parse_flags(argv: list[str]) -> list[str]:
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(e)


def run(main: Callable[[list[str]], None], argv: list[str] | None = None) -> None:
  """`absl.app.run` whose flag errors (unknown flag, bad value, a config file that does
  not load) are one line and exit status 2."""
  keep_freed_memory()
  app.run(main, argv=argv, flags_parser=_parse_flags)


def keep_freed_memory() -> bool:
  """Opt-in (`POSENC_KEEP_FREED_MEMORY=1`): glibc's malloc keeps freed memory for reuse.

  XLA's CPU runtime allocates each execution's temporaries as one block (191 MB for a
  training step of the study's model at T = 40, B = 128) from its worker threads. glibc
  serves a block that large from a thread arena by a fresh mmap and unmaps it on free, so
  every step page-faults its whole working set in again: 46,700 faults and about 150 ms of
  kernel time per step, measured. One arena, no mmap and no trimming keep the block
  mapped; measured on this VM (A/B, two runs each):
    - bench train, P = 1: 1.73 / 1.75 -> 2.04 / 2.10 model-updates/s (+19%);
    - bench eval at length 250: compile 6.6 / 6.8 -> 10.5 / 9.8 s and run 14.6 / 17.1 ->
      24.7 / 21.7 s (slower: every thread, the compiler's included, shares one arena).
  A later A/B of single update steps (randomized_relative, bucket 20) measured it slower:
  median 319 ms by default, 392 ms with these settings. The training gain is therefore not
  established. Hence off by default. Process-wide, so only
  the entry points call it, before the JAX backend starts its threads. Returns whether
  it was applied.
  """
  if not sys.platform.startswith('linux') or os.environ.get('POSENC_KEEP_FREED_MEMORY') != '1':
    return False
  try:
    mallopt = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6').mallopt
  except (OSError, AttributeError):
    return False
  m_trim_threshold, m_top_pad, m_mmap_max, m_arena_max = -1, -2, -4, -8
  return all(mallopt(option, value) == 1 for option, value in (
      (m_arena_max, 1), (m_mmap_max, 0), (m_trim_threshold, 2**31 - 1),
      (m_top_pad, 256 << 20)))


class ArgumentParser(argparse.ArgumentParser):
  """argparse for the benchmarks, whose errors are one line with exit status 2."""

  def error(self, message: str) -> NoReturn:
    fail(f'{self.prog}: {message}')


def cpu_times() -> tuple[int, int] | None:
  """(steal, total) CPU jiffies of the machine from /proc/stat, or None off Linux.

  On a shared VM the hypervisor's steal time moves wall-clock benchmarks by 2x between
  runs here; the benchmarks report the steal share of their own run next to the figures.
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
