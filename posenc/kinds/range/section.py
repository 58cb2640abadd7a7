"""The range runs' section (Ruoss et al. 2023): Table 1 and Table 4 (`tables`),
Figure 4 and the per-length tables, from `RangeResults` records (record.py) grouped into
cells (`tables.collect_cells`), every score and curve in the report's metric (`Cell.score`,
`Cell.curve`: the record's `score_of` and `curve`).

Example:
  >>> cells = tables.collect_cells(runs, metric='exact_match')  # doctest: +SKIP
  >>> fig = figure4(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
  >>> fig.axes[0].get_ylabel()  # doctest: +SKIP
  'exact match'
"""

from __future__ import annotations

import io
import math
import pathlib
import re
from typing import Mapping, Sequence

from matplotlib import figure as mpl_figure

from posenc.sections import plots
from posenc import results as results_lib
from posenc.sections import core
from posenc.sections import load
from posenc.sections import tables as shared_tables
from posenc.kinds.range import record as range_record
from posenc.kinds.range import tables
import tasks as tasks_lib

Cell = tables.Cell


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


def best_member(cell: Cell) -> range_record.RangeMember | None:
  """The non-diverged member with the highest score (the first on ties), or None."""
  converged = cell.converged
  return max(converged, key=cell.score) if converged else None


