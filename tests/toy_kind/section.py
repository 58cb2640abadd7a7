"""The toy kind's section of a report: toy.md, one line per run."""

from posenc.sections import core


def check(record, path, metric) -> None:
  del record, path, metric  # every toy run can be reported


def build(runs, options: core.Options) -> core.Section:
  del options
  lines = ['# Toy', ''] + [
    f'- {run.record.task} / {run.record.encoding}: worst member '
    f'{min(m.score for m in run.record.members):.3f}'
    for run in runs
  ]
  text = '\n'.join(lines) + '\n'
  return core.Section({'toy': text}, {'toy.md': text.encode()}, tables=('toy.md',))
