"""The grid runs' entries and region table (McLeish et al. 2024, Figs. 3 and 4): grid runs
(`GridResults` records, record.py) grouped by (task, architecture, column) into entries,
their members merged, and per task the members' exact match by region (arithmetic.md).

Grid runs' regions (`posenc.kinds.grid.protocol`): 'id' (both axes <= n, the training size),
'ood' (some axis > n, both <= M) and 'beyond' (equal lengths past M); a member's `regions`
hold its mean exact match over each.

Example:
  >>> entries = collect_grid_entries(runs)        # doctest: +SKIP
  >>> print(region_table(entries))                # doctest: +SKIP
  # Arithmetic: exact match (%) by region, mean ± sd over members
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from typing import Any, Iterable, Mapping, Sequence

from posenc import results as results_lib
from posenc.sections import core
from posenc.sections import load
from posenc.sections import notes as notes_lib
from posenc.sections import tables
from posenc.kinds.grid import record as grid_record

# The table shows the regions in this order, the paper's headline (OOD) first.
GRID_REGIONS: tuple[str, ...] = ('ood', 'beyond', 'id')
REGION_NAMES = {'ood': 'OOD', 'beyond': 'beyond', 'id': 'ID'}


# ---------------------------------------------------------------------------------------------
# Entries: the grid runs of one (task, architecture, column), their members merged.


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


@dataclasses.dataclass(frozen=True)
class GridEntry:
  """The merged members of every grid run of one (task, architecture, column).

  Members merge as a range cell's do (`posenc.kinds.range.tables.collect_cells`); `label` names the column as
  `load.column_labels` does for the grid runs.
  """

  task: str
  architecture: str
  encoding: str
  runs: tuple[load.RunFile, ...]
  members: tuple[grid_record.GridMember, ...]
  label: str

  @property
  def converged(self) -> tuple[grid_record.GridMember, ...]:
    return tuple(m for m in self.members if not m.diverged)


def collect_grid_entries(
  grid_runs: Iterable[load.RunFile],
) -> dict[tuple[str, str, str], GridEntry]:
  """Groups grid runs by (task, architecture, column label), merging their members.

  Labels are those of `column_labels` over the grid runs (the encoding, unless its runs differ
  in their options or the runs hold several model families). As in `collect_cells`, a member
  found identically in two runs (same seed, learning rate, divergence, regions and cells)
  counts once.

  Example:
    >>> runs = report.load_all_runs(['runs/abacus']).of('grid')  # doctest: +SKIP
    >>> entries = collect_grid_entries(runs)  # doctest: +SKIP
    >>> entries['addition', 'looped 8x2', 'abacus'].members  # Its 3 seeds.  # doctest: +SKIP
  """
  runs = list(grid_runs)
  grouped: dict[tuple[str, str, str], list[load.RunFile]] = collections.defaultdict(list)
  for run, label in zip(runs, load.column_labels(runs)):
    grouped[run.record.task, run.record.architecture, label].append(run)
  entries = {}
  for (task, architecture, label), entry_runs in grouped.items():
    members, seen = [], set()
    for run in entry_runs:
      for member in run.record.members:
        key = member_key(member)
        if key not in seen:
          seen.add(key)
          members.append(member)
    entries[task, architecture, label] = GridEntry(
      task, architecture, entry_runs[0].record.encoding, tuple(entry_runs), tuple(members), label
    )
  return entries


def member_key(member: grid_record.GridMember) -> tuple[Any, ...]:
  """What tells members apart (an entry counts identical members once)."""
  # What tells members apart: a diverged member's regions count as None; repr, so that the
  # NaN cells of a member compare equal to their copy's.
  regions = {r: None if member.diverged else v for r, v in member.regions.items()}
  return (
    member.seed,
    member.data_seed,
    member.learning_rate,
    member.diverged,
    repr(tuple(regions.items())),
    repr(tuple(results_lib.finite_curve(member.exact_match_by_cell).items())),
  )


def grid_layout(
  entries: Mapping[tuple[str, str, str], GridEntry],
) -> tuple[list[str], list[str], list[str]]:
  """(tasks, architectures, columns) of the grid entries, in the region table's order.

  Tasks follow the arithmetic registry, architectures `architecture_key`, columns their
  encodings' registry order (GRID_ENCODINGS) with the columns of one encoding adjacent and
  sorted; unknown tasks and encodings come after, sorted.

  Example:
    >>> grid_layout(entries)  # doctest: +SKIP
    (['addition'], ['standard', 'looped 8x2'], ['none', 'abacus', 'fire'])
  """
  tasks = tables.ordered_names({e.task for e in entries.values()}, core.ARITHMETIC_TASKS, False)
  architectures = sorted({e.architecture for e in entries.values()}, key=architecture_key)
  labels: dict[str, set[str]] = collections.defaultdict(set)
  for entry in entries.values():
    labels[entry.encoding].add(entry.label)
  encodings = tables.ordered_names(labels, core.GRID_ENCODINGS, False)
  return tasks, architectures, [label for e in encodings for label in sorted(labels[e])]


# ---------------------------------------------------------------------------------------------
# The region table.


_REGION_DEFINITIONS = {
  'id': 'both axes ≤ n',
  'ood': 'some axis > n, both ≤ M',
  'beyond': 'equal lengths past M',
}


@dataclasses.dataclass(frozen=True)
class RegionStats:
  """A region table entry: the members' exact match in one region, as fractions.

  `sd` is the sample standard deviation (ddof 1; None for one member) over the `counted` of
  `total` members (the others diverged, or their runs have no cell in the region).
  """

  mean: float
  sd: float | None
  counted: int
  total: int


def region_stats(entry: GridEntry, region: str) -> RegionStats | None:
  """Mean ± sd over the entry's non-diverged members of their exact match in `region` (one of
  GRID_REGIONS); None when no member has a value there.

  Example:
    >>> [m.regions['ood'] for m in entry.members]  # doctest: +SKIP
    [0.9, 0.8, None]
    >>> region_stats(entry, 'ood')  # doctest: +SKIP
    RegionStats(mean=0.85, sd=0.0707, counted=2, total=3)
  """
  values = [m.regions[region] for m in entry.converged if m.regions[region] is not None]
  if not values:
    return None
  mean = math.fsum(values) / len(values)
  sd = (
    math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
    if len(values) > 1
    else None
  )
  return RegionStats(mean, sd, len(values), len(entry.members))


def _region_entry(entry: GridEntry, region: str) -> str:
  if not entry.converged:
    return core.DIVERGED
  stats = region_stats(entry, region)
  if stats is None:
    return core.MISSING
  return tables.mean_sd_text(stats.mean, stats.sd, stats.counted, stats.total)


def region_table(
  entries: Mapping[tuple[str, str, str], GridEntry], *, skipped: Sequence[str] = ()
) -> str:
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
      lines += [
        f'### {REGION_NAMES[region]}: {_REGION_DEFINITIONS[region]}',
        '',
        '| architecture | ' + ' | '.join(shown) + ' |',
        '|---|' + '---|' * len(shown),
      ]
      for architecture in rows:
        row = [
          core.MISSING
          if (task, architecture, c) not in entries
          else _region_entry(entries[task, architecture, c], region)
          for c in shown
        ]
        lines.append(f'| {architecture} | ' + ' | '.join(row) + ' |')
      lines.append('')
  return '\n'.join(lines + tables.format_notes(_grid_notes(entries, skipped))) + '\n'


def _entry_name(entry: GridEntry) -> str:
  return f'{entry.task}/{entry.architecture}/{entry.label}'


_WORDS = notes_lib.Words(entry='entry', entries='entries', run='grid run', scores='entries')


def _grid_protocol(record: results_lib.Results) -> str:
  """The cells a grid run measured, e.g. 'n = 20, M = 100, cells (digits_a, digits_b) in
  1..100 at stride 1, beyond 101..160 (every length, 60 lengths), 100 samples per cell'."""
  grid = record.evaluation
  stride = f' at stride {grid.grid_stride} (and {grid.grid_max})' if grid.grid_stride > 1 else ''
  past = sorted(set(grid.beyond))
  beyond = (
    (', '.join(map(str, past)) if len(past) <= 4 else tables.describe_lengths(past))
    if past
    else 'none'
  )
  return (
    f'n = {record.train_length}, M = {grid.grid_max}, cells ({grid.axes[0]}, '
    f'{grid.axes[1]}) in 1..{grid.grid_max}{stride}, beyond {beyond}, '
    f'{grid.samples_per_cell} samples per '
    'cell'
  )


