"""Small file helpers: atomic writes, crash-tolerant JSON-lines logs and the full disk
(`no_space`). The lock that keeps a run directory to one writer is `posenc.storage.lease`.

Each takes a local path or an object-store URL (`gs://`, `s3://`: `posenc.storage.store`). On a
store a write is one whole-object put (atomic as a rename is on a disk), an append to a
JSON-lines log rewrites its object (read, add the line, put: the run's one writer makes this
safe, and a log holds one line per log interval or evaluated cell), and a directory's one
writer holds a lease object (`posenc.storage.lease.Lease`) instead of a flock.

Every file written here gets the mode an ordinary `open(path, 'w')` gives it, 0666 & ~umask:
the temporary file of an atomic write is created with mode 0666 and the kernel applies the
process's umask at creation (`tempfile.mkstemp` would give 0600, which colleagues sharing a
machine cannot read). Nothing reads the umask, so nothing races with a thread that creates
files while it is being read.

Example:
  >>> os.makedirs('run', exist_ok=True)
  >>> write_json_atomic('run/results.json', {'score': 0.9})   # mode 0644 under umask 022
  >>> append_jsonl('run/eval.jsonl', {'length': 41, 'accuracy': 0.5})
  >>> read_jsonl('run/eval.jsonl')
  [{'length': 41, 'accuracy': 0.5}]
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from typing import Any, Callable

from posenc.storage import store

# The mode of every file posenc creates, before the umask: that of open(path, 'w').
FILE_MODE = 0o666


def _no_check(path: str) -> None:
  del path


# Called with the path of every file about to be written here: the entry points install a
# check that simulates a full disk at a chosen file (their tests); by default it does nothing.
before_write: Callable[[str], None] = _no_check


# How a full disk reads in a library's message that carries no errno.
NO_SPACE_TEXTS = ('No space left on device', 'Disk quota exceeded')


def no_space(error: BaseException) -> OSError | None:
  """The 'no space left on device' (ENOSPC, or EDQUOT: a quota) error behind `error`, if any.

  Libraries wrap it (orbax and tensorstore raise their own errors with the OS message in
  the text), so the chain of causes is searched and the text read as well; a wrapped
  error comes back as an OSError without a file name.

  Example:
    >>> no_space(OSError(errno.ENOSPC, 'No space left on device', 'run/eval.jsonl')).filename
    'run/eval.jsonl'
  """
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
      return error
    if any(text in str(error) for text in NO_SPACE_TEXTS):
      return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    error = error.__cause__ or error.__context__
  return None


def _raise_named(error: OSError, path: str) -> None:
  """Raises `error`, naming the file `path` when it names none (a failed write does not)."""
  if error.filename is None and error.errno is not None:
    raise OSError(error.errno, error.strerror, path) from error
  raise error


def _create_temporary(directory: str, prefix: str, suffix: str) -> tuple[int, str]:
  """(fd, path) of a new file in `directory`, created exclusively with mode FILE_MODE & ~umask.

  Like `tempfile.mkstemp`, but with the usual mode instead of 0600.
  """
  for _ in range(100):
    path = os.path.join(directory, f'{prefix}{secrets.token_hex(6)}{suffix}')
    try:
      return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), path
    except FileExistsError:
      continue
  raise FileExistsError(f'no free temporary file name in {directory}')


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
  """Writes `data` so that `path` holds either the old or the new file, never half of one.

  The temporary file lives in the same directory (hidden, `.NAME.*.tmp`), so `os.replace`
  is a rename; it is removed again if the write fails. The file gets mode 0666 & ~umask.

  Example:
    >>> os.makedirs('report', exist_ok=True)
    >>> write_bytes_atomic('report/figure.png', b'PNG')  # a reader sees the old or the new one
  """
  path = os.fspath(path)
  if store.is_url(path):
    try:
      before_write(path)
    except OSError as e:
      _raise_named(e, path)
    store.put(path, data)
    return
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = _create_temporary(directory, f'.{os.path.basename(path)}.', '.tmp')
  try:
    with os.fdopen(fd, 'wb') as f:
      before_write(path)
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    if os.path.exists(tmp):
      os.unlink(tmp)
    if isinstance(e, OSError):
      _raise_named(e, path)
    raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
  """`write_bytes_atomic` of `text` in UTF-8."""
  write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
  """Writes `obj` as indented JSON (one trailing newline) with `write_bytes_atomic`.

  Example:
    >>> os.makedirs('run', exist_ok=True)
    >>> write_json_atomic('run/config.json', {'task': 'parity_check'})
    >>> read_json('run/config.json')
    {'task': 'parity_check'}
  """
  write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=False) + '\n')


def read_bytes(path: str) -> bytes:
  """The bytes of the file (or object) `path`; FileNotFoundError if there is none."""
  if store.is_url(path):
    return store.read_bytes(path)
  with open(path, 'rb') as f:
    return f.read()


def read_text(path: str) -> str:
  """The text of the file (or object) `path`; FileNotFoundError if there is none."""
  if store.is_url(path):
    return store.read_bytes(path).decode()
  with open(path) as f:
    return f.read()


def read_json(path: str) -> Any:
  if store.is_url(path):
    return json.loads(read_text(path))
  with open(path) as f:
    return json.load(f)


def exists(path: str) -> bool:
  return store.exists(path) if store.is_url(path) else os.path.exists(path)


def isfile(path: str) -> bool:
  return store.isfile(path) if store.is_url(path) else os.path.isfile(path)


def makedirs(path: str) -> None:
  """Creates directory `path` and its parents; nothing on a store (it has no folders)."""
  if not store.is_url(path):
    os.makedirs(path, exist_ok=True)


def listdir(path: str) -> list[str]:
  return store.listdir(path) if store.is_url(path) else os.listdir(path)


def remove(path: str) -> None:
  """Deletes the file (or object) `path`."""
  if store.is_url(path):
    store.remove(path)
  else:
    os.unlink(path)


def append_jsonl(
  path: str,
  record: dict[str, Any],
  replaces: Callable[[dict[str, Any]], bool] | None = None,
) -> None:
  """Appends one JSON line and flushes it to disk (a kill leaves at most a torn last line).

  On a store the object is rewritten whole with the line added (a kill leaves the old
  object or the new one), only if it is still the version read (`store.replace`: else
  store.Conflict); the old lines that `replaces` matches are dropped from it. A lease
  cannot stop a write already past its check when its process stalls (`Lease`), so a
  process that lost the directory may have put one line more; `replaces` makes the new
  holder's line take its place (a local file has one writer: its flock)."""
  if store.is_url(path):
    line = json.dumps(record) + '\n'
    try:
      before_write(path)
    except OSError as e:
      _raise_named(e, path)
    try:
      old, version = store.read_versioned(path)
    except FileNotFoundError:
      if not store.create(path, line.encode()):
        raise store.Conflict(f'{path}: created by another writer meanwhile') from None
      return
    if replaces is not None:
      kept = [
        text for text in old.decode().splitlines(keepends=True) if not _matches(text, replaces)
      ]
      old = ''.join(kept).encode()
    # Conditional: a writer that lost the directory cannot put back a log the new holder
    # has rewritten since it read it.
    store.replace(path, old + line.encode(), version)
    return
  try:
    with open(path, 'a') as f:
      before_write(path)
      f.write(json.dumps(record) + '\n')
      f.flush()
      os.fsync(f.fileno())
  except OSError as e:
    _raise_named(e, path)


