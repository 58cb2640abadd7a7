"""What posenc's site generates at build time, so that no generated file is kept in git:

- the `launcher-help` directive: a launcher's `--help` (its docstring and its own flags, as
  `python -m launch.NAME --help` prints them), every launcher's read by one process;
- the cpu-v2 leaderboard: the `leaderboard` directive puts the board (`pages.board_html`)
  into the Leaderboard page, and its entry pages, figures, data and BibTeX are written into
  the built site's `leaderboard/` by `posenc.benchmark.leaderboard.site` (the pages
  `launch.benchmark --leaderboard` writes, their header linking back into this site);
- search with snippets from the built files opened from the disk: Sphinx's search page
  fetches each result's page for its snippet, which a browser refuses for file:// addresses;
  `_static/posenc-search-pages.js` holds every page's main text and `_static/posenc-search.js`
  answers those fetches from it;
- links of the markdown pages to repository files that are pages of the site too (the
  README is the home page, each suite's baselines.md a page under baselines/), pointed at
  those pages; a link that reads as a file name (`[docs/gpu.md](docs/gpu.md)`, as the
  README must on GitHub) reads as its page's title on the site.
"""

from __future__ import annotations

import importlib
import json
import os
import posixpath
import re
import subprocess
import sys
import urllib.parse

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHERS = (
  'train',
  'sweep',
  'report',
  'analyze',
  'benchmark',
  'check_encoding',
  'check_card',
  'export_eval_set',
  'speed',
)
LEADERBOARD_SUITE = 'cpu-v2'
# A repository file's link -> the page of the site that shows it.
LINKS = (
  (re.compile(r'\]\(\.\./README\.md'), '](index.md'),
  (re.compile(r'\]\(\.\./experiments/benchmarks/([\w-]+)/baselines\.md'), r'](baselines/\1.md'),
)


def launcher_helps() -> dict[str, str]:
  """{launcher: its --help}: each launcher imported in turn, its flags read as `launch.cli`
  prints them and then removed, so that the next may define flags of the same names (two
  launchers never run in one process otherwise)."""
  from absl import flags

  out = {}
  for name in LAUNCHERS:
    module = importlib.import_module(f'launch.{name}')
    own = flags.FLAGS.get_flags_for_module(module)
    text = flags.FLAGS.module_help(module) if own else ''
    out[name] = module.__doc__.strip() + ('\n\nflags:\n' + text if text else '')
    for flag in own:
      delattr(flags.FLAGS, flag.name)
  return out


def _helps(app) -> None:
  # A process of its own: the launchers' flags stay out of Sphinx's, and the import is paid
  # once.
  proc = subprocess.run(
    [sys.executable, os.path.abspath(__file__)], cwd=ROOT, capture_output=True, text=True
  )
  if proc.returncode != 0:
    raise RuntimeError(f'reading the launchers\' --help failed: {proc.stderr[-2000:]}')
  app.posenc_helps = json.loads(proc.stdout)


class LauncherHelp(Directive):
  """```{launcher-help} NAME```: the `--help` of `python -m launch.NAME`."""

  required_arguments = 1

  def run(self):
    name = self.arguments[0]
    helps = self.state.document.settings.env.app.posenc_helps
    if name not in helps:
      raise self.error(f'unknown launcher {name!r}; known: {", ".join(LAUNCHERS)}')
    block = nodes.literal_block(helps[name], helps[name])
    block['language'] = 'text'
    return [block]


def _links(app, docname, source) -> None:
  for pattern, replacement in LINKS:
    source[0] = pattern.sub(
      lambda m: m.expand(replacement) if docname.count('/') == 0 else m.group(0), source[0]
    )


# A link's text that is a repository file's name: 'usage.md', 'docs/gpu.md'.
FILE_NAME = re.compile(r'[\w.-]+(/[\w.-]+)*\.md')


def _titles(app, doctree, docname) -> None:
  """A link of `docname` whose text is a file name and whose target is a page of the site
  reads as that page's title."""
  if app.builder.format != 'html':
    return
  pages = {app.builder.get_target_uri(d): d for d in app.env.titles}
  here = posixpath.dirname(app.builder.get_target_uri(docname))
  for ref in doctree.findall(nodes.reference):
    path = urllib.parse.urlsplit(ref.get('refuri', '')).path
    if not (ref.get('internal') and path and FILE_NAME.fullmatch(ref.astext())):
      continue
    page = pages.get(posixpath.normpath(posixpath.join(here, path)))
    text = next(ref.findall(nodes.Text), None)
    if page is not None and text is not None:
      text.parent.replace(text, nodes.Text(app.env.titles[page].astext()))


# The board's page of the site and the directory of its files, relative to the site's root.
BOARD_PAGE, BOARD_DIR = 'leaderboard', 'leaderboard'


def _board(app) -> dict:
  """The leaderboard of LEADERBOARD_SUITE's stored baselines, its links into this site and
  its stamp, made once per build (the directive and the writing share it)."""
  if getattr(app, 'posenc_board', None) is None:
    from experiments import benchmarks
    from launch import common
    from posenc import benchmark
    from posenc.benchmark import leaderboard
    from posenc.benchmark.leaderboard import data
    from posenc.benchmark.leaderboard import pages
    from posenc.benchmark.leaderboard import site

    suite = benchmarks.get(LEADERBOARD_SUITE)
    baselines = benchmark.read_baselines(suite)
    # The cards accepted onto the public board (docs/leaderboard.md: a pull request adds
    # one under the suite's cards/), beside the stored baselines.
    cards = leaderboard.submitted_cards(suite)
    entries = [leaderboard.read_card_dir(suite, d) for d in cards]
    names = leaderboard.candidate_names(cards, entries, list(baselines))
    board = leaderboard.leaderboard(suite, baselines, dict(zip(names, entries)))
    links = pages.Links(
      board=f'../{BOARD_PAGE}.html', docs='..', repository=site.default_links().repository
    )
    app.posenc_board = {
      'board': board,
      'links': links,
      'stamp': site.stamp(common.source_commit()),
      'reference': data.default_reference(board),
    }
  return app.posenc_board


