"""The study's tables and curves from run directories (Ruoss et al. 2023, Tables 1, 4, Fig. 4),
and the arithmetic study's (McLeish et al. 2024, Figs. 3 and 4).

A run directory holds the engine's `results.json` (docs/design.md, "engine"). A range run's
(`evaluation` 'range', or none: older files) holds one task, one encoding, one model family
(`family`: 'encoder' or 'decoder'; 'encoder' when not recorded), a population of members
(seeds × learning rates), each with its `score` (mean accuracy over the evaluated lengths
N+1..M) and its `accuracy_by_length`, and likewise its `exact_match_score` and
`exact_match_by_length` (the share of examples with every output token right). This module
turns any set of them into:

- Table 1: per task × encoding, the max score over all non-diverged members, in %;
- Table 4: per task × encoding, mean ± sd of the score over seeds at the learning rate whose
  mean is best, in %;
- Figure 4: per task, the metric versus length, one line per column (its best member), a
  dashed line at the training length N.

The metric is chosen for the whole report: 'accuracy' (the study's) or 'exact_match', which
reads the exact-match fields instead and names them in every title.

A grid run (`evaluation` 'grid') holds a decoder judged by the exact match of its generated
answers on a grid of cells (a, b), e.g. the digit counts of two operands: per member, its mean
over each region (ID: both axes <= n, the training size; OOD: some axis > n, both <= M;
beyond: equal lengths past M) and its `exact_match_by_cell`. Grid runs are kept apart from
range runs (GridRun) and turn into:

- the region table (arithmetic.md): per task, architecture (standard, standard_ii, looped LxR)
  and encoding, mean ± sd over the members of their exact match in each region, in %;
- heatmaps: per member, its exact match on every cell, the training region boxed.

The functions are pure (cells in, markdown strings and PNG bytes out) except the loaders
(`find_results`, `load_run`, `load_runs`, `load_all_runs`, `build_report`), which read files;
writing is left to the caller (`launch/report.py`).

Columns. Runs of one encoding with different encoding options (results.json's
`encoding_options`, e.g. randomized_relative's `relative_mode`) are never merged: when the runs
reported hold more than one set of options for an encoding, each set is a column of its own,
labelled by the encoding and the options that differ, e.g.
'randomized_relative (relative_mode=reference)'. Otherwise the column is the encoding's name. A
results.json without the record of its options counts as 'options not recorded'. Runs of
different model families are never merged either: when the runs reported hold more than one
family, every column names its family, e.g. 'randomized_rotary (decoder)'.

Cells. The runs are grouped by (task, column). When several runs cover the same cell, their
members are merged: the cell holds the union of their members, where a member that appears
identically in two runs (same seed, learning rate, divergence, score and per-length accuracies:
a copy of the same training) counts once and any other member counts separately, even with the
same seed and learning rate. The tables' notes name every merged cell and any repeated
(seed, learning rate) pair.
Grid runs group by (task, architecture, column) into entries, their members merged likewise.

Example:
  >>> runs, problems = load_runs(['workdir/sweep'])  # doctest: +SKIP
  >>> cells = collect_cells(runs)  # doctest: +SKIP
  >>> print(table1(cells, skipped=problems))  # doctest: +SKIP
  # Table 1: accuracy (%) on unseen lengths, max over members
  <BLANKLINE>
  | level | task | none | randomized_relative |
  |---|---|---|---|
  | DCF | reverse_string | 52.0 | 95.1 |
  ...
"""
import collections
import dataclasses
import io
import json
import math
import os
import pathlib
import re
from typing import Any, Callable, Iterable, Mapping, NoReturn, Sequence

from matplotlib import cm
from matplotlib import colormaps
from matplotlib import colors as mpl_colors
from matplotlib import figure as mpl_figure
from matplotlib import patches as mpl_patches
import numpy as np

from posenc import encodings as encodings_lib
from posenc import hint_report
from posenc import io as io_lib
from posenc import plots
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


class MalformedRunError(ValueError):
  """A results.json that does not follow the engine's schema; the report skips it."""


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
  return _metric_fields(metric)[0]


def _metric_fields(metric: str) -> tuple[str, str, str]:
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


# ---------------------------------------------------------------------------------------------
# Loading.


def find_results(paths: Sequence[str | os.PathLike[str]]) -> list[pathlib.Path]:
  """The results.json files under `paths`, each path a run directory, a tree of them or a file.

  A directory that holds results.json is a run directory and is not searched further (its
  checkpoints hold no runs). Files reached twice count once. Order: sorted per given path.

  Example:
    >>> find_results(['sweep'])  # doctest: +SKIP
    [PosixPath('sweep/cells/reverse_string__none/results.json'), ...]

  Raises:
    ReportError: a path does not exist, cannot be read, or holds no results.json anywhere.
  """
  found, seen = [], set()
  for given in paths:
    path = pathlib.Path(given)
    try:
      is_file, is_dir = path.is_file(), path.is_dir()
    except OSError as e:  # Not a missing path (that is False): e.g. a parent without access.
      raise ReportError(f'cannot read {str(given)!r}: {e.strerror or e}') from None
    if is_file:
      candidates = [path]
    elif is_dir:
      candidates = []
      # os.walk skips what it cannot read unless told otherwise; a run directory left out
      # would read as "no results.json".
      for root, dirs, files in os.walk(path, onerror=_unreadable_directory):
        if RESULTS_FILE in files:
          candidates.append(pathlib.Path(root) / RESULTS_FILE)
          dirs.clear()
        dirs.sort()
    else:
      raise ReportError(f'no such file or directory: {str(given)!r}')
    if not candidates:
      raise ReportError(f'no {RESULTS_FILE} in {str(given)!r} or any directory below it')
    for candidate in sorted(candidates):
      key = candidate.resolve()
      if key not in seen:
        seen.add(key)
        found.append(candidate)
  return found


def _unreadable_directory(error: OSError) -> NoReturn:
  """os.walk's `onerror`: a directory it cannot list is an error of the report's input."""
  raise ReportError(f'cannot read directory {str(error.filename)!r}: {error.strerror or error}')


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
  if key not in data:
    raise MalformedRunError(f'{where}: missing {key!r}')
  value = data[key]
  # bool is an int subclass; a count or a length that is True/False is a schema error.
  if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
    raise MalformedRunError(f'{where}: {key!r} is {value!r}, expected {_kind_name(kind)}')
  return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
  return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
  return ' or '.join(k.__name__ for k in _kinds(kind))


def _parse_member(data: Any, where: str, metric: str) -> Member:
  """One member, its score and curve those of `metric` (see METRICS)."""
  _, score_key, curve_key = _metric_fields(metric)
  if not isinstance(data, dict):
    raise MalformedRunError(f'{where}: expected an object, got {data!r}')
  seed = _require(data, 'seed', int, where)
  learning_rate = float(_require(data, 'learning_rate', (int, float), where))
  where = f'{where} (seed {seed}, learning rate {learning_rate:g})'
  diverged = _require(data, 'diverged', bool, where)
  if metric != 'accuracy' and score_key not in data:
    # The engine writes the exact-match fields for every member, diverged or not; without
    # them the file predates that metric. (A diverged member's accuracy score may be absent.)
    raise MalformedRunError(f'{where}: missing {score_key!r}')
  score = data.get(score_key)
  if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
    raise MalformedRunError(f'{where}: {score_key} is {score!r}, expected a number or null')
  if diverged:
    score = None  # Whatever a diverged member scored does not count.
  elif score is None or not math.isfinite(score):
    raise MalformedRunError(f'{where}: not diverged but its {score_key} is {score}')
  raw = _require(data, curve_key, dict, where)
  try:
    accuracy = {int(k): float(v) for k, v in raw.items()}
  except (TypeError, ValueError) as e:
    raise MalformedRunError(f'{where}: bad {curve_key} entry ({e})') from None
  return Member(seed, learning_rate, diverged, None if score is None else float(score),
                dict(sorted(accuracy.items())))


def load_run(results_path: str | os.PathLike[str], *, metric: str = 'accuracy'
             ) -> Run | GridRun:
  """Reads and checks one results.json (the engine's schema, docs/design.md).

  A range run (`evaluation` 'range', or no `evaluation`: older files) gives a Run whose
  members' scores and curves are those of `metric`: 'accuracy' reads `score` and
  `accuracy_by_length`, 'exact_match' reads `exact_match_score` and `exact_match_by_length`. A
  grid run (`evaluation` 'grid', the arithmetic study) gives a GridRun (`load_grid_run`), whose
  exact-match regions and cells do not depend on `metric`.

  Example:
    >>> run = load_run('runs/rs_rr/results.json', metric='exact_match')  # doctest: +SKIP
    >>> run.task, run.encoding, run.family, len(run.members)
    ('reverse_string', 'randomized_relative', 'decoder', 30)
    >>> run.members[0].score  # Its exact_match_score.
    0.87
    >>> load_run('runs/addition__abacus__looped/results.json').architecture  # doctest: +SKIP
    'looped 8x2'

  Raises:
    MalformedRunError: unreadable JSON or a missing/mistyped field, naming the file and field.
    ReportError: `metric` is not one of METRICS.
  """
  _metric_fields(metric)  # An unknown metric is the caller's error, not the file's.
  path = pathlib.Path(results_path)
  data = _read_results(path)
  evaluation = data.get('evaluation')
  if evaluation == 'grid':
    return _parse_grid_run(data, path)
  if evaluation == 'perplexity':
    return _parse_perplexity_run(data, path)
  if evaluation == 'lengths':
    try:
      return hint_report.parse_run(data, str(path))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise MalformedRunError(f'{path}: not a task-hinting run ({type(e).__name__}: {e})'
                              ) from None
  if evaluation not in (None, 'range'):
    raise MalformedRunError(f"{path}: evaluation is {evaluation!r}, expected 'range', 'grid', "
                            "'perplexity' or 'lengths'")
  return _parse_range_run(data, path, metric)