def _grid_notes(
  entries: Mapping[tuple[str, str, str], GridEntry], skipped: Sequence[str]
) -> list[str]:
  """The region table's notes: what an entry is, the regions and cells, members, training,
  columns, merges and skipped runs."""
  tasks, architectures, columns = grid_layout(entries)
  ordered = [
    entries[t, a, c] for t in tasks for a in architectures for c in columns if (t, a, c) in entries
  ]
  total = len(ordered)
  notes = [
    'Each entry is the mean ± sd over the non-diverged members (seeds × learning rates) of an '
    'architecture and encoding of their exact match (the share of generated answers with '
    'every token right) averaged over the cells of a region, in %; sd is the sample '
    'standard deviation (ddof 1; none for a single member). "(2/3)" marks an entry where '
    'only 2 of its 3 members count '
    f'(the others diverged). {core.MISSING} = no run, or no cell in the region; '
    f'{core.DIVERGED} = every '
    'member diverged.'
  ]

  by_protocol: dict[str, list[GridEntry]] = collections.defaultdict(list)
  for entry in ordered:
    for text in dict.fromkeys(_grid_protocol(r) for _, r in entry.runs):
      by_protocol[text].append(entry)
  notes.append(
    'Regions of the cells (a, b): ID, both axes ≤ n (the training size); OOD, some axis > n '
    'and both ≤ M; beyond, equal lengths a = b past M. Cells measured: '
    + '; '.join(
      f'{text} in {notes_lib.which(group, total, _entry_name, _WORDS.entries)}'
      for text, group in by_protocol.items()
    )
    + '.'
  )
  return notes + notes_lib.merged_run_notes(ordered, skipped, _entry_name, _WORDS)
