"""What every entry point shares: one-line errors with exit status 2 for bad input."""

import argparse
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
  app.run(main, argv=argv, flags_parser=_parse_flags)


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
