"""baselines.md of a suite (`baselines_table`): per task each stored baseline's mean,
interval, success and longest length, ranked, and which pairs the suite separates under Holm
(from `card.baseline_scores`).

Example:
  >>> from experiments import benchmarks
  >>> suite = benchmarks.get('cpu-v2')
  >>> print(baselines_table(suite, benchmark.read_baselines(suite)))   # doctest: +SKIP
  # Baselines of suite cpu-v2 (version 2)
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.statistics import intervals
from posenc.report import scorecard as scorecard_lib
from posenc.statistics import verdicts


def baselines_table(
  suite: benchmark.Suite,
  baselines: Mapping[str, Mapping[str, Any]],
  alpha: float = verdicts.ALPHA,
) -> str:
  """baselines.md: per task every stored baseline's mean [interval], success and longest
  length, ranked, and the minimum detectable difference between two of them; which pairs
  the suite separates (`verdicts.pairs_separated`, Holm over every pair and task); the
  command and versions that made them."""
  prior = card_lib.suite_pool(suite, baselines)
  separated = verdicts.pairs_separated(card_lib.baseline_scores(suite, baselines), alpha=alpha)
  lines = [
    f'# Baselines of suite {suite.name} (version {suite.version})',
    '',
    *card_lib.old_version_note({'name': suite.name, 'superseded_by': suite.superseded_by}),
    suite.summary,
    '',
    f'Mean ± sd over the members [95% interval: {intervals.MEAN_METHOD}'
    + (
      ''
      if prior is None
      else f'; pooled dispersion {prior.dispersion:.4f} over {prior.cells} stored cells'
    )
    + f']; success [95% {intervals.SUCCESS_METHOD} interval]. Pairs are compared by a '
    f'{verdicts.TEST_NAME}, every pair on every task, Holm over all '
    f'{separated["comparisons"]} comparisons at family-wise level {alpha:g} (the first step '
    f'needs p ≤ {card_lib.p_short(separated["first_level"])}).',
    '',
  ]
  for task, reason in suite.tasks.items():
    lines += _task_section(baselines, task, reason, prior, separated['first_level'])
  found = separated['separated']
  lines += [
    '## Pairs separated',
    '',
    f'{len(found)} of the {separated["pairs"]} pairs of stored baselines are separated on at '
    'least one task'
    + (
      '.'
      if found or separated['smallest_p'] is None
      else f': the smallest p-value of any comparison is {card_lib.p_short(separated["smallest_p"])}.'
    ),
    '',
    *[
      f'- {s["a"]} and {s["b"]}: '
      + ', '.join(f'{task} ({higher} higher)' for task, higher in zip(s['tasks'], s['higher']))
      for s in found
    ],
    *([''] if found else []),
  ]
  lines += _made_lines(suite, baselines)
  return '\n'.join(lines) + '\n'


def _task_section(baselines, task: str, reason: str, prior, level) -> list[str]:
  """baselines.md's section of `task`: why it is in, the minimum detectable difference
  between two stored baselines at Holm's first `level`, and their ranked table ([] if no
  baseline holds the task)."""
  records = [
    (name, card_lib.record_of(e['tasks'][task], f'{name} {task}'))
    for name, e in sorted(baselines.items())
    if task in e['tasks']
  ]
  if not records:
    return []
  card = scorecard_lib.scorecard(records, prior=prior, comparisons=False)
  rows = sorted(card['rows'], key=card_lib.sort_key)
  groups = [card_lib.member_scores(r) for r in rows]
  n = int(np.median([len(g) for g in groups])) if groups else 0
  sd = verdicts.pooled_sd(groups)
  detectable = {
    'difference': None
    if sd is None or level is None or n < 1
    else verdicts.minimum_detectable_difference(sd, n, n, level),
    'pooled_sd': sd,
    'baselines': len(rows),
    'n_candidate': n,
    'n_baseline': n,
    'level': level,
    'power': verdicts.POWER,
    'smallest_p': 2 / verdicts.splits_count(n, n) if n else None,
  }
  lines = [
    f'## {task}',
    '',
    f'Why it is in: {reason}',
    '',
    card_lib.detectable_text(detectable).replace('against', 'against another\'s', 1),
    '',
    '| rank | encoding | mean ± sd [95% CI] | success [95% CI] | longest generalized |',
    '|---|---|---|---|---|',
  ]
  rank_of = card_lib.ranks(rows)
  for row in rows:
    lines.append(
      f'| {rank_of[row["column"]]} | {row["column"]} | {card_lib.mean_text(row["score"])} | '
      f'{card_lib.success_text(row)} | {card_lib.longest_text(row["longest_generalized"])} |'
    )
  lines.append('')
  return lines


def _made_lines(suite, baselines) -> list[str]:
  """The baselines the suite names but does not store, and the commands that made those it
  stores, with their versions, machines and times."""
  made = sorted(
    {
      (
        ' '.join(e['command']),
        e['posenc_version'],
        e['packages'].get('jax'),
        e['machine']['machine'],
        e['machine']['cpus'],
        round(e['seconds']),
      )
      for e in baselines.values()
    },
    key=lambda m: m[0],
  )
  missing = [name for name in suite.baselines if name not in baselines]
  lines = [f'Not stored yet: {", ".join(missing)}.', ''] if missing else []
  lines += ['## How they were made', '']
  lines += [
    f'- `{cmd}`: posenc {v}, jax {jax}, {machine} ({cpus} CPUs), {secs / 60:.1f} min'
    for cmd, v, jax, machine, cpus, secs in made
  ]
  return lines
