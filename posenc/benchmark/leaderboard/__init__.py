"""The benchmark's leaderboard: a suite's stored baselines and any candidates' entries ranked
in one table, as the data a static site is written from (`posenc.benchmark.leaderboard.site`).

Everything is read from the entries the benchmark already keeps (a stored baseline, a
card directory's entry.json: `posenc.benchmark.make_entry`) and scored by the card's own
functions, so a leaderboard row says what a card says:

- per task, every entry's scorecard row (`posenc.report.scorecard`: mean with its 95%
  interval floored by the suite's stored baselines' pool, success, longest length
  generalized) and its rank among all entries (`posenc.benchmark.card.ranks`); the mean rank over tasks;
- per entry as a reference, its card against every other entry (`posenc.benchmark.card.make_card`):
  each verdict is the reference's against that entry, Holm over the reference's card;
- per entry and task, its mean curve over the members by test length (what a score
  averages: `Evaluation.curve`).

Example:
  >>> from experiments import benchmarks
  >>> from posenc import benchmark
  >>> suite = benchmarks.get('tiny')
  >>> board = leaderboard(suite, benchmark.read_baselines(suite))
  >>> [(e['name'], e['kind'], e['mean_rank']) for e in board['entries']]
  [('none', 'baseline', 1.0), ('rotary', 'baseline', 1.5)]
  >>> board['verdicts']['none']['rotary']['even_pairs']     # 2 members against 2
  'not separated'
"""

from __future__ import annotations

import copy
import os
from typing import Any, Mapping, Sequence

import numpy as np

from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc import results as results_lib
from posenc import kinds
from posenc.report import scorecard as scorecard_lib
from posenc.statistics import verdicts as verdicts_lib

BASELINE, CANDIDATE = 'baseline', 'candidate'
ENTRY = 'entry.json'  # a card directory's run, beside its card.json
# Where the cards accepted onto a suite's public board live: <suite directory>/cards/<name>/.
SUBMITTED = 'cards'
# A verdict read from the other side: the reference better than X is X worse than it. Any
# other verdict (not separated, and a state the statistics may add) reads the same both ways.
OPPOSITE = {'better': 'worse', 'worse': 'better'}


def renamed(entry: Mapping[str, Any], name: str) -> dict[str, Any]:
  """`entry` under another encoding name (a candidate whose encoding a baseline already
  names): its rows, cards and pages are labelled by that name."""
  out = copy.deepcopy(dict(entry))
  out['encoding'] = name
  for task in out['tasks'].values():
    task['encoding'] = name
  return out


def read_card_dir(suite: benchmark.Suite, directory: str) -> dict[str, Any]:
  """The entry of a candidate's card directory (`launch.benchmark --workdir=DIR`: its
  card.json and entry.json), checked to be of `suite` and its version; else
  BenchmarkError (one line)."""
  card = benchmark.read_json(os.path.join(directory, benchmark.CARD_JSON), 'card')
  if not isinstance(card, dict) or card.get('kind') != 'posenc benchmark card':
    raise benchmark.BenchmarkError(
      f'{os.path.join(directory, benchmark.CARD_JSON)} is not a posenc benchmark card'
    )
  named = card.get('suite') if isinstance(card.get('suite'), dict) else {}
  if (named.get('name'), named.get('version')) != (suite.name, suite.version):
    raise benchmark.BenchmarkError(
      f'the card in {directory} is of suite {named.get("name")!r} version '
      f'{named.get("version")!r}, not {suite.name} version {suite.version}'
    )
  path = os.path.join(directory, ENTRY)
  entry = benchmark.check_entry(suite, benchmark.read_json(path, 'entry'), f'entry {path}')
  for task in suite.tasks:
    if task not in entry['tasks']:
      raise benchmark.BenchmarkError(f'entry {path} has no run of task {task!r}')
    _record(entry, task)  # a damaged results record raises its SchemaError here
  return entry


def card_dirs(path: str) -> list[str]:
  """The card directories `path` names: itself when it holds a card.json (a --workdir of
  `launch.benchmark`), else the folders in it that do, sorted (a folder of cards, as a
  suite's `cards/`; one holding no folder at all, only a README, has none yet). Anything
  else is a BenchmarkError (one line): a path that does not exist (a shell's unmatched
  `cards/*` included), a file, a folder of folders none of which is a card."""
  valid = (
    'give card directories (each holding card.json, as launch.benchmark --workdir leaves '
    'it) or a folder of them'
  )
  if os.path.isfile(os.path.join(path, benchmark.CARD_JSON)):
    return [path]
  if not os.path.isdir(path):
    what = 'is a file' if os.path.exists(path) else 'does not exist'
    raise benchmark.BenchmarkError(f'{path} {what}: {valid}')
  folders = sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)))
  cards = [
    os.path.join(path, n)
    for n in folders
    if os.path.isfile(os.path.join(path, n, benchmark.CARD_JSON))
  ]
  if folders and not cards:
    raise benchmark.BenchmarkError(
      f'{path} holds no card.json and no card directory (folders: {", ".join(folders[:3])}'
      f'{", ..." if len(folders) > 3 else ""}): {valid}'
    )
  return cards