def load_grid_run(results_path: str | os.PathLike[str]) -> GridRun:
  """Reads and checks one grid run's results.json (`evaluation` 'grid').

  Example:
    >>> run = load_grid_run('runs/addition__abacus__looped/results.json')  # doctest: +SKIP
    >>> run.architecture, run.train_length, run.grid_max, run.members[0].regions['ood']
    ('looped 8x2', 20, 100, 0.929)

  Raises:
    MalformedRunError: unreadable JSON, not a grid run, or a missing/mistyped field, naming the
      file and field.
  """
  path = pathlib.Path(results_path)
  data = _read_results(path)
  if data.get('evaluation') != 'grid':
    raise MalformedRunError(f"{path}: evaluation is {data.get('evaluation')!r}, expected 'grid'")
  return _parse_grid_run(data, path)


def _read_results(path: pathlib.Path) -> dict[str, Any]:
  """A results.json's top-level object."""
  try:
    data = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise MalformedRunError(f'{path}: cannot read JSON ({e})') from None
  if not isinstance(data, dict):
    raise MalformedRunError(f'{path}: expected a JSON object')
  return data


def _parse_header(data: Mapping[str, Any], where: str, default_family: str
                  ) -> tuple[str, str, str]:
  """(task, encoding, family) of a results.json; `default_family` when it records none."""
  task = _require(data, 'task', str, where)
  encoding = _require(data, 'encoding', str, where)
  if not task or not encoding:
    raise MalformedRunError(f'{where}: empty task or encoding name')
  family = data.get('family')
  if family is None:
    family = default_family
  elif not isinstance(family, str) or not family:
    raise MalformedRunError(f'{where}: family is {family!r}, expected a model family name')
  return task, encoding, family


def _parse_extras(data: Mapping[str, Any], where: str, encoding: str, train_steps: int
                  ) -> dict[str, Any]:
  """The fields both kinds of run share past their evaluation, as keyword arguments."""
  config = data.get('config')
  train = config.get('train') if isinstance(config, dict) else None
  planned_steps = train.get('steps') if isinstance(train, dict) else None
  if not isinstance(planned_steps, int) or isinstance(planned_steps, bool):
    planned_steps = train_steps
  num_params = data.get('num_params')
  versions = data.get('versions')
  options = data.get('encoding_options')
  if options is not None and not isinstance(options, dict):
    raise MalformedRunError(f'{where}: encoding_options is {options!r}, expected an object')
  if options is None:
    options = _options_from_config(encoding, config)
  return {'planned_steps': planned_steps,
          'num_params': num_params if isinstance(num_params, int) else None,
          'versions': versions if isinstance(versions, dict) else {},
          'encoding_options': options}


def _parse_range_run(data: Mapping[str, Any], path: pathlib.Path, metric: str) -> Run:
  where = str(path)
  # Written before the engine had other model families: an encoder.
  task, encoding, family = _parse_header(data, where, 'encoder')
  train_steps = _require(data, 'train_steps', int, where)
  train_length = _require(data, 'train_length', int, where)
  eval_lengths = _require(data, 'eval_lengths', list, where)
  if not all(isinstance(n, int) and not isinstance(n, bool) for n in eval_lengths):
    raise MalformedRunError(f'{where}: eval_lengths must be a list of integers')
  if not any(n > train_length for n in eval_lengths):
    # The engine's score is then null for every member: there is nothing to report.
    raise MalformedRunError(f'{where}: no evaluated length above the training length '
                            f'N = {train_length}, so no score')
  raw_members = _require(data, 'members', list, where)
  if not raw_members:
    raise MalformedRunError(f'{where}: members is empty')
  members = tuple(_parse_member(m, f'{where}: members[{i}]', metric)
                  for i, m in enumerate(raw_members))
  return Run(
      path=path.parent, task=task, encoding=encoding, train_steps=train_steps,
      train_length=train_length, eval_lengths=tuple(sorted(set(eval_lengths))),
      members=members, family=family, **_parse_extras(data, where, encoding, train_steps))


def _parse_grid_run(data: Mapping[str, Any], path: pathlib.Path) -> GridRun:
  where = str(path)
  # Only decoders generate answers, so a grid run without a family is a decoder's.
  task, encoding, family = _parse_header(data, where, 'decoder')
  architecture = _require(data, 'architecture', str, where)
  if not architecture:
    raise MalformedRunError(f'{where}: empty architecture name')
  train_steps = _require(data, 'train_steps', int, where)
  train_length = _require(data, 'train_length', int, where)
  axes = _require(data, 'axes', list, where)
  if len(axes) != 2 or not all(isinstance(a, str) and a for a in axes):
    raise MalformedRunError(f'{where}: axes is {axes!r}, expected two axis names')
  grid = _require(data, 'grid', dict, where)
  grid_where = f'{where}: grid'
  grid_max = _require(grid, 'max', int, grid_where)
  stride = _require(grid, 'stride', int, grid_where)
  beyond = _require(grid, 'beyond', list, grid_where)
  if not all(isinstance(x, int) and not isinstance(x, bool) for x in beyond):
    raise MalformedRunError(f'{grid_where}: beyond must be a list of integers')
  samples = _require(grid, 'samples_per_cell', int, grid_where)
  raw_members = _require(data, 'members', list, where)
  if not raw_members:
    raise MalformedRunError(f'{where}: members is empty')
  members = tuple(_parse_grid_member(m, f'{where}: members[{i}]')
                  for i, m in enumerate(raw_members))
  return GridRun(
      path=path.parent, task=task, encoding=encoding, architecture=architecture,
      train_steps=train_steps, train_length=train_length, axes=(axes[0], axes[1]),
      grid_max=grid_max, grid_stride=stride, beyond=tuple(sorted(set(beyond))),
      samples_per_cell=samples, members=members, family=family,
      **_parse_extras(data, where, encoding, train_steps))


def _parse_grid_member(data: Any, where: str) -> GridMember:
  if not isinstance(data, dict):
    raise MalformedRunError(f'{where}: expected an object, got {data!r}')
  seed = _require(data, 'seed', int, where)
  learning_rate = float(_require(data, 'learning_rate', (int, float), where))
  where = f'{where} (seed {seed}, learning rate {learning_rate:g})'
  diverged = _require(data, 'diverged', bool, where)
  raw_regions = _require(data, 'regions', dict, where)
  regions = {}
  for name in GRID_REGIONS:
    if name not in raw_regions:
      raise MalformedRunError(f'{where}: regions has no {name!r}')
    value = raw_regions[name]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
      raise MalformedRunError(f'{where}: regions.{name} is {value!r}, expected a number or null')
    if value is not None and not diverged and not math.isfinite(value):
      raise MalformedRunError(f'{where}: not diverged but its regions.{name} is {value}')
    # Whatever a diverged member scored does not count.
    regions[name] = None if diverged or value is None else float(value)
  raw_cells = _require(data, 'exact_match_by_cell', dict, where)
  cells = {}
  for key, value in raw_cells.items():
    match = re.fullmatch(r'\s*(\d+)\s*,\s*(\d+)\s*', key)
    if not match:
      raise MalformedRunError(f"{where}: exact_match_by_cell key {key!r} is not 'a,b'")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
      raise MalformedRunError(f'{where}: exact_match_by_cell[{key!r}] is {value!r}, expected a '
                              'number or null')
    cells[int(match[1]), int(match[2])] = math.nan if value is None else float(value)
  return GridMember(seed, learning_rate, diverged, regions, dict(sorted(cells.items())))


def _options_from_config(encoding: str, config: Any) -> dict[str, Any] | None:
  """The options `encoding` takes, from a results.json's config: for files written before
  results recorded `encoding_options`. None when the config does not tell."""
  given = config.get('encoding_options') if isinstance(config, dict) else None
  if not isinstance(given, dict):
    return None
  try:
    attention, embedding = encodings_lib.resolve_options(encoding, given)
  except ValueError:
    return None
  return {**attention, **embedding}


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


def _parse_perplexity_run(data: Mapping[str, Any], path: pathlib.Path) -> PerplexityRun:
  where = str(path)
  try:
    lengths = tuple(int(l) for l in data['eval_lengths'])
    members = []
    for m in data['members']:
      if m.get('diverged'):
        members.append(None)
        continue
      members.append({mode: {int(l): float(v) for l, v in by.items()}
                      for mode, by in m['perplexity_by_length'].items()})
    return PerplexityRun(str(data['task']), str(data['encoding']), int(data['train_length']),
                         lengths, tuple(members), where, str(data.get('family', 'decoder')))
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise MalformedRunError(f'{where}: not a perplexity run ({type(e).__name__}: {e})') from None


