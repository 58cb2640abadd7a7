"""The kinds of evaluation, one folder each, registered here once.

A kind of evaluation is how one kind of task is judged: the study's accuracy per length
(`range`), exact match over grids of operand lengths (`grid`), accuracy and edit distance per
test distribution and length (`lengths`), a language model's perplexity per window length
(`perplexity`). Everything that differs by kind sits in its folder, one module per layer
that reads it (`PARTS`), each built on a shared base that sits below the kinds:

  record.py    its record in results.json (`RECORD`, a `posenc.results.Evaluation`); no JAX
  protocol.py  how its tasks train and are evaluated (`PROTOCOL`, a
               `posenc.training.protocol.Protocol`), and what it reads off a task (a
               `typing.Protocol`, the protocol's `task_type`)
  section.py   its section of a report (`check`, `build`, made of `posenc.sections`); no JAX
  cost.py      what its runs cost (`COST`, a `posenc.training.cost_model.Cost`); a kind without one
               has no cost estimate

`KINDS` names each kind's folder (a package path, so a kind may live outside posenc); a task
names its kind (`task.protocol`), results.json its `evaluation`. Each reader loads only the
part it reads, as big_vision loads its evaluators by name, and sits above the kinds:
`posenc.kinds` (any results.json, by its record), `posenc.report` (every kind's
section), `posenc.setup` (a run of any kind, by its protocol) and `posenc.sweep.cost` (any kind's
cost); nothing a kind's part imports loads a kind by name (tests/test_structure.py counts
the names loaded here as imports). results.json is read and a report is written without
importing JAX or Flax. Adding a kind is one folder and one line here
(tests/test_toy_protocol.py adds one from a folder of the tests).

Example:
  >>> record('grid').evaluation, protocol('grid').families
  ('grid', ('decoder',))
  >>> section('range').__name__
  'posenc.kinds.range.section'
"""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType
from typing import Any

from posenc import results
from posenc.storage import store

# Each kind's folder, in the order a report prints their sections.
KINDS: dict[str, str] = {
  'range': 'posenc.kinds.range',
  'grid': 'posenc.kinds.grid',
  'perplexity': 'posenc.kinds.perplexity',
  'lengths': 'posenc.kinds.lengths',
}
# The modules of a kind's folder that the functions below load by name.
PARTS = ('record', 'protocol', 'section', 'cost')


def check(kind: str) -> None:
  """ValueError (one line) for a kind not in KINDS, naming the valid ones."""
  if kind not in KINDS:
    raise ValueError(f'unknown kind of evaluation {kind!r}; valid: {", ".join(KINDS)}')


def part(kind: str, name: str) -> ModuleType:
  """The module `name` (one of `PARTS`) of `kind`'s folder."""
  check(kind)
  if name not in PARTS:
    raise ValueError(f'unknown part {name!r} of a kind of evaluation; valid: {", ".join(PARTS)}')
  return importlib.import_module(f'{KINDS[kind]}.{name}')


def record(kind: str) -> type:
  """The class of `kind`'s record in results.json (its `RECORD`)."""
  return part(kind, 'record').RECORD


def protocol(kind: str) -> Any:
  """How `kind`'s tasks train and are evaluated (its `PROTOCOL`)."""
  return part(kind, 'protocol').PROTOCOL


def section(kind: str) -> ModuleType:
  """`kind`'s section of a report: a module with `check` and `build`."""
  return part(kind, 'section')


def cost(kind: str) -> Any | None:
  """What `kind`'s runs cost (its `COST`), or None when its folder has no cost module."""
  check(kind)
  try:
    return part(kind, 'cost').COST
  except ModuleNotFoundError as e:
    if e.name != f'{KINDS[kind]}.cost':
      raise
    return None


# ---------------------------------------------------------------------------------------
# results.json of any kind, read back: the record its `evaluation` names, the header and the
# versions checked by `posenc.results` (no protocol, no JAX).


def record_of(evaluation: Any, where: str = 'results.json') -> type:
  """The record class of results.json's `evaluation` (`record`), or a one-line
  SchemaError naming the kinds there are."""
  if evaluation not in KINDS:
    names = [repr(name) for name in KINDS]
    raise results.SchemaError(
      f'{where}: evaluation is {evaluation!r}, expected {", ".join(names[:-1])} or {names[-1]}'
    )
  return record(evaluation)


def from_json(data: Any, where: str = 'results.json') -> results.Results:
  """The Results of a results.json object of any version and kind (a file without
  `schema_version` is version 1, whose runs were all 'range' runs).

  Raises:
    SchemaError: an unknown version or evaluation, or a missing or mistyped field, naming
      `where` and the field.
  """
  version = results.check_version(data, where)
  evaluation = data.get('evaluation', 'range' if version == 1 else None)
  return results.Results.from_json(data, record_of(evaluation, where), where)


def read(path: str | os.PathLike[str]) -> results.Results:
  """The Results of the results.json at `path`, a file or a store URL (`from_json`).

  Raises:
    SchemaError: unreadable JSON, or what `from_json` raises, naming `path`.
  """
  try:
    if store.is_url(path):
      data = json.loads(store.read_bytes(os.fspath(path)))
    else:
      with open(path) as f:
        data = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise results.SchemaError(f'{path}: cannot read JSON ({e})') from None
  return from_json(data, str(path))
