"""The leaderboard as a static site: the board (the suite, a "how to read this" box, one
sortable table seen whole or one task at a time, a figure per task, the downloads), a page
per entry (what the encoding is, its paper and BibTeX, its options, its scores and curves,
the environment of its run), the data (CSV and JSON of the table and of every member, each
entry's card.json, references.bib), SVG figures and one stylesheet and one script.

The pages need no server and no network: they open from the disk (file://) as from any
static host. The table is a plain `<table>` (a screen reader reads it); each sortable
column's header holds a `<button>` (Tab to it, Enter or Space sorts; the first press puts
the best first; `aria-sort` says the order); the reader picks the view (every task, or one)
and the reference encoding the verdicts are against. Without JavaScript the table shows
every column in mean-rank order against the default reference. The same board is written
standalone (`index.html`, by `launch.benchmark --leaderboard`) and into the documentation
site (`board_html`: the docs' leaderboard page holds it, its files under `leaderboard/`).

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark, leaderboard
  >>> suite = benchmarks.get('tiny')
  >>> pages = files(leaderboard.leaderboard(suite, benchmark.read_baselines(suite)))
  >>> sorted(p for p in pages if p.startswith('entries/'))
  ['entries/none.html', 'entries/rotary.html']
  >>> sorted(p for p in pages if p.startswith('data/'))
  ['data/leaderboard.csv', 'data/leaderboard.json', 'data/members.csv', 'data/members.json']
  >>> write('runs/leaderboard_tiny', pages)        # doctest: +SKIP
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import html
import importlib.metadata
import importlib.resources
import io as io_lib
import json
import os
import re
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc import card as card_lib
from posenc import encodings
from posenc import plots
from posenc import leaderboard as leaderboard_lib

# What marks a directory as a leaderboard this module wrote (one it may replace).
GENERATOR = '<meta name="generator" content="posenc leaderboard">'
STATIC = ('leaderboard.css', 'leaderboard.js')
# Verdicts in their best-first order, with what each means (the legend). A verdict not
# named here (a state the statistics may add) sorts between "not separated" and "worse",
# keeps its own name in the table and its own colour class (`verdict <slug>`).
VERDICTS = {
  'reference': 'the entry the others are compared with',
  'better': 'a higher mean than the reference, established (Holm, family-wise error 5%)',
  'not separated': 'a difference from the reference is not established',
  'worse': 'a lower mean than the reference, established',
}
OTHER_VERDICT = 3
VERDICT_ORDER = {'reference': 0, 'better': 1, 'not separated': 2, 'worse': 4}
# The publication of the benchmark's protocol, cited with posenc itself.
STUDY = encodings.papers.RUOSS2023
# The figures' smallest text (points: the SVG's units). A figure is drawn 4.5 in (324 pt)
# wide and shown at most 432 px (its own size) wide, so 10 pt is >= 10 px down to a 324 px
# column: a 390 px phone less the margins of the standalone pages (366 px) or of the
# documentation's (340 px).
FIGURE_WIDTH = 4.5
LABEL = 10
TITLE = 11


class LeaderboardError(ValueError):
  """An output directory that holds something else (one line)."""


@dataclasses.dataclass(frozen=True)
class Links:
  """Where the pages' header points. `board` is the table's page relative to the
  leaderboard's root; the others are addresses (absolute, or relative to that root), None
  where the site has none to give.

  Attributes:
    board: the table's page ('index.html' standalone; '../leaderboard.html' in the docs).
    docs: the documentation's home page.
    benchmark: the page that says how the benchmark is run and read.
    repository: posenc's source repository.
  """

  board: str = 'index.html'
  docs: str | None = None
  benchmark: str | None = None
  repository: str | None = None


def default_links() -> Links:
  """The links a standalone build gets: the documentation and repository addresses the
  installed posenc declares (`[project.urls]`: Documentation, Repository), if any."""
  try:
    urls = importlib.metadata.metadata('posenc').get_all('Project-URL') or []
  except importlib.metadata.PackageNotFoundError:
    urls = []
  named = dict((k.strip().lower(), v.strip()) for k, _, v in (u.partition(',') for u in urls) if v)
  docs = named.get('documentation')
  return Links(
    docs=docs,
    benchmark=None if docs is None else docs.rstrip('/') + '/benchmark.html',
    repository=named.get('repository') or named.get('source'),
  )


def stamp(commit: str | None = None, date: str | None = None) -> dict[str, str | None]:
  """When and from what the site was written: {'date': UTC day, 'version': posenc's
  installed version, 'commit': the source commit the caller read (None: unknown)}."""
  try:
    version = importlib.metadata.version('posenc')
  except importlib.metadata.PackageNotFoundError:
    version = None
  today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
  return {'date': date or today, 'version': version, 'commit': commit}


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


def default_reference(board: Mapping[str, Any]) -> str:
  """The entry the verdicts are first shown against: the first candidate, else the
  best-ranked entry."""
  entries = board['entries']
  return next((e['name'] for e in entries if e['kind'] == 'candidate'), entries[0]['name'])


def entry_pages(board: Mapping[str, Any]) -> dict[str, str]:
  """{entry: its page, relative to the leaderboard's root}."""
  return {n: f'entries/{s}.html' for n, s in _slugs([e['name'] for e in board['entries']]).items()}


# ---------------------------------------------------------------------------------------
# What the table shows: one record per entry, read by the HTML, the CSV and the JSON alike.


def longest(row: Mapping[str, Any]) -> tuple[int | None, bool]:
  """(length, lower bound) a row's "longest generalized" is shown as: the lower median of
  the members' longest lengths, a length that was evaluated and that at least half of the
  members reach (the median of an even count may fall between two evaluated lengths);
  'lower bound' when a member at that length passed every evaluated length."""
  members = [m for m in row['member_scores'] if m.get('longest') is not None]
  if not members:
    return None, False
  members.sort(key=lambda m: m['longest'])
  value = int(members[(len(members) - 1) // 2]['longest'])
  return value, any(m['longest'] == value and m.get('longest_censored') for m in members)


def _pct(x: float | None) -> float | None:
  return None if x is None else 100 * float(x)


def task_record(t: Mapping[str, Any] | None, verdict: str) -> dict[str, Any] | None:
  """A task's cell group of an entry: rank, mean, sd and interval (%), success, longest
  length, the verdict against the page's reference."""
  if t is None:
    return None
  row = t['row']
  score = row['score']
  length, bound = longest(row)
  ci = None if score is None else score['mean_ci']
  success = row['success']
  return {
    'rank': t['rank'],
    'mean': None if score is None else _pct(score['mean']),
    'sd': None if score is None else _pct(score['sd']),
    'ci': None if ci is None else [_pct(ci[0]), _pct(ci[1])],
    'success_rate': _pct(success['rate']),
    'successes': success['successes'],
    'members': row['members'],
    'success_ci': None if success['ci'] is None else [_pct(x) for x in success['ci']],
    'longest': length,
    'longest_lower_bound': bound,
    'train_length': row['train_length'],
    'verdict': verdict,
    'text': {
      'mean': card_lib.mean_text(score),
      'score': _score_text(score),
      'success': card_lib.success_text(row),
      'longest': _longest_text(length, bound, row['train_length']),
    },
  }


def _score_text(score: Mapping[str, Any] | None) -> str:
  """'99.9 [98.9, 100.0]': the mean and its interval, without the sd (the compact view)."""
  if score is None:
    return 'all diverged'
  text = f'{100 * score["mean"]:.1f}'
  ci = score['mean_ci']
  return text if ci is None else f'{text} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]'


def _longest_text(length: int | None, bound: bool, train_length: int) -> str:
  if length is None:
    return '–'
  mark = '≥ ' if bound else ''
  return f'{mark}{length} ({mark}{length / train_length:.1f}×)'


def verdict_of(board: Mapping[str, Any], reference: str, name: str, task: str) -> str:
  """`name`'s verdict on `task` against `reference` (read from the reference's card)."""
  if name == reference:
    return 'reference'
  return board['verdicts'].get(reference, {}).get(name, {}).get(task, '–')


def table(board: Mapping[str, Any], reference: str) -> list[dict[str, Any]]:
  """One record per entry in mean-rank order: name, kind, mean rank, per task
  `task_record`; the page's table, leaderboard.csv and leaderboard.json are written from it."""
  tasks = list(board['suite']['tasks'])
  return [
    {
      'entry': e['name'],
      'kind': e['kind'],
      'mean_rank': e['mean_rank'],
      'tasks': {
        t: task_record(e['tasks'].get(t), verdict_of(board, reference, e['name'], t)) for t in tasks
      },
    }
    for e in board['entries']
  ]


def members(board: Mapping[str, Any]) -> list[dict[str, Any]]:
  """Every member's score of every entry and task (members.csv and members.json)."""
  out = []
  for e in board['entries']:
    for task, t in e['tasks'].items():
      for m in t['row']['member_scores']:
        out.append(
          {
            'entry': e['name'],
            'kind': e['kind'],
            'task': task,
            'seed': m.get('seed'),
            'data_seed': m.get('data_seed'),
            'score': _pct(m.get('score')),
            'longest': m.get('longest'),
            'longest_lower_bound': bool(m.get('longest_censored')),
            'success': m.get('success'),
          }
        )
  return out


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> bytes:
  buffer = io_lib.StringIO()
  writer = csv.writer(buffer, lineterminator='\n')
  writer.writerow(header)
  for row in rows:
    writer.writerow(['' if v is None else (f'{v:.6g}' if isinstance(v, float) else v) for v in row])
  return buffer.getvalue().encode()


TASK_COLUMNS = (
  'rank',
  'mean',
  'sd',
  'ci_low',
  'ci_high',
  'success_rate',
  'successes',
  'members',
  'success_ci_low',
  'success_ci_high',
  'longest',
  'longest_lower_bound',
  'verdict',
)


def _task_values(r: Mapping[str, Any] | None) -> list[Any]:
  if r is None:
    return [None] * len(TASK_COLUMNS)
  ci, sci = r['ci'] or [None, None], r['success_ci'] or [None, None]
  return [
    r['rank'],
    r['mean'],
    r['sd'],
    *ci,
    r['success_rate'],
    r['successes'],
    r['members'],
    *sci,
    r['longest'],
    r['longest_lower_bound'],
    r['verdict'],
  ]


def data_files(
  board: Mapping[str, Any],
  reference: str,
  cards: Mapping[str, str],
  pages: Mapping[str, str],
  site_stamp: Mapping[str, Any],
) -> dict[str, bytes]:
  """data/leaderboard.csv and .json (the table: percentages, integer lengths; the CSV's
  verdicts against `reference`, the JSON's against every reference), data/members.csv and
  .json (every member's score)."""
  rows = table(board, reference)
  tasks = list(board['suite']['tasks'])
  header = ['entry', 'kind', 'mean_rank'] + [f'{t}_{c}' for t in tasks for c in TASK_COLUMNS]
  board_csv = _csv(
    header,
    [
      [r['entry'], r['kind'], r['mean_rank']]
      + [v for t in tasks for v in _task_values(r['tasks'][t])]
      for r in rows
    ],
  )
  entries = []
  for r in rows:
    record = {k: v for k, v in r.items() if k != 'tasks'}
    record['tasks'] = {
      t: None if c is None else {k: v for k, v in c.items() if k != 'text'}
      for t, c in r['tasks'].items()
    }
    entries.append({**record, 'page': pages[r['entry']], 'card': cards[r['entry']]})
  board_json = {
    'kind': 'posenc leaderboard',
    'suite': board['suite'],
    'stamp': dict(site_stamp),
    'units': 'scores, intervals and success rates in %; lengths in tokens',
    'statistics': board['statistics'],
    'thresholds': board['thresholds'],
    'reference': reference,
    'entries': entries,
    # {reference: {entry: {task: verdict}}}: each reference's card against every other.
    'verdicts': board['verdicts'],
  }
  member_rows = members(board)
  member_columns = list(member_rows[0]) if member_rows else ['entry', 'task', 'score']
  return {
    'data/leaderboard.csv': board_csv,
    'data/leaderboard.json': (json.dumps(board_json, indent=1) + '\n').encode(),
    'data/members.csv': _csv(member_columns, [list(m.values()) for m in member_rows]),
    'data/members.json': (json.dumps(member_rows, indent=1) + '\n').encode(),
  }


# ---------------------------------------------------------------------------------------
# What each encoding is: read from the registry's record, so a page cannot drift from it.


def record_of(name: str) -> encodings.Encoding | None:
  """The registry's record of a built-in name (or a combination of two), else None: an
  encoding from outside posenc is not imported to draw a page."""
  if name in encodings.ENCODINGS:
    return encodings.ENCODINGS[name]
  if '+' in name and all(p in encodings.ENCODINGS for p in name.split('+')):
    try:
      return encodings.get(name)
    except ValueError:
      return None
  return None


def _valid_text(option: encodings.Option, defaults: Mapping[str, Any]) -> str:
  if option.valid is None:
    return 'any value'
  if isinstance(option.valid, tuple):
    return 'one of ' + ', '.join(repr(c) for c in option.valid)
  return option.must_be(defaults) if callable(option.must_be) else option.must_be


def options_rows(name: str, used: Mapping[str, Any]) -> list[dict[str, str]]:
  """The options of `name` as its record declares them: name, value in the run (`used`),
  default, meaning, valid values; for an encoding outside the registry, the options its run
  recorded."""
  record = record_of(name)
  if record is None:
    return [
      {'name': k, 'value': repr(v), 'default': '', 'doc': '', 'valid': ''}
      for k, v in sorted(used.items())
    ]
  taken = record.taken()
  defaults = {k: o.default for k, o in taken.items()}
  return [
    {
      'name': k,
      'value': repr(used[k]) if k in used else ('not set' if o.test else repr(o.default)),
      'default': repr(o.default),
      'doc': o.doc + (' (test time only)' if o.test else ''),
      'valid': _valid_text(o, defaults),
    }
    for k, o in taken.items()
  ]


def benchmark_bibtex(board: Mapping[str, Any], site_stamp: Mapping[str, Any]) -> str:
  """The benchmark's BibTeX: posenc at its version, with the suite."""
  s = board['suite']
  year = (site_stamp.get('date') or '')[:4] or 'n.d.'
  fields = [
    (
      'title',
      f'{{posenc}}: positional encodings and length generalization, benchmark suite '
      f'{s["name"]} (version {s["version"]})',
    ),
    ('author', '{posenc authors}'),
    ('year', year),
    ('version', str(site_stamp.get('version') or '')),
    (
      'note',
      'Leaderboard written '
      + (site_stamp.get('date') or '')
      + (f', commit {site_stamp["commit"]}' if site_stamp.get('commit') else ''),
    ),
  ]
  body = ',\n'.join(f'  {k} = {{{v}}}' for k, v in fields)
  return f'@software{{posenc_{slug(s["name"]).replace("-", "_")},\n{body}\n}}\n'


def references_bib(board: Mapping[str, Any], site_stamp: Mapping[str, Any]) -> str:
  """references.bib: the benchmark, the study whose protocol it follows, every entry's
  papers (each once)."""
  papers = {STUDY.key: STUDY}
  for e in board['entries']:
    record = record_of(e['name'])
    for p in () if record is None else record.papers:
      papers.setdefault(p.key, p)
  return benchmark_bibtex(board, site_stamp) + ''.join('\n' + p.bibtex() for p in papers.values())


# ---------------------------------------------------------------------------------------
# Figures: SVG, text as text, at least LABEL points.


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


# ---------------------------------------------------------------------------------------
# Pages.


def _e(text: Any) -> str:
  return html.escape(str(text))


def _href(root: str, path: str) -> str:
  """`path` (relative to the leaderboard's root) from a page `root` away from it; an
  absolute address unchanged."""
  return path if re.match(r'^[a-z]+:', path) else root + path


def header_html(links: Links, root: str, title: str) -> str:
  """The standalone pages' header: posenc's name and its links."""
  items = [
    ('Documentation', links.docs),
    ('Leaderboard', links.board),
    ('Benchmark', links.benchmark),
    ('Repository', links.repository),
  ]
  nav = ''.join(
    f'<li><a href="{_e(_href(root, target))}">{label}</a></li>' for label, target in items if target
  )
  return (
    '<header class="lb-header"><div class="lb-header-inner">'
    f'<a class="lb-brand" href="{_e(_href(root, links.docs or links.board))}">posenc</a>'
    f'<span class="lb-title">{_e(title)}</span>'
    f'<nav aria-label="posenc"><ul>{nav}</ul></nav></div></header>'
  )


def _page(title: str, body: str, links: Links, root: str = '') -> str:
  return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
{GENERATOR}
<title>{_e(title)} · posenc</title>
<link rel="stylesheet" href="{root}leaderboard.css">
</head>
<body class="lb-page">
{header_html(links, root, title)}
<main class="lb">
{body}
</main>
<script src="{root}leaderboard.js"></script>
</body>
</html>
"""


def redirect_page(target: str) -> str:
  """An index.html that sends the reader to the board's page elsewhere (the docs')."""
  return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{GENERATOR}
<meta http-equiv="refresh" content="0; url={_e(target)}">
<title>posenc leaderboard</title>
</head>
<body><p><a href="{_e(target)}">The leaderboard</a></p></body>
</html>
"""


# The columns the first view (all tasks) shows; the page's script switches views, and
# without it the reader has this one and the downloads.
OVERVIEW = ('entry', 'meanrank', 'score', 'verdict')


def _shown(col: str) -> str:
  return '' if col in OVERVIEW else ' hidden'


def _number(x: float | None) -> str:
  """A sort key as an attribute: '' (sorted last) for none."""
  return '' if x is None or not np.isfinite(x) else f'{x:.6g}'


def _sortable(label: str, key: str, first: str, col: str, task: str = '', sort: str = '') -> str:
  """A sortable header: `first` is the order of its first press (the best first)."""
  aria = f' aria-sort="{sort}"' if sort else ''
  where = f' data-task="{_e(task)}"' if task else ''
  return (
    f'<th scope="col" data-type="{key}" data-first="{first}" data-col="{col}"{where}{aria}'
    f'{_shown(col)}>'
    f'<button type="button">{label}</button></th>'
  )


def _verdict_cell(verdict: str, task: str) -> str:
  order = VERDICT_ORDER.get(verdict, OTHER_VERDICT) if verdict != '–' else ''
  return (
    f'<td class="verdict {slug(verdict)}" data-col="verdict" data-task="{_e(task)}" '
    f'data-sort="{order}">{_e(verdict)}</td>'
  )


def _cells(task: str, r: Mapping[str, Any] | None) -> str:
  where = f'data-task="{_e(task)}"'
  if r is None:
    return ''.join(
      f'<td data-col="{c}" {where} data-sort=""{_shown(c)}>–</td>'
      for c in ('score', 'rank', 'mean', 'success', 'longest')
    ) + _verdict_cell('–', task)
  length = '' if r['longest'] is None else r['longest']
  return (
    f'<td data-col="score" {where} data-sort="{_number(r["mean"])}">{_e(r["text"]["score"])}</td>'
    f'<td data-col="rank" {where} data-sort="{r["rank"]}" hidden>{r["rank"]}</td>'
    f'<td data-col="mean" {where} data-sort="{_number(r["mean"])}" hidden>'
    f'{_e(r["text"]["mean"])}</td>'
    f'<td data-col="success" {where} data-sort="{_number(r["success_rate"])}" hidden>'
    f'{_e(r["text"]["success"])}</td>'
    f'<td data-col="longest" {where} data-sort="{length}" hidden>'
    f'{_e(r["text"]["longest"])}</td>' + _verdict_cell(r['verdict'], task)
  )


def _rank_text(mean_rank: float | None) -> str:
  return '–' if mean_rank is None else f'{mean_rank:.2f}'


def _count(board: Mapping[str, Any], kind: str, what: str) -> str:
  n = sum(e['kind'] == kind for e in board['entries'])
  return f'{n} {what}{"" if n == 1 else "s"}'


def _stamp_text(site_stamp: Mapping[str, Any]) -> str:
  parts = [f'written {_e(site_stamp.get("date"))}']
  if site_stamp.get('version'):
    parts.append(f'posenc {_e(site_stamp["version"])}')
  if site_stamp.get('commit'):
    parts.append(f'commit <code>{_e(site_stamp["commit"])}</code>')
  return ', '.join(parts)


def _how_to_read(board: Mapping[str, Any]) -> str:
  st, th = board['statistics'], board['thresholds'] or {}
  members = sorted({e['tasks'][t]['row']['members'] for e in board['entries'] for t in e['tasks']})
  n = '–'.join(str(m) for m in (members[0], members[-1])) if len(members) > 1 else members[0]
  score = f'{100 * th["score"]:g}' if th else '90'
  length = f'{100 * th["length"]:g}' if th else '95'
  return f"""<aside class="lb-read" aria-labelledby="lb-read-title">
<h2 id="lb-read-title">How to read this</h2>
<ul>
<li><strong>Score</strong>: exact match (%) on test lengths past training, averaged over each
entry's {n} trained members (seeds × data orders); higher is better.</li>
<li><strong>[low, high]</strong> is a 95% interval for that mean: where the mean of many more
members would likely fall, widened for few members and for scores near 0 or 100.</li>
<li><strong>Better / worse</strong>: the entry's mean differs from the reference's by a
{_e(st['test'])}, Holm-corrected at family-wise error {st['alpha']:g}; "not separated": no
difference is established.</li>
<li><strong>Verdicts depend on the reference</strong>: each reference is tested against every
other entry as one family, so picking another reference changes the family and can change a
verdict.</li>
<li><strong>Success</strong>: members scoring ≥ {score}%; <strong>longest</strong>: the length
up to which at least half the members stay ≥ {length}% (≥: every tested length passed).</li>
</ul>
</aside>"""


def _legend(board: Mapping[str, Any]) -> str:
  present = {v for ref in board['verdicts'].values() for o in ref.values() for v in o.values()}
  extra = sorted(present - set(VERDICTS))
  items = [(v, m) for v, m in VERDICTS.items()] + [(v, 'see the benchmark page') for v in extra]
  return (
    '<dl class="lb-legend" aria-label="Verdicts">'
    + ''.join(
      f'<div><dt><span class="verdict {slug(v)}">{_e(v)}</span></dt><dd>{_e(m)}</dd></div>'
      for v, m in items
    )
    + '</dl>'
  )


def board_html(
  board: Mapping[str, Any],
  reference: str,
  links: Links,
  site_stamp: Mapping[str, Any],
  root: str = '',
) -> str:
  """The board: title, stamp, "how to read this", the view and reference pickers, the
  table, the legend, the downloads and a figure per task. Every path is written from a page
  `root` away from the leaderboard's root ('' standalone; 'leaderboard/' in the docs)."""
  s, st = board['suite'], board['statistics']
  tasks = list(s['tasks'])
  rows = table(board, reference)
  pages = entry_pages(board)
  head = _sortable('Entry', 'text', 'ascending', 'entry') + _sortable(
    'Mean rank', 'number', 'ascending', 'meanrank', sort='ascending'
  )
  for task in tasks:
    t = _e(task)
    head += (
      _sortable(f'{t} score [95% CI]', 'number', 'descending', 'score', task)
      + _sortable(f'{t} rank', 'number', 'ascending', 'rank', task)
      + _sortable(f'{t} mean ± sd [95% CI]', 'number', 'descending', 'mean', task)
      + _sortable(f'{t} success [95% CI]', 'number', 'descending', 'success', task)
      + _sortable(f'{t} longest generalized', 'number', 'descending', 'longest', task)
      + _sortable(f'{t} verdict vs reference', 'number', 'ascending', 'verdict', task)
    )
  body = []
  for r in rows:
    kind = ' <span class="kind">candidate</span>' if r['kind'] == 'candidate' else ''
    cells = ''.join(_cells(t, r['tasks'][t]) for t in tasks)
    body.append(
      f'<tr data-entry="{_e(r["entry"])}"><th scope="row" data-col="entry" '
      f'data-sort="{_e(r["entry"])}"><a href="{_e(root + pages[r["entry"]])}">'
      f'{_e(r["entry"])}</a>{kind}</th>'
      f'<td data-col="meanrank" data-sort="{_number(r["mean_rank"])}">'
      f'{_rank_text(r["mean_rank"])}</td>{cells}</tr>'
    )
  options = ''.join(
    f'<option value="{_e(e["name"])}"{" selected" if e["name"] == reference else ""}>'
    f'{_e(e["name"])}</option>'
    for e in board['entries']
  )
  views = ''.join(
    f'<label><input type="radio" name="lb-view" value="{_e(v)}"{" checked" if i == 0 else ""}>'
    f'{_e(label)}</label>'
    for i, (v, label) in enumerate(
      [('overview', 'All tasks'), *((t, t) for t in tasks), ('all', 'Every column')]
    )
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
    f'<figure><a href="{root}figures/task_{slug(t)}.svg"><img src="{root}figures/task_{slug(t)}.svg" '
    f'alt="Every entry\'s member scores on {_e(t)}, with means and 95% intervals"></a>'
    f'<figcaption>{_e(t)}: every member of every entry (points), the mean (|) and its 95% '
    'interval (line); the dotted line is the success threshold.</figcaption></figure>'
    for t in tasks
  )
  undecidable = (
    ''
    if board['decidable']
    else '<p class="note"><strong>No comparison can be separated:</strong> with so few members '
    'per cell the smallest p-value any comparison can reach is above Holm\'s first step, so '
    'every verdict is "not separated" whatever the scores; the ranks and intervals still say '
    'where each entry sits.</p>'
  )
  bench = (
    f' (<a href="{_e(_href(root, links.benchmark))}#the-leaderboard">how it is made</a>)'
    if links.benchmark
    else ''
  )
  return f"""<div class="lb">
<p class="lb-stamp">Suite {_e(s['name'])}, version {_e(s['version'])}: {_count(board, leaderboard_lib.BASELINE, 'stored baseline')} and {_count(board, leaderboard_lib.CANDIDATE, 'candidate')}; {_stamp_text(site_stamp)}.</p>
{old}<p>{_e(s['summary'])}</p>
{_how_to_read(board)}
{undecidable}
<div class="lb-controls">
<fieldset class="lb-views"><legend>Show</legend>{views}</fieldset>
<noscript><p class="note">Without JavaScript the table shows its overview; every column is in
<a href="{root}data/leaderboard.csv">leaderboard.csv</a> and on each entry's page.</p></noscript>
<p><label for="reference">Verdicts against</label>
<select id="reference">{options}</select></p>
<p class="lb-hint">Sort by a column's header: the first press puts the best first.</p>
</div>
<p class="lb-cue" hidden>⇆ This table scrolls sideways: more columns to the right.</p>
<div class="table-frame"><div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard table; it scrolls sideways when wider than the screen">
<table class="leaderboard">
<caption class="lb-sr">Leaderboard of {_e(s['name'])}: sort by a column with its header's button; the first press puts the best first.</caption>
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table>
</div></div>
{_legend(board)}
<script type="application/json" id="verdicts">{verdicts}</script>
<h2 id="downloads">Data and citation</h2>
<ul class="lb-downloads">
<li>The table: <a href="{root}data/leaderboard.csv" download>leaderboard.csv</a>, <a href="{root}data/leaderboard.json" download>leaderboard.json</a> (every reference's verdicts)</li>
<li>Every member's score: <a href="{root}data/members.csv" download>members.csv</a>, <a href="{root}data/members.json" download>members.json</a></li>
<li>Each entry's card.json: on its page (the entry's name in the table)</li>
<li>BibTeX of the benchmark, its study and every encoding's paper: <a href="{root}references.bib" download>references.bib</a></li>
</ul>
<pre class="lb-bibtex">{_e(benchmark_bibtex(board, site_stamp))}</pre>
<p>Cite the study whose protocol the suite follows too: {_e(STUDY.cite)}, <a href="{_e(STUDY.url)}">{_e(STUDY.title)}</a> ({_e(STUDY.venue)}).</p>
<h2 id="tasks">The tasks</h2>
<ul class="tasks">{reasons}</ul>
<p>Intervals: {_e(st['interval'])}; success: {_e(st['success_interval'])}{bench}.</p>
<h2 id="figures">Per task</h2>
{figures}
</div>"""


def index_html(
  board: Mapping[str, Any],
  reference: str,
  links: Links,
  site_stamp: Mapping[str, Any],
) -> str:
  """The standalone board page."""
  s = board['suite']
  title = f'Leaderboard of {s["name"]} (version {s["version"]})'
  body = f'<h1>{_e(title)}</h1>\n' + board_html(board, reference, links, site_stamp)
  return _page(title, body, links)


def _papers_html(record: encodings.Encoding | None, bib: str) -> str:
  if record is None or not record.papers:
    return '<p>No paper is recorded for it.</p>'
  items = ''.join(
    f'<li>{_e(p.cite)}: <a href="{_e(p.url)}">{_e(p.title)}</a> ({_e(p.venue)})</li>'
    for p in record.papers
  )
  bibtex = ''.join(p.bibtex() + '\n' for p in record.papers).strip()
  return (
    f'<ul>{items}</ul><p>BibTeX (<a href="{bib}" download>download</a>):</p>'
    f'<pre class="lb-bibtex">{_e(bibtex)}</pre>'
  )


def entry_html(
  board: Mapping[str, Any],
  entry: Mapping[str, Any],
  figure: str,
  card: str,
  bib: str | None,
  reference: str,
  links: Links,
  site_stamp: Mapping[str, Any],
) -> str:
  """An entry's page (in entries/): what the encoding is, its papers and options, its
  scores per task, its curves (`figure`), its card (`card`) and the environment of its run;
  paths relative to the page."""
  s, run, name = board['suite'], entry['run'], entry['name']
  record = record_of(name)
  rows = ''.join(
    f'<tr><th scope="row">{_e(task)}</th><td>{r["rank"]} of {len(board["entries"])}</td>'
    f'<td>{_e(r["text"]["mean"])}</td><td>{_e(r["text"]["success"])}</td>'
    f'<td>{_e(r["text"]["longest"])}</td>'
    f'<td class="verdict {slug(r["verdict"])}">{_e(r["verdict"])}</td></tr>'
    for task, r in (
      (t, task_record(entry['tasks'][t], verdict_of(board, reference, name, t)))
      for t in entry['tasks']
    )
  )
  options = options_rows(name, entry.get('options') or {})
  # A list, not a table: an option's meaning reads whole at any width.
  option_items = ''.join(
    f'<div><dt><code>{_e(o["name"])}</code> = <code>{_e(o["value"])}</code> in this run</dt>'
    + (f'<dd>{_e(o["doc"])}.</dd>' if o['doc'] else '')
    + (
      f'<dd>Default <code>{_e(o["default"])}</code>; valid: {_e(o["valid"])}.</dd>'
      if o['default']
      else ''
    )
    + '</div>'
    for o in options
  )
  options_html = (
    f'<dl class="lb-options">{option_items}</dl>'
    '<p>Set one with <code>--config.encoding_options.NAME=VALUE</code>.</p>'
    if options
    else '<p>It takes no options.</p>'
  )
  about = (
    _e(record.about)
    if record is not None
    else f'An encoding from outside posenc\'s registry, named <code>{_e(name)}</code> by its card.'
  )
  packages = ', '.join(f'{_e(k)} {_e(v)}' for k, v in (run.get('packages') or {}).items())
  machine = run.get('machine') or {}
  seconds = run.get('seconds')
  kind = 'a stored baseline' if entry['kind'] == leaderboard_lib.BASELINE else 'a candidate'
  back = _href('../', links.board)
  body = f"""<p><a href="{_e(back)}">← The leaderboard of {_e(s['name'])}</a></p>
<h1>{_e(name)}</h1>
<p class="lb-stamp">{kind.capitalize()} on suite {_e(s['name'])} (version {_e(s['version'])}), mean rank {_rank_text(entry['mean_rank'])} among {len(board['entries'])} entries; verdicts against {_e(reference)}.</p>
<h2 id="what-it-is">What it is</h2>
<p>{about}</p>
<h2 id="papers">Paper</h2>
{_papers_html(record, bib) if bib else _papers_html(None, '')}
<h2 id="options">Options</h2>
{options_html}
<h2 id="scores">Scores</h2>
<div class="table-wrap" tabindex="0" role="region" aria-label="Scores per task">
<table class="lb-scores">
<thead><tr><th scope="col">Task</th><th scope="col">Rank</th><th scope="col">Mean ± sd [95% CI]</th>
<th scope="col">Success [95% CI]</th><th scope="col">Longest generalized</th><th scope="col">Verdict vs {_e(reference)}</th></tr></thead>
<tbody>{rows}</tbody>
</table>
</div>
<p>Its card: <a href="{card}" download>card.json</a> (every comparison with this entry as the
reference, its p-values, intervals and statistics); every member's score:
<a href="../data/members.csv" download>members.csv</a>.</p>
<figure><a href="{figure}"><img src="{figure}" alt="{_e(name)}'s mean score by test
length on each task, over every other entry's in grey"></a><figcaption>Mean over the members
by test length; the dotted line is the longest training length.</figcaption></figure>
<h2 id="environment">Environment of its run</h2>
<dl>
<dt>Command</dt><dd><code>{_e(' '.join(run.get('command') or []))}</code></dd>
<dt>posenc</dt><dd>{_e(run.get('posenc_version'))}</dd>
<dt>Packages</dt><dd>{packages}</dd>
<dt>Machine</dt><dd>{_e(machine.get('system'))} {_e(machine.get('machine'))}, {_e(machine.get('cpus'))} CPUs, Python {_e(machine.get('python'))}</dd>
<dt>Time</dt><dd>{'–' if seconds is None else f'{seconds / 60:.1f} min'}</dd>
</dl>
<p class="lb-stamp">Page {_stamp_text(site_stamp)}.</p>
"""
  return _page(f'{name} on {s["name"]}', body, links, root='../')


def _card_json(card: Mapping[str, Any]) -> bytes:
  # As `card.card_files` writes card.json.
  return (json.dumps(card, indent=1) + '\n').encode()


def files(
  board: Mapping[str, Any],
  reference: str | None = None,
  links: Links | None = None,
  site_stamp: Mapping[str, Any] | None = None,
  standalone: bool = True,
) -> dict[str, bytes]:
  """{relative path: bytes} of the site; verdicts shown first against `reference` (default:
  the first candidate, else the best-ranked entry). `standalone=False` writes index.html as
  a pointer to `links.board` (the docs' page that holds the board)."""
  entries = board['entries']
  if not entries:
    raise LeaderboardError('a leaderboard needs an entry: the suite stores no baselines')
  links = links or default_links()
  site_stamp = site_stamp or stamp()
  names = [e['name'] for e in entries]
  if reference is None:
    reference = default_reference(board)
  slugs = _slugs(names)
  pages = entry_pages(board)
  cards = {name: f'cards/{slugs[name]}.json' for name in names}
  out = {
    'index.html': (
      index_html(board, reference, links, site_stamp) if standalone else redirect_page(links.board)
    ).encode()
  }
  for e in entries:
    figure = f'figures/entry_{slugs[e["name"]]}.svg'
    record = record_of(e['name'])
    bib = None
    if record is not None and record.papers:
      bib = f'bib/{slugs[e["name"]]}.bib'
      out[bib] = ''.join(p.bibtex() + '\n' for p in record.papers).encode()
    out[pages[e['name']]] = entry_html(
      board,
      e,
      f'../{figure}',
      f'../{cards[e["name"]]}',
      None if bib is None else f'../{bib}',
      reference,
      links,
      site_stamp,
    ).encode()
    out[figure] = plots.svg(entry_figure(board, e['name']))
    out[cards[e['name']]] = _card_json(board['cards'][e['name']])
  for task in board['suite']['tasks']:
    out[f'figures/task_{slug(task)}.svg'] = plots.svg(task_figure(board, task))
  out.update(data_files(board, reference, cards, pages, site_stamp))
  out['references.bib'] = references_bib(board, site_stamp).encode()
  static = importlib.resources.files(__package__) / 'static'
  for name in STATIC:
    out[name] = (static / name).read_bytes()
  return out


# ---------------------------------------------------------------------------------------
# Writing it.


def is_leaderboard(directory: str) -> bool:
  """Whether `directory` holds a site this module wrote (its index.html says so)."""
  try:
    with open(os.path.join(directory, 'index.html'), errors='replace') as f:
      return GENERATOR in f.read(4096)
  except OSError:
    return False


def write(directory: str, site: Mapping[str, bytes]) -> None:
  """Writes `site` into `directory` whole or not at all: into a temporary directory beside
  it, then renamed into place. `directory` may be missing, empty or a previous leaderboard
  (replaced); one that holds anything else raises LeaderboardError. OSError (an unwritable
  place, a full disk) leaves `directory` as it was."""
  directory = os.path.abspath(directory)
  if os.path.exists(directory):
    if not os.path.isdir(directory):
      raise LeaderboardError(f'{directory} is a file, not a directory')
    held = sorted(os.listdir(directory))
    if held and not is_leaderboard(directory):
      raise LeaderboardError(
        f'{directory} holds other files ({", ".join(held[:3])}{", ..." if len(held) > 3 else ""})'
        ' and no leaderboard; give a new or empty directory, or a previous leaderboard\'s'
      )
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