def perplexity_table(runs: Sequence[PerplexityRun]) -> str:
  """Perplexity by length (rows) and encoding (columns), mean ± sd over the non-diverged
  members, for non-overlapping and sliding windows, per task, as markdown."""
  lines = ['# Language models: perplexity (per byte) by evaluation length, mean ± sd over '
           'members', '']
  for task in sorted({r.task for r in runs}):
    mine = sorted((r for r in runs if r.task == task), key=lambda r: r.encoding)
    lengths = sorted({l for r in mine for l in r.lengths})
    train = sorted({r.train_length for r in mine})
    lines += [f'## {task} (trained at length {", ".join(map(str, train))})', '']
    titles = {'nonoverlapping': 'non-overlapping windows', 'sliding': 'sliding windows',
              'masked': 'masked language models (encoders), masked bytes'}
    present = [mode for mode in titles if any(mm and mode in mm for r in mine
                                                for mm in r.members)]
    for mode in present:
      title = titles[mode]
      cols = [r for r in mine if any(mm and mode in mm for mm in r.members)]
      lines += [f'### {title}', '', '| length | ' + ' | '.join(r.label for r in cols) + ' |',
                '|---|' + '---|' * len(cols)]
      for length in lengths:
        cells = []
        for r in cols:
          values = [m[mode][length] for m in r.members if m and length in m.get(mode, {})]
          cells.append('–' if not values else f'{np.mean(values):.3f}' + (
              f' ± {np.std(values):.3f}' if len(values) > 1 else ''))
        lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
      lines.append('')
    m = min(train)
    lines += [f'### relative change |ppl_L − ppl_m| / ppl_m (the first windows above, m = {m})',
              '',
              '| length | ' + ' | '.join(r.label for r in mine) + ' |',
              '|---|' + '---|' * len(mine)]
    for length in lengths:
      cells = []
      for r in mine:
        values = [abs(x[length] - x[m]) / x[m] for x in
                  (next(iter(mm.values())) for mm in r.members if mm)
                  if length in x and m in x]
        cells.append('–' if not values else f'{np.mean(values):.3f}')
      lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
    lines.append('')
  lines.append('Notes: lower is better; a model extrapolates (Qin et al. 2023) when its '
               'perplexity stays flat or falls past the training length. Built from '
               f'{len(runs)} run(s).')
  return '\n'.join(lines) + '\n'


@dataclasses.dataclass(frozen=True)
class LoadedRuns:
  """Every results.json under some paths: range runs, grid runs, language-model runs, and
  one message per file skipped as malformed."""
  runs: tuple[Run, ...]
  grid_runs: tuple[GridRun, ...]
  problems: tuple[str, ...]
  lm_runs: tuple[PerplexityRun, ...] = ()
  hint_runs: tuple[hint_report.HintRun, ...] = ()


def load_all_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
                  ) -> LoadedRuns:
  """Loads every run under `paths` (`load_run`), range and grid runs apart; malformed ones are
  skipped and described.

  Example:
    >>> loaded = load_all_runs(['sweep', 'runs/arithmetic'])  # doctest: +SKIP
    >>> len(loaded.runs), len(loaded.grid_runs), loaded.problems
    (30, 6, ())

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  runs, grid_runs, lm_runs, hint_runs, problems = [], [], [], [], []
  for results_path in find_results(paths):
    try:
      run = load_run(results_path, metric=metric)
    except MalformedRunError as e:
      problems.append(str(e))
    else:
      if isinstance(run, PerplexityRun):
        lm_runs.append(run)
      elif isinstance(run, hint_report.HintRun):
        hint_runs.append(run)
      else:
        (grid_runs if isinstance(run, GridRun) else runs).append(run)
  return LoadedRuns(tuple(runs), tuple(grid_runs), tuple(problems), tuple(lm_runs),
                    tuple(hint_runs))


def load_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
              ) -> tuple[list[Run], list[str]]:
  """Loads every range run under `paths` for `metric` (`load_run`); malformed ones are skipped
  and described. Grid runs load without a problem but are not among the runs: `load_all_runs`
  returns them too.

  Example:
    >>> runs, problems = load_runs(['sweep', 'extra_run'])  # doctest: +SKIP
    >>> problems
    ['sweep/cells/x__y/results.json: missing \\'members\\'']

  Returns:
    (runs, problems): the range runs that loaded and one message per skipped results.json.

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  loaded = load_all_runs(paths, metric=metric)
  return list(loaded.runs), list(loaded.problems)


def _json_text(value: Any) -> str:
  """A value as compact, canonical JSON text: equal values give equal text."""
  return json.dumps(value, sort_keys=True)


def _option_text(value: Any) -> str:
  """An option's value in a column label: strings bare, anything else as JSON (false, 1e-05)."""
  return value if isinstance(value, str) else _json_text(value)


def column_labels(runs: Sequence[Run | GridRun]) -> list[str]:
  """Each run's column label: its encoding, plus its model family and the options that set it
  apart if need be.

  An encoding whose runs all share one set of `encoding_options` is labelled by its name. One
  with several sets gets a column per set, labelled by the encoding and the options whose
  values differ among the sets (an option a set lacks shows as '?'); runs that do not record
  their options are 'options not recorded', unless the encoding's recorded sets are all empty
  (there is nothing to tell them apart by). When `runs` hold more than one model family, every
  label names its run's family first, so that no column mixes families, or hides its own.

  Example:
    >>> [(run.family, run.encoding_options) for run in runs]  # doctest: +SKIP
    [('encoder', {'max_time': 10000.0, 'relative_mode': 'reference'}),
     ('encoder', {'max_time': 10000.0, 'relative_mode': 'symmetric'}), ('encoder', {})]
    >>> column_labels(runs)  # doctest: +SKIP
    ['randomized_relative (relative_mode=reference)',
     'randomized_relative (relative_mode=symmetric)', 'none']
    >>> column_labels(runs + [decoder_run_of_none])  # doctest: +SKIP
    ['randomized_relative (encoder, relative_mode=reference)',
     'randomized_relative (encoder, relative_mode=symmetric)', 'none (encoder)',
     'none (decoder)']
  """
  def key(run: Run | GridRun) -> tuple[str, str | None]:
    options = run.encoding_options
    return run.family, None if options is None else _json_text(options)

  # Family-wide rather than per encoding: in a report of both families, a column of an encoding
  # that only one family ran must still say which.
  name_family = len({run.family for run in runs}) > 1
  # encoding -> {(family, options as text (None: not recorded)): options}, in order of
  # appearance.
  variants: dict[str, dict[tuple[str, str | None], Mapping[str, Any]]] = (
      collections.defaultdict(dict))
  for run in runs:
    variants[run.encoding][key(run)] = run.encoding_options or {}
  labels = {}
  for encoding, sets in variants.items():
    names = list(dict.fromkeys(name for options in sets.values() for name in options))
    differing = [name for name in names if len({
        _json_text(options[name]) if name in options else None for options in sets.values()}) > 1]
    for (family, options_key), options in sets.items():
      parts = [family] if name_family else []
      if differing and options_key is None:
        parts.append('options not recorded')
      elif differing:
        parts += [f'{name}={_option_text(options[name]) if name in options else "?"}'
                  for name in differing]
      labels[encoding, family, options_key] = (
          f'{encoding} ({", ".join(parts)})' if parts else encoding)
  return [labels[(run.encoding, *key(run))] for run in runs]


def collect_cells(runs: Iterable[Run]) -> dict[tuple[str, str], Cell]:
  """Groups runs by (task, column label), merging the members of runs of the same cell.

  The label is the encoding unless its runs differ in their options or the runs hold several
  model families (`column_labels`). Identical members (a copy of the same training in two runs)
  count once; see the module docstring.

  Example:
    >>> cells = collect_cells(runs)  # doctest: +SKIP
    >>> cells['reverse_string', 'relative'].members  # 30 members
  """
  runs = list(runs)
  grouped: dict[tuple[str, str], list[Run]] = collections.defaultdict(list)
  for run, label in zip(runs, column_labels(runs)):
    grouped[run.task, label].append(run)
  cells = {}
  for (task, label), cell_runs in grouped.items():
    members, seen = [], set()
    for run in cell_runs:
      for member in run.members:
        # repr, so that the NaN accuracies of a diverged member compare equal to their copy.
        key = (member.seed, member.learning_rate, member.diverged, member.score,
               repr(tuple(member.accuracy_by_length.items())))
        if key not in seen:
          seen.add(key)
          members.append(member)
    cells[task, label] = Cell(task, cell_runs[0].encoding, tuple(cell_runs), tuple(members),
                              label)
  return cells


# ---------------------------------------------------------------------------------------------
# Statistics.


def best_score(cell: Cell) -> float | None:
  """Table 1's entry: the max score over non-diverged members (None if all diverged)."""
  scores = [m.score for m in cell.converged]
  return max(scores) if scores else None


@dataclasses.dataclass(frozen=True)
class SeedStats:
  """Table 4's entry: score statistics over the seeds at the best learning rate.

  `sd` is the population standard deviation (numpy's default, ddof=0); `converged` of `total`
  members at that learning rate did not diverge and enter the statistics.
  """
  learning_rate: float
  mean: float
  sd: float
  converged: int
  total: int


def seed_stats(cell: Cell) -> SeedStats | None:
  """Mean ± sd over seeds at the learning rate with the best mean (None if all diverged).

  Diverged members are left out of the mean and counted in `total` only. Ties go to the
  smallest learning rate.

  Example:
    >>> seed_stats(cell)  # doctest: +SKIP
    SeedStats(learning_rate=0.0003, mean=0.9, sd=0.05, converged=10, total=10)
  """
  by_rate: dict[float, list[Member]] = collections.defaultdict(list)
  for member in cell.members:
    by_rate[member.learning_rate].append(member)
  best = None
  for rate in sorted(by_rate):
    scores = [m.score for m in by_rate[rate] if not m.diverged]
    if not scores:
      continue
    mean = math.fsum(scores) / len(scores)
    sd = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores))
    if best is None or mean > best.mean:
      best = SeedStats(rate, mean, sd, len(scores), len(by_rate[rate]))
  return best


