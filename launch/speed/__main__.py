"""`python -m launch.speed NAME [--flags]`: runs the measurement launch/speed/NAME.py.

See launch/speed/__init__.py (`python -m launch.speed --help`).
"""

import importlib
import sys

from launch import cli
from launch import speed
from posenc.speed import machine


def main() -> None:
  name = cli.subcommand(sys.argv, speed.NAMES, 'measurement', speed.__doc__)
  machine.keep_freed_memory()  # Process-wide: before the JAX backend starts its threads.
  module = importlib.import_module(f'launch.speed.{name}')
  # Deferred: `launch.speed --help` and an unknown name import no JAX; the measurement's
  # module has imported it by now.
  from launch import full_disk  # pylint: disable=g-import-not-at-top

  with full_disk.on_full_disk(
    lambda: 'nothing else was written (the figures are printed above)', 'the --out file'
  ):
    module.main([sys.argv[0], *sys.argv[2:]])


if __name__ == '__main__':
  main()
