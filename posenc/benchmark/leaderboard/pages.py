"""The leaderboard's HTML: the standalone pages' header and frame, the board (its table,
views and pickers, "how to read this", the downloads, the figures), an entry's page and the
pointer a documentation build leaves at index.html. Paths are written from a page `root`
away from the leaderboard's root.

Example:
  >>> header_html(Links(docs='..'), '', 'Leaderboard').count('<li>')
  4
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from typing import Any, Mapping, Sequence

import numpy as np

from posenc import encodings
from posenc.benchmark import leaderboard as leaderboard_lib
from posenc.benchmark.leaderboard import data

# What marks a directory as a leaderboard this package wrote (one it may replace).
GENERATOR = '<meta name="generator" content="posenc leaderboard">'


@dataclasses.dataclass(frozen=True)
class Links:
  """Where the pages point. `board` is the table's page relative to the leaderboard's root;
  `docs` is the documentation site's root (absolute, or relative to the leaderboard's root:
  '..' when the board is its `leaderboard/` folder, as the documentation build writes it),
  the pages of which the board links by name (`doc`); None where there is none to give.

  Attributes:
    board: the table's page ('index.html' standalone; '../leaderboard.html' in the docs).
    docs: the documentation site's root.
    home: posenc's home page (default: the documentation's).
    repository: posenc's source repository.

  Example:
    >>> Links(docs='..').doc('submit.html')
    '../submit.html'
  """

  board: str = 'index.html'
  docs: str | None = None
  home: str | None = None
  repository: str | None = None

  def doc(self, page: str) -> str | None:
    """A page of the documentation ('benchmark.html', 'api/encodings.html#...')."""
    return None if self.docs is None else f'{self.docs.rstrip("/")}/{page}'


# The documentation's pages the board links: what posenc is, how the benchmark is made and
# read, how a card joins the board, and the API reference of the encodings (an entry of the
# registry at #encoding-NAME, written by docs/_ext/posenc_site.py).
DOC_HOME, DOC_BENCHMARK, DOC_SUBMIT, DOC_API = (
  'index.html',
  'benchmark.html',
  'submit.html',
  'api/encodings.html',
)
API_ANCHOR = 'encoding-{}'
ABOUT = (
  'posenc is a JAX/Flax framework for studying how positional encodings decide whether a '
  'transformer generalizes to sequences longer than it was trained on.'
)


def _e(text: Any) -> str:
  return html.escape(str(text))


def _href(root: str, path: str) -> str:
  """`path` (relative to the leaderboard's root) from a page `root` away from it; an
  absolute address unchanged."""
  return path if re.match(r'^[a-z]+:|^/', path) else root + path


def header_html(links: Links, root: str, title: str) -> str:
  """The standalone pages' header: posenc's name (its home) and its links."""
  items = [
    ('Documentation', links.doc(DOC_HOME)),
    ('Benchmark', links.doc(DOC_BENCHMARK)),
    ('Submit your encoding', links.doc(DOC_SUBMIT)),
    ('Leaderboard', links.board),
    ('Repository', links.repository),
  ]
  nav = ''.join(
    f'<li><a href="{_e(_href(root, target))}">{label}</a></li>' for label, target in items if target
  )
  home = links.home or links.doc(DOC_HOME) or links.board
  return (
    '<header class="lb-header"><div class="lb-header-inner">'
    f'<a class="lb-brand" href="{_e(_href(root, home))}">posenc</a>'
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
  """A sortable header (`label` is HTML): `first` is the order of its first press (the best
  first)."""
  aria = f' aria-sort="{sort}"' if sort else ''
  where = f' data-task="{_e(task)}"' if task else ''
  return (
    f'<th scope="col" data-type="{key}" data-first="{first}" data-col="{col}"{where}{aria}'
    f'{_shown(col)}>'
    f'<button type="button">{label}</button></th>'
  )


def _verdict_cell(verdict: str, task: str) -> str:
  order = data.VERDICT_ORDER.get(verdict, data.OTHER_VERDICT) if verdict != '–' else ''
  return (
    f'<td class="verdict {data.slug(verdict)}" data-col="verdict" data-task="{_e(task)}" '
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
    f'<td data-col="score" {where} data-sort="{_number(r["mean"])}">{_score_html(r["text"]["score"])}</td>'
    f'<td data-col="rank" {where} data-sort="{r["rank"]}" hidden>{r["rank"]}</td>'
    f'<td data-col="mean" {where} data-sort="{_number(r["mean"])}" hidden>'
    f'{_e(r["text"]["mean"])}</td>'
    f'<td data-col="success" {where} data-sort="{_number(r["success_rate"])}" hidden>'
    f'{_e(r["text"]["success"])}</td>'
    f'<td data-col="longest" {where} data-sort="{length}" hidden>'
    f'{_e(r["text"]["longest"])}</td>' + _verdict_cell(r['verdict'], task)
  )


def _score_html(text: str) -> str:
  """'97.9 [86.5, 99.4]' with its interval in a span of its own (a phone shows it under the
  mean, smaller)."""
  mean, space, interval = text.partition(' ')
  return _e(mean) + (f' <span class="lb-ci">{_e(interval)}</span>' if space else '')


def _name_html(name: str) -> str:
  """An entry's name that may break after its underscores on a phone."""
  return _e(name).replace('_', '_<wbr>')


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
  extra = sorted(present - set(data.VERDICTS) - {'–'})
  items = [*data.VERDICTS.items()] + [
    (v, data.MORE_VERDICTS.get(v, 'see the benchmark page')) for v in extra
  ]
  return (
    '<dl class="lb-legend" aria-label="Verdicts">'
    + ''.join(
      f'<div><dt><span class="verdict {data.slug(v)}">{_e(v)}</span></dt><dd>{_e(m)}</dd></div>'
      for v, m in items
    )
    + '</dl>'
  )


def _views(tasks: Sequence[str]) -> list[tuple[str, str]]:
  """The table's views (value, label): every task's score and verdict, one task's every
  column, every column."""
  return [
    ('overview', 'All tasks'),
    *((t, t) for t in tasks),
    ('all', 'Every column'),
  ]


def _select(id_: str, items: Sequence[tuple[str, str]], chosen: str) -> str:
  """A picker of `items` ((value, label)), `chosen` selected."""
  options = ''.join(
    f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(label)}</option>'
    for v, label in items
  )
  return f'<select id="{id_}">{options}</select>'