class Leaderboard(Directive):
  """```{leaderboard}```: the board of the site's suite (the files it links are written
  into leaderboard/ when the build finishes)."""

  def run(self):
    from posenc.benchmark.leaderboard import pages

    made = _board(self.state.document.settings.env.app)
    fragment = pages.board_html(
      made['board'],
      made['reference'],
      made['links'],
      made['stamp'],
      root=f'{BOARD_DIR}/',
    )
    return [nodes.raw('', fragment, format='html')]


class EncodingRegistry(Directive):
  """```{encoding-registry}```: every built-in encoding of the registry, each at the anchor
  `encoding-NAME` the leaderboard's entry pages link (`pages.API_ANCHOR`): what it is, its
  kind, the function (or module) its math is, its options and its papers."""

  def run(self):
    from posenc import encodings
    from posenc.benchmark.leaderboard import data
    from posenc.benchmark.leaderboard import pages

    listing = nodes.definition_list()
    for name, record in encodings.ENCODINGS.items():
      item = nodes.definition_list_item()
      # The anchor on the term: an item has no tag of its own in the HTML.
      term = nodes.term('', '', nodes.literal(name, name), ids=[pages.API_ANCHOR.format(name)])
      if record.randomized:
        term += nodes.Text(' (a randomized twin)')
      body = nodes.definition()
      body += nodes.paragraph(record.about, record.about)
      where = data.implementation(name)
      facts = nodes.paragraph('', f'Kind: {record.kind}. ')
      if where is not None:
        source = where.rsplit('.', 1)[0].replace('.', '/') + '.py'
        facts += [
          nodes.Text('Its math: '),
          nodes.literal(where, where),
          nodes.Text(' in '),
          nodes.literal(source, source),
          nodes.Text('. '),
        ]
      taken = list(record.taken())
      facts += nodes.Text('Options: ' if taken else 'No options.')
      for i, option in enumerate(taken):
        facts += [nodes.Text(', ' if i else ''), nodes.literal(option, option)]
      body += facts
      if record.papers:
        cites = '; '.join(f'{p.cite}, {p.title}' for p in record.papers)
        body += nodes.paragraph('', f'Papers: {cites}.')
      item += [term, body]
      listing += item
    return [listing]


def _page_files(app, pagename, templatename, context, doctree) -> None:
  # The board's stylesheet and script on its page only; the search's offline snippets on
  # the search page.
  if pagename == BOARD_PAGE:
    app.add_css_file('leaderboard.css')
    app.add_js_file('leaderboard.js')
  if pagename == 'search':
    app.add_js_file('posenc-search-pages.js')
    app.add_js_file('posenc-search.js')


def _main_html(path: str) -> str:
  """A built page's article (the theme's `<article class="bd-article">`, its ids kept) as
  the element with role="main" that Sphinx's search reads a snippet from."""
  text = open(path, encoding='utf-8').read()
  start = re.search(r'<article\b[^>]*class="bd-article"[^>]*>', text)
  if start is None:
    return ''
  depth = 0
  for m in re.finditer(r'<(/?)article\b[^>]*>', text[start.start() :]):
    depth += -1 if m.group(1) else 1
    if depth == 0:
      article = text[start.end() : start.start() + m.start()]
      return f'<div role="main">{article}</div>'
  return


def _search_pages(app) -> None:
  """_static/posenc-search-pages.js: {page address: its main HTML} for every page."""
  pages = {}
  for docname in sorted(app.env.found_docs):
    address = app.builder.get_target_uri(docname)
    path = os.path.join(app.outdir, address)
    if os.path.isfile(path):
      pages[address] = _main_html(path)
  script = 'window.POSENC_SEARCH_PAGES = ' + json.dumps(pages).replace('</', '<\\/') + ';\n'
  with open(os.path.join(app.outdir, '_static', 'posenc-search-pages.js'), 'w') as f:
    f.write(script)


def _finished(app, exception) -> None:
  if exception is not None or app.builder.format != 'html':
    return
  from posenc.benchmark.leaderboard import site

  made = _board(app)
  files = site.files(
    made['board'], made['reference'], made['links'], made['stamp'], standalone=False
  )
  site.write(os.path.join(app.outdir, BOARD_DIR), files)
  _search_pages(app)


def _static(app, config) -> None:
  # The board's stylesheet and script, from the package, as the site's own static files.
  static = os.path.join(ROOT, 'posenc', 'benchmark', 'leaderboard', 'static')
  config.html_static_path.append(static)


def setup(app):
  app.connect('config-inited', _static)
  app.connect('builder-inited', _helps)
  app.connect('source-read', _links)
  app.connect('doctree-resolved', _titles)
  app.connect('html-page-context', _page_files)
  app.connect('build-finished', _finished)
  app.add_directive('launcher-help', LauncherHelp)
  app.add_directive('leaderboard', Leaderboard)
  app.add_directive('encoding-registry', EncodingRegistry)
  return {'parallel_read_safe': True, 'parallel_write_safe': True}


if __name__ == '__main__':
  sys.path.insert(0, ROOT)
  print(json.dumps(launcher_helps()))
