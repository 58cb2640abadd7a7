"""posenc's pages as a reader sees them, in headless Chromium (Debian's `chromium`, driven by
playwright): the benchmark's leaderboard (`launch.benchmark --leaderboard`) and the
documentation site (`python -m sphinx -W docs OUT`, built once per session).

Each page opens from the disk (file://) with no request leaving it, no console error and
every image loaded; the leaderboard has one row per entry and sorts by a column from a click
and from the keyboard; the site's API page of `posenc.encodings` lists the helpers; every
relative link of both sites resolves, anchors included. Screenshots at desktop (1280 px) and
phone (390 px) width are kept in tests/artifacts/ (git ignores it).
"""

import csv
import fcntl
import html.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

from experiments import benchmarks
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.benchmark.leaderboard import site as site_lib
from test_benchmark import candidate_entry

ROOT = pathlib.Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / 'tests' / 'artifacts'
CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
# Without the background-networking switches Chromium stalls on a closed network.
CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]
WIDTHS = {'desktop': 1366, 'phone': 390}
HELPERS = ('bias', 'rotation', 'embedding', 'weights', 'param', 'option', 'randomized_twin')


@pytest.fixture(scope='module')
def browser():
  if not os.path.exists(CHROMIUM):
    pytest.fail(f'{CHROMIUM} is missing: apt-get install chromium (.ci/run installs it)')
  from playwright.sync_api import sync_playwright

  with sync_playwright() as p:
    chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


class Reader:
  """A page as a reader opens it, with what went wrong on the way: console errors, page
  errors, failed requests and any request that is not to a local file."""

  def __init__(self, browser, path, width=WIDTHS['desktop']):
    self.problems = []
    self.page = browser.new_page(viewport={'width': width, 'height': 900})
    self.page.on(
      'console', lambda m: self.problems.append(f'console: {m.text}') if m.type == 'error' else 0
    )
    self.page.on('pageerror', lambda e: self.problems.append(f'page error: {e}'))
    self.page.on('requestfailed', lambda r: self.problems.append(f'failed: {r.url}'))
    self.page.on(
      'request',
      lambda r: self.problems.append(f'network: {r.url}') if not r.url.startswith('file:') else 0,
    )
    self.page.goto(pathlib.Path(path).as_uri())
    self.page.wait_for_load_state('load')

  def broken_images(self):
    return self.page.evaluate(
      '[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)'
    )

  def screenshot(self, name, full_page=True):
    ARTIFACTS.mkdir(exist_ok=True)
    self.page.screenshot(path=str(ARTIFACTS / f'{name}.png'), full_page=full_page)

  def close(self):
    self.page.close()


def check_page(browser, path, name=None, full_page=True):
  """Opens `path` at both widths: no problem, no broken image, no sideways scroll of the page
  at phone width; screenshots under `name` (the whole page if `full_page`)."""
  for what, width in WIDTHS.items():
    reader = Reader(browser, path, width)
    assert reader.broken_images() == [], path
    overflow = reader.page.evaluate('document.documentElement.scrollWidth')
    assert overflow <= width, f'{path} is {overflow} px wide at {width} px'
    if name:
      reader.screenshot(f'{name}_{what}', full_page=full_page)
    reader.close()
    assert reader.problems == [], path


class _Links(html.parser.HTMLParser):
  def __init__(self):
    super().__init__()
    self.links, self.ids = [], set()

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    for key in ('id', 'name'):
      if attrs.get(key):
        self.ids.add(attrs[key])
    for key in ('href', 'src'):
      if attrs.get(key):
        self.links.append(attrs[key])


def broken_links(root, leaving=False):
  """Every relative href/src of the HTML pages under `root` whose file (or anchor in it) does
  not exist: ['page.html -> target']; `leaving`: links out of `root` are not checked (a
  standalone board's to the documentation beside it). The theme's templates under _static/
  are not pages."""
  parsed = {}

  def parse(path):
    if path not in parsed:
      parser = _Links()
      parser.feed(path.read_text(errors='replace'))
      parsed[path] = parser
    return parsed[path]

  broken = []
  pages = [p for p in sorted(pathlib.Path(root).rglob('*.html')) if '_static' not in p.parts]
  for page in pages:
    for link in parse(page).links:
      url = urllib.parse.urlsplit(link)
      if url.scheme or url.netloc:
        continue  # an outside address: a link the reader follows, nothing the page loads
      target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
      if leaving and not target.is_relative_to(pathlib.Path(root).resolve()):
        continue
      if target.is_dir():
        target = target / 'index.html'
      fragment = urllib.parse.unquote(url.fragment)
      if not target.exists():
        broken.append(f'{page.relative_to(root)} -> {link}')
      elif fragment and target.suffix == '.html' and fragment not in parse(target).ids:
        broken.append(f'{page.relative_to(root)} -> {link} (no such anchor)')
  assert pages, f'no HTML under {root}'
  return broken


# ---------------------------------------------------------------------------------------
# The leaderboard.


