"""Small file helpers: atomic JSON writes and crash-tolerant JSON-lines logs."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable


def write_json_atomic(path: str, obj: Any) -> None:
  """Writes `obj` as JSON so that `path` holds either the old or the new file, never half.

  The temporary file lives in the same directory so `os.replace` is a rename.
  """
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-', suffix='.json')
  try:
    with os.fdopen(fd, 'w') as f:
      json.dump(obj, f, indent=1, sort_keys=False)
      f.write('\n')
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def read_json(path: str) -> Any:
  with open(path) as f:
    return json.load(f)


def append_jsonl(path: str, record: dict[str, Any]) -> None:
  """Appends one JSON line and flushes it to disk (a kill leaves at most a torn last line)."""
  with open(path, 'a') as f:
    f.write(json.dumps(record) + '\n')
    f.flush()
    os.fsync(f.fileno())


def read_jsonl(path: str, keep: Callable[[dict[str, Any]], bool] = lambda r: True,
               rewrite: bool = False) -> list[dict[str, Any]]:
  """Reads the complete lines of a JSON-lines file that satisfy `keep`.

  A torn last line (a process killed mid-write) is dropped. With `rewrite`, the file
  is atomically rewritten to hold exactly the returned records, so appends continue
  from a clean state (used on resume: records after the restored checkpoint go).
  """
  if not os.path.exists(path):
    return []
  records = []
  with open(path) as f:
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
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-', suffix='.jsonl')
    with os.fdopen(fd, 'w') as f:
      for record in records:
        f.write(json.dumps(record) + '\n')
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  return records
