"""The leaderboard as a static site: index.html (the suite, one sortable table, a figure per
task), a page per entry (its curves by test length against the baselines', its
environment), their figures (PNG) and one stylesheet and one script beside them.

The pages need no server and no network: they open from the disk (file://) as from any
static host. The table is a plain `<table>` (a screen reader reads it); each sortable
column's header holds a `<button>` (Tab to it, Enter or Space sorts; `aria-sort` says the
order); the reader picks the reference encoding the verdicts are against from a `<select>`.
Without JavaScript the table shows in mean-rank order against the default reference.

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark, leaderboard
  >>> suite = benchmarks.get('tiny')
  >>> pages = files(leaderboard.leaderboard(suite, benchmark.read_baselines(suite)))
  >>> sorted(pages)[:4]
  ['entries/none.html', 'entries/rotary.html', 'figures/entry_none.png', 'figures/entry_rotary.png']
  >>> write('runs/leaderboard_tiny', pages)        # doctest: +SKIP
"""

from __future__ import annotations

import html
import importlib.resources
import json
import os
import re
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc import card as card_lib
from posenc import io
from posenc import plots
from posenc import store
from posenc import leaderboard as leaderboard_lib

# What marks a directory as a leaderboard this module wrote (one it may replace).
GENERATOR = '<meta name="generator" content="posenc leaderboard">'
STATIC = ('leaderboard.css', 'leaderboard.js')
VERDICT_ORDER = {'reference': 0, 'better': 1, 'not separated': 2, 'worse': 3}


class LeaderboardError(ValueError):
  """An output directory that holds something else (one line)."""


def slug(name: str) -> str:
  """A file name for an entry: 'my_pkg.mod:ENC' -> 'my_pkg.mod_ENC'."""
  return re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('.') or 'entry'


def _slugs(names: Sequence[str]) -> dict[str, str]:
  out: dict[str, str] = {}
  for name in names:
    base, k = slug(name), 1
    while (s := base if k == 1 else f'{base}_{k}') in out.values():
      k += 1
    out[name] = s
  return out


# ---------------------------------------------------------------------------------------
# Figures.


def task_figure(board: Mapping[str, Any], task: str) -> mpl_figure.Figure:
  """Every entry's members on `task` (points), its mean (a tick) and 95% interval (a line),
  best on top, candidates' names in bold."""
  entries = [e for e in board['entries'] if task in e['tasks']]
  entries.sort(key=lambda e: card_lib.sort_key(e['tasks'][task]['row']), reverse=True)
  names = [e['name'] for e in board['entries']]
  fig = mpl_figure.Figure(figsize=(6.4, 0.28 * len(entries) + 1.3), layout='constrained')
  ax = fig.subplots()
  for y, e in enumerate(entries):
    row = e['tasks'][task]['row']
    style = plots.encoding_style(e['name'], figure=names)
    scores = [100 * m['score'] for m in row['member_scores'] if m['score'] is not None]
    ax.scatter(scores, np.full(len(scores), y), s=14, color=style['color'], marker=style['marker'])
    if row['score'] is not None:
      ax.plot(100 * row['score']['mean'], y, '|', color='black', markersize=10)
      if row['score']['mean_ci'] is not None:
        low, high = row['score']['mean_ci']
        ax.plot([100 * low, 100 * high], [y, y], color='black', linewidth=0.8, zorder=1)
  ax.set_yticks(range(len(entries)), [e['name'] for e in entries], fontsize=7)
  for label, e in zip(ax.get_yticklabels(), entries):
    if e['kind'] == leaderboard_lib.CANDIDATE:
      label.set_fontweight('bold')
  if board['thresholds']:
    ax.axvline(100 * board['thresholds']['score'], **plots.CHANCE_LINE)
  ax.set_xlim(-2, 102)
  ax.set_xlabel(f'{entries[0]["tasks"][task]["row"]["metric"]} past training (%)', fontsize=8)
  ax.set_title(f'{task}: members (points), means (|) and 95% intervals', fontsize=9)
  return fig


