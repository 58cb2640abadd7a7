"""Training curves of every run in a report: `training_<task>.png`, from each run's
`metrics.jsonl` (the loss and accuracy of every member at every logged step).

Per task, two panels (loss, training accuracy) against the step: one hue per column (the
report's encoding labels), every member a thin line and the columns' median a bold one; the
loss on a log axis when its values span more than a decade. A member that fails in the
scorecard can be found here by its column and seed (`series`), which the scorecard names.

Example:
  >>> files = figures(runs)                      # doctest: +SKIP
  >>> sorted(files)  # doctest: +SKIP
  ['training_even_pairs.png']
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc.storage import io
from posenc.sections import plots
from posenc.sections import load

METRICS_FILE = 'metrics.jsonl'


def file_name(task: str) -> str:
  return f'training_{task}.png'


def series(member: Mapping[str, Any]) -> str:
  """A member's name in the figure. Example: {'seed': 1, 'learning_rate': 1e-3} ->
  'seed 1, lr 0.001'."""
  data = '' if member.get('data_seed') is None else f', data {member["data_seed"]}'
  return f'seed {member["seed"]}{data}, lr {member["learning_rate"]:g}'


def read_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
  """The logged steps of a run, in order ([] when it has no metrics.jsonl); a line cut
  short by a crash is left out."""
  path = os.path.join(run_dir, METRICS_FILE)
  rows = []
  if not io.exists(path):
    return rows
  with io.open_lines(path) as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        continue
  return sorted(rows, key=lambda r: r['step'])


def curves(run: load.RunFile) -> dict[str, Any]:
  """{'steps': [S], 'loss': [P, S], 'accuracy': [P, S]} (NaN for a diverged value) of a
  run's members in the order of its config's members."""
  rows = read_metrics(os.path.dirname(run.path))
  values = lambda key: (
    np.array([[math.nan if v is None else v for v in r[key]] for r in rows], np.float64).T
  )
  return {
    'steps': [r['step'] for r in rows],
    'loss': values('loss') if rows else None,
    'accuracy': values('accuracy') if rows else None,
  }


def figure(task: str, columns: Sequence[tuple[str, dict[str, Any]]]) -> mpl_figure.Figure:
  """Loss and training accuracy against the step for every column of `task`: [(label,
  `curves(run)`)]."""
  fig = mpl_figure.Figure(figsize=(9.0, 3.6), layout='constrained')
  loss_ax, accuracy_ax = fig.subplots(1, 2)
  labels = [label for label, _ in columns]
  losses = np.concatenate([c['loss'].ravel() for _, c in columns if c['loss'] is not None])
  positive = losses[np.isfinite(losses) & (losses > 0)]
  for label, c in columns:
    if c['loss'] is None:
      continue
    style = plots.encoding_style(label.split(' ')[0], figure=[l.split(' ')[0] for l in labels])
    for ax, key in ((loss_ax, 'loss'), (accuracy_ax, 'accuracy')):
      values = c[key] * (100 if key == 'accuracy' else 1)
      for member in values:
        ax.plot(c['steps'], member, color=style['color'], linewidth=0.6, alpha=0.35)
      with np.errstate(all='ignore'):
        median = np.nanmedian(values, axis=0)
      ax.plot(
        c['steps'],
        median,
        color=style['color'],
        linewidth=2.0,
        label=label if key == 'loss' else None,
      )
  if positive.size and positive.max() / positive.min() > 10:
    loss_ax.set_yscale('log')
  loss_ax.set_ylabel('training loss')
  accuracy_ax.set_ylabel('training accuracy (%)')
  for ax in (loss_ax, accuracy_ax):
    ax.set_xlabel('step')
  fig.suptitle(f'{task}: training, every member (thin) and the median (bold)', fontsize=9)
  fig.legend(
    fontsize=7, loc='outside lower center', ncols=min(4, max(1, len(columns))), frameon=False
  )
  return fig


def figures(runs: Sequence[load.RunFile]) -> dict[str, bytes]:
  """training_<task>.png for every task whose runs logged their training."""
  out = {}
  for task in sorted({r.record.task for r in runs}):
    mine = [r for r in runs if r.record.task == task]
    labels = load.column_labels([(r.path, r.record) for r in mine])
    columns = [(label, curves(r)) for label, r in zip(labels, mine)]
    columns = [(label, c) for label, c in columns if c['loss'] is not None]
    if columns:
      out[file_name(task)] = plots.png(figure(task, columns), dpi=110)
  return out
