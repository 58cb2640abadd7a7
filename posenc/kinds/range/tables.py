"""The range runs' tables (Ruoss et al. 2023): Table 1, Table 4 and their notes, from
`RangeResults` records (record.py) grouped into cells (`tables.collect_cells`), every score
in the report's metric (`Cell.score`: the record's `score_of`); and what the grid runs'
region table shares with them (`ordered_names`, `percent_text`, `format_notes`,
`describe_lengths`, `members_text`).

Example:
  >>> cells = tables.collect_cells(runs, metric='exact_match')  # doctest: +SKIP
  >>> print(table1(cells, metric='exact_match'))              # doctest: +SKIP
  # Table 1: exact match (%) on unseen lengths, max over members
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Callable, Iterable, Mapping, Sequence

from posenc import results as results_lib
from posenc.kinds.range import record as range_record
from posenc.sections import core
from posenc.sections import load
from posenc.sections import notes as notes_lib
from posenc.sections import tables


@dataclasses.dataclass(frozen=True)
class Cell:
  """The members of every range run of one (task, column), merged (`collect_cells`), read in
  `metric` ('accuracy' or 'exact_match').

  `label` names the column: the encoding, or the encoding and the options that set its runs
  apart from its other columns (`column_labels`).
  """

  task: str
  encoding: str
  runs: tuple[load.RunFile, ...]
  members: tuple[range_record.RangeMember, ...]
  label: str
  metric: str = 'accuracy'

  @property
  def converged(self) -> tuple[range_record.RangeMember, ...]:
    return tuple(m for m in self.members if not m.diverged)

  @property
  def family(self) -> str:
    """The model family of the cell's runs (one, as families are never merged)."""
    return self.runs[0].record.family

  def score(self, member: range_record.RangeMember) -> float | None:
    """The member's score in the cell's metric; None for a diverged member, whatever it
    scored."""
    if member.diverged:
      return None
    return self.runs[0].record.evaluation.score_of(member, self.family, self.metric)

  def curve(self, member: range_record.RangeMember) -> dict[int, float]:
    """The member's metric by length, sorted (NaN where none was recorded)."""
    return self.runs[0].record.evaluation.curve(member, self.family, self.metric)


def collect_cells(
  runs: Iterable[load.RunFile], metric: str = 'accuracy'
) -> dict[tuple[str, str], Cell]:
  """Groups range runs by (task, column label), merging the members of runs of one cell.

  The label is the encoding unless its runs differ in their options or the runs hold several
  model families (`column_labels`). The members are read in `metric`. When several runs cover
  the same cell, the cell holds the union of their members, where a member that appears
  identically in two runs (same seed, learning rate, divergence, score and curve: a copy of
  the same training) counts once and any other member counts separately, even with the same
  seed and learning rate.

  Example:
    >>> cells = collect_cells(runs)  # doctest: +SKIP
    >>> cells['reverse_string', 'relative'].members  # 30 members  # doctest: +SKIP
  """
  runs = list(runs)
  grouped: dict[tuple[str, str], list[load.RunFile]] = collections.defaultdict(list)
  for run, label in zip(runs, load.column_labels(runs)):
    grouped[run.record.task, label].append(run)
  cells = {}
  for (task, label), cell_runs in grouped.items():
    cell = Cell(task, cell_runs[0].record.encoding, tuple(cell_runs), (), label, metric)
    members, seen = [], set()
    for run in cell_runs:
      for member in run.record.members:
        # repr, so that the NaN values of a diverged member compare equal to their copy's.
        key = (
          member.seed,
          member.data_seed,
          member.learning_rate,
          member.diverged,
          cell.score(member),
          repr(tuple(cell.curve(member).items())),
        )
        if key not in seen:
          seen.add(key)
          members.append(member)
    cells[task, label] = dataclasses.replace(cell, members=tuple(members))
  return cells


# ---------------------------------------------------------------------------------------------
# Statistics.


def best_score(cell: Cell) -> float | None:
  """Table 1's entry: the max score over non-diverged members (None if all diverged)."""
  scores = [cell.score(m) for m in cell.converged]
  return max(scores) if scores else None