# ---------------------------------------------------------------------------------------------
# Tables.


def _ordered(present: Iterable[str], canonical: Sequence[str], full_grid: bool) -> list[str]:
  """Canonical names (all of them, or those present), then unknown names sorted."""
  present = set(present)
  known = [n for n in canonical if full_grid or n in present]
  return known + sorted(present - set(canonical))


def grid_axes(cells: Mapping[tuple[str, str], Cell], full_grid: bool = False
              ) -> tuple[list[str], list[str]]:
  """(rows, columns): tasks in the study's order and column labels in the grid's order.

  Columns follow their encodings' order, the columns of one encoding adjacent and sorted by
  label. Only names present in `cells` unless `full_grid` (an encoding without runs is then a
  column of its name); unknown names are appended, sorted.

  Example:
    >>> grid_axes(cells)  # doctest: +SKIP
    (['reverse_string'], ['none', 'randomized_relative (relative_mode=reference)',
                          'randomized_relative (relative_mode=symmetric)'])
  """
  tasks = _ordered((t for t, _ in cells), TASKS, full_grid)
  labels: dict[str, set[str]] = collections.defaultdict(set)
  for cell in cells.values():
    labels[cell.encoding].add(cell.label)
  encodings = _ordered(labels, ENCODINGS, full_grid)
  return tasks, [label for e in encodings for label in sorted(labels.get(e, {e}))]


def _percent(x: float) -> str:
  return f'{100 * x:.1f}'


def _markdown_grid(cells: Mapping[tuple[str, str], Cell], full_grid: bool,
                   entry: Callable[[Cell], str]) -> list[str]:
  """The rows of a task × encoding markdown grid; `entry` renders a cell that has runs."""
  tasks, encodings = grid_axes(cells, full_grid)
  lines = ['| level | task | ' + ' | '.join(encodings) + ' |',
           '|---|---|' + '---|' * len(encodings)]
  for task in tasks:
    row = []
    for encoding in encodings:
      cell = cells.get((task, encoding))
      row.append(MISSING if cell is None else entry(cell))
    lines.append(f'| {TASK_LEVELS.get(task, "?")} | {task} | ' + ' | '.join(row) + ' |')
  return lines


def table1(cells: Mapping[tuple[str, str], Cell], *, full_grid: bool = False,
           skipped: Sequence[str] = (), metric: str = 'accuracy') -> str:
  """The study's Table 1 as markdown: max score over all non-diverged members, in %.

  `metric` is the one the cells' members were loaded with (`load_runs`); the title names it.

  Example:
    >>> print(table1(cells))  # doctest: +SKIP
    # Table 1: accuracy (%) on unseen lengths, max over members
    <BLANKLINE>
    | level | task | none | relative |
    |---|---|---|---|
    | DCF | reverse_string | 52.0 | 58.3 |
    <BLANKLINE>
    Notes:
    ...
  """
  def entry(cell: Cell) -> str:
    best = best_score(cell)
    return DIVERGED if best is None else _percent(best)

  label = metric_label(metric)
  lines = [f'# Table 1: {label} (%) on unseen lengths, max over members', '']
  lines += _markdown_grid(cells, full_grid, entry)
  notes = [f'Each entry is the best score over all non-diverged members (seeds × learning '
           f'rates) of a task and encoding, in %. {MISSING} = no run; {DIVERGED} = every '
           f'member diverged.']
  notes += _common_notes(cells, skipped, metric)
  return '\n'.join(lines + [''] + _format_notes(notes)) + '\n'


def table4(cells: Mapping[tuple[str, str], Cell], *, full_grid: bool = False,
           skipped: Sequence[str] = (), metric: str = 'accuracy') -> str:
  """The study's Table 4 as markdown: mean ± sd over seeds at the best learning rate, in %.

  A second grid gives the learning rate chosen for each cell. `metric` is the one the cells'
  members were loaded with (`load_runs`); the title names it.

  Example:
    >>> print(table4(cells))  # doctest: +SKIP
    # Table 4: accuracy (%) on unseen lengths, mean ± sd over seeds at the best learning rate
    <BLANKLINE>
    | level | task | none | relative |
    |---|---|---|---|
    | DCF | reverse_string | 50.3 ± 1.2 | 55.0 ± 2.4 (9/10) |
    ...
  """
  def entry(cell: Cell) -> str:
    stats = seed_stats(cell)
    if stats is None:
      return DIVERGED
    text = f'{_percent(stats.mean)} ± {_percent(stats.sd)}'
    if stats.converged < stats.total:
      text += f' ({stats.converged}/{stats.total})'
    return text

  def rate(cell: Cell) -> str:
    stats = seed_stats(cell)
    return DIVERGED if stats is None else f'{stats.learning_rate:g}'

  label = metric_label(metric)
  lines = [f'# Table 4: {label} (%) on unseen lengths, mean ± sd over seeds at the best '
           'learning rate', '']
  lines += _markdown_grid(cells, full_grid, entry)
  lines += ['', '## Best learning rate per cell', '']
  lines += _markdown_grid(cells, full_grid, rate)
  notes = [
      'Each entry is the mean ± sd of the score over the seeds at the learning rate whose mean '
      'is best (ties: the smallest rate), in %; sd is the population standard deviation '
      '(ddof=0). Diverged members are left out; "(k/n)" marks a cell where only k of the n '
      f'members at that rate did not diverge. {MISSING} = no run; {DIVERGED} = every member '
      'diverged.']
  notes += _common_notes(cells, skipped, metric)
  return '\n'.join(lines + [''] + _format_notes(notes)) + '\n'


def _format_notes(notes: Sequence[str]) -> list[str]:
  return ['Notes:', ''] + [f'{i}. {note}' for i, note in enumerate(notes, 1)]


def _name(cell: Cell) -> str:
  return f'{cell.task}/{cell.label}'


def _names(cells: Sequence[Cell], limit: int = 8) -> str:
  """'a/b, c/d' or 'all N cells', shortened past `limit`."""
  names = [_name(c) for c in cells]
  if len(names) > limit:
    return ', '.join(names[:limit]) + f' and {len(names) - limit} more'
  return ', '.join(names)


def _which(group: Sequence[Cell], total: int) -> str:
  return f'all {total} cells' if len(group) == total else _names(group)


def describe_lengths(lengths: Sequence[int]) -> str:
  """A short description of a sorted set of lengths.

  Example:
    >>> describe_lengths(range(41, 501))
    '41..500 (every length, 460 lengths)'
    >>> describe_lengths(range(41, 501, 10))
    '41, 51, …, 491 (every 10th length, 46 lengths)'
  """
  lengths = sorted(set(lengths))
  if not lengths:
    return 'no lengths'
  if len(lengths) == 1:
    return f'{lengths[0]} (1 length)'
  steps = {b - a for a, b in zip(lengths, lengths[1:])}
  if steps == {1}:
    return f'{lengths[0]}..{lengths[-1]} (every length, {len(lengths)} lengths)'
  if len(steps) == 1 and len(lengths) > 2:
    (step,) = steps
    return (f'{lengths[0]}, {lengths[1]}, …, {lengths[-1]} '
            f'(every {_ordinal(step)} length, {len(lengths)} lengths)')
  return f'{lengths[0]}..{lengths[-1]} ({len(lengths)} lengths, irregularly spaced)'


def _ordinal(n: int) -> str:
  suffix = 'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')
  return f'{n}{suffix}'


def _members_text(members: Sequence[Any]) -> str:
  """'N', or 'N (S seeds × learning rates {...})' when the members are a full product.

  Example: seeds 0, 1 at 1e-3 -> '2 (2 seeds × learning rates {0.001})'.
  """
  seeds = {m.seed for m in members}
  rates = sorted({m.learning_rate for m in members})
  text = str(len(members))
  if len(seeds) * len(rates) == len(members):
    text += (f' ({len(seeds)} seed{"s" * (len(seeds) != 1)} × learning rates '
             f'{{{", ".join(f"{r:g}" for r in rates)}}})')
  return text


