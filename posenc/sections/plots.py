"""How posenc's figures draw their curves: one style per encoding, the same in every figure,
and distinct styles for unnamed series (variants, layers).

Every curve differs from every other in hue *and* in marker or line style, so a figure reads
in greyscale and for colour-blind readers too. An encoding and its randomized version share a
marker (a pair reads as a pair) but not a hue; the standard one is dashed with hollow
markers, the randomized one solid with filled markers. Black is kept for the training-length
line and grey for chance lines, which no curve uses.

Example:
  >>> encoding_style('rotary')['marker'] == encoding_style('randomized_rotary')['marker']
  True
  >>> encoding_style('rotary')['color'] != encoding_style('randomized_rotary')['color']
  True
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import matplotlib
from matplotlib import colors as mpl_colors

# Thirteen hues that stay apart: tab10 and three darker ones.
_HUES = (
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
  '#000080',
  '#e6a800',
  '#7b0b2f',
)
# The encodings of the randomized-encoding study: each its own hue; a family one marker.
_ENCODING_HUES = {
  'none': 7,
  'sin_cos': 0,
  'randomized_sin_cos': 1,
  'relative': 2,
  'randomized_relative': 3,
  'alibi': 4,
  'randomized_alibi': 5,
  'rotary': 6,
  'randomized_rotary': 10,
  'learned': 9,
  'randomized_learned': 11,
  'geometric': 8,
  'geometric_directional': 12,
}
_FAMILY_MARKERS = {
  'none': 'X',
  'sin_cos': 'o',
  'relative': 's',
  'alibi': '^',
  'rotary': 'D',
  'learned': 'v',
  'geometric': 'P',
  'geometric_directional': '*',
}
# Unnamed series and encodings outside the study: hue, marker and line style cycle at
# coprime periods, so no two of the first 13 · 7 series look alike.
_MARKERS = ('o', 's', '^', 'D', 'v', 'P', '*')
_LINESTYLES = ('-', (0, (5, 2)), (0, (1, 1.5)), (0, (5, 2, 1, 2)))
DASHES = (0, (3, 3))  # A standard encoding's line: dashes as long as the gaps.
TRAINING_LINE = {'color': 'black', 'linestyle': (0, (2, 2)), 'lw': 1, 'zorder': 1}
CHANCE_LINE = {'color': 'grey', 'linestyle': ':', 'lw': 1.2, 'zorder': 1}
_DARKER = 0.35  # How far an encoding's last variant column moves towards black.
# One series picked out over the others (the leaderboard's entry over the baselines): a
# blue no greyed curve is confused with, over a grey that stays visible but behind.
ACCENT = '#1f5fa8'
BASELINE_GREY = '#9aa0a6'


def mix(color: Any, other: Any, amount: float) -> tuple[float, float, float]:
  """`color` moved `amount` (0..1) of the way towards `other`, as RGB."""
  rgb, target = mpl_colors.to_rgb(color), mpl_colors.to_rgb(other)
  return tuple((1 - amount) * a + amount * b for a, b in zip(rgb, target))


def series_style(index: int) -> dict[str, Any]:
  """matplotlib line keywords of the `index`-th unnamed series (a variant, a layer).

  Example: series_style(0) is solid blue with circles, series_style(1) dashed orange with
  squares; hue, marker and line style repeat at periods 13, 7 and 4.
  """
  color = _HUES[index % len(_HUES)]
  return {
    'color': color,
    'marker': _MARKERS[index % len(_MARKERS)],
    'linestyle': _LINESTYLES[index % len(_LINESTYLES)],
    'markersize': 4,
    'markerfacecolor': color,
    'markeredgecolor': color,
  }


def encoding_style(
  encoding: str, variant: int = 0, variants: int = 1, figure: Sequence[str] = ()
) -> dict[str, Any]:
  """matplotlib line keywords for the `variant`-th of an encoding's `variants` columns.

  An encoding of the study gets its hue and its family's marker; one outside it (a bias
  family, a combination) is dash-dotted, with a marker of its own and the first hue no
  other encoding of the `figure` (all its encodings, in order) has. Later variant columns
  of one encoding are darker and change marker.

  Example: 'rotary' is dashed pink with hollow diamonds, 'randomized_rotary' solid navy with
  filled diamonds.
  """
  family = encoding.removeprefix('randomized_')
  standard = False
  if encoding in _ENCODING_HUES:
    color, marker = _HUES[_ENCODING_HUES[encoding]], _FAMILY_MARKERS[family]
    standard = encoding == family and f'randomized_{family}' in _ENCODING_HUES
    linestyle = DASHES if standard else '-'
  else:
    outside = [e for e in dict.fromkeys(figure) if e not in _ENCODING_HUES]
    k = outside.index(encoding) if encoding in outside else 0
    taken = {_ENCODING_HUES[e] for e in figure if e in _ENCODING_HUES}
    free = [h for h in range(len(_HUES)) if h not in taken] or list(range(len(_HUES)))
    color, marker = _HUES[free[k % len(free)]], _MARKERS[(k + 2) % len(_MARKERS)]
    linestyle = '-.'
  if variants > 1:
    color = mix(color, 'black', _DARKER * variant / (variants - 1))
  if variant:
    marker = ('<', '>', 'd', 'H', '8')[(variant - 1) % 5]
  # Dashed lines go on top, so where a pair coincides both colours show.
  return {
    'color': color,
    'linestyle': linestyle,
    'marker': marker,
    'markersize': 4.5,
    'markerfacecolor': 'white' if standard else color,
    'markeredgecolor': color,
    'zorder': 2.5 if standard else 2,
  }


def svg(fig: Any) -> bytes:
  """A matplotlib figure as SVG bytes, reproducible (no date, fixed ids), its text kept as
  text: a browser draws it at the size the page shows the figure, sharp at any width, and
  the size of its letters can be read from the file (`font: 10px ...` in the figure's
  units, points)."""
  buffer = io.BytesIO()
  with matplotlib.rc_context({'svg.fonttype': 'none', 'svg.hashsalt': 'posenc'}):
    fig.savefig(buffer, format='svg', metadata={'Date': None, 'Creator': None})
  return buffer.getvalue()


def png(fig: Any, dpi: int = 110) -> bytes:
  """A matplotlib figure as PNG bytes, without a timestamp or software tag (reproducible)."""
  buffer = io.BytesIO()
  fig.savefig(buffer, format='png', dpi=dpi, metadata={'Software': None})
  return buffer.getvalue()
