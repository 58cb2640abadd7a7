"""The tables `launch.benchmark` prints of a suite's stored baselines, nothing trained:
--coverage (`coverage_table`), --separated (`separated`) and --selection (`selection_table`).
Flag values come in as arguments; bad ones are one line, exit 2 (`common.fail`)."""

import json
import os

import numpy as np

from experiments import benchmarks
from launch import common
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.storage import io

# The numbers of members per cell --separated sizes a new suite version at.
SIZING = (8, 12, 16)


def coverage_table(
  suite: benchmark.Suite, draws: int, leave_one_out: bool, out: str | None
) -> None:
  """The coverage table, simulated from `suite`'s stored cells."""
  from posenc.statistics import coverage  # Deferred: only --coverage simulates.

  if out and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
    common.fail(f'--coverage_json={out}: its directory does not exist')
  baselines = benchmark.read_baselines(suite)
  stored = card_lib.baseline_cells(suite, baselines)
  if len(stored) < 3:
    common.fail(f'suite {suite.name} stores {len(stored)} cells; the coverage table needs 3')
  examples = sorted(e for _, _, e in stored)[len(stored) // 2]
  chance = card_lib.task_chances(suite, baselines)
  truths, prior = coverage.truths_of(stored, examples, leave_one_out, chance)
  ns = sorted(set(range(2, 17)) | set(benchmarks.member_counts()))
  result = coverage.simulate(truths, prior, ns, draws, examples)
  result['suite'] = suite.name
  result['leave_one_out'] = leave_one_out
  if out:
    io.write_text_atomic(out, json.dumps(result, indent=1) + '\n')
  print(f'Coverage of the 95% intervals, truths from the stored baselines of {suite.name}:')
  print()
  print(coverage.markdown(result), end='')
  failed = coverage.failures(result)
  must = (
    f'{100 * coverage.THRESHOLD:g}% on every truth but the stress ones at every n, and '
    f'{100 * coverage.FAILURE_THRESHOLD:g}% on the failure families from n = '
    f'{coverage.FAILURE_FROM}'
  )
  print(
    f'\n{coverage.CHOSEN}: '
    + (
      f'{len(failed)} (truth, n) under what it must cover ({must}): {"; ".join(failed)}'
      if failed
      else f'covers at least {must}.'
    )
  )


def separated(
  suite: benchmark.Suite, baselines, among: list[str], alpha: float, explicit: bool
) -> None:
  """Which pairs of stored baselines the suite separates, and what it can detect."""
  from posenc.statistics import verdicts  # Deferred: only --separated tests.

  scores = card_lib.baseline_scores(suite, baselines)
  among = among or sorted(scores)
  unknown = [name for name in among if name not in scores]
  if unknown or len(among) < 2:
    common.fail(
      f'--among names {unknown} that suite {suite.name} does not store; stored: '
      f'{", ".join(sorted(scores))}'
      if unknown
      else '--among needs two encodings or more'
    )
  result = verdicts.pairs_separated(scores, among, alpha)
  if explicit and result['comparisons'] and result['smallest_possible_p'] > result['first_level']:
    n = min(len(s) for name in among for s in scores[name].values())
    common.fail(
      f'--alpha={alpha:g} cannot be reached on suite {suite.name}: with {n} members '
      f'against {n} no comparison reaches p <= {result["first_level"]:.2g} (Holm over '
      f'{result["comparisons"]} comparisons); the smallest possible p is '
      f'{result["smallest_possible_p"]:.2g}'
    )
  found = result['separated']
  exactness = 'exact' if result['exact'] else 'Monte-Carlo where the members are too many'
  print(
    f'suite {suite.name}: {len(found)} of the {result["pairs"]} pairs of {len(among)} '
    f'encodings separated on at least one task ({verdicts.TEST_NAME}, {exactness}; Holm over '
    f'{result["comparisons"]} comparisons at family-wise {alpha:g}: the first step '
    f'needs p <= {result["first_level"]:.2g}; the smallest p is {result["smallest_p"]:.2g})'
  )
  for s in found:
    print(
      f'  {s["a"]} / {s["b"]}: '
      + ', '.join(f'{t} ({h} higher)' for t, h in zip(s['tasks'], s['higher']))
    )
  if result['undecided']:
    print(
      f'undecided (a Monte-Carlo p-value within {verdicts.SE_MARGIN:g} standard errors of '
      f'deciding otherwise): {len(result["undecided"])} pairs'
    )
    for s in result['undecided']:
      print(f'  {s["a"]} / {s["b"]}: {", ".join(s["tasks"])}')
  # A candidate's card compares it with every stored baseline on every task they hold,
  # whichever --among names: a smaller family than every pair's.
  card_family = sum(1 for name in scores for task in suite.tasks if scores[name].get(task))
  levels = {
    f"a candidate's card ({card_family} comparisons: {len(scores)} stored baselines on their "
    'tasks)': alpha / card_family,
    f'these pairs ({result["comparisons"]})': result['first_level'],
  }
  print(
    f'minimum detectable difference (points; {100 * verdicts.POWER:g}% power at Holm\'s '
    'first level, normal scores with the pooled sd), by members per cell:'
  )
  for task in suite.tasks:
    groups = [scores[name][task] for name in among if task in scores[name]]
    sd = verdicts.pooled_sd(groups)
    if sd is None:
      continue
    n = int(np.median([len(g) for g in groups]))
    for what, level in levels.items():
      mdd = {
        k: verdicts.minimum_detectable_difference(sd, k, k, level) for k in sorted({n, *SIZING})
      }
      print(
        f'  {task} (pooled sd {100 * sd:.1f}), {what}: '
        + ', '.join(f'{k}: ' + ('none' if d is None else f'{100 * d:.1f}') for k, d in mdd.items())
      )


def selection_table(suite: benchmark.Suite, baselines, among: list[str], alpha: float) -> None:
  """Per task and longest test length: what the task alone separates (card.selection)."""
  from posenc.benchmark import selection  # Deferred: only --selection and --separated test.
  from posenc.statistics import verdicts

  unknown = [name for name in among or () if name not in baselines]
  if unknown:
    common.fail(
      f'--among names {unknown} that suite {suite.name} does not store; stored: '
      f'{", ".join(sorted(baselines))}'
    )
  rows = selection.selection(suite, baselines, among, alpha)
  print(
    f'suite {suite.name}, {len(baselines)} stored baselines; a task alone: Holm over its pairs '
    f'at family-wise {alpha:g}; "all tasks": Holm over every pair and task; minimum '
    f'detectable difference in points ({100 * verdicts.POWER:g}% power at Holm\'s first level '
    'of the task alone, normal scores with the pooled sd)'
  )
  print(selection.selection_markdown(rows), end='')