def _common_notes(cells: Mapping[tuple[str, str], Cell], skipped: Sequence[str],
                  metric: str = 'accuracy') -> list[str]:
  """Notes shared by both tables: lengths, members, training, columns, merges, skipped runs."""
  tasks, encodings = grid_axes(cells)
  ordered = [cells[t, e] for t in tasks for e in encodings if (t, e) in cells]
  total = len(ordered)
  notes = []

  # Which lengths the scores average over: the evaluated lengths above N, per run.
  by_lengths: dict[tuple[int, tuple[int, ...], int], list[Cell]] = collections.defaultdict(list)
  for cell in ordered:
    for key in sorted({(r.train_length, tuple(n for n in r.eval_lengths if n > r.train_length),
                        max(r.eval_lengths, default=0)) for r in cell.runs}):
      by_lengths[key].append(cell)
  parts = []
  for (train_length, unseen, max_length), group in by_lengths.items():
    full = tuple(range(train_length + 1, max_length + 1))
    subset = '' if unseen == full else f', a subset of {train_length + 1}..{max_length}'
    parts.append(f'N = {train_length}, lengths {describe_lengths(unseen)}{subset} in '
                 f'{_which(group, total)}')
  notes.append(f'Scores average the {metric_label(metric)} over the evaluated lengths above the '
               f'training length N: {"; ".join(parts)}. The study uses '
               f'N = {STUDY_TRAIN_LENGTH} and every length '
               f'{STUDY_TRAIN_LENGTH + 1}..{STUDY_MAX_LENGTH}.')

  # Members per cell, as seeds × learning rates where the cell is a full product.
  by_count: dict[str, list[Cell]] = collections.defaultdict(list)
  for cell in ordered:
    by_count[_members_text(cell.members)].append(cell)
  notes.append('Members per cell: ' + '; '.join(
      f'{text} in {_which(group, total)}' for text, group in by_count.items()) + '.')

  diverged = [(c, sum(m.diverged for m in c.members)) for c in ordered]
  diverged = [(c, k) for c, k in diverged if k]
  if diverged:
    listed = ', '.join(f'{_name(c)} ({k} of {len(c.members)})' for c, k in diverged)
    notes.append(f'Diverged members, left out of the scores: {listed}.')

  # Training budget: short of the study's steps, or stopped before the configured steps.
  by_steps: dict[tuple[int, int], list[Cell]] = collections.defaultdict(list)
  for cell in ordered:
    for key in sorted({(r.train_steps, r.planned_steps) for r in cell.runs}):
      by_steps[key].append(cell)
  for (steps, planned), group in sorted(by_steps.items(), reverse=True):
    if steps < planned:
      state = f'Not fully trained: stopped at {steps:,} of {planned:,} configured steps'
    elif steps < STUDY_TRAIN_STEPS:
      state = f'Not fully trained: {steps:,} steps, of the study\'s {STUDY_TRAIN_STEPS:,}'
    else:
      state = f'Trained {steps:,} steps'
    notes.append(f'{state}: {_which(group, total)}.')

  families = sorted({c.family for c in ordered})
  if len(families) > 1:
    notes.append(f'Runs of {len(families)} model families ({", ".join(families)}): each column '
                 'names its family; runs of different families are never merged.')

  # Encodings split into columns by their options, and the options their columns share. An
  # encoding's columns beyond one per family are those of its options.
  split: dict[str, list[Cell]] = collections.defaultdict(list)
  for cell in ordered:
    split[cell.encoding].append(cell)
  split = {e: group for e, group in split.items()
           if len({c.label for c in group}) > len({c.family for c in group})}
  for encoding, group in split.items():
    labels = sorted({c.label for c in group})
    text = (f'{encoding} is split by encoding options into {len(labels)} columns '
            f'({"; ".join(labels)}); their runs are never merged')
    recorded = [r.encoding_options for c in group for r in c.runs
                if r.encoding_options is not None]
    shared = {k: v for k, v in (recorded[0] if recorded else {}).items()
              if all(k in o and _json_text(o[k]) == _json_text(v) for o in recorded)}
    if shared:
      text += '; options shared by every run that records them: ' + ', '.join(
          f'{k}={_option_text(v)}' for k, v in shared.items())
    notes.append(text + '.')

  merged = [c for c in ordered if len(c.runs) > 1]
  for cell in merged:
    pairs = collections.Counter((m.seed, m.learning_rate) for m in cell.members)
    repeated = sorted(p for p, k in pairs.items() if k > 1)
    text = (f'{_name(cell)} merges the members of {len(cell.runs)} runs '
            f'({", ".join(str(r.path) for r in cell.runs)}); identical members count once')
    if repeated:
      text += ('; distinct members with the same (seed, learning rate) all count: '
               + ', '.join(f'({s}, {r:g})' for s, r in repeated))
    notes.append(text + '.')

  devices = sorted({str(r.versions.get('device_kind', '?')) for c in ordered for r in c.runs})
  runs = sum(len(c.runs) for c in ordered)
  notes.append(f'Built from {runs} run{"s" * (runs != 1)} in {total} cell{"s" * (total != 1)}'
               f' (devices: {", ".join(devices)}).')
  if skipped:
    notes.append(f'Skipped {len(skipped)} malformed run{"s" * (len(skipped) != 1)}: '
                 + '; '.join(skipped) + '.')
  return notes


# ---------------------------------------------------------------------------------------------
# Figure 4.


_MARKS_PER_CURVE = 12  # A denser curve is marked at about this many lengths.
_Y_MARGIN = 0.03  # Room beyond 0 and 1, so curves at exactly 0% or 100% leave the frame.


def chance(task: str, metric: str) -> float | None:
  """The per-token accuracy of uniform guessing, 1/C, for a task of the study with C output
  classes; None for exact match (its chance vanishes with the length) and other tasks."""
  if metric != 'accuracy' or task not in tasks_lib.REGISTRY:
    return None
  return 1.0 / tasks_lib.REGISTRY[task].num_classes


def best_member(cell: Cell) -> Member | None:
  """The non-diverged member with the highest score (the first on ties), or None."""
  converged = cell.converged
  return max(converged, key=lambda m: m.score) if converged else None


def figure4(cells: Mapping[tuple[str, str], Cell], task: str, *,
            metric: str = 'accuracy') -> mpl_figure.Figure:
  """Figure 4 for one task: the metric vs length, one line per column (encoding or variant).

  Each column's line is its best member (by score); columns whose members all diverged are
  listed in the legend without a line. A black dashed line marks the training length N. The
  legend sits right of the axes; the y-axis, labelled by `metric` (the one the cells' members
  were loaded with), leaves a margin beyond 0 and 1 so that no curve hides in the frame.
  1000 × 500 pixels.

  Example:
    >>> fig = figure4(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['none: 20.0', 'randomized_relative: 85.0', 'training length N']
    >>> fig.axes[0].get_ylabel()
    'exact match'
  """
  label_y = metric_label(metric)
  _, columns = grid_axes(cells)
  encoding_of = {cell.label: cell.encoding for cell in cells.values()}
  fig = mpl_figure.Figure(figsize=(10, 5), dpi=100)  # The Agg canvas; no pyplot state.
  ax = fig.add_subplot()
  train_lengths = set()
  dashed = []  # (line, dash phase)
  for index, label in enumerate(columns):
    cell = cells.get((task, label))
    if cell is None:
      continue
    train_lengths.update(r.train_length for r in cell.runs)
    # The variant index counts over every task, so a column has one style in all figures.
    siblings = [c for c in columns if encoding_of[c] == cell.encoding]
    style = plots.encoding_style(cell.encoding, siblings.index(label), len(siblings),
                                 [encoding_of[c] for c in columns])
    member = best_member(cell)
    if member is None:
      ax.plot([], [], **style, label=f'{label}: {DIVERGED}')
      continue
    lengths = list(member.accuracy_by_length)
    step = max(1, -(-len(lengths) // _MARKS_PER_CURVE))
    # Staggered starts, so that curves lying on each other still show each one's markers.
    markevery = (index * step // len(columns), step)
    (line,) = ax.plot(lengths, [member.accuracy_by_length[n] for n in lengths], lw=1.6,
                      markevery=markevery, **style, label=f'{label}: {_percent(member.score)}')
    if style['linestyle'] == plots.DASHES:
      dashed.append((line, 2 * (index % 3)))
  for i, n in enumerate(sorted(train_lengths)):
    ax.axvline(n, **plots.TRAINING_LINE, label=None if i else 'training length N')
  level = chance(task, metric)
  if level is not None:
    ax.axhline(level, **plots.CHANCE_LINE, label=f'chance (1/C = {_percent(level)}%)')
  ax.set_ylim(-_Y_MARGIN, 1 + _Y_MARGIN)
  ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1])
  ax.set_xlabel('sequence length')
  ax.set_ylabel(label_y)
  ax.set_title(f'{task} ({TASK_LEVELS.get(task, "?")}): best member per encoding')
  ax.grid(alpha=0.3)
  ax.legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize='small',
            title='encoding: score (%)', title_fontsize='small')
  for line, phase in dashed:
    # Shifted after the legend copied the plain dashes: dashed curves lying on each other (two
    # encodings at chance, say) then show every colour, alternately.
    line.set_linestyle((phase, plots.DASHES[1]))
  fig.tight_layout()  # Counts the legend, so the axes shrink to leave it room.
  return fig


def figure4_png(cells: Mapping[tuple[str, str], Cell], task: str, *,
                metric: str = 'accuracy') -> bytes:
  """`figure4` as PNG bytes.

  Example:
    >>> png = figure4_png(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'
    True
  """
  buffer = io.BytesIO()
  figure4(cells, task, metric=metric).savefig(buffer, format='png')
  return buffer.getvalue()


def figure_name(task: str) -> str:
  """The file name of a task's figure, safe for any task name: 'figure4_<task>.png'."""
  return f'figure4_{re.sub(r"[^A-Za-z0-9_.-]", "_", task)}.png'


# ---------------------------------------------------------------------------------------------
# Grid runs: the arithmetic study's regions and heatmaps (McLeish et al. 2024, Figs. 3 and 4).


_REGION_DEFINITIONS = {'id': 'both axes ≤ n', 'ood': 'some axis > n, both ≤ M',
                       'beyond': 'equal lengths past M'}


