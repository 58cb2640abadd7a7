"""The task-hinting study's report: full-sequence accuracy and edit distance against test
length, per variant (hints, encoding, attention temperature), on every test distribution.

The section of the 'lengths' evaluation (`LengthsResults`, record.py): `build` writes
`hints.md` and one `hints_<task>.png` per main task; the runs of one variant are pooled
(`variants`).

  >>> runs = [load.RunFile(p, kinds.read(p)) for p in paths]   # doctest: +SKIP
  >>> print(table(runs))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc.sections import plots
from posenc import results as results_lib
from posenc.sections import core
from posenc.sections import load

FILE = 'hints.md'


def temperature_text(config: Mapping[str, Any]) -> str:
  """'none', or 'fixed β=1' / 'learned β₀=0.3' from a run's config.json contents."""
  model = config.get('model', {})
  kind = model.get('temperature', 'none')
  if kind == 'none':
    return 'none'
  beta = model.get('temperature_beta', 1.0)
  return f'fixed β={beta:g}' if kind == 'fixed' else f'learned β₀={beta:g}'


def label(record: results_lib.Results) -> str:
  """A run's variant, e.g. 'successor · rotary' or 'no hint · none · τ learned β₀=0.3'."""
  evaluation = record.evaluation
  hints = '+'.join(evaluation.hints) or 'no hint'
  if len(evaluation.hints) > 1 or (evaluation.hints and evaluation.hint_schedule != 'alternate'):
    hints += f' ({evaluation.hint_schedule})'
  parts = [hints, record.encoding]
  temperature = temperature_text(record.config or {})
  if temperature != 'none':
    parts.append(f'τ {temperature}')
  return ' · '.join(parts)


@dataclasses.dataclass(frozen=True)
class Variant:
  """The runs of one task, variant and training length (e.g. more seeds in another sweep),
  pooled: a column of the table. `label` names it (`label`)."""

  label: str
  runs: tuple[load.RunFile, ...]

  @property
  def first(self) -> results_lib.Results:
    return self.runs[0].record

  @property
  def lengths(self) -> list[int]:
    return sorted({n for _, r in self.runs for n in r.evaluation.eval_lengths})

  @property
  def distributions(self) -> list[str]:
    return list(dict.fromkeys(d for _, r in self.runs for d in r.evaluation.distributions))

  @property
  def counts(self) -> tuple[int, int]:
    """(non-diverged members, members) over the runs."""
    members = [m for _, r in self.runs for m in r.members]
    return sum(not m.diverged for m in members), len(members)

  def curves(self, distribution: str, metric: str = 'exact_match') -> list[dict[int, float]]:
    """Each non-diverged member's `metric` by length on `distribution`, over the runs that
    evaluated it (NaN where none was recorded)."""
    return [
      results_lib.finite_curve(m.by_length[metric].get(distribution, {}))
      for _, r in self.runs
      if distribution in r.evaluation.distributions
      for m in r.members
      if not m.diverged
    ]


def variants(runs: Sequence[load.RunFile]) -> list[Variant]:
  """One Variant per (task, variant, training length), no hint first, then by hints,
  encoding and temperature.

  Example:
    >>> [v.label for v in variants(runs)]  # doctest: +SKIP
    ['no hint · fire', 'successor · fire']
  """
  groups: dict[tuple[Any, ...], list[load.RunFile]] = {}
  for run in runs:
    r = run.record
    groups.setdefault((r.task, label(r), r.train_length), []).append(run)
  pooled = [Variant(key[1], tuple(group)) for key, group in groups.items()]
  return sorted(
    pooled,
    key=lambda v: (
      bool(v.first.evaluation.hints),
      v.first.evaluation.hints,
      v.first.encoding,
      temperature_text(v.first.config or {}),
    ),
  )


def check(record: results_lib.Results, path: pathlib.Path, metric: str) -> None:
  """Every well-formed hinting run can be reported (in its own metrics, whatever `metric`)."""
  del record, path, metric


def build(runs: Sequence[load.RunFile], options: core.Options) -> core.Section:
  """The hinting table ('hints', hints.md) and, with figures, one figure per main task
  (hints_<task>.png)."""
  text = table(runs)
  files = {FILE: text.encode()}
  if options.figures:
    for task in sorted({r.record.task for r in runs}):
      files[f'hints_{task}.png'] = figure_png(runs, task)
  plots_made = sum(name.startswith('hints_') for name in files)
  return core.Section(
    {'hints': text},
    files,
    tables=(FILE,),
    figures=(core.counted(plots_made, 'accuracy-by-length figure'),),
  )


