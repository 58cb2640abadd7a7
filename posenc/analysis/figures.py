"""The figures of the analyses (`launch.analyze`): pure functions from their data to a
matplotlib `Figure`, drawn in posenc's styles (`posenc.sections.plots`).

Each figure has its own Agg canvas (no pyplot state, no backend to choose); `plots.png`
turns it into PNG bytes. The data are arrays and dicts as `posenc.analysis.receptive`,
`posenc.analysis` and `posenc.analysis.probe` return them: drawing needs neither a model nor JAX.

Example (the TRF figure of two bias encodings at horizon 512):
  >>> from posenc.analysis import receptive
  >>> from posenc.sections import plots
  >>> curves = {name: receptive.trf(receptive.weights(name, 512), EPS_GRID).max(axis=0) / 512
  ...           for name in ('type1', 'inverse_n')}
  >>> data = plots.png(trf_figure(EPS_GRID, curves, horizon=512), dpi=120)
  >>> data[:4]
  b'\\x89PNG'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc.sections import plots

# The ε of the receptive-field curves: Qin et al.'s 50 values from 1 to 0, without the ends
# (TRF and ERF are defined for ε in (0, 1) only).
EPS_GRID = np.linspace(1, 0, 50)[1:-1]


def trf_figure(
  grid: Sequence[float], curves: Mapping[str, Sequence[float]], horizon: int
) -> mpl_figure.Figure:
  """TRF / m against ε at horizon m, one curve per encoding (Qin et al.'s plot).

  Args:
    grid: the ε of the curves, from 1 towards 0 (e.g. `EPS_GRID`).
    curves: encoding -> TRF(ε) / m of its widest head at each ε of `grid`.
    horizon: m.

  Example: trf_figure(EPS_GRID, {'type1': [...], 'alibi': [...]}, 512) has one axes, log
  scaled in y, with the two curves in their encodings' styles.
  """
  fig = mpl_figure.Figure(figsize=(6.5, 4))
  ax = fig.subplots()
  for name, curve in curves.items():
    ax.plot(grid, curve, label=name, markevery=7, **plots.encoding_style(name, figure=curves))
  ax.set_xlabel('ε')
  ax.set_ylabel(f'TRF / m (m = {horizon:,}, log scale)')
  # TRF/m spans decades: a few keys for Type 1/2 at m = 512, all m keys for 1/n.
  ax.set_yscale('log')
  ax.set_title('Theoretical receptive field at initial parameters (widest head)')
  ax.invert_xaxis()
  ax.grid(alpha=0.3, which='both')
  ax.legend(fontsize='small')
  fig.tight_layout()
  return fig


def erf_figure(
  grid: Sequence[float], summary: Mapping[str, Any], encoding: str, length: int
) -> mpl_figure.Figure:
  """ERF / keys attended against ε, one curve per layer (the mean over its heads).

  Args:
    grid: the ε of the curves, from 1 towards 0 (e.g. `EPS_GRID`).
    summary: `analysis.erf_summary(rows, grid)`: {'eps': {str(ε): {'layers': [[{'mean_share',
      ...} per head] per layer]}}}.
    encoding, length: the run's encoding and the input length, for the title.

  Example: a 2-layer run's summary over EPS_GRID gives two curves, 'layer 0' and 'layer 1',
  each rising towards 1 as ε goes to 0.
  """
  by_eps = summary['eps']
  layers = len(by_eps[str(grid[0])]['layers'])
  fig = mpl_figure.Figure(figsize=(6, 4))
  ax = fig.subplots()
  for i in range(layers):
    shares = [np.mean([head['mean_share'] for head in by_eps[str(e)]['layers'][i]]) for e in grid]
    ax.plot(grid, shares, label=f'layer {i}', markevery=7, **plots.series_style(i))
  ax.set_xlabel('ε')
  ax.set_ylabel('ERF / keys attended')
  ax.set_ylim(0, 1.02)
  ax.set_title(f'{encoding}: empirical receptive field at length {length}')
  ax.invert_xaxis()
  ax.legend()
  fig.tight_layout()
  return fig


def attention_maps_figure(
  maps: Sequence[Sequence[np.ndarray]], lengths: Sequence[int], encoding: str
) -> mpl_figure.Figure:
  """One example's attention per length (rows) and layer (columns), max over heads
  (Ruoss et al. Fig. 6).

  Args:
    maps: [per length [per layer [T, T] weights]] (`analysis.attention_map`).
    lengths: the input length of each row.
    encoding: the run's encoding, for the title.

  Example: maps at lengths 40 and 100 of a 5-layer model give a 2 x 5 grid of images
  sharing one colour bar from 0 to 1.
  """
  layers = len(maps[0])
  fig = mpl_figure.Figure(
    figsize=(2.6 * layers + 1.2, 2.6 * len(lengths) + 0.4), layout='constrained'
  )
  axes = fig.subplots(len(lengths), layers, squeeze=False)
  for r, (n, row) in enumerate(zip(lengths, maps)):
    for layer, weights in enumerate(row):
      ax = axes[r][layer]
      image = ax.imshow(weights, cmap='viridis', vmin=0, vmax=1)
      ax.set_title(f'length {n}, layer {layer}', fontsize=8)
      ax.set_xlabel('key', fontsize=7)
      ax.set_ylabel('query', fontsize=7)
      ax.set_xticks([])
      ax.set_yticks([])
  fig.colorbar(image, ax=axes, label='attention weight (max over heads)', shrink=0.8)
  fig.suptitle(f'{encoding}: attention, max over heads (rows: queries)')
  return fig


def activation_pca_figure(
  pca: Mapping[str, Any], lengths: Sequence[int], encoding: str, layer: int
) -> mpl_figure.Figure:
  """A layer's activations in the PCA plane fitted at the first length, one panel per
  length, tokens coloured by position (Ruoss et al. Fig. 5).

  Args:
    pca: `analysis.activation_pca(...)`: {'points': [per length [N, 2]], 'positions': [per
      length [N]], ...}.
    lengths: the input length of each panel; the first is the one the PCA was fitted at.
    encoding, layer: for the title.

  Example: the PCA of layer 1 at lengths 40 and 100 gives two scatter panels, each with a
  colour bar of positions.
  """
  fig = mpl_figure.Figure(figsize=(3.6 * len(lengths), 3.4))
  axes = fig.subplots(1, len(lengths), squeeze=False)
  for ax, n, points, positions in zip(axes[0], lengths, pca['points'], pca['positions']):
    scatter = ax.scatter(points[:, 0], points[:, 1], c=positions, s=4, cmap='viridis')
    ax.set_title(f'length {n}', fontsize=9)
    fig.colorbar(scatter, ax=ax, label='position')
  fig.suptitle(f'{encoding}: layer {layer} activations, PCA fitted at length {lengths[0]}')
  fig.tight_layout()
  return fig


def position_probe_figure(
  layers: Sequence[Mapping[str, Any]], encoding: str, length: int
) -> mpl_figure.Figure:
  """The probe's mean |error| per position, one curve per layer, against random guessing
  (Haviv et al. 2022).

  Args:
    layers: `probe.probe_layers(...)`: per layer {'by_position': [mean error or None per
      position], 'baseline': float, ...}.
    encoding, length: the run's encoding and the probe's training length, for the title.

  Example: a 2-layer run probed at length 40 gives two curves over positions 0..39 and a
  grey line at (40² - 1) / 120 = 13.3.
  """
  fig = mpl_figure.Figure(figsize=(6, 4))
  ax = fig.subplots()
  for i, result in enumerate(layers):
    errors = [np.nan if v is None else v for v in result['by_position']]
    ax.plot(
      errors, label=f'layer {i}', markevery=max(1, len(errors) // 12), **plots.series_style(i)
    )
  ax.axhline(layers[0]['baseline'], **plots.CHANCE_LINE, label='random guessing')
  ax.set_xlabel('position')
  ax.set_ylabel('mean |error|')
  ax.set_title(f'{encoding}: position probe, trained at length {length}')
  ax.legend(fontsize=7)
  fig.tight_layout()
  return fig
