"""What every section of a report shares: the names of its rows and columns, the report's
options and metric, a section's output (`Section`) and the report's errors.

A section is the module section.py of a kind's folder (`posenc.kinds`) with `check(record,
path, metric)` (raises `MalformedRunError` for a run it cannot report, which the report then
skips) and `build(runs, options) -> Section` over the runs (`load.RunFile`) of its kind; the
report finds it by results.json's `evaluation` (`posenc.kinds.section`).

Rows and columns come from the registries: the tasks from `tasks`, the encodings' names from
`posenc.encoding_names` (the registry of encodings holds Flax modules, and a report needs
neither Flax nor a model).

Example:
  >>> metric_label('exact_match')
  'exact match'
  >>> counted(3, 'heatmap')
  '3 heatmaps'
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from posenc import encoding_names
from posenc import results as results_lib
from posenc import suggest
import tasks as tasks_lib


# The study's tasks in its order (the range tables' rows), their Chomsky level as the tables
# print it and that of the later tasks in the study's interface (rows after the study's), and
# the arithmetic study's tasks in the registry's order.
_LEVEL_LABELS = {'regular': 'R', 'dcf': 'DCF', 'cs': 'CS', 'later': 'later'}
TASKS: tuple[str, ...] = tuple(tasks_lib.NAMES)
TASK_LEVELS: dict[str, str] = {
  name: _LEVEL_LABELS.get(tasks_lib.REGISTRY[name].level, '?')
  for name in TASKS + tuple(tasks_lib.LATER)
}
ARITHMETIC_TASKS: tuple[str, ...] = tuple(tasks_lib.ARITHMETIC)

# The study's encodings in its order (Ruoss et al. 2023: Table 1's 11, Table 5's two
# geometric variants): the range tables' columns.
ENCODINGS: tuple[str, ...] = encoding_names.STUDY
# Every encoding of the registry in its order: the region table's columns, the arithmetic
# study's abacus and FIRE among them.
GRID_ENCODINGS: tuple[str, ...] = encoding_names.ALL

# The study's protocol, against which runs are called "not fully trained" or "a subset".
STUDY_TRAIN_STEPS = 2_000_000
STUDY_TRAIN_LENGTH = 40
STUDY_MAX_LENGTH = 500

MISSING = '–'  # No run covers the cell.
DIVERGED = 'div'  # Runs cover the cell, but every member diverged.
RESULTS_FILE = 'results.json'

# The metrics a report can be asked for: those of the range tables (the range records'
# `metrics`, `posenc.kinds.range.record`: the one section that reads several); every other
# section reads its evaluation's own.
METRICS: tuple[str, ...] = ('accuracy', 'exact_match')


class ReportError(ValueError):
  """Bad input to the report as a whole (a missing path, no results anywhere, an unknown
  metric)."""


# A results.json that does not follow the schema (`posenc.results`), or that holds nothing a
# section can report; the report skips it.
MalformedRunError = results_lib.SchemaError


@dataclasses.dataclass(frozen=True)
class Options:
  """What a report is asked for: every column of the grid (`full_grid`), figures, per-length
  tables, the metric ('accuracy' or 'exact_match'), and the skipped files the notes name."""

  full_grid: bool = False
  figures: bool = True
  per_length: bool = False
  metric: str = 'accuracy'
  skipped: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Section:
  """A part of a report: its markdown texts by name ('table1', 'arithmetic', ...), in the
  order they print; its files by name; and what `launch.report` says it wrote: its tables
  (file names) and its figures counted (e.g. '3 figures').

  Example:
    >>> Section({'perplexity': text}, {'perplexity.md': text.encode()},  # doctest: +SKIP
    ...         tables=('perplexity.md',))
  """

  texts: Mapping[str, str]
  files: Mapping[str, bytes]
  tables: tuple[str, ...] = ()
  figures: tuple[str, ...] = ()


def metric_label(metric: str) -> str:
  """How titles and axis labels name `metric` (`posenc.results.METRICS`).

  Raises:
    ReportError: `metric` is not one of METRICS.
  """
  if metric not in METRICS:
    raise ReportError(
      f'unknown metric {metric!r}{suggest.did_you_mean(metric, METRICS)}; expected one of {", ".join(METRICS)}'
    )
  return results_lib.METRICS[metric]


def counted(n: int, noun: str) -> str:
  """'1 figure', '3 figures'."""
  return f'{n} {noun}{"s" * (n != 1)}'
