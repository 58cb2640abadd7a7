"""The leaderboard's figures, drawn for a phone as for a laptop: SVG (text kept as text) at
least LABEL points, a figure at most FIGURE_WIDTH wide, one entry picked out over the
others in grey.

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark
  >>> from posenc.benchmark import leaderboard
  >>> suite = benchmarks.get('tiny')
  >>> board = leaderboard.leaderboard(suite, benchmark.read_baselines(suite))
  >>> [round(float(x), 1) for x in task_figure(board, 'even_pairs').get_size_inches()]
  [4.5, 2.0]
"""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib import figure as mpl_figure
import numpy as np

from posenc.benchmark import card as card_lib
from posenc.benchmark import leaderboard as leaderboard_lib
from posenc.sections import plots

# The figures' smallest text (points: the SVG's units). A figure is drawn 4.5 in (324 pt)
# wide and shown at most 432 px (its own size) wide, so 10 pt is >= 10 px down to a 324 px
# column: a 390 px phone less the margins of the standalone pages (366 px) or of the
# documentation's (340 px).
FIGURE_WIDTH = 4.5
LABEL = 10
TITLE = 11


def task_figure(board: Mapping[str, Any], task: str) -> mpl_figure.Figure:
  """Every entry's members on `task` (points), its mean (a tick) and 95% interval (a line),
  best on top; candidates in the accent colour and bold, baselines in grey."""
  entries = [e for e in board['entries'] if task in e['tasks']]
  entries.sort(key=lambda e: card_lib.sort_key(e['tasks'][task]['row']), reverse=True)
  fig = mpl_figure.Figure(
    figsize=(FIGURE_WIDTH, 0.3 * len(entries) + 1.4), layout='constrained', facecolor='none'
  )
  ax = fig.subplots()
  for y, e in enumerate(entries):
    row = e['tasks'][task]['row']
    mine = e['kind'] == leaderboard_lib.CANDIDATE
    color = plots.ACCENT if mine else plots.BASELINE_GREY
    scores = [100 * m['score'] for m in row['member_scores'] if m['score'] is not None]
    ax.scatter(scores, np.full(len(scores), y), s=12, color=color, alpha=0.8, linewidths=0)
    if row['score'] is not None:
      ax.plot(100 * row['score']['mean'], y, '|', color='black', markersize=11, mew=1.6)
      if row['score']['mean_ci'] is not None:
        low, high = row['score']['mean_ci']
        ax.plot([100 * low, 100 * high], [y, y], color='black', linewidth=1, zorder=1)
  ax.set_yticks(range(len(entries)), [e['name'] for e in entries], fontsize=LABEL)
  for label, e in zip(ax.get_yticklabels(), entries):
    if e['kind'] == leaderboard_lib.CANDIDATE:
      label.set_fontweight('bold')
      label.set_color(plots.ACCENT)
  if board['thresholds']:
    ax.axvline(100 * board['thresholds']['score'], **plots.CHANCE_LINE)
  ax.set_xlim(-2, 102)
  ax.tick_params(axis='x', labelsize=LABEL)
  metric = entries[0]['tasks'][task]['row']['metric']
  ax.set_xlabel(f'{metric} past training (%)', fontsize=LABEL)
  ax.set_title(f'{task}: members, mean |, 95% CI', fontsize=TITLE)
  return fig


def entry_figure(board: Mapping[str, Any], name: str) -> mpl_figure.Figure:
  """Per task (one panel under the other) the entry's mean curve by test length, drawn over
  every other entry's in grey."""
  entry = next(e for e in board['entries'] if e['name'] == name)
  tasks = list(entry['tasks'])
  fig = mpl_figure.Figure(
    figsize=(FIGURE_WIDTH, 2.7 * len(tasks) + 0.3), layout='constrained', facecolor='none'
  )
  axes = fig.subplots(len(tasks), 1, squeeze=False)[:, 0]
  for ax, task in zip(axes, tasks):
    for e in board['entries']:
      if e is entry or task not in e['tasks']:
        continue
      curve = e['tasks'][task]['curve']
      xs, ys = [int(n) for n in curve], [100 * v for v in curve.values()]
      ax.plot(xs, ys, color=plots.BASELINE_GREY, linewidth=0.9, alpha=0.7, zorder=1)
    curve = entry['tasks'][task]['curve']
    ax.plot(
      [int(n) for n in curve],
      [100 * v for v in curve.values()],
      color=plots.ACCENT,
      linewidth=2.6,
      marker='o',
      markersize=3.5,
      zorder=3,
      label=name,
    )
    ax.axvline(entry['tasks'][task]['train_length'], **plots.TRAINING_LINE)
    ax.set_ylim(-2, 102)
    ax.tick_params(labelsize=LABEL)
    ax.set_xlabel('test length (dotted: longest trained)', fontsize=LABEL)
    ax.set_ylabel(f'{entry["tasks"][task]["row"]["metric"]} (%)', fontsize=LABEL)
    who = name if len(name) <= 18 else 'this entry'  # a long name would leave the figure
    ax.set_title(f'{task}: {who} (blue), the others (grey)', fontsize=TITLE)
  return fig