def entry_figure(board: Mapping[str, Any], name: str) -> mpl_figure.Figure:
  """Per task the entry's mean curve by test length (thick) against every baseline's."""
  entry = next(e for e in board['entries'] if e['name'] == name)
  names = [e['name'] for e in board['entries']]
  tasks = list(entry['tasks'])
  fig = mpl_figure.Figure(figsize=(4.6 * len(tasks) + 1.6, 3.4), layout='constrained')
  axes = fig.subplots(1, len(tasks), squeeze=False)[0]
  for ax, task in zip(axes, tasks):
    others = [
      e
      for e in board['entries']
      if e['kind'] == leaderboard_lib.BASELINE and e['name'] != name and task in e['tasks']
    ]
    for e in [*others, entry]:
      curve = e['tasks'][task]['curve']
      style = plots.encoding_style(e['name'], figure=names)
      mine = e is entry
      ax.plot(
        [int(n) for n in curve],
        [100 * v for v in curve.values()],
        **{**style, 'markersize': 4.5 if mine else 2.5, 'zorder': 4 if mine else style['zorder']},
        linewidth=2.4 if mine else 0.9,
        alpha=1.0 if mine else 0.55,
        label=e['name'],
      )
    ax.axvline(entry['tasks'][task]['train_length'], **plots.TRAINING_LINE)
    ax.set_ylim(-2, 102)
    ax.set_xlabel('test length (dotted: longest trained)', fontsize=8)
    ax.set_ylabel(f'{entry["tasks"][task]["row"]["metric"]}, mean of members (%)', fontsize=8)
    ax.set_title(f'{task}: {name} (thick) and the baselines', fontsize=9)
  axes[-1].legend(fontsize=6, loc='center left', bbox_to_anchor=(1.02, 0.5), frameon=False)
  return fig


# ---------------------------------------------------------------------------------------
# Pages.


def _e(text: Any) -> str:
  return html.escape(str(text))


def _page(title: str, body: str, root: str = '') -> str:
  return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{GENERATOR}