def submitted_cards(suite: benchmark.Suite) -> list[str]:
  """The card directories accepted onto `suite`'s public board (<suite>/cards/<name>/,
  each holding a card.json), sorted; the documentation's leaderboard shows them beside the
  stored baselines."""
  root = os.path.join(suite.directory, SUBMITTED)
  return card_dirs(root) if os.path.isdir(root) else []


def candidate_names(
  directories: Sequence[str], entries: Sequence[Mapping[str, Any]], taken: Sequence[str]
) -> list[str]:
  """Each candidate's name on the board: its encoding, or 'encoding (DIR)' where a baseline
  (`taken`) or another candidate has that name."""
  names = [e['encoding'] for e in entries]
  out: list[str] = []
  for directory, name in zip(directories, names):
    if name in taken or names.count(name) > 1:
      name = f'{name} ({os.path.normpath(directory)})'
    # The same directory given twice: its second copy numbered.
    out.append(name if name not in out else f'{name} #{out.count(name) + 1}')
  return out


def _record(entry: Mapping[str, Any], task: str) -> results_lib.Results:
  return kinds.from_json(dict(entry['tasks'][task]), f'{entry["encoding"]} {task}')


def mean_curve(record: results_lib.Results) -> dict[int, float]:
  """{test length: mean over the members' curves} of a run (lengths any member evaluated;
  a diverged member's empty curve counts at none)."""
  curves = [record.evaluation.curve(m, record.family) for m in record.members]
  lengths = sorted({n for c in curves for n in c})
  return {n: float(np.mean([c[n] for c in curves if n in c])) for n in lengths}


def leaderboard(
  suite: benchmark.Suite,
  baselines: Mapping[str, Mapping[str, Any]],
  candidates: Mapping[str, Mapping[str, Any]] | None = None,
  alpha: float = verdicts_lib.ALPHA,
) -> dict[str, Any]:
  """The leaderboard of `baselines` and `candidates` ({name: entry}, names distinct).

  Returns:
    {'suite': the suite as a card names it, 'entries': [{'name', 'kind', 'mean_rank',
    'tasks': {task: {'rank', 'row': its scorecard row, 'curve': {length: mean},
    'train_length'}}, 'run': command, time, versions and machine, 'options': the encoding
    options its run recorded}] best mean rank first, 'verdicts': {reference: {other: {task:
    other's verdict against the reference}}}, 'cards': {name: its card against every other
    entry},
    'statistics': the reference cards' methods, 'decidable': whether any verdict can be
    other than 'not separated', 'thresholds', 'alpha'}.
  """
  entries = {
    **{n: (BASELINE, e) for n, e in baselines.items()},
    **{n: (CANDIDATE, renamed(e, n)) for n, e in (candidates or {}).items()},
  }
  prior = card_lib.suite_pool(suite, baselines)
  rows: dict[str, dict[str, Any]] = {name: {} for name in entries}
  for task in suite.tasks:
    records = [
      (name, _record(e, task)) for name, (_, e) in sorted(entries.items()) if task in e['tasks']
    ]
    card = scorecard_lib.scorecard(records, prior=prior, comparisons=False)
    by_name = {r['column']: r for r in card['rows']}  # one row per entry, as a card's
    rank = card_lib.ranks(card['rows'])
    for name, record in records:
      rows[name][task] = {
        'rank': rank[name],
        'row': by_name[name],
        'curve': {str(n): v for n, v in mean_curve(record).items()},
        'train_length': record.train_length,
      }
  cards = {
    name: card_lib.make_card(
      suite, e, {n: other for n, (_, other) in entries.items() if n != name}, alpha=alpha
    )
    for name, (_, e) in entries.items()
  }
  out = []
  for name, (kind, e) in entries.items():
    ranked = [t['rank'] for t in rows[name].values()]
    out.append(
      {
        'name': name,
        'kind': kind,
        'mean_rank': float(np.mean(ranked)) if ranked else None,
        'tasks': rows[name],
        'run': cards[name]['run'],
        # The encoding options its run recorded (its first task's; a suite runs every task
        # of an encoding with the same ones).
        'options': next((dict(t.get('encoding_options') or {}) for t in e['tasks'].values()), {}),
      }
    )
  out.sort(key=lambda e: (np.inf if e['mean_rank'] is None else e['mean_rank'], e['name']))
  first = next(iter(cards.values()), None)
  return {
    'suite': None if first is None else first['suite'],
    'entries': out,
    'verdicts': {reference: _verdicts_of(card) for reference, card in cards.items()},
    # Each entry's card against every other entry: the verdicts shown with it as the
    # reference are its card's.
    'cards': cards,
    'statistics': None if first is None else {k: first['statistics'][k] for k in _METHODS},
    # Whether any reference's card can separate a comparison at all (cpu-v1's 3 members
    # against 3 cannot: p >= 0.1).
    'decidable': any(card['statistics']['decidable'] for card in cards.values()),
    'thresholds': None if first is None else first['thresholds'],
    'alpha': alpha,
  }


_METHODS = ('interval', 'success_interval', 'level', 'test', 'correction', 'alpha')


def _verdicts_of(card: Mapping[str, Any]) -> dict[str, dict[str, str]]:
  """{other: {task: other's verdict against the card's candidate}}."""
  out: dict[str, dict[str, str]] = {}
  for task, t in card['tasks'].items():
    for c in t['comparisons']:
      out.setdefault(c['b'], {})[task] = OPPOSITE.get(c['verdict'], c['verdict'])
  return out
