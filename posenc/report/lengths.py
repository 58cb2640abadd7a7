"""The task-hinting study's report: full-sequence accuracy and edit distance against test
length, per variant (hints, encoding, attention temperature), on every test distribution.

The section of the 'lengths' protocol (`posenc.evaluate.lengths`): `view` reads a run,
`build` writes `hints.md` and one `hints_<task>.png` per main task.

  >>> runs = [view(results.read(p, kinds), p, 'accuracy') for p in paths]   # doctest: +SKIP
  >>> print(table(runs))
"""
from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc import plots
from posenc.report import records

FILE = 'hints.md'
METRICS = ('exact_match', 'edit_distance')


@dataclasses.dataclass(frozen=True)
class HintRun:
  """One run: its variant and, per member (None when diverged), {metric: {distribution:
  {length: value}}}."""
  task: str
  encoding: str
  hints: tuple[str, ...]
  schedule: str
  temperature: str
  train_length: int
  lengths: tuple[int, ...]
  distributions: tuple[str, ...]
  members: tuple[dict[str, dict[str, dict[int, float]]] | None, ...]
  source: str

  @property
  def label(self) -> str:
    """e.g. 'successor · rotary' or 'none · none · τ learned (β₀ 0.3)'."""
    hints = '+'.join(self.hints) or 'no hint'
    if len(self.hints) > 1 or (self.hints and self.schedule != 'alternate'):
      hints += f' ({self.schedule})'
    parts = [hints, self.encoding]
    if self.temperature != 'none':
      parts.append(f'τ {self.temperature}')
    return ' · '.join(parts)


def temperature_text(config: Mapping[str, Any]) -> str:
  """'none', or 'fixed β=1' / 'learned β₀=0.3' from a run's config.json contents."""
  model = config.get('model', {})
  kind = model.get('temperature', 'none')
  if kind == 'none':
    return 'none'
  beta = model.get('temperature_beta', 1.0)
  return f'fixed β={beta:g}' if kind == 'fixed' else f'learned β₀={beta:g}'


def view(record: Any, path: pathlib.Path, metric: str) -> HintRun:
  """A hinting run (`posenc.results.LengthsResults`): its variant and per member (None when
  diverged) its exact match and edit distance per distribution and length."""
  del metric
  evaluation = record.evaluation
  members = tuple(None if m.diverged else {
      metric: {d: {n: math.nan if v is None else v for n, v in m.by_length[metric][d].items()}
               for d in evaluation.distributions} for metric in METRICS}
                  for m in evaluation.members)
  return HintRun(record.task, record.encoding, evaluation.hints, evaluation.hint_schedule,
                 temperature_text(record.config or {}), record.train_length,
                 evaluation.eval_lengths, evaluation.distributions, members, str(path))


def build(runs: Sequence[HintRun], options: Any) -> Any:
  """The hinting table ('hints', hints.md) and, with figures, one figure per main task
  (hints_<task>.png)."""
  text = table(runs)
  files = {FILE: text.encode()}
  if options.figures:
    for task in sorted({r.task for r in runs}):
      files[f'hints_{task}.png'] = figure_png(runs, task)
  return records.Section({'hints': text}, files)


def _stats(values: Sequence[float], scale: float, digits: int) -> str:
  if not values:
    return '–'
  text = f'{np.mean(values) * scale:.{digits}f}'
  return text + (f' ± {np.std(values, ddof=1) * scale:.{digits}f}' if len(values) > 1 else '')


def _ordered(runs: Sequence[HintRun]) -> list[HintRun]:
  """One run per variant (runs of the same task, variant and training length, e.g. more
  seeds in another sweep, pooled: their members together), no hint first, then by hints,
  encoding and temperature."""
  groups: dict[tuple[Any, ...], list[HintRun]] = {}
  for r in runs:
    groups.setdefault((r.task, r.label, r.train_length), []).append(r)
  pooled = [dataclasses.replace(
      group[0], members=tuple(m for r in group for m in r.members),
      lengths=tuple(sorted({n for r in group for n in r.lengths})),
      distributions=tuple(dict.fromkeys(d for r in group for d in r.distributions)),
      source=', '.join(r.source for r in group)) for group in groups.values()]
  return sorted(pooled, key=lambda r: (bool(r.hints), r.hints, r.encoding, r.temperature))