<title>{_e(title)}</title>
<link rel="stylesheet" href="{root}leaderboard.css">
</head>
<body>
<main>
{body}
</main>
<script src="{root}leaderboard.js"></script>
</body>
</html>
"""


def _number(x: float | None) -> str:
  """A sort key as an attribute: '' (sorted last) for none."""
  return '' if x is None or not np.isfinite(x) else f'{x:.6g}'


def _verdict_cell(verdict: str, task: str) -> str:
  return (
    f'<td class="verdict {slug(verdict)}" data-task="{_e(task)}" '
    f'data-sort="{VERDICT_ORDER.get(verdict, 9)}">{_e(verdict)}</td>'
  )


def _task_cells(task: str, t: Mapping[str, Any] | None, verdict: str) -> str:
  if t is None:
    return '<td data-sort="">–</td>' * 3 + _verdict_cell('–', task)
  row = t['row']
  mean = None if row['score'] is None else row['score']['mean']
  lg = row['longest_generalized']
  return (
    f'<td data-sort="{_number(mean)}">{_e(card_lib.mean_text(row["score"]))}</td>'
    f'<td data-sort="{_number(row["success"]["rate"])}">{_e(card_lib.success_text(row))}</td>'
    f'<td data-sort="{_number(None if lg is None else lg["median"])}">'
    f'{_e(card_lib.longest_text(lg))}</td>' + _verdict_cell(verdict, task)
  )


def _count(board: Mapping[str, Any], kind: str, what: str) -> str:
  n = sum(e['kind'] == kind for e in board['entries'])
  return f'{n} {what}{"" if n == 1 else "s"}'


def _rank_text(entry: Mapping[str, Any]) -> str:
  return '–' if entry['mean_rank'] is None else f'{entry["mean_rank"]:.2f}'


def _verdict(board: Mapping[str, Any], reference: str, name: str, task: str) -> str:
  if name == reference:
    return 'reference'
  return board['verdicts'].get(reference, {}).get(name, {}).get(task, '–')


def _sortable(label: str, key: str = 'number', sort: str = '') -> str:
  aria = f' aria-sort="{sort}"' if sort else ''
  return f'<th scope="col" data-type="{key}"{aria}><button type="button">{label}</button></th>'


def index_html(board: Mapping[str, Any], pages: Mapping[str, str], reference: str) -> str:
  """The suite, the table (mean-rank order), the reference picker and a figure per task."""
  s, st = board['suite'], board['statistics']
  tasks = list(s['tasks'])
  head = _sortable('Entry', 'text') + _sortable('Mean rank', sort='ascending')
  for task in tasks:
    head += (
      _sortable(f'{_e(task)}: mean ± sd [95% CI]')
      + _sortable(f'{_e(task)}: success [95% CI]')
      + _sortable(f'{_e(task)}: longest generalized')
      + _sortable(f'{_e(task)}: verdict vs reference')
    )
  body = []
  for e in board['entries']:
    kind = ' <span class="kind">candidate</span>' if e['kind'] == 'candidate' else ''
    cells = ''.join(
      _task_cells(t, e['tasks'].get(t), _verdict(board, reference, e['name'], t)) for t in tasks
    )
    body.append(
      f'<tr data-entry="{_e(e["name"])}"><th scope="row" data-sort="{_e(e["name"])}">'
      f'<a href="{pages[e["name"]]}">{_e(e["name"])}</a>{kind}</th>'
      f'<td data-sort="{_number(e["mean_rank"])}">{_rank_text(e)}</td>{cells}</tr>'
    )
  options = ''.join(
    f'<option value="{_e(e["name"])}"{" selected" if e["name"] == reference else ""}>'
    f'{_e(e["name"])}</option>'
    for e in board['entries']
  )
  verdicts = json.dumps(board['verdicts'], sort_keys=True).replace('</', '<\\/')
  old = (
    f'<p class="note"><strong>An old version of the benchmark:</strong> {_e(s["name"])} is '
    f'superseded by {_e(s["superseded_by"])}.</p>'
    if s.get('superseded_by')
    else ''
  )
  reasons = ''.join(f'<li><strong>{_e(t)}</strong>: {_e(r)}</li>' for t, r in s['tasks'].items())
  figures = ''.join(
    f'<figure><a href="figures/task_{slug(t)}.png"><img src="figures/task_{slug(t)}.png" '
    f'alt="Every entry\'s member scores on {_e(t)}, with means and 95% intervals"></a><figcaption>{_e(t)}: every member of every '
    'entry; the dotted line is the success threshold.</figcaption></figure>'
    for t in tasks
  )
  thresholds = board['thresholds']
  undecidable = (
    ''
    if board['decidable']
    else '<p class="note"><strong>No comparison can be separated:</strong> with so few members '
    'per cell the smallest p-value any comparison can reach is above Holm\'s first step, so '
    'every verdict is "not separated" whatever the scores; the ranks and intervals still say '
    'where each entry sits.</p>'
  )
  body_html = f"""<h1>Leaderboard of suite {_e(s['name'])} (version {_e(s['version'])})</h1>
{old}<p>{_e(s['summary'])}</p>
<ul class="tasks">{reasons}</ul>
<p>{_count(board, leaderboard_lib.BASELINE, 'stored baseline')} of the suite and {_count(board, leaderboard_lib.CANDIDATE, 'candidate')}.
Scores: exact match (%) averaged over the lengths past training, mean ± sd over the members
[95% interval: {_e(st['interval'])}]; success: members scoring at least
{100 * thresholds['score']:g}% [95% {_e(st['success_interval'])} interval]; longest generalized:
the median over members of the longest length up to which every evaluated length stays at
least {100 * thresholds['length']:g}%. Rank per task among all entries by mean, 1 = best.</p>
<p>Verdicts are read from the reference's card: a {_e(st['test'])} of the reference against
every other entry on every task, Holm over all of them at family-wise level {st['alpha']:g};
each row says whether that entry is better, worse or not separated from the reference.</p>
{undecidable}
<p class="controls"><label for="reference">Reference encoding</label>
<select id="reference">{options}</select></p>
<div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard table, scrolls sideways">
<table class="leaderboard">
<caption>Sort by a column with its header's button.</caption>
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table>
</div>
<script type="application/json" id="verdicts">{verdicts}</script>
<h2>Per task</h2>
{figures}
"""
  return _page(f'Leaderboard: {s["name"]} (version {s["version"]})', body_html)


def entry_html(board: Mapping[str, Any], entry: Mapping[str, Any], figure: str) -> str:
  """An entry's scores per task, its curves by length (the PNG at `figure`, relative to the
  page) and the environment of its run."""
  s, run = board['suite'], entry['run']
  rows = ''.join(
    f'<tr><th scope="row">{_e(task)}</th><td>{t["rank"]} of {len(board["entries"])}</td>'
    f'<td>{_e(card_lib.mean_text(t["row"]["score"]))}</td>'
    f'<td>{_e(card_lib.success_text(t["row"]))}</td>'
    f'<td>{_e(card_lib.longest_text(t["row"]["longest_generalized"]))}</td></tr>'
    for task, t in entry['tasks'].items()
  )
  packages = ', '.join(f'{_e(k)} {_e(v)}' for k, v in (run.get('packages') or {}).items())
  machine = run.get('machine') or {}
  seconds = run.get('seconds')
  body = f"""<p><a href="../index.html">← Leaderboard of {_e(s['name'])}</a></p>
