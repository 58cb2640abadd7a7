"""The scorecard's figure (`posenc.report.scorecard`): per task, every member's score as a
point over its column's box.

Example:
  >>> png(card, 'even_pairs')[:4]                       # doctest: +SKIP
  b'\\x89PNG'
"""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib import figure as mpl_figure
import numpy as np

from posenc.sections import plots


def figure(card: Mapping[str, Any], task: str) -> mpl_figure.Figure:
  """Per column of `task`, each member's score as a point over its box (quartiles and
  range)."""
  rows = [r for r in card['rows'] if r['task'] == task]
  lower = not rows[0]['higher_is_better']
  fig = mpl_figure.Figure(figsize=(max(4.0, 1.2 * len(rows) + 1.5), 3.6), layout='constrained')
  ax = fig.add_subplot()
  scale = 1 if lower else 100
  data = [[m['score'] * scale for m in r['member_scores'] if m['score'] is not None] for r in rows]
  positions = np.arange(len(rows))
  shown = [(p, d) for p, d in zip(positions, data) if d]
  if shown:
    ax.boxplot(
      [d for _, d in shown],
      positions=[p for p, _ in shown],
      widths=0.5,
      showfliers=False,
      medianprops={'color': 'black'},
    )
  for p, d, r in zip(positions, data, rows):
    # Spread the points evenly across the box, in score order (no random jitter).
    offsets = np.linspace(-0.18, 0.18, len(d)) if len(d) > 1 else np.zeros(len(d))
    style = plots.encoding_style(
      r['column'].split(' ')[0], figure=[q['column'].split(' ')[0] for q in rows]
    )
    ax.scatter(
      p + offsets,
      sorted(d),
      s=16,
      zorder=3,
      color=style['color'],
      marker=style['marker'],
      facecolors=style['markerfacecolor'],
    )
  ax.set_xticks(
    positions,
    [f'{r["column"]}\n({r["members"] - r["diverged"]}/{r["members"]})' for r in rows],
    fontsize=7,
  )
  if not lower:
    ax.axhline(
      card['thresholds']['score'] * 100,
      color='grey',
      linestyle=':',
      linewidth=1,
      label=f'success threshold ({card["thresholds"]["score"] * 100:g}%)',
    )
    # Outside the axes, so that no member's point is hidden under it.
    fig.legend(fontsize=7, loc='outside lower center', frameon=False)
  metric = rows[0]['metric']
  ax.set_ylabel(f'{metric}{"" if lower else " (%)"}' + (' (lower is better)' if lower else ''))
  ax.set_title(f'{task}: score of every member', fontsize=9)
  return fig


def png(card: Mapping[str, Any], task: str) -> bytes:
  return plots.png(figure(card, task), dpi=120)
