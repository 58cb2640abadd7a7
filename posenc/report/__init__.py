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
range runs and turn into:

- the region table (arithmetic.md): per task, architecture (standard, standard_ii, looped LxR)
  and encoding, mean ± sd over the members of their exact match in each region, in %;
- heatmaps: per member, its exact match on every cell, the training region boxed.

Language-model runs (`evaluation` 'perplexity') give perplexity.md, task-hinting runs
('lengths') hints.md and a figure per task; with a scorecard, every run enters the robustness
scorecard (`scorecard.py`).

Runs are read as `posenc.results.Results` records (`posenc.kinds`;
`sections.load.RunFile`: a record and its path), with no view of their own: a member's score
and curve in the report's metric come from the record (`score_of`, `curve`). Each kind of
evaluation's section (section.py in its folder of `posenc.kinds`: `check` and `build`, made
of what every section shares, `posenc.sections`: `core.Section`) is found by results.json's
`evaluation` (`kinds.section`), in the registry's order: a run goes to its section, whose
`check` may skip it as malformed, and the report gathers the sections' texts and files
without naming any (`Report`). This package sits above the kinds; `posenc.sections` below
them. The range tables and figures are `posenc.kinds.range.tables` and `.section`'s,
the region table and heatmaps `posenc.kinds.grid.regions` and `.section`'s.

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
identically in two runs (same seed, learning rate, divergence, score and curve in the metric:
a copy of the same training) counts once and any other member counts separately, even with the
same seed and learning rate. The tables' notes name every merged cell and any repeated
(seed, learning rate) pair.
Grid runs group by (task, architecture, column) into entries, their members merged likewise.

Example:
  >>> runs, problems = load_runs(['workdir/sweep'])  # doctest: +SKIP
  >>> cells = tables.collect_cells(runs, metric='accuracy')  # doctest: +SKIP
  >>> print(tables.table1(cells, skipped=problems))  # doctest: +SKIP
  # Table 1: accuracy (%) on unseen lengths, max over members
  <BLANKLINE>
  | level | task | none | randomized_relative |
  |---|---|---|---|
  | DCF | reverse_string | 52.0 | 95.1 |
  ...
