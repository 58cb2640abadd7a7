"""The table a suite's tasks and test lengths are chosen by (`launch.benchmark --selection`):
per task and per longest test length, what that task alone separates among the suite's stored
baselines (`posenc.statistics.verdicts`, Holm over its pairs), its minimum detectable difference,
the encodings that succeed and the cell's training time.

Example:
  >>> from posenc import benchmark
  >>> from experiments import benchmarks
  >>> suite = benchmarks.get('tiny')
  >>> rows = selection(suite, benchmark.read_baselines(suite))
  >>> print(selection_markdown(rows))
  | task | score lengths | pairs separated | min. detectable difference | succeed | ...
  |---|---|---|---|---|---|
  | even_pairs | **9..12** | 0 of 1 | none | 0 of 2 | ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc import kinds
from posenc.statistics import verdicts


def _record(data: Mapping[str, Any], where: str) -> Any:
  return kinds.from_json(dict(data), where)


def scores_up_to(
  suite: benchmark.Suite, baselines: Mapping[str, Mapping[str, Any]], task: str, up_to: int
) -> dict[str, list[float]]:
  """{encoding: member scores} of `task` over its score lengths up to `up_to` only (the mean
  of each member's curve there), as if the suite tested no longer. Example: up_to=64 scores
  cpu-v2's even_pairs over 17..64 instead of 17..128."""
  out = {}
  for name, entry in baselines.items():
    if task not in entry['tasks']:
      continue
    record = _record(entry['tasks'][task], f'{name} {task}')
    first = record.evaluation.score_lengths[0]
    scores = []
    for m in record.members:
      curve = record.evaluation.curve(m, record.family)
      kept = [v for length, v in curve.items() if first <= length <= up_to]
      if kept:
        scores.append(float(np.mean(kept)))
    out[name] = scores
  return out


def _doublings(first: int, last: int) -> list[int]:
  """The test lengths a selection compares: every doubling of the training length (first - 1)
  up to `last`, and `last`. Example: _doublings(17, 128) == [32, 64, 128]."""
  out, length = [], 2 * (first - 1)
  while length < last:
    out.append(length)
    length *= 2
  return [*out, last]


def selection(
  suite: benchmark.Suite,
  baselines: Mapping[str, Mapping[str, Any]],
  among: Sequence[str] | None = None,
  alpha: float = verdicts.ALPHA,
) -> list[dict[str, Any]]:
  """The table a suite's tasks and test lengths are chosen by: per task and per longest test
  length (every doubling of the training length up to the suite's), the pairs of stored
  baselines that task alone separates (Holm over its pairs at `alpha`), those among `among`
  (Holm over their pairs alone), the minimum detectable difference at the suite's members,
  the encodings that succeed (mean >= 90%), and the cell's median training time; then one
  row for the suite as it stands (every task, Holm over every pair and task).
  """
  names = sorted(baselines)
  rows = []
  for task in suite.tasks:
    records = {
      n: _record(baselines[n]['tasks'][task], f'{n} {task}')
      for n in names
      if task in baselines[n]['tasks']
    }
    if len(records) < 2:
      continue
    first, last = next(iter(records.values())).evaluation.score_lengths
    seconds = [r.timing.get('train_s') for r in records.values() if r.timing]
    for length in _doublings(first, last):
      scores = scores_up_to(suite, baselines, task, length)
      alone = {n: {task: scores[n]} for n in records}
      row = {
        'task': task,
        'lengths': (first, length),
        'suite_lengths': length == last,
        'separated': len(verdicts.pairs_separated(alone, alpha=alpha)['separated']),
        'pairs': math.comb(len(records), 2),
        'succeed': sum(np.mean(alone[n][task]) >= 0.9 for n in alone),
        'encodings': len(records),
        'train_min': float(np.median([s for s in seconds if s])) / 60 if any(seconds) else None,
      }
      if among:
        chosen = [n for n in among if n in alone]
        row['among'] = len(verdicts.pairs_separated(alone, chosen, alpha)['separated'])
        row['among_pairs'] = math.comb(len(chosen), 2)
      groups = [alone[n][task] for n in alone]
      sd = verdicts.pooled_sd(groups)
      n = int(np.median([len(g) for g in groups]))
      row['members'] = n
      row['mdd'] = (
        None
        if sd is None
        else verdicts.minimum_detectable_difference(sd, n, n, alpha / row['pairs'])
      )
      rows.append(row)
  scores = card_lib.baseline_scores(suite, baselines)
  whole = {'task': 'all tasks', 'encodings': len(scores), 'pairs': math.comb(len(scores), 2)}
  whole['separated'] = len(verdicts.pairs_separated(scores, alpha=alpha)['separated'])
  if among:
    chosen = [n for n in among if n in scores]
    whole['among'] = len(verdicts.pairs_separated(scores, chosen, alpha)['separated'])
    whole['among_pairs'] = math.comb(len(chosen), 2)
  return [*rows, whole]


def selection_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
  """`selection`'s rows as a markdown table (the suite's own test lengths in bold)."""
  among = any('among' in r for r in rows)
  head = ['task', 'score lengths', 'pairs separated', *(['among'] if among else [])]
  head += ['min. detectable difference', 'succeed', 'training (min per cell)']
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in rows:
    lengths = f'{r["lengths"][0]}..{r["lengths"][1]}' if 'lengths' in r else 'every task'
    if r.get('suite_lengths'):
      lengths = f'**{lengths}**'
    cells = [r['task'], lengths, f'{r["separated"]} of {r["pairs"]}']
    if among:
      cells.append(f'{r["among"]} of {r["among_pairs"]}' if 'among' in r else '')
    mdd = r.get('mdd')
    cells += [
      '' if 'members' not in r else ('none' if mdd is None else f'{100 * mdd:.1f}'),
      '' if 'succeed' not in r else f'{r["succeed"]} of {r["encodings"]}',
      '' if r.get('train_min') is None else f'{r["train_min"]:.1f}',
    ]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'