def _go_html(links: Links, root: str) -> str:
  """Where a visitor goes next: how the benchmark works, how to submit, how to read it."""
  go = [
    (label, target)
    for label, target in (
      ('How the benchmark works', links.doc(DOC_BENCHMARK)),
      ('Submit your encoding →', links.doc(DOC_SUBMIT)),
    )
    if target
  ]
  return (
    '<p class="lb-go">'
    + ''.join(f'<a href="{_e(_href(root, t))}">{_e(label)}</a> · ' for label, t in go)
    + '<a href="#lb-read-title">How to read the table</a></p>'
  )


def board_html(
  board: Mapping[str, Any],
  reference: str,
  links: Links,
  site_stamp: Mapping[str, Any],
  root: str = '',
) -> str:
  """The board: what the suite measures and where to go next, the view and reference
  pickers, the table, the legend, "how to read this", the stamp, the downloads and a figure
  per task. Every path is written from a page `root` away from the leaderboard's root (''
  standalone; 'leaderboard/' in the docs).

  The picked view, sort and reference are kept in the address's fragment
  (`#view=flip_flop&sort=score:flip_flop&order=descending&reference=alibi`) by the page's
  script, which restores them on load; a fragment it does not understand is named in one
  line above the table and otherwise ignored."""
  s = board['suite']
  tasks = list(s['tasks'])
  head, body = _table(board, reference, tasks, root)

  views = _select('lb-view', _views(tasks), 'overview')
  options = _select('reference', [(e['name'], e['name']) for e in board['entries']], reference)
  verdicts = json.dumps(board['verdicts'], sort_keys=True).replace('</', '<\\/')
  old = (
    f'<p class="note"><strong>An old version of the benchmark:</strong> {_e(s["name"])} is '
    f'superseded by {_e(s["superseded_by"])}.</p>'
    if s.get('superseded_by')
    else ''
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
    f' (<a href="{_e(_href(root, links.doc(DOC_BENCHMARK)))}#the-leaderboard">how it is made</a>)'
    if links.docs
    else ''
  )
  return f"""<div class="lb">
{old}<p class="lb-lead">{_e(s['summary'])}</p>
{_go_html(links, root)}
{undecidable}
<div class="lb-controls">
<p><label for="lb-view">Show</label>{views}</p>
<p><label for="reference">Verdicts against</label>{options}</p>
<noscript><p class="note">Without JavaScript the table shows its overview; every column is in
<a href="{root}data/leaderboard.csv">leaderboard.csv</a> and on each entry's page.</p></noscript>
</div>
<p class="lb-hint">Sort by a column's header: the first press puts the best first.</p>
<p class="note lb-fragment" role="status" hidden></p>
<p class="lb-cue" hidden>⇆ This table scrolls sideways: more columns to the right.</p>
<div class="table-frame"><div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard table; it scrolls sideways when wider than the screen">
<table class="leaderboard" data-reference="{_e(reference)}">
<caption class="lb-sr">Leaderboard of {_e(s['name'])}: sort by a column with its header's button; the first press puts the best first.</caption>
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table>
</div></div>
{_legend(board)}
{_how_to_read(board)}
<p class="lb-stamp">Suite {_e(s['name'])}, version {_e(s['version'])}: {_count(board, leaderboard_lib.BASELINE, 'stored baseline')} and {_count(board, leaderboard_lib.CANDIDATE, 'candidate')}; {_stamp_text(site_stamp)}.</p>
<script type="application/json" id="verdicts">{verdicts}</script>
{_downloads_and_tasks(board, site_stamp, root, bench, links)}</div>"""


