"""The nearest valid name to an unknown one, for the one-line errors of bad input.

Every error that names an unknown value (an encoding, a task, a suite, a config field, an
option, a launcher) puts `did_you_mean(value, valid)` right after the value, so that a typo
reads with its correction. Plain Python (difflib), imported by `tasks`, `experiments`,
`launch` and `posenc` alike.

Example:
  >>> f'unknown encoding {"rotray"!r}{did_you_mean("rotray", ["rotary", "alibi"])}'
  "unknown encoding 'rotray' (did you mean 'rotary'?)"
  >>> did_you_mean('zzz', ['rotary', 'alibi'])
  ''
  >>> did_you_mean('RoPE', ['rotary', 'pope'], known_as={'rope': 'rotary'})
  " (did you mean 'rotary'?)"
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

# difflib's similarity ratio a suggestion needs: a typo is well above it ('rotray' ->
# 'rotary' 0.83, 'stepz' -> 'steps' 0.8, 'evl' -> 'eval' 0.86), another word below
# ('division' -> 'addition' 0.62).
CUTOFF = 0.75


def nearest(name: Any, valid: Iterable[Any], known_as: Mapping[str, str] = {}) -> str | None:
  """The valid name most like `name` (case aside), or None when none is near; `known_as`
  maps names the field uses elsewhere to the valid one ('rope' -> 'rotary')."""
  if not isinstance(name, str) or not name:
    return None
  if name.lower() in known_as:
    return known_as[name.lower()]
  choices = [str(v) for v in valid]
  by_lower = {c.lower(): c for c in reversed(choices)}
  found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=CUTOFF)
  return by_lower[found[0]] if found and by_lower[found[0]] != name else None


def did_you_mean(name: Any, valid: Iterable[Any], known_as: Mapping[str, str] = {}) -> str:
  """ " (did you mean 'x'?)" for the nearest valid name, or ''."""
  found = nearest(name, valid, known_as)
  return '' if found is None else f' (did you mean {found!r}?)'
