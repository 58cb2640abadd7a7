"""The notes every table of merged runs shares (the range tables' cells, the region table's
entries): members, divergence, training, model families, columns split by options, merged
runs, devices and skipped runs. A kind's table puts its own notes first (what its scores
average over) and words its entries (`Words`).

An entry is anything with `members` (each with `seed`, `data_seed`, `learning_rate`,
`diverged`), `runs` (`load.RunFile`s), `encoding` and `label`.

Example:
  >>> words = Words(entry='cell', entries='cells', run='run', scores='scores')
  >>> notes = merged_run_notes(cells, skipped, lambda c: c.task, words)  # doctest: +SKIP
  >>> notes[-1]                                                          # doctest: +SKIP
  'Built from 2 runs in 2 cells (devices: cpu).'
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Sequence

from posenc.sections import load
from posenc.sections import tables


@dataclasses.dataclass(frozen=True)
class Words:
  """How a table's notes name its entries: e.g. ('cell', 'cells', 'run', 'scores') for the
  range tables, ('entry', 'entries', 'grid run', 'entries') for the region table. `scores`
  is what a diverged member is left out of."""

  entry: str
  entries: str
  run: str
  scores: str


def which(group: Sequence[Any], total: int, name: Callable[[Any], str], entries: str) -> str:
  """'all N cells' when `group` is every entry, else their names, shortened past 8."""
  if len(group) == total:
    return f'all {total} {entries}'
  names = [name(e) for e in group]
  if len(names) > 8:
    return ', '.join(names[:8]) + f' and {len(names) - 8} more'
  return ', '.join(names)


def merged_run_notes(
  ordered: Sequence[Any],
  skipped: Sequence[str],
  name: Callable[[Any], str],
  words: Words,
  study_steps: int | None = None,
  split_detail: Callable[[Sequence[Any]], str] | None = None,
  merge_detail: Callable[[Any], str] | None = None,
) -> list[str]:
  """The notes on `ordered`, the table's entries in its order, and the `skipped` malformed
  runs. `study_steps` (the study's training steps) marks entries trained for fewer;
  `split_detail(entries)` and `merge_detail(entry)` add to the note on an encoding split
  into columns and on an entry that merges runs."""
  total = len(ordered)

  def among(group):
    return which(group, total, name, words.entries)

  by_count: dict[str, list[Any]] = collections.defaultdict(list)
  for entry in ordered:
    by_count[tables.members_text(entry.members)].append(entry)
  notes = [
    f'Members per {words.entry}: '
    + '; '.join(f'{text} in {among(group)}' for text, group in by_count.items())
    + '.'
  ]
  diverged = [(e, sum(m.diverged for m in e.members)) for e in ordered]
  listed = ', '.join(f'{name(e)} ({k} of {len(e.members)})' for e, k in diverged if k)
  if listed:
    notes.append(f'Diverged members, left out of the {words.scores}: {listed}.')
  notes += _training_notes(ordered, among, study_steps)
  notes += _column_notes(ordered, split_detail)
  for entry in ordered:
    if len(entry.runs) > 1:
      detail = merge_detail(entry) if merge_detail else ''
      notes.append(
        f'{name(entry)} merges the members of {len(entry.runs)} runs '
        f'({", ".join(str(r.path.parent) for r in entry.runs)}); identical members count '
        f'once{detail}.'
      )
  devices = sorted({str(r.versions.get('device_kind', '?')) for e in ordered for _, r in e.runs})
  runs = sum(len(e.runs) for e in ordered)
  entries = words.entry if total == 1 else words.entries
  notes.append(
    f'Built from {runs} {words.run}{"s" * (runs != 1)} in {total} {entries}'
    f' (devices: {", ".join(devices)}).'
  )
  if skipped:
    notes.append(
      f'Skipped {len(skipped)} malformed run{"s" * (len(skipped) != 1)}: '
      + '; '.join(skipped)
      + '.'
    )
  return notes


def _training_notes(
  ordered: Sequence[Any], among: Callable[[Sequence[Any]], str], study_steps: int | None
) -> list[str]:
  """The training budget: stopped before the configured steps, or short of the study's."""
  by_steps: dict[tuple[int, int], list[Any]] = collections.defaultdict(list)
  for entry in ordered:
    for key in sorted({(r.train_steps, load.planned_steps(r)) for _, r in entry.runs}):
      by_steps[key].append(entry)
  notes = []
  for (steps, planned), group in sorted(by_steps.items(), reverse=True):
    if steps < planned:
      state = f'Not fully trained: stopped at {steps:,} of {planned:,} configured steps'
    elif study_steps is not None and steps < study_steps:
      state = f"Not fully trained: {steps:,} steps, of the study's {study_steps:,}"
    else:
      state = f'Trained {steps:,} steps'
    notes.append(f'{state}: {among(group)}.')
  return notes


def _column_notes(
  ordered: Sequence[Any], split_detail: Callable[[Sequence[Any]], str] | None
) -> list[str]:
  """The model families, and the encodings split into columns by their options: an
  encoding's columns beyond one per family are those of its options."""
  notes = []
  families = sorted({r.family for e in ordered for _, r in e.runs})
  if len(families) > 1:
    notes.append(
      f'Runs of {len(families)} model families ({", ".join(families)}): each column '
      'names its family; runs of different families are never merged.'
    )
  by_encoding: dict[str, list[Any]] = collections.defaultdict(list)
  for entry in ordered:
    by_encoding[entry.encoding].append(entry)
  for encoding, group in by_encoding.items():
    labels = sorted({e.label for e in group})
    if len(labels) > len({r.family for e in group for _, r in e.runs}):
      detail = split_detail(group) if split_detail else ''
      notes.append(
        f'{encoding} is split by encoding options into {len(labels)} columns '
        f'({"; ".join(labels)}); their runs are never merged{detail}.'
      )
  return notes
