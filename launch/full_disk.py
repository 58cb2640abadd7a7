"""A full disk in an entry point: one line, exit status 2, and nothing else on the terminal.

`on_full_disk(kept, where)` wraps what an entry point writes: a write that finds no space
left ends the command with one line naming the file and what is kept; the checkpoint orbax
did not finish is removed, the finished ones stay; the libraries' own reports of the failure
(orbax's, asyncio's and tensorstore's, from their threads, also while the process exits) are
silenced. `POSENC_NO_SPACE_AT=PATTERN` makes every write to a file matching it fail so, for
the tests.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import logging
import os
import sys
import threading
from typing import Any, Callable, Iterator

from launch import cli
from posenc.storage import io

fail = cli.fail


# Fault injection for testing a full disk: every write posenc makes to a file whose name
# matches this pattern (e.g. eval.jsonl, length_*.npz) fails with ENOSPC.
NO_SPACE_AT = 'POSENC_NO_SPACE_AT'


class _NoSpaceSilenced(logging.Filter):
  """Drops the reports of a full disk that libraries make from their own threads (orbax
  logs each failed write with its traceback, asyncio each task that failed with it): the
  one line of `on_full_disk` says it."""

  def filter(self, record: logging.LogRecord) -> bool:
    error = record.exc_info[1] if record.exc_info else None
    if error is not None and io.no_space(error) is not None:
      return False
    return not any(text in record.getMessage() for text in io.NO_SPACE_TEXTS)


def _follows_full_disk(error: BaseException | None) -> bool:
  """A full disk, or what a library's failed write leaves behind it: tensorstore's callbacks
  of the reads and writes still in flight find orbax's event loop closed under them."""
  if error is None:
    return False
  closed = isinstance(error, RuntimeError) and str(error) == 'Event loop is closed'
  return closed or io.no_space(error) is not None


def _silence_full_disk() -> Callable[[], None]:
  """Installs `_NoSpaceSilenced` on every logging handler and drops the errors of a full
  disk (`_follows_full_disk`) that reach sys.excepthook (tensorstore prints its callbacks'
  errors through it), threading.excepthook or sys.unraisablehook; returns what uninstalls it."""
  silenced = _NoSpaceSilenced()
  handlers = [*logging.getLogger().handlers, logging.lastResort]
  for handler in handlers:
    if handler is not None:
      handler.addFilter(silenced)
  hooks = sys.excepthook, threading.excepthook, sys.unraisablehook

  def on_error(kind: Any, error: BaseException, trace: Any) -> None:
    if not _follows_full_disk(error):
      hooks[0](kind, error, trace)

  def on_thread(args: Any) -> None:
    if not _follows_full_disk(args.exc_value):
      hooks[1](args)

  def on_unraisable(unraisable: Any) -> None:
    if not _follows_full_disk(unraisable.exc_value):
      hooks[2](unraisable)

  sys.excepthook, threading.excepthook, sys.unraisablehook = on_error, on_thread, on_unraisable

  def uninstall() -> None:
    for handler in handlers:
      if handler is not None:
        handler.removeFilter(silenced)
    sys.excepthook, threading.excepthook, sys.unraisablehook = hooks

  return uninstall


@contextlib.contextmanager
def on_full_disk(kept: Callable[[], str], where: str) -> Iterator[None]:
  """Turns a full disk inside the block into one line, exit status 2, and nothing else on
  the terminal:

    error: no space left on device writing run/eval.jsonl: the last checkpoint (step 20) is
    kept and the rerun resumes from it; free space and rerun the same command

  `kept()` says what survives (called after the failure); `where` names the output when the
  error names no file (a library's own write). A checkpoint orbax did not finish (its
  temporary directory under `where`) is removed; the finished ones stay. The libraries'
  own reports of the failure (orbax's, asyncio's, from their threads, also while the
  process exits) are silenced. Other errors pass through.
  """
  pattern = os.environ.get(NO_SPACE_AT, '')
  if pattern:

    def no_space(path: str) -> None:
      if fnmatch.fnmatch(os.path.basename(path), pattern):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    io.before_write = no_space
  uninstall = _silence_full_disk()
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    full = io.no_space(e)
    if full is None:
      uninstall()
      raise
    # Deferred: orbax; launch.report imports this module but not orbax.
    from posenc.training import checkpoint  # pylint: disable=g-import-not-at-top

    checkpoint.remove_unfinished(where)
    # The silencing stays: orbax's and asyncio's threads may still report while exiting.
    fail(
      f'no space left on device writing {full.filename or where}: {kept()}; free space '
      'and rerun the same command'
    )
  uninstall()


def kept_checkpoint(workdir: str) -> str:
  """What `on_full_disk` says survives of a run: its last checkpoint, from which the rerun
  resumes (the evaluation resumes from the last length measured)."""
  # Deferred: orbax and Flax; launch.report imports this module but neither
  # (tests/test_results_schema.py).
  from posenc.training import checkpoint  # pylint: disable=g-import-not-at-top

  steps = checkpoint.saved_steps(workdir)
  if not steps:
    return 'no checkpoint was written yet (the rerun starts from step 0)'
  return f'the last checkpoint (step {steps[-1]}) is kept and the rerun resumes from it'
