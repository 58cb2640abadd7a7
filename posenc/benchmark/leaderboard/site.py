"""The leaderboard as a static site: the board (the suite, a "how to read this" box, one
sortable table seen whole or one task at a time, a figure per task, the downloads), a page
per entry (what the encoding is, its paper and BibTeX, its options, its scores and curves,
the environment of its run), the data (CSV and JSON of the table and of every member, each
entry's card.json, references.bib), SVG figures and one stylesheet and one script: `files`
makes it, `write` writes it whole or not at all.

The pages need no server and no network: they open from the disk (file://) as from any
static host. The table is a plain `<table>` (a screen reader reads it); each sortable
column's header holds a `<button>` (Tab to it, Enter or Space sorts; the first press puts
the best first; `aria-sort` says the order); the reader picks the view (every task, or one)
and the reference encoding the verdicts are against. Without JavaScript the table shows its
overview in mean-rank order against the default reference. The same board is written
standalone (`index.html`, by `launch.benchmark --leaderboard`) and into the documentation
site (`pages.board_html`: the docs' leaderboard page holds it, its files under
`leaderboard/`). What the table shows is `data`, the figures `figures`, the HTML `pages`.

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark
  >>> from posenc.benchmark import leaderboard
  >>> suite = benchmarks.get('tiny')
  >>> pages = files(leaderboard.leaderboard(suite, benchmark.read_baselines(suite)))
  >>> sorted(p for p in pages if p.startswith('entries/'))
  ['entries/none.html', 'entries/rotary.html']
  >>> sorted(p for p in pages if p.startswith('data/'))
  ['data/leaderboard.csv', 'data/leaderboard.json', 'data/members.csv', 'data/members.json']
  >>> write('runs/leaderboard_tiny', pages)        # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.resources
import json
import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from posenc.storage import io
from posenc.sections import plots
from posenc.storage import store
from posenc.benchmark.leaderboard import data
from posenc.benchmark.leaderboard import figures
from posenc.benchmark.leaderboard import pages as pages_lib
from posenc.benchmark.leaderboard.pages import GENERATOR, Links

STATIC = ('leaderboard.css', 'leaderboard.js')


class LeaderboardError(ValueError):
  """An output directory that holds something else (one line)."""


# Where a standalone board's links go by default: the documentation site whose
# `leaderboard/` folder it is (the documentation build writes the board there; a hosted copy
# put beside the docs the same way links them unchanged).
DOCS = '..'


def default_links(docs: str | None = None, home: str | None = None) -> Links:
  """The links of a standalone board: `docs` (the documentation site's root: given, else
  the Documentation address the installed posenc declares in `[project.urls]`, else DOCS),
  `home` (default: the documentation's home) and the declared repository, if any."""
  try:
    urls = importlib.metadata.metadata('posenc').get_all('Project-URL') or []
  except importlib.metadata.PackageNotFoundError:
    urls = []
  named = dict((k.strip().lower(), v.strip()) for k, _, v in (u.partition(',') for u in urls) if v)
  return Links(
    docs=docs or named.get('documentation') or DOCS,
    home=home or named.get('homepage'),
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
    reference = data.default_reference(board)
  slugs = data.slugs(names)
  pages = data.entry_pages(board)
  cards = {name: f'cards/{slugs[name]}.json' for name in names}
  out = {
    'index.html': (
      pages_lib.index_html(board, reference, links, site_stamp)
      if standalone
      else pages_lib.redirect_page(links.board)
    ).encode()
  }
  for e in entries:
    figure = f'figures/entry_{slugs[e["name"]]}.svg'
    record = data.record_of(e['name'])
    bib = None
    if record is not None and record.papers:
      bib = f'bib/{slugs[e["name"]]}.bib'
      out[bib] = ''.join(p.bibtex() + '\n' for p in record.papers).encode()
    out[pages[e['name']]] = pages_lib.entry_html(
      board,
      e,
      f'../{figure}',
      f'../{cards[e["name"]]}',
      None if bib is None else f'../{bib}',
      reference,
      links,
      site_stamp,
    ).encode()
    out[figure] = plots.svg(figures.entry_figure(board, e['name']))
    out[cards[e['name']]] = _card_json(board['cards'][e['name']])
  for task in board['suite']['tasks']:
    out[f'figures/task_{data.slug(task)}.svg'] = plots.svg(figures.task_figure(board, task))
  out.update(data.data_files(board, reference, cards, pages, site_stamp))
  out['references.bib'] = data.references_bib(
    board, site_stamp, pages_lib.cite_address(links)
  ).encode()
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
    for path, content in site.items():
      os.makedirs(os.path.dirname(os.path.join(staging, path)), exist_ok=True)
      with open(os.path.join(staging, path), 'wb') as f:
        f.write(content)
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