def _table(
  board: Mapping[str, Any], reference: str, tasks: Sequence[str], root: str
) -> tuple[str, list[str]]:
  """The board table's header cells and its rows, a row per entry (its page `root` away)."""
  rows = data.table(board, reference)
  pages = data.entry_pages(board)
  head = _sortable('Entry', 'text', 'ascending', 'entry') + _sortable(
    'Mean rank', 'number', 'ascending', 'meanrank', sort='ascending'
  )
  for task in tasks:
    # The task's name on a line of its own; a phone leaves out the brackets' part.
    t = f'<span class="lb-task">{_e(task)}</span> '
    head += (
      _sortable(
        f'{t}score<span class="lb-more"> [95% CI]</span>', 'number', 'descending', 'score', task
      )
      + _sortable(f'{t}rank', 'number', 'ascending', 'rank', task)
      + _sortable(
        f'{t}mean ± sd<span class="lb-more"> [95% CI]</span>', 'number', 'descending', 'mean', task
      )
      + _sortable(
        f'{t}success<span class="lb-more"> [95% CI]</span>', 'number', 'descending', 'success', task
      )
      + _sortable(f'{t}longest generalized', 'number', 'descending', 'longest', task)
      + _sortable(
        f'{t}verdict<span class="lb-more"> vs reference</span>',
        'number',
        'ascending',
        'verdict',
        task,
      )
    )
  body = []
  for r in rows:
    kind = ' <span class="kind">candidate</span>' if r['kind'] == 'candidate' else ''
    cells = ''.join(_cells(t, r['tasks'][t]) for t in tasks)
    body.append(
      f'<tr data-entry="{_e(r["entry"])}"><th scope="row" data-col="entry" '
      f'data-sort="{_e(r["entry"])}"><a href="{_e(root + pages[r["entry"]])}">'
      f'{_name_html(r["entry"])}</a>{kind}</th>'
      f'<td data-col="meanrank" data-sort="{_number(r["mean_rank"])}">'
      f'{_rank_text(r["mean_rank"])}</td>{cells}</tr>'
    )
  return head, body


def cite_address(links: Links) -> str | None:
  """The documentation's address a citation can give: its home page if absolute, else None
  (a relative one means nothing outside this copy)."""
  home = links.doc(DOC_HOME)
  return home if home and re.match(r'^[a-z]+://', home) else None


def _downloads_and_tasks(
  board: Mapping[str, Any], site_stamp: Mapping[str, Any], root: str, bench: str, links: Links
) -> str:
  """The board's end: its data files and citation, the tasks and why, a figure per task."""
  s, st = board['suite'], board['statistics']
  tasks = list(s['tasks'])
  reasons = ''.join(f'<li><strong>{_e(t)}</strong>: {_e(r)}</li>' for t, r in s['tasks'].items())
  figures = ''.join(
    f'<figure><a href="{root}figures/task_{data.slug(t)}.svg"><img src="{root}figures/task_{data.slug(t)}.svg" '
    f'alt="Every entry\'s member scores on {_e(t)}, with means and 95% intervals"></a>'
    f'<figcaption>{_e(t)}: every member of every entry (points), the mean (|) and its 95% '
    'interval (line); the dotted line is the success threshold.</figcaption></figure>'
    for t in tasks
  )
  return f"""<h2 id="downloads">Data and citation</h2>
<ul class="lb-downloads">
<li>The table: <a href="{root}data/leaderboard.csv" download>leaderboard.csv</a>, <a href="{root}data/leaderboard.json" download>leaderboard.json</a> (every reference's verdicts)</li>
<li>Every member's score: <a href="{root}data/members.csv" download>members.csv</a>, <a href="{root}data/members.json" download>members.json</a></li>
<li>Each entry's card.json: on its page (the entry's name in the table)</li>
<li>BibTeX of the benchmark, its study and every encoding's paper: <a href="{root}references.bib" download>references.bib</a></li>
</ul>
<pre class="lb-bibtex">{_e(data.benchmark_bibtex(board, site_stamp, cite_address(links)))}</pre>
<p>Cite the study whose protocol the suite follows too: {_e(data.STUDY.cite)}, <a href="{_e(data.STUDY.url)}">{_e(data.STUDY.title)}</a> ({_e(data.STUDY.venue)}).</p>
<h2 id="tasks">The tasks</h2>
<ul class="tasks">{reasons}</ul>
<p>Intervals: {_e(st['interval'])}; success: {_e(st['success_interval'])}{bench}.</p>
<h2 id="figures">Per task</h2>
{figures}
"""


