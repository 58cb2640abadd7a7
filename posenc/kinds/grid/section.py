"""The grid runs' section (McLeish et al. 2024, Figs. 3 and 4): the region table
(arithmetic.md, `regions`) and a heatmap per member, from `GridResults` records
(record.py).

Example:
  >>> entries = regions.collect_grid_entries(runs)  # doctest: +SKIP
  >>> sorted(grid_heatmaps(entries))                # doctest: +SKIP
  ['heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png', ...]
"""

from __future__ import annotations

import io
import pathlib
import re
from typing import Mapping, Sequence

from matplotlib import cm
from matplotlib import colormaps
from matplotlib import colors as mpl_colors
from matplotlib import figure as mpl_figure
from matplotlib import patches as mpl_patches
import numpy as np

from posenc import results as results_lib
from posenc.sections import core
from posenc.sections import load
from posenc.sections import tables
from posenc.kinds.grid import record as grid_record
from posenc.kinds.grid import regions

FILE = 'arithmetic.md'


# ---------------------------------------------------------------------------------------------
# Heatmaps.


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


def grid_heatmap(
  run: load.RunFile, member: grid_record.GridMember, *, label: str | None = None
) -> mpl_figure.Figure:
  """A member's exact match (%) on every measured cell (a, b) ≤ M, and on the cells past M.

  a (the run's first axis) runs up the y axis, b (the second) along the x axis; each measured
  cell is drawn at its lengths and, on a strided grid, stretches up to the next measured
  lengths (`_cell_edges`); a cell not measured is blank. A red box marks the training region
  (both axes ≤ n). The equal lengths past M, when measured, are a strip of their own on the
  right. The title names the task, column `label` (default: the encoding), architecture, seed,
  learning rate and the member's region means. 800 × 660 pixels.

  Example:
    >>> fig = grid_heatmap(run, run.record.members[0])  # doctest: +SKIP
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()  # doctest: +SKIP
    ('digits_b', 'digits_a')
  """
  record, grid = run.record, run.record.evaluation
  label = record.encoding if label is None else label
  m, n = grid.grid_max, record.train_length
  by_cell = results_lib.finite_curve(member.exact_match_by_cell)
  inside = {(a, b): v for (a, b), v in by_cell.items() if a <= m and b <= m}
  beyond = sorted((a, v) for (a, b), v in by_cell.items() if a == b and a > m)
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
    ax.pcolormesh(
      _cell_edges(columns), _cell_edges(rows), np.ma.masked_invalid(percent), cmap=cmap, norm=norm
    )
    ax.set_xticks(_ticks(columns))
    ax.set_yticks(_ticks(rows))
  else:
    ax.text(0.5, 0.5, 'no cell measured', transform=ax.transAxes, ha='center', va='center')
  ax.set_xlim(0.5, m + 0.5)
  ax.set_ylim(0.5, m + 0.5)
  ax.add_patch(
    mpl_patches.Rectangle(
      (0.5, 0.5), min(n, m), min(n, m), fill=False, edgecolor=_TRAINING_BOX, linewidth=2, zorder=3
    )
  )
  ax.text(
    min(n, m) + 0.5,
    min(n, m) + 0.5,
    f' training: both ≤ {n}',
    color=_TRAINING_BOX,
    fontsize=9,
    ha='left',
    va='bottom',
    zorder=3,
    bbox={'facecolor': 'white', 'alpha': 0.7, 'edgecolor': 'none', 'pad': 1},
  )
  ax.set_xlabel(grid.axes[1])
  ax.set_ylabel(grid.axes[0])
  ax.tick_params(labelsize=8)
  if beyond:
    strip = fig.add_subplot(layout[1])
    values = np.ma.masked_invalid([[100 * v] for _, v in beyond])
    strip.pcolormesh([0, 1], np.arange(len(beyond) + 1) - 0.5, values, cmap=cmap, norm=norm)
    lengths = [a for a, _ in beyond]
    shown = set(_ticks(lengths))
    strip.set_yticks(
      [i for i, a in enumerate(lengths) if a in shown], [str(a) for a in lengths if a in shown]
    )
    strip.set_xticks([])
    strip.yaxis.tick_right()
    strip.tick_params(labelsize=8)
    strip.set_title(f'beyond\na = b > {m}', fontsize=8)
  fig.colorbar(
    cm.ScalarMappable(norm=norm, cmap=cmap),
    cax=fig.add_subplot(layout[-1]),
    label='exact match (%)',
  )
  shown = lambda v: core.MISSING if v is None else tables.percent_text(v)
  means = ', '.join(
    f'{regions.REGION_NAMES[r]} {shown(member.regions[r])}' for r in ('id', 'ood', 'beyond')
  )
  state = 'diverged' if member.diverged else f'exact match (%): {means}'
  fig.suptitle(
    f'{record.task}: {label}, {record.architecture}\nseed {member.seed}, learning rate '
    f'{member.learning_rate:g}; {state}',
    fontsize=11,
  )
  return fig