def write_card_dir(directory, entry, suite):
  """A card directory as `launch.benchmark --workdir` leaves it: card.json/md/png and the
  run's entry.json."""
  os.makedirs(directory)
  card = card_lib.make_card(suite, entry, benchmark.read_baselines(suite))
  for name, data in card_lib.card_files(card).items():
    (directory / name).write_bytes(data)
  (directory / 'entry.json').write_text(json.dumps(entry))


@pytest.fixture(scope='module')
def tiny_board(cli, tmp_path_factory):
  """The tiny suite's leaderboard of its 2 baselines and a candidate card ('mine', every
  member at 100% on even_pairs and 40% on parity_check)."""
  root = tmp_path_factory.mktemp('leaderboard')
  suite = benchmarks.get('tiny')
  stored = benchmark.read_baselines(suite)
  entry = candidate_entry(
    stored['rotary'], 'mine', {'even_pairs': [1.0, 1.0], 'parity_check': [0.4, 0.4]}
  )
  write_card_dir(root / 'mine', entry, suite)
  proc = cli.run(
    ['launch.benchmark', '--leaderboard', '--suite=tiny', str(root / 'mine'), f'--out={root}/site']
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.startswith('wrote the leaderboard of tiny (2 stored baselines, 1 card)')
  return root


def _cells(page, col, task=None):
  """The text of one column of the leaderboard's table, row by row (hidden or not)."""
  where = f'[data-col="{col}"]' + (f'[data-task="{task}"]' if task else '')
  return page.evaluate(
    f'[...document.querySelectorAll("table.leaderboard tbody tr")]'
    f'.map(r => r.querySelector(\'{where}\').textContent.trim())'
  )


def _header(page, col, task=None):
  where = f'thead th[data-col="{col}"]' + (f'[data-task="{task}"]' if task else '')
  return page.locator(where)


def _names(page):
  return [n.removesuffix('candidate').strip() for n in _cells(page, 'entry')]


def test_the_leaderboard_sorts_best_first_from_a_click_and_from_the_keyboard(browser, tiny_board):
  reader = Reader(browser, tiny_board / 'site' / 'index.html')
  page = reader.page
  assert sorted(_names(page)) == ['mine', 'none', 'rotary']
  assert _header(page, 'meanrank').get_attribute('aria-sort') == 'ascending'
  ranks = [float(r) for r in _cells(page, 'meanrank')]
  assert ranks == sorted(ranks)
  # Entry, by a click: A to Z, then Z to A.
  _header(page, 'entry').locator('button').click()
  assert _names(page) == sorted(_names(page))
  assert _header(page, 'entry').get_attribute('aria-sort') == 'ascending'
  _header(page, 'entry').locator('button').click()
  assert _names(page) == sorted(_names(page), reverse=True)
  # A score column, from the keyboard: the first press puts the best first.
  _header(page, 'score', 'parity_check').locator('button').focus()
  page.keyboard.press('Enter')
  assert _header(page, 'score', 'parity_check').get_attribute('aria-sort') == 'descending'
  assert _header(page, 'entry').get_attribute('aria-sort') is None
  means = [float(m.split()[0]) for m in _cells(page, 'score', 'parity_check')]
  assert means == sorted(means, reverse=True) and _names(page)[-1] == 'mine'
  page.keyboard.press('Enter')
  assert _names(page)[0] == 'mine'
  # Every score column's first press is the best first; ranks and verdicts ascend.
  firsts = page.evaluate(
    '[...document.querySelectorAll("table.leaderboard thead th")]'
    '.map(th => [th.dataset.col, th.dataset.first])'
  )
  for col, first in firsts:
    want = 'descending' if col in ('score', 'mean', 'success', 'longest') else 'ascending'
    assert first == want, col
  reader.close()
  assert reader.problems == []


def test_the_leaderboard_shows_verdicts_against_the_reference_the_reader_picks(browser, tiny_board):
  reader = Reader(browser, tiny_board / 'site' / 'index.html')
  page = reader.page
  # The candidate is the first reference.
  assert page.input_value('#reference') == 'mine'
  verdicts = dict(zip(_names(page), _cells(page, 'verdict', 'even_pairs')))
  assert verdicts['mine'] == 'reference'
  # 2 members against 2 separate nothing (p >= 1/3), and the page says so.
  assert {verdicts['none'], verdicts['rotary']} == {'not separated'}
  assert 'No comparison can be separated' in page.inner_text('main')
  page.select_option('#reference', 'rotary')
  verdicts = dict(zip(_names(page), _cells(page, 'verdict', 'even_pairs')))
  assert verdicts['rotary'] == 'reference' and verdicts['mine'] == 'not separated'
  # What to read it by: the box, the legend, the stamp, the header.
  text = page.inner_text('main')
  assert page.inner_text('.lb-read').count('\n') >= 5
  assert 'Verdicts depend on the reference' in text and 'not separated' in page.inner_text(
    '.lb-legend'
  )
  assert 'written 20' in page.inner_text('.lb-stamp') and 'posenc' in page.inner_text('.lb-stamp')
  assert page.inner_text('.lb-brand') == 'posenc'
  reader.close()
  assert reader.problems == []


def _hidden_without_cue(page):
  """The table frames wider than their window whose cue is not shown: [frame's label]."""
  return page.evaluate(
    """[...document.querySelectorAll('.table-wrap')].filter(w => {
      if (w.scrollWidth <= w.clientWidth + 1) return false;
      const cue = w.parentNode.previousElementSibling;
      return !(cue && cue.classList.contains('lb-cue') && !cue.hidden
               && cue.getBoundingClientRect().height > 0);
    }).map(w => w.getAttribute('aria-label'))"""
  )


def test_every_column_is_in_view_or_behind_a_cue_at_desktop_and_phone_width(browser, tiny_board):
  views = ['overview', 'even_pairs', 'parity_check', 'all']
  for what, width in WIDTHS.items():
    reader = Reader(browser, tiny_board / 'site' / 'index.html', width)
    page = reader.page
    for view in views:
      page.select_option('#lb-view', view)
      shown = page.evaluate(
        '[...document.querySelectorAll("table.leaderboard thead th")]'
        '.filter(th => !th.hidden).map(th => [th.dataset.col, th.dataset.task || ""])'
      )
      if view in ('overview', 'all'):
        assert {t for _, t in shown if t} == {'even_pairs', 'parity_check'}, view
      else:
        assert {t for _, t in shown if t} == {view}, view
      assert _hidden_without_cue(page) == [], (what, view)
      fits = page.evaluate(
        '(w => w.scrollWidth <= w.clientWidth + 1)(document.querySelector(".table-wrap"))'
      )
      if what == 'desktop' and view != 'all':
        assert fits, view  # a view per task, or the overview, fits a laptop's screen whole
      if view == 'overview':
        page.evaluate('document.querySelector(".lb-controls").scrollIntoView()')
        reader.screenshot(f'leaderboard_table_{what}', full_page=False)
    # The header and the entries' names stay in view as the table scrolls.
    sticky = page.evaluate(
      '[getComputedStyle(document.querySelector("table.leaderboard thead th")).position,'
      ' getComputedStyle(document.querySelector("table.leaderboard tbody th")).position]'
    )
    assert sticky == ['sticky', 'sticky']
    reader.close()
    assert reader.problems == []


def _figure_text(reader, root):
  """{figure: its smallest text in CSS pixels as the page shows it}: the SVG's font sizes
  (its units) scaled by the shown width over the SVG's own."""
  out = {}
  for src, shown in reader.page.evaluate(
    '[...document.images].filter(i => i.src.endsWith(".svg")).map(i => [i.src, i.clientWidth])'
  ):
    svg = pathlib.Path(urllib.parse.unquote(urllib.parse.urlsplit(src).path)).read_text()
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
    sizes = [float(x) for x in re.findall(r'font-size: ([\d.]+)px', svg)]
    assert sizes, src
    out[src.rsplit('/', 1)[-1]] = min(sizes) * shown / width
  return out


def test_the_figures_read_on_a_phone(browser, tiny_board):
  site = tiny_board / 'site'
  for width in WIDTHS.values():
    for page in (site / 'index.html', site / 'entries' / 'mine.html'):
      reader = Reader(browser, page, width)
      text = _figure_text(reader, site)
      assert text and min(text.values()) >= 10, (page.name, width, text)
      reader.close()


def test_the_downloads_parse_and_say_what_the_table_says(browser, tiny_board):
  site = tiny_board / 'site'
  reader = Reader(browser, site / 'index.html')
  page = reader.page
  page.select_option('#lb-view', 'all')
  names = _names(page)
  table = {
    task: {
      col: dict(zip(names, _cells(page, col, task)))
      for col in ('score', 'rank', 'success', 'longest', 'verdict')
    }
    for task in ('even_pairs', 'parity_check')
  }
  ranks = dict(zip(names, _cells(page, 'meanrank')))
  reader.close()
  with open(site / 'data' / 'leaderboard.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  board = json.loads((site / 'data' / 'leaderboard.json').read_text())
  assert [r['entry'] for r in rows] == [e['entry'] for e in board['entries']] == names
  members = json.loads((site / 'data' / 'members.json').read_text())
  with open(site / 'data' / 'members.csv', newline='') as f:
    member_rows = list(csv.DictReader(f))
  assert len(member_rows) == len(members) == 3 * 2 * 2  # entries x tasks x members
  for row, entry in zip(rows, board['entries']):
    name = row['entry']
    assert f'{float(row["mean_rank"]):.2f}' == ranks[name]
    for task, cols in table.items():
      t = entry['tasks'][task]
      assert cols['score'][name].startswith(f'{float(row[f"{task}_mean"]):.1f} [')
      assert f'{t["mean"]:.1f}' == f'{float(row[f"{task}_mean"]):.1f}'
      assert cols['rank'][name] == row[f'{task}_rank'] == str(t['rank'])
      assert cols['success'][name].startswith(f'{float(row[f"{task}_success_rate"]):.1f}%')
      assert cols['longest'][name].removeprefix('≥ ').split()[0] == row[f'{task}_longest']
      assert int(row[f'{task}_longest']) == t['longest']  # an integer length
      assert cols['verdict'][name] == row[f'{task}_verdict'] == t['verdict']
      scores = [float(m['score']) for m in member_rows if (m['entry'], m['task']) == (name, task)]
      assert abs(sum(scores) / len(scores) - t['mean']) < 1e-6
    # Its card: the entry as the reference against every other entry.
    card = json.loads((site / entry['card']).read_text())
    assert card['candidate'] == name and card['kind'] == 'posenc benchmark card'
  assert board['verdicts']['rotary']['mine']['even_pairs'] == 'not separated'
  bib = (site / 'references.bib').read_text()
  assert bib.startswith('@software{posenc_tiny,') and '@inproceedings{ruoss2023randomized,' in bib
  assert '@article{su2024roformer,' in bib and '@inproceedings{haviv2022nopos,' in bib


def test_an_entry_page_says_what_the_encoding_is_from_its_record(browser, tiny_board):
  from posenc import encodings

  reader = Reader(browser, tiny_board / 'site' / 'entries' / 'rotary.html')
  text = reader.page.inner_text('main')
  record = encodings.ENCODINGS['rotary']
  assert record.about in text
  for paper in record.papers:
    assert paper.cite in text and paper.bibtex().splitlines()[0] in text
  for name, option in record.options:
    assert name in text and option.doc in text
  mine = Reader(browser, tiny_board / 'site' / 'entries' / 'mine.html')
  assert "outside posenc's registry" in mine.page.inner_text('main')
  for r in (reader, mine):
    r.close()
    assert r.problems == []


def test_the_leaderboard_pages_load_whole_at_desktop_and_phone_width(browser, tiny_board):
  site = tiny_board / 'site'
  assert sorted(p.name for p in (site / 'entries').iterdir()) == [
    'mine.html',
    'none.html',
    'rotary.html',
  ]
  check_page(browser, site / 'index.html', 'leaderboard')
  check_page(browser, site / 'entries' / 'rotary.html', 'leaderboard_entry')
  # Its links to the documentation beside it: test_a_board_hosted_beside_the_docs_links_them.
  assert broken_links(site, leaving=True) == []
  entry = (site / 'entries' / 'mine.html').read_text()
  assert 'python -m launch.benchmark' in entry and 'jax 0.' in entry
  # A reader whose system is dark gets a dark page.
  page = browser.new_page(color_scheme='dark')
  page.goto((site / 'index.html').as_uri())
  background = page.evaluate('getComputedStyle(document.body).backgroundColor')
  assert background == 'rgb(15, 20, 25)', background
  page.close()


def _in_first_screen(page, selector):
  """Whether the element `selector` is whole inside the window as the page opens."""
  return page.evaluate(
    """s => { const r = document.querySelector(s).getBoundingClientRect();
      return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0
             && r.right <= innerWidth; }""",
    selector,
  )


def test_the_standalone_board_says_what_it_is_and_where_to_go_in_its_first_screen(
  browser, tiny_board
):
  for what, width in WIDTHS.items():
    reader = Reader(browser, tiny_board / 'site' / 'index.html', width)
    page = reader.page
    assert 'posenc is a JAX/Flax framework' in page.inner_text('.lb-about')
    assert page.inner_text('.lb-lead') == benchmarks.get('tiny').summary
    go = {
      a['text']: a['href']
      for a in page.eval_on_selector_all(
        '.lb-go a', 'as => as.map(a => ({text: a.textContent, href: a.getAttribute("href")}))'
      )
    }
    assert go['How the benchmark works'] == '../benchmark.html'
    assert go['Submit your encoding →'] == '../submit.html'
    nav = page.eval_on_selector_all('.lb-header a', 'as => as.map(a => a.getAttribute("href"))')
    assert {'../index.html', '../benchmark.html', '../submit.html'} <= set(nav), nav
    for selector in ('.lb-header', '.lb-about', '.lb-lead', '.lb-go', '#reference', '#lb-view'):
      assert _in_first_screen(page, selector), (what, selector)
    reader.close()
    assert reader.problems == []


def test_a_board_hosted_beside_the_docs_links_into_them(cli, docs_site, tiny_board, tmp_path):
  # The standalone board as a folder of the documentation site (its default links, '..'):
  # every link resolves, an entry's encoding at its anchor in the API reference.
  docs = tmp_path / 'docs'
  shutil.copytree(docs_site, docs)
  out = docs / 'tiny-board'
  proc = _leaderboard(cli, '--suite=tiny', tiny_board / 'mine', f'--out={out}')
  assert proc.returncode == 0 and proc.stdout.strip().endswith(f'documentation at {docs}')
  assert broken_links(out) == []
  rotary = (out / 'entries' / 'rotary.html').read_text()
  assert 'href="../../api/encodings.html#encoding-rotary"' in rotary
  assert 'api/encodings.html' not in (out / 'entries' / 'mine.html').read_text()
  # Given an address, the links go there, and the citation gives it.
  hosted = tmp_path / 'hosted'
  given = _leaderboard(
    cli, '--suite=tiny', f'--out={hosted}', '--docs_url=https://posenc.example/docs/'
  )
  assert given.returncode == 0, given.stderr
  assert given.stdout.strip().endswith('documentation at https://posenc.example/docs/')
  index = (hosted / 'index.html').read_text()
  assert 'href="https://posenc.example/docs/submit.html"' in index
  assert 'url = {https://posenc.example/docs/index.html}' in (hosted / 'references.bib').read_text()


def _state(page):
  return {
    'view': page.input_value('#lb-view'),
    'reference': page.input_value('#reference'),
    'sorted': page.evaluate(
      '[...document.querySelectorAll("thead th[aria-sort]")]'
      '.map(th => [th.dataset.col, th.dataset.task || "", th.getAttribute("aria-sort")])'
    ),
    'rows': _names(page),
    'verdicts': _cells(page, 'verdict', 'parity_check'),
  }


def test_the_view_sort_and_reference_are_kept_in_the_address(browser, tiny_board):
  index = tiny_board / 'site' / 'index.html'
  reader = Reader(browser, index)
  page = reader.page
  default = _state(page)
  page.select_option('#lb-view', 'parity_check')
  _header(page, 'mean', 'parity_check').locator('button').click()
  page.select_option('#reference', 'rotary')
  chosen = _state(page)
  assert chosen['sorted'] == [['mean', 'parity_check', 'descending']]
  fragment = page.evaluate('location.hash')
  assert 'view=parity_check' in fragment and 'reference=rotary' in fragment
  # Opened from the address (a link shared, a reload): the same table.
  shared = Reader(browser, index)
  shared.page.goto(index.as_uri() + fragment)
  shared.page.reload()
  assert _state(shared.page) == chosen
  assert shared.page.is_hidden('.lb-fragment')
  # A fragment it does not understand: one line naming each value and what is valid, the
  # table as it opens without one; an anchor of the page is no state at all.
  for bad in ('#view=nope&reference=rotary&order=up', '#sort=bogus&zzz=1', '#downloads'):
    shared.page.goto(index.as_uri() + bad)
    shared.page.reload()
    state = _state(shared.page)
    if bad == '#downloads':
      assert state == default and shared.page.is_hidden('.lb-fragment')
      continue
    note = shared.page.inner_text('.lb-fragment')
    assert '\n' not in note.strip() and note.startswith('Not understood in the address'), note
    if 'nope' in bad:
      assert 'view=nope (the views: overview, even_pairs, parity_check, all)' in note
      assert 'order=up (ascending or descending)' in note
      assert state['reference'] == 'rotary' and state['view'] == 'overview'
    else:
      assert 'sort=bogus (a column: entry, meanrank, score:even_pairs' in note
      assert '"zzz"' in note and state == default
  for r in (reader, shared):
    r.close()
    assert r.problems == []


def test_a_phone_shows_rank_entry_score_and_verdict_in_the_first_screen(browser, tiny_board):
  reader = Reader(browser, tiny_board / 'site' / 'index.html', WIDTHS['phone'])
  page = reader.page
  page.set_viewport_size({'width': WIDTHS['phone'], 'height': 844})
  first = 'table.leaderboard tbody tr:first-child'
  for selector in (
    f'{first} [data-col="entry"]',
    f'{first} [data-col="meanrank"]',
    f'{first} [data-col="score"][data-task="even_pairs"]',
    f'{first} [data-col="verdict"][data-task="even_pairs"]',
    'thead th[data-col="verdict"][data-task="even_pairs"]',
  ):
    assert _in_first_screen(page, selector), selector
  # The header row is compact: the task's name over a one-word column name.
  height = page.evaluate('document.querySelector("table.leaderboard thead tr").offsetHeight')
  assert height <= 64, height
  reader.screenshot('leaderboard_phone_first_screen', full_page=False)
  reader.close()
  assert reader.problems == []


def _leaderboard(cli, *args):
  return cli.run(['launch.benchmark', '--leaderboard', *map(str, args)])


def test_bad_leaderboard_input_is_one_line_and_writes_nothing(cli, tiny_board, tmp_path):
  mine = tiny_board / 'mine'
  damaged = tmp_path / 'damaged'
  shutil.copytree(mine, damaged)
  (damaged / 'card.json').write_text('{"kind": "posenc benchmark card", ')
  other = tmp_path / 'other'
  other.mkdir()
  (other / 'notes.txt').write_text('mine')
  notcards = tmp_path / 'notcards'
  (notcards / 'runs').mkdir(parents=True)
  cases = [
    (
      ['--suite=cpu-v2', mine, f'--out={tmp_path}/a'],
      f'the card in {mine} is of suite \'tiny\' version 1, not cpu-v2 version 2',
    ),
    (['--suite=tiny', damaged, f'--out={tmp_path}/a'], 'card.json does not read as JSON'),
    (
      ['--suite=tiny', tmp_path / 'nowhere', f'--out={tmp_path}/a'],
      f'{tmp_path}/nowhere does not exist: give card directories (each holding card.json',
    ),
    # A shell passes an unmatched `cards/*` through as it is.
    (
      ['--suite=tiny', tmp_path / 'cards' / '*', f'--out={tmp_path}/a'],
      f'{tmp_path}/cards/* does not exist',
    ),
    (
      ['--suite=tiny', notcards, f'--out={tmp_path}/a'],
      f'{notcards} holds no card.json and no card directory (folders: runs)',
    ),
    (
      ['--suite=tiny', mine, f'--out={tmp_path}/a', '--docs_url=htps:/docs'],
      '--docs_url=htps:/docs is not an address; give an http(s):// address or a path',
    ),
    (['--suite=tiny', mine, f'--out={other}'], 'holds other files (notes.txt) and no leaderboard'),
    (['--suite=tiny', mine, '--out=/proc/posenc_leaderboard'], '--out=/proc/posenc_leaderboard'),
    (['--suite=tiny', mine, f'--out={tmp_path}/a', '--reference=nope'], '--reference=nope'),
    (['--suite=tiny', mine], '--leaderboard needs --out=DIR'),
  ]
  for args, needle in cases:
    before = sorted(os.listdir(tmp_path))
    proc = _leaderboard(cli, *args)
    assert proc.returncode == 2, (args, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
    assert sorted(os.listdir(tmp_path)) == before, args
  assert os.listdir(other) == ['notes.txt']
  assert not os.path.exists('/proc/posenc_leaderboard')


def test_a_leaderboard_flag_without_leaderboard_trains_nothing(cli, tmp_path):
  for flag in (f'--out={tmp_path}/board', '--docs_url=..', '--reference=none'):
    proc = cli.run(
      ['launch.benchmark', '--encoding=rotary', '--suite=tiny', f'--workdir={tmp_path}/w', flag]
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    name = flag.split('=')[0]
    assert lines[0] == f'error: {name} is a flag of --leaderboard; add --leaderboard, or drop it'
    assert os.listdir(tmp_path) == []


def test_a_second_leaderboard_replaces_the_first_whole(cli, tiny_board, tmp_path):
  out = tmp_path / 'site'
  assert _leaderboard(cli, '--suite=tiny', tiny_board / 'mine', f'--out={out}').returncode == 0
  assert (out / 'entries' / 'mine.html').exists()
  # Without the card: its page is gone, nothing is left beside the site.
  proc = _leaderboard(cli, '--suite=tiny', f'--out={out}')
  assert proc.returncode == 0, proc.stderr
  assert not (out / 'entries' / 'mine.html').exists()
  assert sorted(os.listdir(tmp_path)) == ['site']
  assert sorted(p.name for p in (out / 'entries').iterdir()) == ['none.html', 'rotary.html']


def test_a_write_that_fails_leaves_nothing_behind(tmp_path):
  # A site whose second file cannot be written ('a' is a file): no page, no temporary
  # directory, none of the parents the write created.
  with pytest.raises(OSError):
    site_lib.write(str(tmp_path / 'new' / 'deeper' / 'site'), {'a': b'1', 'a/b': b'2'})
  assert os.listdir(tmp_path) == []
  with pytest.raises(site_lib.LeaderboardError, match='is a file, not a directory'):
    (tmp_path / 'file').write_text('x')
    site_lib.write(str(tmp_path / 'file'), {'index.html': b''})


# ---------------------------------------------------------------------------------------
# The documentation site.


def build_site(out):
  """The site as the README builds it (warnings are errors), into the fresh directory `out`."""
  proc = subprocess.run(
    [sys.executable, '-m', 'sphinx', '-W', '-q', 'docs', str(out)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  return out


@pytest.fixture(scope='module')
def docs_site(tmp_path_factory):
  """The documentation site, built once per test session (about 30 s): pytest-xdist's
  workers share one build in the session's temporary directory, the first to get there
  building it while the others wait on the lock."""
  if 'PYTEST_XDIST_WORKER' not in os.environ:
    return build_site(tmp_path_factory.mktemp('docs') / 'html')
  shared = tmp_path_factory.getbasetemp().parent / 'docs_site'
  shared.mkdir(exist_ok=True)
  with open(shared / 'lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not (shared / 'built').exists():
      shutil.rmtree(shared / 'html', ignore_errors=True)
      build_site(shared / 'html')
      (shared / 'built').touch()
  return shared / 'html'


def _clipped(page):
  """The code blocks and wide tables of a page that hide part of themselves without a cue:
  a code block must fit its box (it wraps); a table wider than its frame needs the cue
  above it shown."""
  return page.evaluate(
    """[...[...document.querySelectorAll('.bd-article pre')]
        .filter(p => p.scrollWidth > p.clientWidth + 1)
        .map(p => 'code: ' + p.textContent.slice(0, 40)),
      ...[...document.querySelectorAll('.bd-article .pst-scrollable-table-container')]
        .filter(t => t.scrollWidth > t.clientWidth + 1)
        .filter(t => { const c = t.previousElementSibling;
                       return !(c && c.classList.contains('posenc-cue') && !c.hidden); })
        .map(t => 'table: ' + t.textContent.trim().slice(0, 40))]"""
  )


def test_the_documentation_site_builds_links_and_loads_whole_offline(browser, docs_site):
  assert broken_links(docs_site) == []
  for page in (
    'index.html',
    'benchmark.html',
    'api/encodings.html',
    'leaderboard.html',
    'gpu.html',
  ):
    assert (docs_site / page).exists(), page
  # The README is the home page; its links to docs/*.md are the site's pages.
  home = (docs_site / 'index.html').read_text()
  assert 'href="usage.html"' in home and 'href="benchmark.html"' in home
  # In the browser: every page whole, nothing from the network, the helpers listed.
  check_page(browser, docs_site / 'index.html', 'site_home', full_page=False)
  check_page(browser, docs_site / 'leaderboard.html', 'site_leaderboard')
  check_page(browser, docs_site / 'leaderboard' / 'entries' / 'rotary.html', 'site_entry')
  check_page(browser, docs_site / 'api' / 'launchers.html')
  reader = Reader(browser, docs_site / 'api' / 'encodings.html')
  for helper in HELPERS:
    assert reader.page.locator(f'[id="posenc.encodings.{helper}"]').count() == 1, helper
  summary = reader.page.locator('table.autosummary').inner_text()
  assert all(helper in summary for helper in HELPERS)
  reader.close()
  assert reader.problems == []
  check_page(browser, docs_site / 'api' / 'encodings.html', 'site_api_encodings', False)
  for what, width in WIDTHS.items():
    # Code blocks wrap, wide tables say they scroll, at both widths.
    for page in ('index.html', 'usage.html', 'benchmark.html'):
      reader = Reader(browser, docs_site / page, width)
      assert _clipped(reader.page) == [], (page, width)
      reader.close()
    # The leaderboard is a page of the site: its board sorts, its figures read, the stored
    # baselines are its rows, and its pages lead back into the site.
    reader = Reader(browser, docs_site / 'leaderboard.html', width)
    page = reader.page
    assert len(_names(page)) == 16
    _header(page, 'score', 'flip_flop').locator('button').click()
    means = [float(m.split()[0]) for m in _cells(page, 'score', 'flip_flop')]
    assert means == sorted(means, reverse=True)
    assert _hidden_without_cue(page) == []
    if what == 'desktop':
      assert page.evaluate(
        '(w => w.scrollWidth <= w.clientWidth + 1)(document.querySelector(".table-wrap"))'
      )
    assert min(_figure_text(reader, docs_site).values()) >= 10
    page.evaluate('document.querySelector(".lb-controls").scrollIntoView()')
    reader.screenshot(f'site_leaderboard_table_{what}', full_page=False)
    reader.close()
    assert reader.problems == []
  entry = (docs_site / 'leaderboard' / 'entries' / 'rotary.html').read_text()
  for target in ('../../index.html', '../../benchmark.html', '../../leaderboard.html'):
    assert f'href="{target}"' in entry, target
  # Search from the disk: results with their snippets, no request refused.
  reader = Reader(browser, docs_site / 'search.html')
  reader.page.goto((docs_site / 'search.html').as_uri() + '?q=leaderboard')
  reader.page.wait_for_selector('#search-results li p.context', timeout=30000)
  assert reader.page.locator('#search-results li').count() >= 2
  reader.screenshot('site_search', full_page=False)
  reader.close()
  assert reader.problems == []


def _frames(page):
  """Waits two frames of the page: its resize and scroll events are handled, and what their
  handlers left to the next frame is done."""
  page.evaluate('new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))')


def _copied(reader, block):
  """What the copy button of the page's code block number `block` puts on the clipboard."""
  page = reader.page
  page.context.grant_permissions(['clipboard-read', 'clipboard-write'])
  page.locator('.bd-article div.highlight').nth(block).hover()
  page.locator('.bd-article div.highlight button.copybtn').nth(block).click()
  return page.evaluate('navigator.clipboard.readText()')


def test_a_code_block_s_copy_button_copies_it_without_prompts_or_output(browser, docs_site):
  # Commands without a prompt: the block as written.
  reader = Reader(browser, docs_site / 'index.html')
  blocks = reader.page.locator('.bd-article div.highlight pre')
  assert blocks.count() >= 3 and reader.page.locator('button.copybtn').count() == blocks.count()
  assert _copied(reader, 0) == blocks.first.text_content().removesuffix('\n')
  reader.close()
  assert reader.problems == []
  # A doctest: its `>>> ` and `... ` lines, without the prompts, and none of its output.
  reader = Reader(browser, docs_site / 'api' / 'config.html')
  text = reader.page.locator('.bd-article div.highlight pre').first.text_content()
  lines = text.splitlines()
  assert lines[0].startswith('>>> ') and not all(line.startswith('>>> ') for line in lines)
  want = [line[4:] for line in lines if line.startswith(('>>> ', '... '))]
  assert _copied(reader, 0) == '\n'.join(want)
  reader.close()
  assert reader.problems == []


# The whitespace-separated tokens of a page's code blocks that fit on a line yet are split
# across two: [token]; the blocks whose selected text is not their text; how many lines of
# the blocks are wrapped.
_SPLIT_TOKENS = """(() => {
  const split = [], misread = [];
  let wrapped = 0;
  for (const pre of document.querySelectorAll('.bd-article div.highlight pre')) {
    const style = getComputedStyle(pre);
    const line = pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const texts = [];
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node, at = 0; (node = walker.nextNode()); at += node.data.length) texts.push([node, at]);
    const point = offset => {
      const [node, at] = texts.findLast(([, at]) => at <= offset);
      return [node, offset - at];
    };
    const tops = new Set();
    for (const m of pre.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(...point(m.index));
      const [node, at] = point(m.index + m[0].length - 1);
      range.setEnd(node, at + 1);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      const width = rects.reduce((sum, r) => sum + r.width, 0);
      if (new Set(rects.map(r => Math.round(r.top))).size > 1 && width <= line) split.push(m[0]);
      if (rects.length) tops.add(Math.round(rects[0].top));
    }
    wrapped += tops.size - pre.textContent.split('\\n').filter(l => l.trim()).length;
    if (!pre.querySelector('.gp')) {  // a prompt is left out of a selection (Sphinx's CSS)
      const range = document.createRange();
      range.selectNodeContents(pre);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      if (getSelection().toString() !== pre.textContent.replace(/\\n$/, '')) {
        misread.push(pre.textContent.slice(0, 40));
      }
    }
  }
  return [split, misread, wrapped];
})()"""


def test_code_wraps_between_tokens_at_phone_width(browser, docs_site):
  # The home page opened on a phone; the usage page on a laptop whose window then narrows.
  for name, width in (('index.html', WIDTHS['phone']), ('usage.html', WIDTHS['desktop'])):
    reader = Reader(browser, docs_site / name, width)
    page = reader.page
    page.set_viewport_size({'width': WIDTHS['phone'], 'height': 900})
    _frames(page)
    assert page.evaluate('document.documentElement.scrollWidth') <= WIDTHS['phone'], name
    split, misread, wrapped = page.evaluate(_SPLIT_TOKENS)
    assert split == [] and misread == [], name
    assert wrapped >= 3, name  # the page's long commands do wrap
    reader.close()
    assert reader.problems == [], name


def test_the_home_page_links_the_docs_pages_by_their_titles(browser, docs_site):
  reader = Reader(browser, docs_site / 'index.html')
  links = reader.page.evaluate(
    '[...document.querySelectorAll(".bd-article a")].map(a => [a.getAttribute("href"), '
    'a.innerText.trim()])'
  )
  assert [text for _, text in links if text.endswith('.md')] == []
  titles = dict(links)
  for page in ('gpu', 'usage', 'scaling', 'benchmark'):
    title = (ROOT / 'docs' / f'{page}.md').read_text().splitlines()[0].removeprefix('# ')
    assert titles[f'{page}.html'] == title, page
  assert titles['usage.html#the-main-job-measured'] == titles['usage.html']
  reader.close()
  assert reader.problems == []


def test_a_wide_table_s_cue_says_on_which_side_more_columns_are(browser, docs_site):
  reader = Reader(browser, docs_site / 'index.html', WIDTHS['phone'])
  page = reader.page
  frame = page.locator('.bd-article .pst-scrollable-table-container').first
  cue = page.locator('.bd-article .posenc-cue').first
  assert frame.evaluate('f => f.scrollWidth > f.clientWidth + 1')
  sides = {}
  for where, left in (
    ('start', '0'),
    ('middle', '(f.scrollWidth - f.clientWidth) / 2'),
    ('end', 'f.scrollWidth'),
  ):
    frame.evaluate(f'f => f.scrollLeft = {left}')
    _frames(page)
    sides[where] = cue.inner_text()
  assert sides == {
    'start': '⇆ This table scrolls sideways: more columns to the right.',
    'middle': '⇆ This table scrolls sideways: more columns on both sides.',
    'end': '⇆ This table scrolls sideways: more columns to the left.',
  }
  reader.close()
  assert reader.problems == []
  # A table that fits has no cue.
  reader = Reader(browser, docs_site / 'usage.html')
  shown = reader.page.evaluate(
    """[...document.querySelectorAll('.bd-article .pst-scrollable-table-container')]
      .map(f => [f.scrollWidth > f.clientWidth + 1, !f.previousElementSibling.hidden])"""
  )
  assert [False, False] in shown and all(wide == cue for wide, cue in shown)
  reader.close()
  assert reader.problems == []