def figure4(
  cells: Mapping[tuple[str, str], Cell], task: str, *, metric: str = 'accuracy'
) -> mpl_figure.Figure:
  """Figure 4 for one task: the metric vs length, one line per column (encoding or variant).

  Each column's line is its best member (by score); columns whose members all diverged are
  listed in the legend without a line. A black dashed line marks the training length N. The
  legend sits right of the axes; the y-axis, labelled by `metric` (the one the cells' members
  were loaded with), leaves a margin beyond 0 and 1 so that no curve hides in the frame.
  1000 × 500 pixels.

  Example:
    >>> fig = figure4(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> [line.get_label() for line in fig.axes[0].get_lines()]  # doctest: +SKIP
    ['none: 20.0', 'randomized_relative: 85.0', 'training length N']
    >>> fig.axes[0].get_ylabel()  # doctest: +SKIP
    'exact match'
  """
  label_y = core.metric_label(metric)
  _, columns = tables.grid_axes(cells)
  encoding_of = {cell.label: cell.encoding for cell in cells.values()}
  fig = mpl_figure.Figure(figsize=(10, 5), dpi=100)  # The Agg canvas; no pyplot state.
  ax = fig.add_subplot()
  train_lengths = set()
  dashed = []  # (line, dash phase)
  for index, label in enumerate(columns):
    cell = cells.get((task, label))
    if cell is None:
      continue
    train_lengths.update(r.record.train_length for r in cell.runs)
    # The variant index counts over every task, so a column has one style in all figures.
    siblings = [c for c in columns if encoding_of[c] == cell.encoding]
    style = plots.encoding_style(
      cell.encoding, siblings.index(label), len(siblings), [encoding_of[c] for c in columns]
    )
    member = best_member(cell)
    if member is None:
      ax.plot([], [], **style, label=f'{label}: {core.DIVERGED}')
      continue
    curve = cell.curve(member)
    lengths = list(curve)
    step = max(1, -(-len(lengths) // _MARKS_PER_CURVE))
    # Staggered starts, so that curves lying on each other still show each one's markers.
    markevery = (index * step // len(columns), step)
    (line,) = ax.plot(
      lengths,
      [curve[n] for n in lengths],
      lw=1.6,
      markevery=markevery,
      **style,
      label=f'{label}: {shared_tables.percent_text(cell.score(member))}',
    )
    if style['linestyle'] == plots.DASHES:
      dashed.append((line, 2 * (index % 3)))
  for i, n in enumerate(sorted(train_lengths)):
    ax.axvline(n, **plots.TRAINING_LINE, label=None if i else 'training length N')
  level = chance(task, metric)
  if level is not None:
    ax.axhline(
      level, **plots.CHANCE_LINE, label=f'chance (1/C = {shared_tables.percent_text(level)}%)'
    )
  ax.set_ylim(-_Y_MARGIN, 1 + _Y_MARGIN)
  ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1])
  ax.set_xlabel('sequence length')
  ax.set_ylabel(label_y)
  ax.set_title(f'{task} ({core.TASK_LEVELS.get(task, "?")}): best member per encoding')
  ax.grid(alpha=0.3)
  ax.legend(
    loc='center left',
    bbox_to_anchor=(1.01, 0.5),
    fontsize='small',
    title='encoding: score (%)',
    title_fontsize='small',
  )
  for line, phase in dashed:
    # Shifted after the legend copied the plain dashes: dashed curves lying on each other (two
    # encodings at chance, say) then show every colour, alternately.
    line.set_linestyle((phase, plots.DASHES[1]))
  fig.tight_layout()  # Counts the legend, so the axes shrink to leave it room.
  return fig


def figure4_png(
  cells: Mapping[tuple[str, str], Cell], task: str, *, metric: str = 'accuracy'
) -> bytes:
  """`figure4` as PNG bytes.

  Example:
    >>> png = figure4_png(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'  # doctest: +SKIP
    True
  """
  buffer = io.BytesIO()
  figure4(cells, task, metric=metric).savefig(buffer, format='png')
  return buffer.getvalue()


def figure_name(task: str) -> str:
  """The file name of a task's figure, safe for any task name: 'figure4_<task>.png'."""
  return f'figure4_{re.sub(r"[^A-Za-z0-9_.-]", "_", task)}.png'


def per_length_table(
  cells: Mapping[tuple[str, str], Cell], task: str, max_rows: int = 24, *, metric: str = 'accuracy'
) -> str:
  """The metric by length of each encoding's best member on `task`, as markdown.

  Rows are lengths (thinned evenly to at most `max_rows`, always keeping N, N+1 and the
  longest), columns those of the tables (encodings, or an encoding's variants, `column_labels`);
  the training range ends at N, marked with '*'. `metric` is the one the cells' members were
  loaded with; the title names it.

  Example:
    >>> text = per_length_table(cells, 'reverse_string', metric='exact_match')  # doctest: +SKIP
    >>> text.split(';')[0]  # doctest: +SKIP
    'reverse_string: exact match (%) by length, best member per encoding'
    >>> text.splitlines()[2:5]  # doctest: +SKIP
    ['| length | none | randomized_relative |', '|---|---|---|', '| 1* | 100.0 | 100.0 |']
  """
  label = core.metric_label(metric)
  encodings = [e for e in tables.grid_axes(cells)[1] if (task, e) in cells]
  best = {e: best_member(cells[(task, e)]) for e in encodings}
  curves = {e: cells[(task, e)].curve(m) if m else {} for e, m in best.items()}
  lengths = sorted({int(l) for curve in curves.values() for l in curve})
  if not lengths:
    return f'{task}: no evaluated lengths'
  n = cells[(task, encodings[0])].runs[0].record.train_length
  step = max(1, -(-len(lengths) // max_rows))
  shown = sorted(set(lengths[::step]) | {l for l in (n, n + 1, lengths[-1]) if l in lengths})
  head = '| length | ' + ' | '.join(encodings) + ' |'
  rows = [head, '|' + '---|' * (len(encodings) + 1)]
  for length in shown:
    cells_text = []
    for e in encodings:
      acc = curves[e].get(length)
      cells_text.append('–' if acc is None or acc != acc else f'{100 * acc:.1f}')
    mark = '*' if length <= n else ''
    rows.append(f'| {length}{mark} | ' + ' | '.join(cells_text) + ' |')
  return (
    f'{task}: {label} (%) by length, best member per encoding; * = trained length '
    f'(1..{n})\n\n' + '\n'.join(rows) + '\n'
  )


# ---------------------------------------------------------------------------------------------
# The section: which range runs it reports, and its files.


def check(record: results_lib.Results, path: pathlib.Path, metric: str) -> None:
  """Raises MalformedRunError for a range run the tables cannot read in `metric`.

  Raises:
    MalformedRunError: no evaluated length past training (the engine's score is then null for
      every member: nothing to report), a member without `metric`'s fields (a file from
      before the exact-match metric), or a converged member without a finite score.
  """
  where = str(path)
  evaluation = record.evaluation
  if not any(n > record.train_length for n in evaluation.eval_lengths):
    raise core.MalformedRunError(
      f'{where}: no evaluated length above the training length '
      f'N = {record.train_length}, so no score'
    )
  score_key, curve_key = evaluation.FIELDS[metric]
  for i, member in enumerate(evaluation.members):
    at = load.member_where(where, i, member)
    # The engine writes the exact-match fields for every member, diverged or not; without
    # them the file predates that metric. (A diverged member's accuracy score may be absent.)
    if metric != 'accuracy' and score_key in member.missing:
      raise core.MalformedRunError(f'{at}: missing {score_key!r}')
    if getattr(member, curve_key) is None:
      raise core.MalformedRunError(f'{at}: missing {curve_key!r}')
    score = evaluation.score_of(member, record.family, metric)
    if not member.diverged and (score is None or not math.isfinite(score)):
      raise core.MalformedRunError(f'{at}: not diverged but its {score_key} is {score}')


def build(runs: Sequence[load.RunFile], options: core.Options) -> core.Section:
  """Table 1 and Table 4 ('table1', 'table4'), with figures every task's Figure 4
  (figure4_<task>.png) and with `per_length` the per-length tables ('lengths_<task>',
  lengths_<task>.md, printed in the order of their file names)."""
  cells = tables.collect_cells(runs, metric=options.metric)
  kw = {'full_grid': options.full_grid, 'skipped': options.skipped, 'metric': options.metric}
  texts = {'table1': tables.table1(cells, **kw), 'table4': tables.table4(cells, **kw)}
  files = {'table1.md': texts['table1'].encode(), 'table4.md': texts['table4'].encode()}
  tasks = tables.grid_axes(cells)[0]
  if options.figures:
    for task in tasks:
      files[figure_name(task)] = figure4_png(cells, task, metric=options.metric)
  figures = core.counted(sum(name.startswith('figure4_') for name in files), 'figure')
  if options.per_length:
    for task in sorted(tasks, key=lambda task: f'lengths_{task}.md'):
      texts[f'lengths_{task}'] = per_length_table(cells, task, metric=options.metric)
      files[f'lengths_{task}.md'] = texts[f'lengths_{task}'].encode()
  return core.Section(texts, files, tables=('table1.md', 'table4.md'), figures=(figures,))
