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
import dataclasses
import os
import pathlib
from typing import Mapping, Sequence


from posenc import io as io_lib
from posenc.report import load
from posenc.report import records
from posenc.report import scorecard as scorecard_lib

# The public API, from the modules that define it.
# pylint: disable=unused-import,g-importing-member
from posenc.report.grid import (RegionStats, architecture_key, collect_grid_entries,
                                grid_heatmap, grid_layout, heatmap_name, region_stats,
                                region_table)
from posenc.report.load import (collect_cells, column_labels, find_results, load_all_runs,
                                load_grid_run, load_run, load_runs)
from posenc.report.range import (describe_lengths, figure4, grid_axes, per_length_table,
                                 table1, table4)
from posenc.report.records import (ARITHMETIC_FILE, ENCODINGS, METRICS, PERPLEXITY_FILE,
                                   TASK_LEVELS, TASKS, GridRun, Member, ReportError, Run)
# pylint: enable=unused-import,g-importing-member


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
  scorecard: str = ''  # The robustness scorecard's markdown, '' when not asked for.


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
                 metric: str = 'accuracy', absent: Sequence[str] = (),
                 scorecard: scorecard_lib.Thresholds | None = None) -> Report:
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
  reads as a whole one. With `scorecard` (its thresholds), the robustness scorecard of every
  run too (`posenc.report.scorecard`: scorecard.json, scorecard.md, scorecard_<task>.png).

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
  if scorecard is not None:
    try:
      scorecard.check()
    except ValueError as e:
      raise records.ReportError(str(e)) from None
  loaded = load.load_all_runs(paths, metric=metric)
  skipped = tuple(loaded.problems)
  if not loaded.views:
    raise records.ReportError(f'no well-formed run among {len(skipped)} results.json file(s): '
                              f'{skipped[0]}')
  options = records.Options(full_grid=full_grid, figures=figures, per_length=per_length,
                            metric=metric, skipped=skipped)
  texts, files = {}, {}
  # Each protocol's runs go to its section (`Protocol.report`), in the registry's order.
  for name, views in loaded.views.items():
    section = load.section(name).build(views, options)
    texts.update(section.texts)
    files.update(section.files)
  if scorecard is not None:
    card = scorecard_lib.scorecard(loaded.records, scorecard)
    texts['scorecard'] = scorecard_lib.markdown(card)
    files.update(scorecard_lib.files(card, figures=figures))
  absent_text = absent_section(absent)
  files = {name: data + absent_text.encode() if name.endswith('.md') else data
           for name, data in files.items()}
  return Report(texts.get('table1', ''), texts.get('table4', ''), files, skipped,
                texts.get('arithmetic', ''), texts.get('perplexity', ''),
                texts.get('hints', ''), absent_text, texts.get('scorecard', ''))


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
