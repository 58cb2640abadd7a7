"""`launch.bench` is now `launch.speed` (docs/speed.md); this pointer goes in the next version.

`python -m launch.bench NAME [flags]` and `python -m launch.bench_NAME [flags]` run nothing:
they print the new command on one line and exit with status 2, e.g.

  error: launch.bench is now launch.speed: python -m launch.speed train --steps=5
"""

import shlex
import sys
from typing import NoReturn


def point(name: str | None = None) -> NoReturn:
  """Prints the command `sys.argv` now is, `launch.bench_NAME` given `name`; exit status 2."""
  args = ([name] if name else []) + sys.argv[1:]
  old = 'launch.bench' + (f'_{name}' if name else '')
  new = shlex.join(['python', '-m', 'launch.speed', *args])
  print(f'error: {old} is now launch.speed: {new}', file=sys.stderr)
  sys.exit(2)


if __name__ == '__main__':
  point()