"""

import dataclasses
import os
from typing import Mapping, Sequence

from posenc.storage import io as io_lib
from posenc import kinds
from posenc.storage import store
from posenc.report import scorecard as scorecard_lib
from posenc.report import training
from posenc.sections import core
from posenc.sections import load

# The public API, from the modules that define it.
# pylint: disable=unused-import,g-importing-member
from posenc.sections.core import (
  ENCODINGS,
  METRICS,
  TASK_LEVELS,
  TASKS,
  MalformedRunError,
  ReportError,
)
from posenc.sections.load import RunFile, column_labels, find_results
# pylint: enable=unused-import,g-importing-member


# ---------------------------------------------------------------------------------------------
# Loading.


def load_run(
  results_path: str | os.PathLike[str], *, metric: str = 'accuracy', evaluation: str | None = None
) -> RunFile:
  """Reads one results.json (`posenc.kinds`, any schema version) and checks that its
  evaluation's section can report it in `metric` (`check`), and with `evaluation` that it
  is a run of that kind.

  Example:
    >>> run = load_run('runs/rs_rr/results.json', metric='exact_match')  # doctest: +SKIP
    >>> run.record.task, run.record.family, len(run.record.members)  # doctest: +SKIP
    ('reverse_string', 'decoder', 30)

  Raises:
    MalformedRunError: unreadable JSON, an unknown schema version, a missing/mistyped field,
      or nothing the section can report, naming the file and field.
    ReportError: `metric` is not one of METRICS.
  """
  core.metric_label(metric)  # An unknown metric is the caller's error, not the file's.
  path = store.as_path(results_path)
  record = kinds.read(path)
  if evaluation is not None and record.evaluation.evaluation != evaluation:
    raise MalformedRunError(f'{results_path}: not a {evaluation} run')
  kinds.section(record.evaluation.evaluation).check(record, path, metric)
  return RunFile(path, record)


@dataclasses.dataclass(frozen=True)
class LoadedRuns:
  """Every well-formed results.json under some paths (`runs`, in `find_results`' order), and
  one message per file skipped as malformed."""

  runs: tuple[RunFile, ...]
  problems: tuple[str, ...]

  def of(self, evaluation: str) -> tuple[RunFile, ...]:
    """The runs of one evaluation, e.g. 'grid'."""
    return tuple(r for r in self.runs if r.record.evaluation.evaluation == evaluation)


def load_all_runs(
  paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
) -> LoadedRuns:
  """Loads every run under `paths` (`load_run`); malformed ones are skipped and described.

  Example:
    >>> loaded = load_all_runs(['sweep', 'runs/arithmetic'])  # doctest: +SKIP
    >>> len(loaded.of('range')), len(loaded.of('grid')), loaded.problems  # doctest: +SKIP
    (30, 6, ())

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  found = load.find_results(paths)
  core.metric_label(metric)
  runs, problems = [], []
  for results_path in found:
    try:
      runs.append(load_run(results_path, metric=metric))
    except MalformedRunError as e:
      problems.append(str(e))
  return LoadedRuns(tuple(runs), tuple(problems))


def load_runs(
  paths: Sequence[str | os.PathLike[str]],
  *,
  metric: str = 'accuracy',
  evaluation: str = 'range',
) -> tuple[list[RunFile], list[str]]:
  """Loads every run of one kind of evaluation (by default the study's, 'range') under
  `paths` for `metric` (`load_run`); malformed ones are skipped and described. Runs of other
  evaluations load without a problem but are not among the runs: `load_all_runs` returns
  them too.

  Example:
    >>> runs, problems = load_runs(['sweep', 'extra_run'])  # doctest: +SKIP
    >>> problems  # doctest: +SKIP
    ['sweep/cells/x__y/results.json: missing \\'members\\'']

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  loaded = load_all_runs(paths, metric=metric)
  return list(loaded.of(evaluation)), list(loaded.problems)


# ---------------------------------------------------------------------------------------------
# Everything at once.


@dataclasses.dataclass(frozen=True)
class Report:
  """A built report: every section's markdown texts by name (`texts`: 'table1', 'table4',
  'arithmetic', ..., in the order they print), its files by name, the malformed runs skipped;
  the files that are tables and the figures counted (`tables`, `figures`: what
  `launch.report` names as written); and the "Not in this report" section (`absent`, '' when
  nothing is left out).
  """

  texts: Mapping[str, str]
  files: Mapping[str, bytes]
  skipped: tuple[str, ...]
  tables: tuple[str, ...] = ()
  figures: tuple[str, ...] = ()
  absent: str = ''


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
  return (
    f'\n## Not in this report\n\n{n} cell{"s" * (n != 1)} of the grid '
    f'{"is" if n == 1 else "are"} not in the tables and figures above:\n'
    + ''.join(f'- {line}\n' for line in absent)
  )


def partial_title(text: str, absent: Sequence[str]) -> str:
  """`text` with its title (its first line: '# Table 1: ...', or a per-length table's
  caption) marked partial when `absent` lists cells the report leaves out, so a part of a
  grid never reads as the whole of it.

  Example:
    >>> partial_title('# Table 1: accuracy\\n\\n| a |\\n', ['x: failed'])
    '# Table 1: accuracy (partial: 1 cell of the grid missing, listed at the end)\\n\\n| a |\\n'
  """
  if not absent or not text:
    return text
  n = len(absent)
  title, _, rest = text.partition('\n')
  mark = f' (partial: {n} cell{"s" * (n != 1)} of the grid missing, listed at the end)'
  return title + mark + '\n' + rest


def build_report(
  paths: Sequence[str | os.PathLike[str]],
  *,
  full_grid: bool = False,
  figures: bool = True,
  per_length: bool = False,
  metric: str = 'accuracy',
  absent: Sequence[str] = (),
  scorecard: scorecard_lib.Thresholds | None = None,
) -> Report:
  """Loads the runs under `paths` and renders every table and figure in memory.

  Range runs give both tables (table1.md, table4.md), every task's figure
  (figure4_<task>.png) and with `per_length` the per-length tables (lengths_<task>.md); there,
  every score, curve and title is that of `metric` ('accuracy' or 'exact_match'), and under
  'exact_match' a range results.json without the exact-match fields is skipped as malformed.
  Grid runs give the region table (arithmetic.md, `region_table`: always exact match, the
  arithmetic study's measure) and one heatmap per member (`grid_heatmaps`); language-model
  and hinting runs their sections' tables and figures. `figures=False`
  leaves out every PNG. `absent` lists what the caller knows is missing from `paths` ('cell:
  why', e.g. a sweep's cells that are not complete): every markdown file's title then says
  the report is partial (`partial_title`) and the file ends with a "Not in this report"
  section that lists them (`absent_section`), so a partial report never reads as a whole one. With `scorecard` (its thresholds), the robustness scorecard of every
  run too (`posenc.report.scorecard`: scorecard.json, scorecard.md, scorecard_<task>.png).

  Example:
    >>> report = build_report(['sweep', 'runs/abacus'], metric='exact_match')  # doctest: +SKIP
    >>> sorted(report.files)  # doctest: +SKIP
    ['arithmetic.md', 'figure4_reverse_string.png',
     'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png', 'table1.md', 'table4.md']
    >>> report.texts['table1'].splitlines()[0]  # doctest: +SKIP
    '# Table 1: exact match (%) on unseen lengths, max over members'

  Raises:
    ReportError: a path is missing, holds no results.json, no run is well formed, or `metric`
      is unknown.
  """
  if scorecard is not None:
    try:
      scorecard.check()
    except ValueError as e:
      raise ReportError(str(e)) from None
  loaded = load_all_runs(paths, metric=metric)
  skipped = loaded.problems
  if not loaded.runs:
    raise ReportError(f'no well-formed run among {len(skipped)} results.json file(s): {skipped[0]}')
  options = core.Options(
    full_grid=full_grid, figures=figures, per_length=per_length, metric=metric, skipped=skipped
  )
  sections = [
    kinds.section(name).build(runs, options) for name in kinds.KINDS if (runs := loaded.of(name))
  ]
  if scorecard is not None:
    sections.append(scorecard_lib.section(loaded.runs, scorecard, figures=figures))
  if figures:
    curves = training.figures(loaded.runs)
    if curves:
      sections.append(
        core.Section({}, curves, figures=(core.counted(len(curves), 'training figure'),))
      )
  absent_text = absent_section(absent)
  # Every markdown file ends with what the report leaves out.
  files = {
    name: (partial_title(data.decode(), absent) + absent_text).encode()
    if name.endswith('.md')
    else data
    for section in sections
    for name, data in section.files.items()
  }
  return Report(
    {k: partial_title(v, absent) for section in sections for k, v in section.texts.items()},
    files,
    skipped,
    tuple(t for section in sections for t in section.tables),
    tuple(f for section in sections for f in section.figures),
    absent_text,
  )


def write_files(out: str | os.PathLike[str], files: Mapping[str, bytes]) -> None:
  """Writes each file into `out` (created) atomically (`posenc.storage.io.write_bytes_atomic`: mode
  0666 & ~umask, like any file a user writes)."""
  out = store.as_path(out)
  if not store.is_url(out):  # A store has no folders to make.
    out.mkdir(parents=True, exist_ok=True)
  for name, data in files.items():
    io_lib.write_bytes_atomic(out / name, data)


def write_report(
  paths: Sequence[str | os.PathLike[str]],
  out: str | os.PathLike[str],
  *,
  full_grid: bool = False,
  per_length: bool = False,
  metric: str = 'accuracy',
  absent: Sequence[str] = (),
) -> str:
  """Builds the report of `paths` for `metric` (`build_report`), writes it into `out`, returns
  the text to print: every section's texts in order (the range tables and per-length tables,
  the region table, ...), and last, once, the "Not in this report" section of `absent`.

  Example:
    >>> print(write_report(['sweep'], 'sweep/report', metric='exact_match'))  # doctest: +SKIP
    # Table 1: exact match (%) on unseen lengths, max over members
    ...
  """
  report = build_report(
    paths, full_grid=full_grid, per_length=per_length, metric=metric, absent=absent
  )
  write_files(out, report.files)
  texts = list(report.texts.values())
  if report.absent:
    texts.append(report.absent.lstrip('\n'))
  return '\n'.join(texts)