def index_html(
  board: Mapping[str, Any],
  reference: str,
  links: Links,
  site_stamp: Mapping[str, Any],
) -> str:
  """The standalone board page: its first screen says what posenc is, what the suite
  measures and where to go next (the documentation, the benchmark, how to submit), then the
  table."""
  s = board['suite']
  title = f'Leaderboard of {s["name"]} (version {s["version"]})'
  docs = links.doc(DOC_HOME)
  # The brand's word links the documentation, where there is one.
  about = _e(ABOUT).replace('posenc', f'<a href="{_e(docs)}">posenc</a>', 1) if docs else _e(ABOUT)
  body = (
    f'<h1>{_e(title)}</h1>\n<p class="lb-about">{about} This board ranks encodings on its '
    f'benchmark suite {_e(s["name"])}:</p>\n' + board_html(board, reference, links, site_stamp)
  )
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
  s, name = board['suite'], entry['name']
  record = data.record_of(name)
  rows = ''.join(
    f'<tr><th scope="row">{_e(task)}</th><td>{r["rank"]} of {len(board["entries"])}</td>'
    f'<td>{_e(r["text"]["mean"])}</td><td>{_e(r["text"]["success"])}</td>'
    f'<td>{_e(r["text"]["longest"])}</td>'
    f'<td class="verdict {data.slug(r["verdict"])}">{_e(r["verdict"])}</td></tr>'
    for task, r in (
      (t, data.task_record(entry['tasks'][t], data.verdict_of(board, reference, name, t)))
      for t in entry['tasks']
    )
  )
  about = (
    _e(record.about)
    if record is not None
    else f'An encoding from outside posenc\'s registry, named <code>{_e(name)}</code> by its card.'
  )
  api = links.doc(f'{DOC_API}#{API_ANCHOR.format(name)}')
  code = data.implementation(name)
  if api and name in encodings.ENCODINGS:
    math = f'<code>{_e(code)}</code>' if code else 'no function: attention sees content only'
    about += (
      f'</p><p>Its implementation: {math} (<a href="{_e(_href("../", api))}">'
      f'<code>{_e(name)}</code> in the API reference</a>).'
    )
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
{_options_html(name, entry.get('options') or {})}
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
{_environment_html(entry['run'])}<p class="lb-stamp">Page {_stamp_text(site_stamp)}.</p>
"""
  return _page(f'{name} on {s["name"]}', body, links, root='../')


def _options_html(name: str, given: Mapping[str, Any]) -> str:
  """An entry's encoding options: each with its value in the run, meaning, default and
  valid values."""
  options = data.options_rows(name, given)
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
  return (
    f'<dl class="lb-options">{option_items}</dl>'
    '<p>Set one with <code>--config.encoding_options.NAME=VALUE</code>.</p>'
    if options
    else '<p>It takes no options.</p>'
  )


def _environment_html(run: Mapping[str, Any]) -> str:
  """The command, versions, machine and time of an entry's run."""
  packages = ', '.join(f'{_e(k)} {_e(v)}' for k, v in (run.get('packages') or {}).items())
  machine = run.get('machine') or {}
  seconds = run.get('seconds')
  return f"""<dl>
<dt>Command</dt><dd><code>{_e(' '.join(run.get('command') or []))}</code></dd>
<dt>posenc</dt><dd>{_e(run.get('posenc_version'))}</dd>
<dt>Packages</dt><dd>{packages}</dd>
<dt>Machine</dt><dd>{_e(machine.get('system'))} {_e(machine.get('machine'))}, {_e(machine.get('cpus'))} CPUs, Python {_e(machine.get('python'))}</dd>
<dt>Time</dt><dd>{'–' if seconds is None else f'{seconds / 60:.1f} min'}</dd>
</dl>
"""