def _stats(values: Sequence[float], scale: float, digits: int) -> str:
  if not values:
    return '–'
  text = f'{np.mean(values) * scale:.{digits}f}'
  return text + (f' ± {np.std(values, ddof=1) * scale:.{digits}f}' if len(values) > 1 else '')


def table(runs: Sequence[load.RunFile]) -> str:
  """Per main task and test distribution: exact match (%) and mean edit distance against
  test length (rows) per variant (columns), mean ± sd over the non-diverged members, as
  markdown. Lengths past training are marked '*'."""
  lines = [
    '# Task hinting: full-sequence accuracy and edit distance against test length',
    '',
    'Entries: mean ± sd over the non-diverged members; sd is the sample standard '
    'deviation (ddof 1).',
    '',
  ]
  for task in sorted({r.record.task for r in runs}):
    mine = variants([r for r in runs if r.record.task == task])
    train = max(v.first.train_length for v in mine)
    lengths = sorted({n for v in mine for n in v.lengths})
    distributions = list(dict.fromkeys(d for v in mine for d in v.distributions))
    counts = ', '.join(f'{v.label}: {v.counts[0]}/{v.counts[1]}' for v in mine)
    lines += [f'## {task} (trained at lengths up to {train}; members per variant: {counts})', '']
    for metric, title, scale, digits in (
      ('exact_match', 'full-sequence accuracy (%)', 100, 1),
      ('edit_distance', 'mean edit distance', 1, 2),
    ):
      for d in distributions:
        cols = [v for v in mine if d in v.distributions]
        curves = [v.curves(d, metric) for v in cols]
        lines += [
          f'### {title}, {d} inputs',
          '',
          '| length | ' + ' | '.join(v.label for v in cols) + ' |',
          '|---|' + '---|' * len(cols),
        ]
        for n in lengths:
          cells = [_stats([c[n] for c in col if n in c], scale, digits) for col in curves]
          lines.append(f'| {n}{"*" if n > train else ""} | ' + ' | '.join(cells) + ' |')
        lines.append('')
  lines.append(
    'Notes: * marks lengths past training. rep2..rep5 are rep(i, r) (Awasthi & '
    'Gupta 2023, §3.1): floor(i/r) distinct values each repeated r times, the rest '
    f'uniform, shuffled. Built from {len(runs)} run(s); the runs of one variant are '
    'pooled.'
  )
  return '\n'.join(lines) + '\n'


def figure_png(runs: Sequence[load.RunFile], task: str) -> bytes:
  """Exact match against test length, one panel per test distribution (three to a row), one
  line per variant (the mean over members, the band their range), as PNG bytes."""
  mine = variants([r for r in runs if r.record.task == task])
  distributions = list(dict.fromkeys(d for v in mine for d in v.distributions))
  cols = min(3, len(distributions))
  rows = -(-len(distributions) // cols)
  fig = mpl_figure.Figure(figsize=(3.4 * cols + 1.0, 2.9 * rows + 0.6))
  grid = fig.subplots(rows, cols, squeeze=False)
  for ax in grid.flat[len(distributions) :]:
    ax.set_visible(False)
  axes = list(grid.flat[: len(distributions)])
  train = max(v.first.train_length for v in mine)
  for ax, d in zip(axes, distributions):
    for k, v in enumerate(mine):
      if d not in v.distributions:
        continue
      lengths = v.lengths
      curves = [c for c in v.curves(d) if all(n in c for n in lengths)]
      if not curves:
        continue
      values = np.array([[c[n] * 100 for n in lengths] for c in curves])
      (line,) = ax.plot(lengths, values.mean(0), label=v.label, **plots.series_style(k))
      if len(curves) > 1:
        ax.fill_between(lengths, values.min(0), values.max(0), alpha=0.15, color=line.get_color())
    ax.axvline(train, **plots.TRAINING_LINE)
    ax.set_title(d, fontsize=9)
    ax.set_xlabel('test length')
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
  for row in grid:
    row[0].set_ylabel('full-sequence accuracy (%)')
  axes[-1].legend(fontsize=7, loc='best')
  fig.suptitle(
    f'{task}: accuracy against test length (black dashes: longest training length)', fontsize=10
  )
  fig.tight_layout()
  return plots.png(fig)