def architecture_key(name: str) -> tuple[int, int, int, str]:
  """Sort key of architectures: standard, standard_ii, looped by L descending (then by R), then
  any other name alphabetically.

  Example:
    >>> sorted(['looped 4x4', 'standard_ii', 'looped 8x2', 'other', 'standard'],
    ...        key=architecture_key)
    ['standard', 'standard_ii', 'looped 8x2', 'looped 4x4', 'other']
  """
  if name == 'standard':
    return 0, 0, 0, name
  if name == 'standard_ii':
    return 1, 0, 0, name
  looped = re.fullmatch(r'looped (\d+)x(\d+)', name)
  if looped:
    return 2, -int(looped[1]), int(looped[2]), name
  return 3, 0, 0, name


def collect_grid_entries(grid_runs: Iterable[GridRun]
                         ) -> dict[tuple[str, str, str], GridEntry]:
  """Groups grid runs by (task, architecture, column label), merging their members.

  Labels are those of `column_labels` over the grid runs (the encoding, unless its runs differ
  in their options or the runs hold several model families). As in `collect_cells`, a member
  found identically in two runs (same seed, learning rate, divergence, regions and cells)
  counts once.

  Example:
    >>> entries = collect_grid_entries(load_all_runs(['runs/abacus']).grid_runs)  # doctest: +SKIP
    >>> entries['addition', 'looped 8x2', 'abacus'].members  # Its 3 seeds.
  """
  runs = list(grid_runs)
  grouped: dict[tuple[str, str, str], list[GridRun]] = collections.defaultdict(list)
  for run, label in zip(runs, column_labels(runs)):
    grouped[run.task, run.architecture, label].append(run)
  entries = {}
  for (task, architecture, label), entry_runs in grouped.items():
    members, seen = [], set()
    for run in entry_runs:
      for member in run.members:
        key = _grid_member_key(member)
        if key not in seen:
          seen.add(key)
          members.append(member)
    entries[task, architecture, label] = GridEntry(
        task, architecture, entry_runs[0].encoding, tuple(entry_runs), tuple(members), label)
  return entries


def _grid_member_key(member: GridMember) -> tuple[Any, ...]:
  # repr, so that the NaN cells of a member compare equal to their copy's.
  return (member.seed, member.learning_rate, member.diverged,
          repr(tuple(member.regions.items())), repr(tuple(member.exact_match_by_cell.items())))


def grid_layout(entries: Mapping[tuple[str, str, str], GridEntry]
                ) -> tuple[list[str], list[str], list[str]]:
  """(tasks, architectures, columns) of the grid entries, in the region table's order.

  Tasks follow the arithmetic registry, architectures `architecture_key`, columns their
  encodings' registry order (GRID_ENCODINGS) with the columns of one encoding adjacent and
  sorted; unknown tasks and encodings come after, sorted.

  Example:
    >>> grid_layout(entries)  # doctest: +SKIP
    (['addition'], ['standard', 'looped 8x2'], ['none', 'abacus', 'fire'])
  """
  tasks = _ordered({e.task for e in entries.values()}, ARITHMETIC_TASKS, False)
  architectures = sorted({e.architecture for e in entries.values()}, key=architecture_key)
  labels: dict[str, set[str]] = collections.defaultdict(set)
  for entry in entries.values():
    labels[entry.encoding].add(entry.label)
  encodings = _ordered(labels, GRID_ENCODINGS, False)
  return tasks, architectures, [label for e in encodings for label in sorted(labels[e])]


@dataclasses.dataclass(frozen=True)
class RegionStats:
  """A region table entry: the members' exact match in one region, as fractions.

  `sd` is the population standard deviation (ddof=0) over the `counted` of `total` members
  (the others diverged, or their runs have no cell in the region).
  """
  mean: float
  sd: float
  counted: int
  total: int


def region_stats(entry: GridEntry, region: str) -> RegionStats | None:
  """Mean ± sd over the entry's non-diverged members of their exact match in `region` (one of
  GRID_REGIONS); None when no member has a value there.

  Example:
    >>> [m.regions['ood'] for m in entry.members]  # doctest: +SKIP
    [0.9, 0.8, None]
    >>> region_stats(entry, 'ood')  # doctest: +SKIP
    RegionStats(mean=0.85, sd=0.05, counted=2, total=3)
  """
  values = [m.regions[region] for m in entry.converged if m.regions[region] is not None]
  if not values:
    return None
  mean = math.fsum(values) / len(values)
  sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
  return RegionStats(mean, sd, len(values), len(entry.members))


def _region_entry(entry: GridEntry, region: str) -> str:
  if not entry.converged:
    return DIVERGED
  stats = region_stats(entry, region)
  if stats is None:
    return MISSING
  text = f'{_percent(stats.mean)} ± {_percent(stats.sd)}'
  if stats.counted < stats.total:
    text += f' ({stats.counted}/{stats.total})'
  return text


def region_table(entries: Mapping[tuple[str, str, str], GridEntry], *,
                 skipped: Sequence[str] = ()) -> str:
  """The arithmetic study's results as markdown: per task, exact match (%) by region.

  The shape of the paper's Figures 3 and 4: per task, one table per region (OOD, beyond, ID),
  rows the architectures and columns the encodings (`grid_layout`), each entry the mean ± sd
  over the non-diverged members of their exact match in the region (`region_stats`).

  Example:
    >>> print(region_table(entries))  # doctest: +SKIP
    # Arithmetic: exact match (%) by region, mean ± sd over members
    <BLANKLINE>
    ## addition
    <BLANKLINE>
    ### OOD: some axis > n, both ≤ M
    <BLANKLINE>
    | architecture | abacus | none |
    |---|---|---|
    | standard | 92.9 ± 1.2 | 3.1 ± 0.4 |
    | looped 8x2 | 97.5 ± 0.3 | 4.0 ± 1.1 (2/3) |
    ...
  """
  tasks, architectures, columns = grid_layout(entries)
  lines = ['# Arithmetic: exact match (%) by region, mean ± sd over members', '']
  for task in tasks:
    rows = [a for a in architectures if any((task, a, c) in entries for c in columns)]
    shown = [c for c in columns if any((task, a, c) in entries for a in architectures)]
    lines += [f'## {task}', '']
    for region in GRID_REGIONS:
      lines += [f'### {REGION_NAMES[region]}: {_REGION_DEFINITIONS[region]}', '',
                '| architecture | ' + ' | '.join(shown) + ' |', '|---|' + '---|' * len(shown)]
      for architecture in rows:
        row = [MISSING if (task, architecture, c) not in entries
               else _region_entry(entries[task, architecture, c], region) for c in shown]
        lines.append(f'| {architecture} | ' + ' | '.join(row) + ' |')
      lines.append('')
  return '\n'.join(lines + _format_notes(_grid_notes(entries, skipped))) + '\n'


def _entry_name(entry: GridEntry) -> str:
  return f'{entry.task}/{entry.architecture}/{entry.label}'


def _which_entries(group: Sequence[GridEntry], total: int, limit: int = 8) -> str:
  """'all N entries', or the entries' names, shortened past `limit`."""
  if len(group) == total:
    return f'all {total} entries'
  names = [_entry_name(e) for e in group]
  if len(names) > limit:
    return ', '.join(names[:limit]) + f' and {len(names) - limit} more'
  return ', '.join(names)


def _grid_protocol(run: GridRun) -> str:
  """The cells a grid run measured, e.g. 'n = 20, M = 100, cells (digits_a, digits_b) in
  1..100 at stride 1, beyond 101..160 (every length, 60 lengths), 100 samples per cell'."""
  stride = f' at stride {run.grid_stride} (and {run.grid_max})' if run.grid_stride > 1 else ''
  beyond = (', '.join(map(str, run.beyond)) if len(run.beyond) <= 4
            else describe_lengths(run.beyond)) if run.beyond else 'none'
  return (f'n = {run.train_length}, M = {run.grid_max}, cells ({run.axes[0]}, {run.axes[1]}) '
          f'in 1..{run.grid_max}{stride}, beyond {beyond}, {run.samples_per_cell} samples per '
          'cell')


