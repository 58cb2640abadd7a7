"""What the leaderboard shows, as records the page, the CSV and the JSON are all written
from (so the downloads say what the table says), and what each encoding is, read from its
record in the registry (so an encoding's page cannot say other than the record).

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark
  >>> from posenc.benchmark import leaderboard
  >>> suite = benchmarks.get('tiny')
  >>> board = leaderboard.leaderboard(suite, benchmark.read_baselines(suite))
  >>> [(r['entry'], r['tasks']['even_pairs']['rank']) for r in table(board, 'none')]
  [('none', 1), ('rotary', 2)]
  >>> entry_pages(board)['rotary'], record_of('rotary').papers[0].cite
  ('entries/rotary.html', 'Su et al. 2024')
"""

from __future__ import annotations

import csv
import io as io_lib
import json
import re
from typing import Any, Mapping, Sequence

from posenc.benchmark import card as card_lib
from posenc import encodings

# Verdicts, with what each means (the legend, which always shows these four). A state the
# statistics may give besides (an undecided test) is listed in the legend where the board
# has one; any verdict keeps its own name in the table and its own colour class
# (`verdict <slug>`; a state without a colour of its own is amber).
VERDICTS = {
  'reference': 'the entry the others are compared with',
  'better': 'a higher mean than the reference, established (Holm, family-wise error 5%)',
  'not separated': 'a difference from the reference is not established',
  'worse': 'a lower mean than the reference, established',
}
MORE_VERDICTS = {
  'undecided': "the test's simulated p-value is too near the level to say (see the benchmark page)",
}
# Best first on the first press of a verdict column; a verdict not named here sorts with
# "not separated".
VERDICT_ORDER = {'reference': 0, 'better': 1, 'undecided': 2, 'not separated': 3, 'worse': 4}
OTHER_VERDICT = 3
# The publication of the benchmark's protocol, cited with posenc itself.
STUDY = encodings.papers.RUOSS2023


def slug(name: str) -> str:
  """A file name for an entry: 'my_pkg.mod:ENC' -> 'my_pkg.mod_ENC'."""
  return re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('.') or 'entry'


def slugs(names: Sequence[str]) -> dict[str, str]:
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
  return {n: f'entries/{s}.html' for n, s in slugs([e['name'] for e in board['entries']]).items()}


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


def implementation(name: str) -> str | None:
  """Where a built-in encoding's math is: the dotted name of its function of positions (the
  one its helper call wraps) or, for an encoding written as a Linen module, of that module;
  None for a name outside the registry.

  Example:
    >>> implementation('alibi'), implementation('randomized_rotary')
    ('posenc.encodings.biases.alibi_bias', 'posenc.encodings.rotary.rope')
  """
  record = encodings.ENCODINGS.get(name)
  if record is None:
    return None
  part = record.attention or record.embedding
  if part is None:
    return None  # no encoding at all: nothing to implement
  # A helper's factory holds the function it was made from; a partial binds a family's name.
  code = dict(getattr(part, 'fields', ())).get('fn', part)
  code = getattr(code, 'func', code)
  return f'{code.__module__}.{code.__qualname__}'


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


def benchmark_bibtex(
  board: Mapping[str, Any], site_stamp: Mapping[str, Any], url: str | None = None
) -> str:
  """The benchmark's BibTeX: posenc at its version, with the suite, and where posenc is
  documented (`url`, an absolute address; without one, where its documentation comes from)."""
  s = board['suite']
  year = (site_stamp.get('date') or '')[:4] or 'n.d.'
  where = (
    [('url', url)]
    if url
    else [
      (
        'howpublished',
        'Documentation: docs/ of the posenc source, built as a site by '
        'python -m sphinx docs docs/_build',
      )
    ]
  )
  fields = [
    (
      'title',
      f'{{posenc}}: positional encodings and length generalization, benchmark suite '
      f'{s["name"]} (version {s["version"]})',
    ),
    # Braced twice: a name of a group, not a person's first and last name.
    ('author', '{posenc contributors}'),
    ('year', year),
    ('version', str(site_stamp.get('version') or '')),
    *where,
    (
      'note',
      'Leaderboard written '
      + (site_stamp.get('date') or '')
      + (f', commit {site_stamp["commit"]}' if site_stamp.get('commit') else ''),
    ),
  ]
  body = ',\n'.join(f'  {k} = {{{v}}}' for k, v in fields)
  return f'@software{{posenc_{slug(s["name"]).replace("-", "_")},\n{body}\n}}\n'


def references_bib(
  board: Mapping[str, Any], site_stamp: Mapping[str, Any], url: str | None = None
) -> str:
  """references.bib: the benchmark, the study whose protocol it follows, every entry's
  papers (each once)."""
  papers = {STUDY.key: STUDY}
  for e in board['entries']:
    record = record_of(e['name'])
    for p in () if record is None else record.papers:
      papers.setdefault(p.key, p)
  return benchmark_bibtex(board, site_stamp, url) + ''.join(
    '\n' + p.bibtex() for p in papers.values()
  )