def grid_heatmap_png(
  run: load.RunFile, member: grid_record.GridMember, *, label: str | None = None
) -> bytes:
  """`grid_heatmap` as PNG bytes.

  Example:
    >>> png = grid_heatmap_png(run, run.record.members[0])  # doctest: +SKIP
    >>> png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'  # doctest: +SKIP
    True
  """
  buffer = io.BytesIO()
  grid_heatmap(run, member, label=label).savefig(buffer, format='png')
  return buffer.getvalue()


def heatmap_name(task: str, label: str, architecture: str, seed: int, learning_rate: float) -> str:
  """A heatmap's file name, safe for any name: spaces and other signs become '_'.

  Example:
    >>> heatmap_name('addition', 'abacus', 'looped 8x2', 0, 1e-4)
    'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png'
  """
  stem = f'heatmap_{task}__{label}__{architecture}__seed{seed}_lr{learning_rate:g}'
  return re.sub(r'[^A-Za-z0-9_.-]', '_', stem) + '.png'


def grid_heatmaps(entries: Mapping[tuple[str, str, str], regions.GridEntry]) -> dict[str, bytes]:
  """One heatmap per member of every entry (`grid_heatmap_png`), by file name (`heatmap_name`).

  A member found identically in two runs of an entry is drawn once; distinct members whose
  names coincide (the same seed and learning rate twice) get '__2', '__3', ... appended.

  Example:
    >>> sorted(grid_heatmaps(entries))  # doctest: +SKIP
    ['heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png', ...]
  """
  tasks, architectures, columns = regions.grid_layout(entries)
  files = {}
  for key in ((t, a, c) for t in tasks for a in architectures for c in columns):
    entry = entries.get(key)
    if entry is None:
      continue
    seen = set()
    for run in entry.runs:
      for member in run.record.members:
        if regions.member_key(member) in seen:
          continue
        seen.add(regions.member_key(member))
        name = heatmap_name(
          entry.task, entry.label, entry.architecture, member.seed, member.learning_rate
        )
        stem, copy = name.removesuffix('.png'), 1
        while name in files:
          copy += 1
          name = f'{stem}__{copy}.png'
        files[name] = grid_heatmap_png(run, member, label=entry.label)
  return files


# ---------------------------------------------------------------------------------------------
# The section: which grid runs it reports, and its files.


def check(record: results_lib.Results, path: pathlib.Path, metric: str) -> None:
  """Raises MalformedRunError for a grid run without an architecture (its table's row); a
  grid is read in exact match whatever `metric` (the arithmetic study's measure).

  Raises:
    MalformedRunError: the file records no architecture.
  """
  del metric
  if record.architecture is None:
    raise core.MalformedRunError(f"{path}: missing 'architecture'")
  if not record.architecture:
    raise core.MalformedRunError(f'{path}: empty architecture name')


def build(runs: Sequence[load.RunFile], options: core.Options) -> core.Section:
  """The region table ('arithmetic', arithmetic.md) and, with figures, one heatmap per
  member."""
  entries = regions.collect_grid_entries(runs)
  text = regions.region_table(entries, skipped=options.skipped)
  files = {FILE: text.encode()}
  if options.figures:
    files.update(grid_heatmaps(entries))
  heatmaps = sum(name.startswith('heatmap_') for name in files)
  return core.Section(
    {'arithmetic': text}, files, tables=(FILE,), figures=(core.counted(heatmaps, 'heatmap'),)
  )