def _grid_notes(entries: Mapping[tuple[str, str, str], GridEntry],
                skipped: Sequence[str]) -> list[str]:
  """The region table's notes: what an entry is, the regions and cells, members, training,
  columns, merges and skipped runs."""
  tasks, architectures, columns = grid_layout(entries)
  ordered = [entries[t, a, c] for t in tasks for a in architectures for c in columns
             if (t, a, c) in entries]
  total = len(ordered)
  notes = [
      'Each entry is the mean ± sd over the non-diverged members (seeds × learning rates) of an '
      'architecture and encoding of their exact match (the share of generated answers with '
      'every token right) averaged over the cells of a region, in %; sd is the population '
      'standard deviation (ddof=0). "(2/3)" marks an entry where only 2 of its 3 members count '
      f'(the others diverged). {MISSING} = no run, or no cell in the region; {DIVERGED} = every '
      'member diverged.']

  by_protocol: dict[str, list[GridEntry]] = collections.defaultdict(list)
  for entry in ordered:
    for text in dict.fromkeys(_grid_protocol(r) for r in entry.runs):
      by_protocol[text].append(entry)
  notes.append(
      'Regions of the cells (a, b): ID, both axes ≤ n (the training size); OOD, some axis > n '
      'and both ≤ M; beyond, equal lengths a = b past M. Cells measured: ' + '; '.join(
          f'{text} in {_which_entries(group, total)}' for text, group in by_protocol.items())
      + '.')

  by_count: dict[str, list[GridEntry]] = collections.defaultdict(list)
  for entry in ordered:
    by_count[_members_text(entry.members)].append(entry)
  notes.append('Members per entry: ' + '; '.join(
      f'{text} in {_which_entries(group, total)}' for text, group in by_count.items()) + '.')

  diverged = [(e, sum(m.diverged for m in e.members)) for e in ordered]
  listed = ', '.join(f'{_entry_name(e)} ({k} of {len(e.members)})' for e, k in diverged if k)
  if listed:
    notes.append(f'Diverged members, left out of the entries: {listed}.')

  by_steps: dict[tuple[int, int], list[GridEntry]] = collections.defaultdict(list)
  for entry in ordered:
    for key in sorted({(r.train_steps, r.planned_steps) for r in entry.runs}):
      by_steps[key].append(entry)
  for (steps, planned), group in sorted(by_steps.items(), reverse=True):
    state = (f'Not fully trained: stopped at {steps:,} of {planned:,} configured steps'
             if steps < planned else f'Trained {steps:,} steps')
    notes.append(f'{state}: {_which_entries(group, total)}.')

  families = sorted({r.family for e in ordered for r in e.runs})
  if len(families) > 1:
    notes.append(f'Runs of {len(families)} model families ({", ".join(families)}): each column '
                 'names its family; runs of different families are never merged.')
  split: dict[str, set[str]] = collections.defaultdict(set)
  for entry in ordered:
    split[entry.encoding].add(entry.label)
  for encoding, labels in split.items():
    if len(labels) > len({r.family for e in ordered if e.encoding == encoding for r in e.runs}):
      notes.append(f'{encoding} is split by encoding options into {len(labels)} columns '
                   f'({"; ".join(sorted(labels))}); their runs are never merged.')

  for entry in ordered:
    if len(entry.runs) > 1:
      notes.append(f'{_entry_name(entry)} merges the members of {len(entry.runs)} runs '
                   f'({", ".join(str(r.path) for r in entry.runs)}); identical members count '
                   'once.')

  devices = sorted({str(r.versions.get('device_kind', '?')) for e in ordered for r in e.runs})
  runs = sum(len(e.runs) for e in ordered)
  notes.append(f'Built from {runs} grid run{"s" * (runs != 1)} in {total} '
               f'entr{"ies" if total != 1 else "y"} (devices: {", ".join(devices)}).')
  if skipped:
    notes.append(f'Skipped {len(skipped)} malformed run{"s" * (len(skipped) != 1)}: '
                 + '; '.join(skipped) + '.')
  return notes


_HEATMAP_COLORMAP = 'viridis'
_TRAINING_BOX = 'red'  # Stands out on every viridis shade.
_MAX_TICKS = 20  # An axis with more measured lengths is ticked at round numbers.


def _cell_edges(values: Sequence[int]) -> list[float]:
  """The edges of the cells of sorted measured lengths: each from half a length below its
  length to half a length below the next measured one (the last one length wide), so that on a
  strided axis a cell stands for the lengths it skips.

  Example: _cell_edges([1, 2, 3]) == [0.5, 1.5, 2.5, 3.5];
  _cell_edges([1, 11, 20]) == [0.5, 10.5, 19.5, 20.5].
  """
  return [v - 0.5 for v in values] + [values[-1] + 0.5]


def _ticks(values: Sequence[int]) -> list[int]:
  """Tick positions for sorted measured lengths: all of them when few; else the first and the
  multiples of a round step (1, 2 or 5 × 10^k) giving at most about ten ticks.

  Example: _ticks(range(1, 19)) == [1, 2, ..., 18]; _ticks(range(1, 101)) == [1, 10, 20, ...,
  100].
  """
  values = sorted(values)
  if len(values) <= _MAX_TICKS:
    return values
  span = values[-1] - values[0]
  step = 1
  while span / step > 10:
    step = _next_round(step)
  first = -(-values[0] // step) * step
  ticks = list(range(first, values[-1] + 1, step))
  if not ticks or ticks[0] - values[0] >= step / 2:
    ticks.insert(0, values[0])
  return ticks


def _next_round(step: int) -> int:
  """The round step after `step` in 1, 2, 5, 10, 20, 50, ..."""
  return step * 5 // 2 if str(step).startswith('2') else step * 2


def grid_heatmap(run: GridRun, member: GridMember, *, label: str | None = None
                 ) -> mpl_figure.Figure:
  """A member's exact match (%) on every measured cell (a, b) ≤ M, and on the cells past M.

  a (the run's first axis) runs up the y axis, b (the second) along the x axis; each measured
  cell is drawn at its lengths and, on a strided grid, stretches up to the next measured
  lengths (`_cell_edges`); a cell not measured is blank. A red box marks the training region
  (both axes ≤ n). The equal lengths past M, when measured, are a strip of their own on the
  right. The title names the task, column `label` (default: the encoding), architecture, seed,
  learning rate and the member's region means. 800 × 660 pixels.

  Example:
    >>> fig = grid_heatmap(run, run.members[0])  # doctest: +SKIP
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('digits_b', 'digits_a')
  """
  label = run.encoding if label is None else label
  m, n = run.grid_max, run.train_length
  inside = {(a, b): v for (a, b), v in member.exact_match_by_cell.items() if a <= m and b <= m}
  beyond = sorted((a, v) for (a, b), v in member.exact_match_by_cell.items()
                  if a == b and a > m)
  fig = mpl_figure.Figure(figsize=(8, 6.6), dpi=100, layout='constrained')
  ratios = [20, 1.2, 0.8] if beyond else [20, 0.8]
  layout = fig.add_gridspec(1, len(ratios), width_ratios=ratios)
  ax = fig.add_subplot(layout[0])
  cmap = colormaps[_HEATMAP_COLORMAP].with_extremes(bad='white')
  norm = mpl_colors.Normalize(0, 100)
  rows, columns = sorted({a for a, _ in inside}), sorted({b for _, b in inside})
  if inside:
    percent = np.full((len(rows), len(columns)), np.nan)
    row_index = {a: i for i, a in enumerate(rows)}
    column_index = {b: j for j, b in enumerate(columns)}
    for (a, b), value in inside.items():
      percent[row_index[a], column_index[b]] = 100 * value
    ax.pcolormesh(_cell_edges(columns), _cell_edges(rows),
                  np.ma.masked_invalid(percent), cmap=cmap, norm=norm)
    ax.set_xticks(_ticks(columns))
    ax.set_yticks(_ticks(rows))
  else:
    ax.text(0.5, 0.5, 'no cell measured', transform=ax.transAxes, ha='center', va='center')
  ax.set_xlim(0.5, m + 0.5)
  ax.set_ylim(0.5, m + 0.5)
  ax.add_patch(mpl_patches.Rectangle((0.5, 0.5), min(n, m), min(n, m), fill=False,
                                     edgecolor=_TRAINING_BOX, linewidth=2, zorder=3))
  ax.text(min(n, m) + 0.5, min(n, m) + 0.5, f' training: both ≤ {n}', color=_TRAINING_BOX,
          fontsize=9, ha='left', va='bottom', zorder=3,
          bbox={'facecolor': 'white', 'alpha': 0.7, 'edgecolor': 'none', 'pad': 1})
  ax.set_xlabel(run.axes[1])
  ax.set_ylabel(run.axes[0])
  ax.tick_params(labelsize=8)
  if beyond:
    strip = fig.add_subplot(layout[1])
    values = np.ma.masked_invalid([[100 * v] for _, v in beyond])
    strip.pcolormesh([0, 1], np.arange(len(beyond) + 1) - 0.5, values, cmap=cmap, norm=norm)
    lengths = [a for a, _ in beyond]
    shown = set(_ticks(lengths))
    strip.set_yticks([i for i, a in enumerate(lengths) if a in shown],
                     [str(a) for a in lengths if a in shown])
    strip.set_xticks([])
    strip.yaxis.tick_right()
    strip.tick_params(labelsize=8)
    strip.set_title(f'beyond\na = b > {m}', fontsize=8)
  fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), cax=fig.add_subplot(layout[-1]),
               label='exact match (%)')
  regions = ', '.join(
      f'{REGION_NAMES[r]} {MISSING if member.regions[r] is None else _percent(member.regions[r])}'
      for r in ('id', 'ood', 'beyond'))
  state = 'diverged' if member.diverged else f'exact match (%): {regions}'
  fig.suptitle(f'{run.task}: {label}, {run.architecture}\nseed {member.seed}, learning rate '
               f'{member.learning_rate:g}; {state}', fontsize=11)
  return fig


def grid_heatmap_png(run: GridRun, member: GridMember, *, label: str | None = None) -> bytes:
  """`grid_heatmap` as PNG bytes.

  Example:
    >>> grid_heatmap_png(run, run.members[0])[:8] == b'\\x89PNG\\r\\n\\x1a\\n'  # doctest: +SKIP
    True
  """
  buffer = io.BytesIO()
  grid_heatmap(run, member, label=label).savefig(buffer, format='png')
  return buffer.getvalue()


def heatmap_name(task: str, label: str, architecture: str, seed: int,
                 learning_rate: float) -> str:
  """A heatmap's file name, safe for any name: spaces and other signs become '_'.

  Example:
    >>> heatmap_name('addition', 'abacus', 'looped 8x2', 0, 1e-4)
    'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png'
  """
  stem = f'heatmap_{task}__{label}__{architecture}__seed{seed}_lr{learning_rate:g}'
  return re.sub(r'[^A-Za-z0-9_.-]', '_', stem) + '.png'


