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