@dataclasses.dataclass(frozen=True)
class SeedStats:
  """Table 4's entry: score statistics over the seeds at the best learning rate.

  `sd` is the sample standard deviation (ddof 1, None for one member), as in every table of
  a report; `converged` of `total` members at that learning rate did not diverge and enter
  the statistics.
  """

  learning_rate: float
  mean: float
  sd: float | None
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
  by_rate: dict[float, list[range_record.RangeMember]] = collections.defaultdict(list)
  for member in cell.members:
    by_rate[member.learning_rate].append(member)
  best = None
  for rate in sorted(by_rate):
    scores = [cell.score(m) for m in by_rate[rate] if not m.diverged]
    if not scores:
      continue
    mean = math.fsum(scores) / len(scores)
    sd = (
      math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (len(scores) - 1))
      if len(scores) > 1
      else None
    )
    if best is None or mean > best.mean:
      best = SeedStats(rate, mean, sd, len(scores), len(by_rate[rate]))
  return best


# ---------------------------------------------------------------------------------------------
# Tables.


def grid_axes(
  cells: Mapping[tuple[str, str], Cell], full_grid: bool = False
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
  tasks = tables.ordered_names((t for t, _ in cells), core.TASKS, full_grid)
  labels: dict[str, set[str]] = collections.defaultdict(set)
  for cell in cells.values():
    labels[cell.encoding].add(cell.label)
  encodings = tables.ordered_names(labels, core.ENCODINGS, full_grid)
  return tasks, [label for e in encodings for label in sorted(labels.get(e, {e}))]


def _markdown_grid(
  cells: Mapping[tuple[str, str], Cell], full_grid: bool, entry: Callable[[Cell], str]
) -> list[str]:
  """The rows of a task × encoding markdown grid; `entry` renders a cell that has runs."""
  tasks, encodings = grid_axes(cells, full_grid)
  lines = [
    '| level | task | ' + ' | '.join(encodings) + ' |',
    '|---|---|' + '---|' * len(encodings),
  ]
  for task in tasks:
    row = []
    for encoding in encodings:
      cell = cells.get((task, encoding))
      row.append(core.MISSING if cell is None else entry(cell))
    lines.append(f'| {core.TASK_LEVELS.get(task, "?")} | {task} | ' + ' | '.join(row) + ' |')
  return lines


def table1(
  cells: Mapping[tuple[str, str], Cell],
  *,
  full_grid: bool = False,
  skipped: Sequence[str] = (),
  metric: str = 'accuracy',
) -> str:
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
    return core.DIVERGED if best is None else tables.percent_text(best)

  label = core.metric_label(metric)
  lines = [f'# Table 1: {label} (%) on unseen lengths, max over members', '']
  lines += _markdown_grid(cells, full_grid, entry)
  notes = [
    f'Each entry is the best score over all non-diverged members (seeds × learning '
    f'rates) of a task and encoding, in %. {core.MISSING} = no run; '
    f'{core.DIVERGED} = every '
    f'member diverged.'
  ]
  notes += _common_notes(cells, skipped, metric)
  return '\n'.join(lines + [''] + tables.format_notes(notes)) + '\n'


def table4(
  cells: Mapping[tuple[str, str], Cell],
  *,
  full_grid: bool = False,
  skipped: Sequence[str] = (),
  metric: str = 'accuracy',
) -> str:
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
      return core.DIVERGED
    return tables.mean_sd_text(stats.mean, stats.sd, stats.converged, stats.total)

  def rate(cell: Cell) -> str:
    stats = seed_stats(cell)
    return core.DIVERGED if stats is None else f'{stats.learning_rate:g}'

  label = core.metric_label(metric)
  lines = [
    f'# Table 4: {label} (%) on unseen lengths, mean ± sd over seeds at the best learning rate',
    '',
  ]
  lines += _markdown_grid(cells, full_grid, entry)
  lines += ['', '## Best learning rate per cell', '']
  lines += _markdown_grid(cells, full_grid, rate)
  notes = [
    'Each entry is the mean ± sd of the score over the seeds at the learning rate whose mean '
    'is best (ties: the smallest rate), in %; sd is the sample standard deviation '
    '(ddof 1; none for a single seed). Diverged members are left out; "(k/n)" marks a cell '
    'where only k of the n '
    f'members at that rate did not diverge. {core.MISSING} = no run; '
    f'{core.DIVERGED} = every member '
    'diverged.'
  ]
  notes += _common_notes(cells, skipped, metric)
  return '\n'.join(lines + [''] + tables.format_notes(notes)) + '\n'


def _name(cell: Cell) -> str:
  return f'{cell.task}/{cell.label}'


_WORDS = notes_lib.Words(entry='cell', entries='cells', run='run', scores='scores')


def _common_notes(
  cells: Mapping[tuple[str, str], Cell], skipped: Sequence[str], metric: str = 'accuracy'
) -> list[str]:
  """Notes shared by both tables: the lengths the scores average over, then those of every
  table of merged runs (`notes.merged_run_notes`)."""
  tasks, encodings = grid_axes(cells)
  ordered = [cells[t, e] for t in tasks for e in encodings if (t, e) in cells]
  return [_lengths_note(ordered, metric)] + notes_lib.merged_run_notes(
    ordered,
    skipped,
    _name,
    _WORDS,
    study_steps=core.STUDY_TRAIN_STEPS,
    split_detail=_shared_options,
    merge_detail=_repeated_members,
  )


def _lengths_note(ordered: Sequence[Cell], metric: str) -> str:
  """Which lengths the scores average over: the evaluated lengths above N, per run."""
  by_lengths: dict[tuple[int, tuple[int, ...], int], list[Cell]] = collections.defaultdict(list)
  for cell in ordered:
    for key in sorted(
      {
        (
          r.train_length,
          tuple(n for n in _lengths(r) if n > r.train_length),
          max(_lengths(r), default=0),
        )
        for _, r in cell.runs
      }
    ):
      by_lengths[key].append(cell)
  parts = []
  for (train_length, unseen, max_length), group in by_lengths.items():
    full = tuple(range(train_length + 1, max_length + 1))
    subset = '' if unseen == full else f', a subset of {train_length + 1}..{max_length}'
    among = notes_lib.which(group, len(ordered), _name, _WORDS.entries)
    parts.append(
      f'N = {train_length}, lengths {tables.describe_lengths(unseen)}{subset} in {among}'
    )
  return (
    f'Scores average the {core.metric_label(metric)} over the evaluated lengths '
    'above the '
    f'training length N: {"; ".join(parts)}. The study uses '
    f'N = {core.STUDY_TRAIN_LENGTH} and every length '
    f'{core.STUDY_TRAIN_LENGTH + 1}..{core.STUDY_MAX_LENGTH}.'
  )


def _shared_options(group: Sequence[Cell]) -> str:
  """The options every run of an encoding split into columns records alike ('' if none)."""
  recorded = [o for c in group for _, r in c.runs if (o := load.encoding_options(r)) is not None]
  shared = {
    k: v
    for k, v in (recorded[0] if recorded else {}).items()
    if all(k in o and load.json_text(o[k]) == load.json_text(v) for o in recorded)
  }
  if not shared:
    return ''
  return '; options shared by every run that records them: ' + ', '.join(
    f'{k}={load.option_text(v)}' for k, v in shared.items()
  )


def _repeated_members(cell: Cell) -> str:
  """The distinct members of a merged cell that share their seeds and learning rate ('' if
  none): each counts."""
  pairs = collections.Counter((m.seed, m.data_seed, m.learning_rate) for m in cell.members)
  repeated = sorted((p for p, k in pairs.items() if k > 1), key=repr)
  if not repeated:
    return ''
  with_data = any(d is not None for _, d, _ in repeated)
  return (
    f'; distinct members with the same (seed, {"data seed, " * with_data}learning '
    'rate) all count: '
    + ', '.join(f'({s}, {f"{d}, " if with_data else ""}{r:g})' for s, d, r in repeated)
  )


def _lengths(record: results_lib.Results) -> list[int]:
  """The record's evaluated lengths, sorted, each once."""
  return sorted(set(record.evaluation.eval_lengths))
