"""The language-model runs' section: perplexity by evaluation length (perplexity.md)."""
from __future__ import annotations

import math
import pathlib
from typing import Any, Sequence

import numpy as np

from posenc.report import records


def perplexity_table(runs: Sequence[records.PerplexityRun]) -> str:
  """Perplexity by length (rows) and encoding (columns), mean ± sd over the non-diverged
  members, for non-overlapping and sliding windows, per task, as markdown."""
  lines = ['# Language models: perplexity (per byte) by evaluation length, mean ± sd over '
           'members', '', 'sd is the sample standard deviation (ddof 1).', '']
  for task in sorted({r.task for r in runs}):
    mine = sorted((r for r in runs if r.task == task), key=lambda r: r.encoding)
    lengths = sorted({l for r in mine for l in r.lengths})
    train = sorted({r.train_length for r in mine})
    lines += [f'## {task} (trained at length {", ".join(map(str, train))})', '']
    titles = {'nonoverlapping': 'non-overlapping windows', 'sliding': 'sliding windows',
              'masked': 'masked language models (encoders), masked bytes'}
    present = [mode for mode in titles if any(mm and mode in mm for r in mine
                                                for mm in r.members)]
    for mode in present:
      title = titles[mode]
      cols = [r for r in mine if any(mm and mode in mm for mm in r.members)]
      lines += [f'### {title}', '', '| length | ' + ' | '.join(r.label for r in cols) + ' |',
                '|---|' + '---|' * len(cols)]
      for length in lengths:
        cells = []
        for r in cols:
          values = [m[mode][length] for m in r.members if m and length in m.get(mode, {})]
          cells.append('–' if not values else f'{np.mean(values):.3f}' + (
              f' ± {np.std(values, ddof=1):.3f}' if len(values) > 1 else ''))
        lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
      lines.append('')
    m = min(train)
    lines += [f'### relative change |ppl_L − ppl_m| / ppl_m (the first windows above, m = {m})',
              '',
              '| length | ' + ' | '.join(r.label for r in mine) + ' |',
              '|---|' + '---|' * len(mine)]
    for length in lengths:
      cells = []
      for r in mine:
        values = [abs(x[length] - x[m]) / x[m] for x in
                  (next(iter(mm.values())) for mm in r.members if mm)
                  if length in x and m in x]
        cells.append('–' if not values else f'{np.mean(values):.3f}')
      lines.append(f'| {length} | ' + ' | '.join(cells) + ' |')
    lines.append('')
  lines.append('Notes: lower is better; a model extrapolates (Qin et al. 2023) when its '
               'perplexity stays flat or falls past the training length. Built from '
               f'{len(runs)} run(s).')
  return '\n'.join(lines) + '\n'


def view(record: Any, path: pathlib.Path, metric: str) -> records.PerplexityRun:
  """A language-model run (`posenc.results.PerplexityResults`): per member (None when
  diverged) its perplexity by window mode and length."""
  del metric
  members = tuple(None if m.diverged else {
      mode: {n: math.nan if v is None else v for n, v in by.items()}
      for mode, by in m.perplexity_by_length.items()} for m in record.evaluation.members)
  return records.PerplexityRun(record.task, record.encoding, record.train_length,
                               record.evaluation.eval_lengths, members, str(path),
                               record.family)


def build(runs: Sequence[records.PerplexityRun], options: records.Options) -> records.Section:
  """The perplexity table ('perplexity', perplexity.md)."""
  del options
  text = perplexity_table(runs)
  return records.Section({'perplexity': text}, {records.PERPLEXITY_FILE: text.encode()})