def table(runs: Sequence[HintRun]) -> str:
  """Per main task and test distribution: exact match (%) and mean edit distance against
  test length (rows) per variant (columns), mean ± sd over the non-diverged members, as
  markdown. Lengths past training are marked '*'."""
  lines = ['# Task hinting: full-sequence accuracy and edit distance against test length', '',
           'Entries: mean ± sd over the non-diverged members; sd is the sample standard '
           'deviation (ddof 1).', '']
  for task in sorted({r.task for r in runs}):
    mine = _ordered([r for r in runs if r.task == task])
    train = max(r.train_length for r in mine)
    lengths = sorted({n for r in mine for n in r.lengths})
    distributions = list(dict.fromkeys(d for r in mine for d in r.distributions))
    counts = ', '.join(f'{r.label}: {sum(m is not None for m in r.members)}/{len(r.members)}'
                       for r in mine)
    lines += [f'## {task} (trained at lengths up to {train}; members per variant: {counts})',
              '']
    for metric, title, scale, digits in (('exact_match', 'full-sequence accuracy (%)', 100, 1),
                                         ('edit_distance', 'mean edit distance', 1, 2)):
      for d in distributions:
        cols = [r for r in mine if d in r.distributions]
        lines += [f'### {title}, {d} inputs', '',
                  '| length | ' + ' | '.join(r.label for r in cols) + ' |',
                  '|---|' + '---|' * len(cols)]
        for n in lengths:
          cells = [_stats([m[metric][d][n] for m in r.members
                           if m and n in m[metric].get(d, {})], scale, digits) for r in cols]
          lines.append(f'| {n}{"*" if n > train else ""} | ' + ' | '.join(cells) + ' |')
        lines.append('')
  lines.append('Notes: * marks lengths past training. rep2..rep5 are rep(i, r) (Awasthi & '
               'Gupta 2023, §3.1): floor(i/r) distinct values each repeated r times, the rest '
               f'uniform, shuffled. Built from {len(runs)} run(s); the runs of one variant are '
               'pooled.')
  return '\n'.join(lines) + '\n'


def figure_png(runs: Sequence[HintRun], task: str) -> bytes:
  """Exact match against test length, one panel per test distribution (three to a row), one
  line per variant (the mean over members, the band their range), as PNG bytes."""
  mine = _ordered([r for r in runs if r.task == task])
  distributions = list(dict.fromkeys(d for r in mine for d in r.distributions))
  cols = min(3, len(distributions))
  rows = -(-len(distributions) // cols)
  fig = mpl_figure.Figure(figsize=(3.4 * cols + 1.0, 2.9 * rows + 0.6))
  grid = fig.subplots(rows, cols, squeeze=False)
  for ax in grid.flat[len(distributions):]:
    ax.set_visible(False)
  axes = list(grid.flat[:len(distributions)])
  train = max(r.train_length for r in mine)
  for ax, d in zip(axes, distributions):
    for k, r in enumerate(mine):
      if d not in r.distributions:
        continue
      lengths = sorted(r.lengths)
      members = [m for m in r.members
                 if m and all(n in m['exact_match'].get(d, {}) for n in lengths)]
      if not members:
        continue
      values = np.array([[m['exact_match'][d][n] * 100 for n in lengths] for m in members])
      line, = ax.plot(lengths, values.mean(0), label=r.label, **plots.series_style(k))
      if len(members) > 1:
        ax.fill_between(lengths, values.min(0), values.max(0), alpha=0.15,
                        color=line.get_color())
    ax.axvline(train, **plots.TRAINING_LINE)
    ax.set_title(d, fontsize=9)
    ax.set_xlabel('test length')
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
  for row in grid:
    row[0].set_ylabel('full-sequence accuracy (%)')
  axes[-1].legend(fontsize=7, loc='best')
  fig.suptitle(f'{task}: accuracy against test length (black dashes: longest training '
               'length)', fontsize=10)
  fig.tight_layout()
  return plots.png(fig)