def _matches(text: str, replaces: Callable[[dict[str, Any]], bool]) -> bool:
  """Whether the complete JSON line `text` is a record `replaces` matches."""
  if not text.endswith('\n'):
    return True  # A torn last line goes as well.
  try:
    record = json.loads(text)
  except json.JSONDecodeError:
    return True
  return isinstance(record, dict) and replaces(record)


def open_lines(path: str) -> Any:
  """The open file `path`, or the lines of the object `path` (split at newlines only)."""
  if store.is_url(path):
    text = read_text(path)
    return contextlib.nullcontext(
      [line + '\n' for line in text.split('\n')[:-1]] + [text.split('\n')[-1]]
    )
  return open(path)


def read_jsonl(
  path: str, keep: Callable[[dict[str, Any]], bool] = lambda r: True, rewrite: bool = False
) -> list[dict[str, Any]]:
  """Reads the complete lines of a JSON-lines file that satisfy `keep`.

  A torn last line (a process killed mid-write) is dropped. With `rewrite`, the file
  is atomically rewritten to hold exactly the returned records, so appends continue
  from a clean state (used on resume: records after the restored checkpoint go).
  """
  if not exists(path):
    return []
  records = []
  with open_lines(path) as f:
    for line in f:
      if not line.endswith('\n'):
        break
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        break
      if keep(record):
        records.append(record)
  if rewrite:
    write_text_atomic(path, ''.join(json.dumps(record) + '\n' for record in records))
  return records


# ---------------------------------------------------------------------------------------
# One writer per directory.