<h1>{_e(entry['name'])} on {_e(s['name'])} (version {_e(s['version'])})</h1>
<p>A {_e(entry['kind'])}; mean rank {_rank_text(entry)} among {len(board['entries'])} entries.</p>
<div class="table-wrap" tabindex="0" role="region" aria-label="Scores per task">
<table>
<thead><tr><th scope="col">Task</th><th scope="col">Rank</th><th scope="col">Mean ± sd [95% CI]</th>
<th scope="col">Success [95% CI]</th><th scope="col">Longest generalized</th></tr></thead>
<tbody>{rows}</tbody>
</table>
</div>
<figure><a href="{figure}"><img src="{figure}" alt="{_e(entry['name'])}'s mean score by test
length on each task, against every baseline's"></a><figcaption>Mean over the members by test
length; the dotted line is the longest training length (the figure opens full size).
</figcaption></figure>
<h2>Environment</h2>
<dl>
<dt>Command</dt><dd><code>{_e(' '.join(run.get('command') or []))}</code></dd>
<dt>posenc</dt><dd>{_e(run.get('posenc_version'))}</dd>
<dt>Packages</dt><dd>{packages}</dd>
<dt>Machine</dt><dd>{_e(machine.get('system'))} {_e(machine.get('machine'))}, {_e(machine.get('cpus'))} CPUs, Python {_e(machine.get('python'))}</dd>
<dt>Time</dt><dd>{'–' if seconds is None else f'{seconds / 60:.1f} min'}</dd>
</dl>
"""
  return _page(f'{entry["name"]} on {s["name"]}', body, root='../')


def files(board: Mapping[str, Any], reference: str | None = None) -> dict[str, bytes]:
  """{relative path: bytes} of the site; verdicts shown first against `reference` (default:
  the first candidate, else the best-ranked entry)."""
  entries = board['entries']
  if not entries:
    raise LeaderboardError('a leaderboard needs an entry: the suite stores no baselines')
  names = [e['name'] for e in entries]
  if reference is None:
    reference = next((e['name'] for e in entries if e['kind'] == 'candidate'), names[0])
  slugs = _slugs(names)
  pages = {name: f'entries/{slugs[name]}.html' for name in names}
  out = {'index.html': index_html(board, pages, reference).encode()}
  for e in entries:
    figure = f'figures/entry_{slugs[e["name"]]}.png'
    out[pages[e['name']]] = entry_html(board, e, f'../{figure}').encode()
    out[figure] = plots.png(entry_figure(board, e['name']), 100)
  for task in board['suite']['tasks']:
    out[f'figures/task_{slug(task)}.png'] = plots.png(task_figure(board, task), 100)
  static = importlib.resources.files(__package__) / 'static'
  for name in STATIC:
    out[name] = (static / name).read_bytes()
  return out


# ---------------------------------------------------------------------------------------
# Writing it.


def is_leaderboard(directory: str) -> bool:
  """Whether `directory` (a path or a store URL) holds a site this module wrote (its
  index.html says so)."""
  try:
    head = io.read_bytes(os.path.join(directory, 'index.html'))[:4096]
  except (OSError, store.StoreError):
    return False
  return GENERATOR in head.decode(errors='replace')


def write(directory: str, site: Mapping[str, bytes]) -> None:
  """Writes `site` into `directory` whole or not at all: into a temporary directory beside
  it, then renamed into place. `directory` may be missing, empty or a previous leaderboard
  (replaced); one that holds anything else raises LeaderboardError. OSError (an unwritable
  place, a full disk) leaves `directory` as it was.

  A store URL (gs://, s3://) has no rename: every file is put whole, index.html last (a
  reader before it sees the previous site, with some pages already new), then the previous
  site's files that the new one lacks are deleted. A store that fails midway is a
  store.StoreError; the previous index.html is then still in place.
  """
  if store.is_url(directory):
    _write_to_store(directory.rstrip('/'), site)
    return
  directory = os.path.abspath(directory)
  if os.path.exists(directory):
    if not os.path.isdir(directory):
      raise LeaderboardError(f'{directory} is a file, not a directory')
    held = sorted(os.listdir(directory))
    if held and not is_leaderboard(directory):
      raise LeaderboardError(_holds_other_files(directory, held))
  parent = os.path.dirname(directory)
  missing = []  # the parents this call creates, removed again if it fails
  while not os.path.exists(parent):
    missing.append(parent)
    parent = os.path.dirname(parent)
  staging = None
  try:
    for made in reversed(missing):
      os.mkdir(made)
    staging = tempfile.mkdtemp(
      prefix=f'.{os.path.basename(directory)}-', dir=os.path.dirname(directory)
    )
    for path, data in site.items():
      os.makedirs(os.path.dirname(os.path.join(staging, path)), exist_ok=True)
      with open(os.path.join(staging, path), 'wb') as f:
        f.write(data)
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the site from a web server
    if os.path.exists(directory):
      old = staging + '.old'
      os.rename(directory, old)
      os.rename(staging, directory)
      shutil.rmtree(old)
    else:
      os.rename(staging, directory)
    missing = []
  finally:
    if staging:
      shutil.rmtree(staging, ignore_errors=True)
    for made in missing:
      if os.path.isdir(made) and not os.listdir(made):
        os.rmdir(made)


def _holds_other_files(directory: str, held: Sequence[str]) -> str:
  return (
    f'{directory} holds other files ({", ".join(held[:3])}{", ..." if len(held) > 3 else ""})'
    " and no leaderboard; give a new or empty directory, or a previous leaderboard's"
  )


def _write_to_store(url: str, site: Mapping[str, bytes]) -> None:
  """`write` on a store: each file one put, index.html last, then the previous site's
  files the new one lacks deleted."""
  before = store.files_under(url)
  if before and not is_leaderboard(url):
    raise LeaderboardError(_holds_other_files(url, before))
  for path in sorted(site, key=lambda p: p == 'index.html'):
    io.write_bytes_atomic(f'{url}/{path}', site[path])
  for path in before:
    if path not in site:
      store.remove(f'{url}/{path}')
