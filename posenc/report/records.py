"""What a report reads: the records of runs, members and cells, and the names of rows and
columns (from the registries)."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping


from posenc import encodings as encodings_lib
from posenc import results as results_lib
import tasks as tasks_lib


# Rows and columns come from the registries: the study's tasks in order with their Chomsky
# level as the tables print it, and the encodings of the grid in order.
_LEVEL_LABELS = {'regular': 'R', 'dcf': 'DCF', 'cs': 'CS'}
TASKS: tuple[str, ...] = tuple(tasks_lib.NAMES)
TASK_LEVELS: dict[str, str] = {
    name: _LEVEL_LABELS.get(tasks_lib.REGISTRY[name].level, '?') for name in TASKS}
ENCODINGS: tuple[str, ...] = tuple(encodings_lib.NAMES)

# The study's protocol, against which runs are called "not fully trained" or "a subset".
STUDY_TRAIN_STEPS = 2_000_000
STUDY_TRAIN_LENGTH = 40
STUDY_MAX_LENGTH = 500

MISSING = '–'  # No run covers the cell.
DIVERGED = 'div'  # Runs cover the cell, but every member diverged.
RESULTS_FILE = 'results.json'
ARITHMETIC_FILE = 'arithmetic.md'  # The region table of grid runs.
PERPLEXITY_FILE = 'perplexity.md'  # Perplexity by length of language-model runs.


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
  """A protocol's part of a report: its markdown texts by name ('table1', 'arithmetic', ...;
  the fields of `posenc.report.Report`) and its files by name."""
  texts: Mapping[str, str]
  files: Mapping[str, bytes]


# The report's metrics: its name in titles and axis labels, and the member fields it reads.
METRICS: dict[str, tuple[str, str, str]] = {
    'accuracy': ('accuracy', 'score', 'accuracy_by_length'),
    'exact_match': ('exact match', 'exact_match_score', 'exact_match_by_length'),
}


def metric_label(metric: str) -> str:
  """How titles and axis labels name `metric`.

  Example:
    >>> metric_label('exact_match')
    'exact match'

  Raises:
    ReportError: `metric` is not one of METRICS.
  """
  return metric_fields(metric)[0]


def metric_fields(metric: str) -> tuple[str, str, str]:
  if metric not in METRICS:
    raise ReportError(f'unknown metric {metric!r}; expected one of {", ".join(METRICS)}')
  return METRICS[metric]


@dataclasses.dataclass(frozen=True)
class Member:
  """One trained model of a population.

  `score` is None for a diverged member; `accuracy_by_length` maps length -> accuracy. Both hold
  the report's metric: with 'exact_match', the member's exact-match score and curve.
  """
  seed: int
  learning_rate: float
  diverged: bool
  score: float | None
  accuracy_by_length: Mapping[int, float]
  data_seed: int | None = None  # When the population varies the data order.


@dataclasses.dataclass(frozen=True)
class Run:
  """One run directory's results.json.

  `planned_steps` is the config's `train.steps` when the config records it (else
  `train_steps`), so a run that stopped early can be told from one planned short.
  `encoding_options` maps each option the encoding takes to its value, e.g.
  {'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}; None when
  the results.json predates that record. `family` is the model family ('encoder' or 'decoder'),
  'encoder' when the results.json predates that record.
  """
  path: pathlib.Path
  task: str
  encoding: str
  train_steps: int
  planned_steps: int
  train_length: int
  eval_lengths: tuple[int, ...]
  members: tuple[Member, ...]
  num_params: int | None = None
  versions: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  encoding_options: Mapping[str, Any] | None = None
  family: str = 'encoder'


@dataclasses.dataclass(frozen=True)
class Cell:
  """The merged members of every run of one (task, column); see the module docstring.

  `label` names the column: the encoding, or the encoding and the options that set its runs
  apart from its other columns (`column_labels`).
  """
  task: str
  encoding: str
  runs: tuple[Run, ...]
  members: tuple[Member, ...]
  label: str

  @property
  def converged(self) -> tuple[Member, ...]:
    return tuple(m for m in self.members if not m.diverged)

  @property
  def family(self) -> str:
    """The model family of the cell's runs (one, as families are never merged)."""
    return self.runs[0].family


# Grid runs' regions (posenc/evaluate/grid.py): 'id' (both axes <= n, the training size), 'ood'
# (some axis > n, both <= M) and 'beyond' (equal lengths past M). The table shows them in the
# order of GRID_REGIONS, the paper's headline (OOD) first.
GRID_REGIONS: tuple[str, ...] = ('ood', 'beyond', 'id')
REGION_NAMES = {'ood': 'OOD', 'beyond': 'beyond', 'id': 'ID'}
ARITHMETIC_TASKS: tuple[str, ...] = tuple(tasks_lib.ARITHMETIC)
# Grid runs' columns: every encoding of the registry in its order (the arithmetic study's
# abacus and FIRE among them), then any other name (e.g. a combination 'abacus+fire'), sorted.
GRID_ENCODINGS: tuple[str, ...] = tuple(encodings_lib.ENCODINGS)


@dataclasses.dataclass(frozen=True)
class GridMember:
  """One trained model of a grid run.

  `regions` maps each of GRID_REGIONS to the member's mean exact match over the region's cells
  (None for a region without cells, and for every region of a diverged member);
  `exact_match_by_cell` maps (a, b) to the exact match of cell (a, b) (NaN where the engine
  recorded none).
  """
  seed: int
  learning_rate: float
  diverged: bool
  regions: Mapping[str, float | None]
  exact_match_by_cell: Mapping[tuple[int, int], float]
  data_seed: int | None = None


@dataclasses.dataclass(frozen=True)
class GridRun:
  """One grid run's results.json (`evaluation` 'grid'; the arithmetic study).

  `architecture` is 'standard', 'standard_ii' or 'looped LxR' (L layers applied R times);
  `train_length` is the training size n (both axes <= n is in distribution); the cells are
  (a, b) for a, b in 1..`grid_max` at `grid_stride` (and `grid_max` itself), plus (x, x) for x
  in `beyond`; `axes` names the two axes, e.g. ('digits_a', 'digits_b'). The other fields are
  those of Run.
  """
  path: pathlib.Path
  task: str
  encoding: str
  architecture: str
  train_steps: int
  planned_steps: int
  train_length: int
  axes: tuple[str, str]
  grid_max: int
  grid_stride: int
  beyond: tuple[int, ...]
  samples_per_cell: int
  members: tuple[GridMember, ...]
  num_params: int | None = None
  versions: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  encoding_options: Mapping[str, Any] | None = None
  family: str = 'decoder'


@dataclasses.dataclass(frozen=True)
class GridEntry:
  """The merged members of every grid run of one (task, architecture, column).

  Members merge as a range Cell's do (the module docstring); `label` names the column as
  `column_labels` does for the grid runs.
  """
  task: str
  architecture: str
  encoding: str
  runs: tuple[GridRun, ...]
  members: tuple[GridMember, ...]
  label: str

  @property
  def converged(self) -> tuple[GridMember, ...]:
    return tuple(m for m in self.members if not m.diverged)


@dataclasses.dataclass(frozen=True)
class PerplexityRun:
  """One language-model run (`evaluation` 'perplexity'): per member, perplexity by window
  mode and length (None for a diverged member)."""
  task: str
  encoding: str
  train_length: int
  lengths: tuple[int, ...]
  members: tuple[Mapping[str, Mapping[int, float]] | None, ...]
  path: str
  family: str = 'decoder'

  @property
  def label(self) -> str:
    return self.encoding if self.family == 'decoder' else f'{self.encoding} ({self.family})'
