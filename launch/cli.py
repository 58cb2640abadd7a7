"""The command line of every entry point: absl flags, one-line errors, `--help`, subcommands.

It imports absl only, so a dispatcher's `--help` and an unknown subcommand answer before
JAX is imported (`launch.common` adds what runs need: the experiment file, the cache).

- Flags are absl's: `--name=value`, `--flag`/`--noflag`, `--flagfile=FILE` (flags read from
  a file, one a line), positional arguments among them (`launch.report RUNDIR --out=DIR`).
- Bad input is one line `error: ...` on stderr and exit status 2 (`fail`), an absl flag
  error too (an unknown flag, a value of the wrong type or outside its choices).
- `--help` (-h, -help, --helpshort) prints the entry point's docstring and its own flags,
  `--helpfull` every library's too, exit status 0.
- Subcommands (`launch.analyze NAME`, `launch.speed NAME`): `subcommand` picks the name
  from argv[1]; each defines its flags only once it is chosen, so two may share a flag name
  with different defaults.

Example (an entry point):
  _OUT = flags.DEFINE_string('out', 'report', 'Output directory.')

  def main(argv):  # argv: the program name, then the positional arguments
    ...

  if __name__ == '__main__':
    cli.run(main)
"""

from __future__ import annotations

import sys
from typing import Any, Callable, NoReturn, Sequence

from absl import app
from absl import flags
from absl import logging

from posenc import suggest

# 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C.
INTERRUPTED_EXIT = 130


def fail(message: Any) -> NoReturn:
  """Prints `error: message` as one line on stderr and exits with status 2."""
  print('error: ' + ' '.join(str(message).split()), file=sys.stderr)
  sys.exit(2)


def parse_flags(argv: list[str]) -> list[str]:
  """absl's parse of `argv` (program name first), a flag error as one line (`fail`).

  Returns:
    The program name and the positional arguments.
  """
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(e)


def flags_only(argv: Sequence[str], hint: str = 'give flags only') -> None:
  """Fails with one line if `argv` (after the program name) holds positional arguments."""
  if len(argv) > 1:
    fail(f'unexpected arguments {list(argv[1:])}; {hint}')


HELP_FLAGS = ('-h', '-help', '--help', '--helpshort', '--helpfull')


def wants_help(argv: Sequence[str]) -> bool:
  """Whether `argv` (without the program name) asks for help before any `--`."""
  for arg in argv:
    if arg == '--':
      return False
    if arg in HELP_FLAGS:
      return True
  return False


def print_help(module: Any, full: bool = False, doc: str | None = None) -> NoReturn:
  """`doc` (default: the module's docstring) and the module's flags (`full`: every
  library's too) on stdout, then exit status 0.

  `module` is the module object that defines the flags, or '__main__'.
  """
  if doc is None:
    doc = (sys.modules[module] if isinstance(module, str) else module).__doc__ or ''
  if full:
    text = flags.FLAGS.get_help()
  else:
    text = (
      flags.FLAGS.main_module_help() if module == '__main__' else flags.FLAGS.module_help(module)
    )
  print(doc.strip() + ('\n\nflags:\n' + text if text else ''))
  sys.exit(0)


def quiet_logging() -> None:
  """Libraries log warnings only, unless --verbosity was given on the command line."""
  if not flags.FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)


def run(
  main: Callable[[list[str]], Any],
  argv: list[str] | None = None,
  *,
  doc: str | None = None,
  flags_parser: Callable[[list[str]], list[str]] = parse_flags,
  module: Any = None,
) -> NoReturn:
  """`absl.app.run(main)` with one-line flag errors (exit status 2), quiet library logs, and
  `--help` printing `doc` (default: the docstring of `main`'s module) and that module's
  flags with exit status 0.

  Args:
    main: called with the program name and the positional arguments.
    argv: the command line, program name first (default: sys.argv).
    doc: the help text, for a subcommand whose flags live in its dispatcher's module.
    flags_parser: parses argv (`launch.common` checks the experiment file first).
    module: the module that defines the flags (default: `main`'s).
  """
  args = (sys.argv if argv is None else argv)[1:]
  name = module or main.__module__
  if wants_help(args):
    print_help(
      name if name == '__main__' else sys.modules[name], full='--helpfull' in args, doc=doc
    )

  def quiet_main(argv):
    quiet_logging()
    try:
      return main(argv)
    except KeyboardInterrupt:
      # Ctrl-C: one line, no traceback; every file is written whole, so a rerun resumes.
      print('interrupted (Ctrl-C); rerunning the same command resumes', file=sys.stderr)
      sys.exit(INTERRUPTED_EXIT)

  app.run(quiet_main, argv=argv, flags_parser=flags_parser)


def call(main: Callable[[list[str]], Any], argv: Sequence[str], module: str | None = None) -> Any:
  """Runs an entry point's `main` in this process on `argv` (its arguments, without the
  program name) and returns what it returns: the module's flags back at their defaults,
  then parsed as the command line would (one-line errors). For programs and tests; the
  command line goes through `run`, which exits.

  Example: cli.call(report._main, ['runs/parity', '--out=report'])
  """
  for flag in flags.FLAGS.get_flags_for_module(module or main.__module__):
    flag.unparse()
  return main(parse_flags([sys.argv[0], *argv]))


def subcommand(argv: Sequence[str], names: Sequence[str], what: str, doc: str) -> str:
  """The subcommand named by argv[1] (argv: the command line, program name first).

  `--help` in its place prints `doc` and exits with status 0; a missing or unknown name is
  one line naming the valid ones.

  Example: subcommand(['speed', 'nope'], ['eval', 'train'], 'measurement', __doc__) exits
    with `error: unknown measurement 'nope'; valid: eval, train`.
  """
  if len(argv) > 1 and argv[1] in HELP_FLAGS:
    print(doc.strip())
    sys.exit(0)
  if len(argv) < 2 or argv[1] not in names:
    got = argv[1] if len(argv) > 1 else '(none)'
    fail(f'unknown {what} {got!r}{suggest.did_you_mean(got, names)}; valid: {", ".join(names)}')
  return argv[1]