def grid_heatmaps(entries: Mapping[tuple[str, str, str], GridEntry]) -> dict[str, bytes]:
  """One heatmap per member of every entry (`grid_heatmap_png`), by file name (`heatmap_name`).

  A member found identically in two runs of an entry is drawn once; distinct members whose
  names coincide (the same seed and learning rate twice) get '__2', '__3', ... appended.

  Example:
    >>> sorted(grid_heatmaps(entries))  # doctest: +SKIP
    ['heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png', ...]
  """
  tasks, architectures, columns = grid_layout(entries)
  files = {}
  for key in ((t, a, c) for t in tasks for a in architectures for c in columns):
    entry = entries.get(key)
    if entry is None:
      continue
    seen = set()
    for run in entry.runs:
      for member in run.members:
        if _grid_member_key(member) in seen:
          continue
        seen.add(_grid_member_key(member))
        name = heatmap_name(entry.task, entry.label, entry.architecture, member.seed,
                            member.learning_rate)
        stem, copy = name.removesuffix('.png'), 1
        while name in files:
          copy += 1
          name = f'{stem}__{copy}.png'
        files[name] = grid_heatmap_png(run, member, label=entry.label)
  return files


# ---------------------------------------------------------------------------------------------
# Everything at once.


@dataclasses.dataclass(frozen=True)
class Report:
  """A built report: `files` maps file names to contents; `skipped` lists malformed runs.

  `table1` and `table4` are empty without range runs, `arithmetic` (the region table) without
  grid runs.
  """
  table1: str
  table4: str
  files: Mapping[str, bytes]
  skipped: tuple[str, ...]
  arithmetic: str = ''
  perplexity: str = ''
  hints: str = ''
  absent: str = ''  # The "Not in this report" section, '' when nothing is left out.


def per_length_table(cells: Mapping[tuple[str, str], Cell], task: str,
                     max_rows: int = 24, *, metric: str = 'accuracy') -> str:
  """The metric by length of each encoding's best member on `task`, as markdown.

  Rows are lengths (thinned evenly to at most `max_rows`, always keeping N, N+1 and the
  longest), columns those of the tables (encodings, or an encoding's variants, `column_labels`);
  the training range ends at N, marked with '*'. `metric` is the one the cells' members were
  loaded with; the title names it.

  Example:
    >>> text = per_length_table(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> text.split(';')[0]
    'reverse_string: exact match (%) by length, best member per encoding'
    >>> text.splitlines()[2:5]
    ['| length | none | randomized_relative |', '|---|---|---|', '| 1* | 100.0 | 100.0 |']
  """
  label = metric_label(metric)
  encodings = [e for e in grid_axes(cells)[1] if (task, e) in cells]
  best = {e: best_member(cells[(task, e)]) for e in encodings}
  lengths = sorted({int(l) for m in best.values() if m for l in m.accuracy_by_length})
  if not lengths:
    return f'{task}: no evaluated lengths'
  n = cells[(task, encodings[0])].runs[0].train_length
  step = max(1, -(-len(lengths) // max_rows))
  shown = sorted(set(lengths[::step]) | {l for l in (n, n + 1, lengths[-1]) if l in lengths})
  head = '| length | ' + ' | '.join(encodings) + ' |'
  rows = [head, '|' + '---|' * (len(encodings) + 1)]
  for length in shown:
    cells_text = []
    for e in encodings:
      acc = best[e].accuracy_by_length.get(length) if best[e] else None
      cells_text.append('–' if acc is None or acc != acc else f'{100 * acc:.1f}')
    mark = '*' if length <= n else ''
    rows.append(f'| {length}{mark} | ' + ' | '.join(cells_text) + ' |')
  return (f'{task}: {label} (%) by length, best member per encoding; * = trained length '
          f'(1..{n})\n\n' + '\n'.join(rows) + '\n')


def absent_section(absent: Sequence[str]) -> str:
  """The markdown section that lists what a report leaves out and why ('' for nothing).

  Example:
    >>> print(absent_section(['parity_check__none: held by process 7 on host a']), end='')
    <BLANKLINE>
    ## Not in this report
    <BLANKLINE>
    1 cell of the grid is not in the tables and figures above:
    - parity_check__none: held by process 7 on host a
  """
  if not absent:
    return ''
  n = len(absent)
  return (f'\n## Not in this report\n\n{n} cell{"s" * (n != 1)} of the grid '
          f'{"is" if n == 1 else "are"} not in the tables and figures above:\n'
          + ''.join(f'- {line}\n' for line in absent))


def build_report(paths: Sequence[str | os.PathLike[str]], *, full_grid: bool = False,
                 figures: bool = True, per_length: bool = False,
                 metric: str = 'accuracy', absent: Sequence[str] = ()) -> Report:
  """Loads the runs under `paths` and renders every table and figure in memory.

  Range runs give both tables (table1.md, table4.md), every task's figure
  (figure4_<task>.png) and with `per_length` the per-length tables (lengths_<task>.md); there,
  every score, curve and title is that of `metric` ('accuracy' or 'exact_match'), and under
  'exact_match' a range results.json without the exact-match fields is skipped as malformed.
  Grid runs give the region table (arithmetic.md, `region_table`: always exact match, the
  arithmetic study's measure) and one heatmap per member (`grid_heatmaps`). `figures=False`
  leaves out every PNG. `absent` lists what the caller knows is missing from `paths` ('cell:
  why', e.g. a sweep's cells that are not complete): every markdown file then ends with a
  "Not in this report" section that lists them (`absent_section`), so a partial report never
  reads as a whole one.

  Example:
    >>> report = build_report(['sweep', 'runs/abacus'], metric='exact_match')  # doctest: +SKIP
    >>> sorted(report.files)
    ['arithmetic.md', 'figure4_reverse_string.png',
     'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png', 'table1.md', 'table4.md']
    >>> report.table1.splitlines()[0]
    '# Table 1: exact match (%) on unseen lengths, max over members'

  Raises:
    ReportError: a path is missing, holds no results.json, no run (range or grid) is well
      formed, or `metric` is unknown.
  """
  loaded = load_all_runs(paths, metric=metric)
  runs, skipped = list(loaded.runs), list(loaded.problems)
  if not runs and not loaded.grid_runs and not loaded.lm_runs and not loaded.hint_runs:
    raise ReportError(f'no well-formed run among {len(skipped)} results.json file(s): '
                      f'{skipped[0]}')
  text1 = text4 = arithmetic = ''
  files = {}
  if runs:
    cells = collect_cells(runs)
    text1 = table1(cells, full_grid=full_grid, skipped=skipped, metric=metric)
    text4 = table4(cells, full_grid=full_grid, skipped=skipped, metric=metric)
    files.update({'table1.md': text1.encode(), 'table4.md': text4.encode()})
    if figures:
      for task in grid_axes(cells)[0]:
        files[figure_name(task)] = figure4_png(cells, task, metric=metric)
    if per_length:
      for task in grid_axes(cells)[0]:
        files[f'lengths_{task}.md'] = per_length_table(cells, task, metric=metric).encode()
  if loaded.grid_runs:
    entries = collect_grid_entries(loaded.grid_runs)
    arithmetic = region_table(entries, skipped=skipped)
    files[ARITHMETIC_FILE] = arithmetic.encode()
    if figures:
      files.update(grid_heatmaps(entries))
  perplexity = ''
  if loaded.lm_runs:
    perplexity = perplexity_table(loaded.lm_runs)
    files[PERPLEXITY_FILE] = perplexity.encode()
  hints = ''
  if loaded.hint_runs:
    hints = hint_report.table(loaded.hint_runs)
    files[hint_report.FILE] = hints.encode()
    if figures:
      for task in sorted({r.task for r in loaded.hint_runs}):
        files[f'hints_{task}.png'] = hint_report.figure_png(loaded.hint_runs, task)
  section = absent_section(absent)
  files = {name: data + section.encode() if name.endswith('.md') else data
           for name, data in files.items()}
  return Report(text1, text4, files, tuple(skipped), arithmetic, perplexity, hints, section)


def write_files(out: str | os.PathLike[str], files: Mapping[str, bytes]) -> None:
  """Writes each file into `out` (created) atomically (`posenc.io.write_bytes_atomic`: mode
  0666 & ~umask, like any file a user writes)."""
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  for name, data in files.items():
    io_lib.write_bytes_atomic(out / name, data)


def write_report(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                 full_grid: bool = False, per_length: bool = False,
                 metric: str = 'accuracy', absent: Sequence[str] = ()) -> str:
  """Builds the report of `paths` for `metric` (`build_report`), writes it into `out`, returns
  the text to print: the range tables, the per-length tables, then the region table (each when
  present), and last, once, the "Not in this report" section of `absent`.

  Example:
    >>> print(write_report(['sweep'], 'sweep/report', metric='exact_match'))  # doctest: +SKIP
    # Table 1: exact match (%) on unseen lengths, max over members
    ...
  """
  report = build_report(paths, full_grid=full_grid, per_length=per_length, metric=metric,
                        absent=absent)
  write_files(out, report.files)
  texts = [report.table1, report.table4] if report.table1 else []
  texts += [v.decode().removesuffix(report.absent) for k, v in sorted(report.files.items())
            if k.startswith('lengths_')]
  if report.arithmetic:
    texts.append(report.arithmetic)
  if report.perplexity:
    texts.append(report.perplexity)
  if report.hints:
    texts.append(report.hints)
  if report.absent:
    texts.append(report.absent.lstrip('\n'))
  return '\n'.join(texts)
