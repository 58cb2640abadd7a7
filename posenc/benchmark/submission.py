"""What a submitted card must be before it joins the public leaderboard: the checks of
`launch.check_card`, each a function of the card directory's files and the suite.

A submission is a card directory (`launch.benchmark --workdir=DIR`: card.json, card.md,
card.png, entry.json). It is accepted when

- `suite`: its card and its entry are of the suite and version named, and of one encoding;
- `config`: every task's recorded config is the suite's cell for that encoding today (the
  steps, members, lengths and model a card of the suite runs), local paths aside;
- `card`: the member scores in card.json are those of entry.json (the card says what the
  run says);
- `checksums`: the frozen evaluation sets are the suite's (`posenc.benchmark`);
- `rerun`: one member trained again from its config scores what the entry records
  (`compare_member`; a single member trains as it does in its population: one member of a
  cpu-v2 cell, rerun alone on the same kind of processor, gives the same score to the last
  bit).

Example:
  >>> check = Check('suite', True, 'card and entry of tiny version 1')
  >>> check.line()
  'suite      ok    card and entry of tiny version 1'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from posenc import benchmark
from posenc import config as config_lib

CHECKS = ('suite', 'config', 'card', 'checksums', 'rerun')


@dataclasses.dataclass(frozen=True)
class Check:
  """One check's outcome: its name, whether it passed, and what it found (one line)."""

  name: str
  passed: bool
  detail: str

  def line(self) -> str:
    return f'{self.name:<10} {"ok  " if self.passed else "FAIL"}  {self.detail}'


def check_config(suite: benchmark.Suite, entry: Mapping[str, Any]) -> Check:
  """Every task's recorded config against the suite's cell for the entry's encoding."""
  name = entry['encoding']
  for task, results in entry['tasks'].items():
    recorded = benchmark.recorded_config(results['config'])
    today = benchmark.recorded_config(suite.cell_config(task, name))
    changes = config_lib.config_changes(recorded, today)
    if changes:
      return Check(
        'config',
        False,
        f'{task}: the run is not the suite\'s cell for {name!r}: '
        + config_lib.describe_changes(changes),
      )
  return Check(
    'config',
    True,
    f'every task\'s config is the suite\'s cell for {name!r} ({len(entry["tasks"])} tasks)',
  )


def _key(member: Mapping[str, Any]) -> tuple[Any, Any]:
  return member.get('seed'), member.get('data_seed')


def member_name(member: Mapping[str, Any]) -> str:
  """'seed 3, data 1' ('seed 3' in a suite of one data order)."""
  data = member.get('data_seed')
  return f'seed {member.get("seed")}' + ('' if data is None else f', data {data}')


def check_card(card: Mapping[str, Any], entry: Mapping[str, Any]) -> Check:
  """card.json's candidate row, task by task, against entry.json's members: the same
  members, the same scores."""
  name = card.get('candidate')
  if name != entry['encoding']:
    return Check(
      'card',
      False,
      f'card.json is the card of {name!r}, entry.json the run of {entry["encoding"]!r}',
    )
  count = 0
  for task, results in entry['tasks'].items():
    rows = [
      r for r in (card.get('tasks', {}).get(task) or {}).get('rows', []) if r.get('column') == name
    ]
    if not rows:
      return Check('card', False, f'card.json has no row of {name!r} on {task}')
    carded = {_key(m): m.get('score') for m in rows[0].get('member_scores', [])}
    run = {_key(m): None if m.get('diverged') else m.get('score') for m in results['members']}
    if set(carded) != set(run):
      return Check('card', False, f'{task}: card.json lists other members than entry.json')
    for k, score in run.items():
      if carded[k] != score:
        return Check(
          'card',
          False,
          f'{task} {member_name({"seed": k[0], "data_seed": k[1]})}: card.json says '
          f'{carded[k]}, entry.json {score}',
        )
    count += len(run)
  return Check('card', True, f'card.json\'s {count} member scores are entry.json\'s')


def member_of(
  entry: Mapping[str, Any], task: str, seed: int | None, data_seed: int | None
) -> dict[str, Any]:
  """The entry's record of one member of `task`; ValueError (one line) naming the members
  there are when it has no such member."""
  members = entry['tasks'][task]['members']
  for m in members:
    if (seed is None or m.get('seed') == seed) and (
      data_seed is None or m.get('data_seed') == data_seed
    ):
      return m
  there = ', '.join(
    f'{m.get("seed")}:{"" if m.get("data_seed") is None else m["data_seed"]}' for m in members
  )
  raise ValueError(
    f'{task} has no member {member_name({"seed": seed, "data_seed": data_seed})}; its members '
    f'(seed:data): {there}'
  )


def _curve(member: Mapping[str, Any]) -> Mapping[str, float]:
  for key in ('exact_match_by_length', 'accuracy_by_length'):
    if isinstance(member.get(key), Mapping):
      return member[key]
  return {}


def compare_member(
  task: str, recorded: Mapping[str, Any], rerun: Mapping[str, Any], tolerance: float
) -> Check:
  """The rerun member against the entry's: its score and its score at every test length,
  each within `tolerance` points (0: equal)."""
  where = f'{task} {member_name(recorded)}'
  a, b = recorded.get('score'), rerun.get('score')
  if a is None or b is None:
    return Check('rerun', a is None and b is None, f'{where}: score {a} in the entry, {b} rerun')
  worst, at = abs(a - b), 'its score'
  ca, cb = _curve(recorded), _curve(rerun)
  if set(ca) != set(cb):
    return Check('rerun', False, f'{where}: the rerun is evaluated at other lengths than the entry')
  for length in ca:
    d = abs(ca[length] - cb[length])
    if d > worst:
      worst, at = d, f'length {length}'
  passed = 100 * worst <= tolerance
  return Check(
    'rerun',
    passed,
    f'{where}: {100 * b:.4f}% rerun, {100 * a:.4f}% in the entry; largest difference '
    f'{100 * worst:.4g} points ({at}), tolerance {tolerance:g}',
  )
