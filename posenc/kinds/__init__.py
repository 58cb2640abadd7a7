"""The kinds of evaluation, one folder each, registered here once.

A kind of evaluation is how one kind of task is judged: the study's accuracy per length
(`range`), exact match over grids of operand lengths (`grid`), accuracy and edit distance per
test distribution and length (`lengths`), a language model's perplexity per window length
(`perplexity`). Everything that differs by kind sits in its folder, one module per layer
that reads it (`PARTS`), each built on a shared base that sits below the kinds:

  record.py    its record in results.json (`RECORD`, a `posenc.results.Evaluation`); no JAX
  protocol.py  how its tasks train and are evaluated (`PROTOCOL`, a
               `posenc.evaluate.core.Protocol`), and what it reads off a task (a
               `typing.Protocol`, the protocol's `task_type`)
  section.py   its section of a report (`check`, `build`, made of `posenc.sections`); no JAX
  cost.py      what its runs cost (`COST`, a `posenc.cost_model.Cost`); a kind without one
               has no cost estimate

`KINDS` names each kind's folder (a package path, so a kind may live outside posenc); a task
names its kind (`task.protocol`), results.json its `evaluation`. Each reader loads only the
part it reads, as big_vision loads its evaluators by name, and sits above the kinds:
`posenc.results_file` (any results.json, by its record), `posenc.report` (every kind's
section), `posenc.setup` (a run of any kind, by its protocol) and `posenc.cost` (any kind's
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
from types import ModuleType
from typing import Any

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
