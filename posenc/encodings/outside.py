"""Encodings from outside posenc: by import path, or from an installed package's entry point.

  my_pkg.my_module:MY_ENCODING      an `Encoding` record at an import path
  NAME                              an installed package's entry point of the group
                                    `posenc.encodings` (its pyproject.toml:
                                    [project.entry-points."posenc.encodings"]
                                    NAME = "my_pkg.my_module:MY_ENCODING")
  randomized_<either of the above>  its randomized twin (`define.randomized_twin`)

The object must be an `Encoding` (the record the registry holds; `posenc.encodings.bias`,
`rotation`, `embedding` and `weights` build one from a function). What cannot be loaded, an
object of another type, or a record that breaks the contract is one line naming it
(`OutsideError`, a ValueError).

Example (xPos, `pip install -e examples/outside_encoding`):
  >>> load('posenc_xpos:XPOS').kind     # by its import path  # doctest: +SKIP
  'rotation'
  >>> load('xpos').kind                 # by its entry point  # doctest: +SKIP
  'rotation'
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
from typing import Any

from posenc.encodings import core
from posenc.encodings import define

GROUP = 'posenc.encodings'
KINDS = (core.EMBEDDING, core.ROTATION, core.BIAS, core.GEOMETRIC, core.CONTENT)
RANDOMIZED = 'randomized_'
HELPERS = 'posenc.encodings.bias, rotation, embedding or weights'


class OutsideError(ValueError):
  """An outside encoding that cannot be loaded or breaks the contract (one line)."""


def is_path(name: str) -> bool:
  """An import path `module:attribute`."""
  return ':' in name


@functools.lru_cache(maxsize=None)
def entry_points() -> dict[str, Any]:
  """{name: entry point} of the installed packages' `posenc.encodings` group (read once per
  process; `entry_points.cache_clear()` after installing one)."""
  return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def _describe(obj: Any) -> str:
  kind = (
    'a function'
    if callable(obj) and not isinstance(obj, type)
    else ('a class' if isinstance(obj, type) else f'a {type(obj).__name__}')
  )
  return kind


def check(encoding: Any, name: str) -> core.Encoding:
  """`encoding` if it is an `Encoding` that keeps the contract, else `OutsideError` naming
  what is wrong: its kind, or the module factory its kind needs. (Its options are its own:
  the record declares them.)"""
  if not isinstance(encoding, core.Encoding):
    raise OutsideError(
      f'encoding {name!r} is {_describe(encoding)}, not a posenc Encoding '
      f'record; build one with {HELPERS}'
    )
  if encoding.kind not in KINDS:
    raise OutsideError(
      f'encoding {name!r} has kind {encoding.kind!r}; valid kinds: {", ".join(KINDS)}'
    )
  if encoding.kind == core.EMBEDDING:
    if not callable(encoding.embedding) or encoding.attention is not None:
      raise OutsideError(
        f'encoding {name!r} of kind {encoding.kind!r} needs an embedding '
        'module factory and no attention one'
      )
  elif encoding.kind == core.CONTENT:
    if encoding.attention is not None:
      raise OutsideError(
        f'encoding {name!r} of kind {encoding.kind!r} takes no attention module factory'
      )
  elif not callable(encoding.attention):
    raise OutsideError(
      f'encoding {name!r} of kind {encoding.kind!r} needs an attention '
      'module factory (attention=...)'
    )
  return encoding


def _import(path: str) -> Any:
  module_name, _, attribute = path.partition(':')
  if not module_name or not attribute:
    raise OutsideError(f'encoding {path!r} is not an import path module:attribute')
  try:
    module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name and module_name.startswith(e.name) or e.name == module_name:
      raise OutsideError(
        f'encoding {path!r}: no module named {module_name!r} (is it installed, '
        'or on the Python path from the directory you run in?)'
      ) from None
    raise OutsideError(
      f'encoding {path!r}: module {module_name!r} does not import: {type(e).__name__}: {e}'
    ) from None
  except Exception as e:  # pylint: disable=broad-except  (any error of the user's module)
    raise OutsideError(
      f'encoding {path!r}: module {module_name!r} does not import: {type(e).__name__}: {e}'
    ) from None
  obj = module
  for part in attribute.split('.'):
    if not hasattr(obj, part):
      records = sorted(n for n, v in vars(module).items() if isinstance(v, core.Encoding))
      raise OutsideError(
        f'encoding {path!r}: module {module_name!r} has no attribute '
        f'{attribute!r}; its Encoding records: {", ".join(records) or "none"}'
      )
    obj = getattr(obj, part)
  return obj


def _entry_point(name: str) -> Any:
  try:
    return entry_points()[name].load()
  except Exception as e:  # pylint: disable=broad-except  (an installed package's error)
    raise OutsideError(
      f'encoding {name!r}: the {GROUP} entry point {name!r} of an installed '
      f'package does not load: {type(e).__name__}: {e}'
    ) from None


@functools.lru_cache(maxsize=None)
def load(name: str) -> core.Encoding | None:
  """The outside encoding `name` (an import path or an entry point, either with the
  `randomized_` prefix for the twin), checked; None when `name` is neither."""
  base = name[len(RANDOMIZED) :] if name.startswith(RANDOMIZED) else None
  if is_path(name):
    if base is not None and not _importable(name) and _importable(base):
      return _twin(name, check(_import(base), base))
    return check(_import(name), name)
  if name in entry_points():
    return check(_entry_point(name), name)
  if base is not None and base in entry_points():
    return _twin(name, check(_entry_point(base), base))
  return None


def _twin(name: str, encoding: core.Encoding) -> core.Encoding:
  try:
    return define.randomized_twin(encoding)
  except ValueError as e:
    raise OutsideError(f'encoding {name!r}: {e}') from None


def _importable(path: str) -> bool:
  """The module of `path` can be found (for `randomized_` + path, tried after the whole name)."""
  try:
    return importlib.util.find_spec(path.partition(':')[0]) is not None
  except (ImportError, ValueError):
    return False
