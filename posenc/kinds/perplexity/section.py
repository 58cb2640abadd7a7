"""The language-model runs' section: perplexity by evaluation length (perplexity.md), from
`PerplexityResults` records (record.py).

Example:
  >>> print(perplexity_table(runs))   # doctest: +SKIP
  # Language models: perplexity (per byte) by evaluation length, mean ± sd over members
"""

from __future__ import annotations

import math
import pathlib
from typing import Sequence

import numpy as np

from posenc.models import families
from posenc import results as results_lib
from posenc.sections import core
from posenc.sections import load
from posenc.kinds.perplexity import record as perplexity_record

FILE = 'perplexity.md'


def label(record: results_lib.Results) -> str:
  """A run's column: its encoding, and its model family unless a causal language model's."""
  causal = families.of(record.family).causal
  return record.encoding if causal else f'{record.encoding} ({record.family})'


def by_mode(member: perplexity_record.PerplexityMember) -> dict[str, dict[int, float]] | None:
  """A member's perplexity by window mode and length (NaN where none was recorded); None
  when it diverged."""
  if member.diverged:
    return None
  return {
    mode: {n: math.nan if v is None else v for n, v in by.items()}
    for mode, by in member.perplexity_by_length.items()
  }


def perplexity_table(runs: Sequence[load.RunFile]) -> str:
  """Perplexity by length (rows) and encoding (columns), mean ± sd over the non-diverged
  members, for non-overlapping and sliding windows, per task, as markdown."""
  lines = [
    '# Language models: perplexity (per byte) by evaluation length, mean ± sd over members',
    '',
    'sd is the sample standard deviation (ddof 1).',
    '',
  ]
  for task in sorted({r.task for _, r in runs}):
    # Each run with its members by mode, in the order of their encodings.
    mine = [
      (r, [by_mode(m) for m in r.members])
      for r in sorted((r for _, r in runs if r.task == task), key=lambda r: r.encoding)
    ]
    lengths = sorted({l for r, _ in mine for l in r.evaluation.eval_lengths})
    train = sorted({r.train_length for r, _ in mine})
    lines += [f'## {task} (trained at length {", ".join(map(str, train))})', '']
    titles = {
      'nonoverlapping': 'non-overlapping windows',
      'sliding': 'sliding windows',
      'masked': 'masked language models (encoders), masked bytes',
    }
    present = [
      mode for mode in titles if any(mm and mode in mm for _, members in mine for mm in members)
    ]
    for mode in present:
      title = titles[mode]
      cols = [(r, members) for r, members in mine if any(mm and mode in mm for mm in members)]
      lines += [
        f'### {title}',
        '',
        '| length | ' + ' | '.join(label(r) for r, _ in cols) + ' |',
        '|---|' + '---|' * len(cols),
      ]
      for length in lengths:
        cells = []
        for _, members in cols:
          values = [m[mode][length] for m in members if m and length in m.get(mode, {})]
          cells.append(
            '–'
            if not values
            else f'{np.mean(values):.3f}'
            + (f' ± {np.std(values, ddof=1):.3f}' if len(values) > 1 else '')
          )
        lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
      lines.append('')
    m = min(train)
    lines += [
      f'### relative change |ppl_L − ppl_m| / ppl_m (the first windows above, m = {m})',
      '',
      '| length | ' + ' | '.join(label(r) for r, _ in mine) + ' |',
      '|---|' + '---|' * len(mine),
    ]
    for length in lengths:
      cells = []
      for _, members in mine:
        # The first window mode: the one the score and `curve` read.
        values = [
          abs(x[length] - x[m]) / x[m]
          for x in (next(iter(mm.values())) for mm in members if mm)
          if length in x and m in x
        ]
        cells.append('–' if not values else f'{np.mean(values):.3f}')
      lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
    lines.append('')
  lines.append(
    'Notes: lower is better; a model extrapolates (Qin et al. 2023) when its '
    'perplexity stays flat or falls past the training length. Built from '
    f'{len(runs)} run(s).'
  )
  return '\n'.join(lines) + '\n'


def check(record: results_lib.Results, path: pathlib.Path, metric: str) -> None:
  """Every well-formed language-model run can be reported (in perplexity, whatever
  `metric`)."""
  del record, path, metric


def build(runs: Sequence[load.RunFile], options: core.Options) -> core.Section:
  """The perplexity table ('perplexity', perplexity.md)."""
  del options
  text = perplexity_table(runs)
  return core.Section({'perplexity': text}, {FILE: text.encode()}, tables=(FILE,))
