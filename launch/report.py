"""The study's Table 1, Table 4 and Figure 4, and the arithmetic study's region table and
heatmaps, from run directories.

Usage:
  python -m launch.report WORKDIR... [--out=DIR] [--full_grid] [--metric=accuracy|exact_match]
      [--scorecard [--success_threshold=0.9] [--length_threshold=0.95]
       [--perplexity_tolerance=0.1]]

Each WORKDIR is a run directory (holding results.json), a tree of them (a sweep directory) or a
results.json file. Range runs (the study's tasks) give DIR/table1.md, DIR/table4.md and
DIR/figure4_<task>.png; grid runs (the arithmetic study: exact match on a grid of operand
lengths) give DIR/arithmetic.md (exact match by region, per task, architecture and encoding)
and one DIR/heatmap_<task>__<encoding>__<architecture>__seed<k>_lr<rate>.png per member;
language-model runs (perplexity by length) give DIR/perplexity.md; task-hinting runs
(accuracy and edit distance by test length and distribution) give DIR/hints.md and one
DIR/hints_<task>.png per task. --scorecard adds the robustness scorecard of every run
(posenc/report/scorecard.py): DIR/scorecard.md, DIR/scorecard.json and one
DIR/scorecard_<task>.png per task. DIR defaults to ./report; every table is printed.
--metric=exact_match makes the range tables and figures report the share of examples whose
every output token is right instead of the per-token accuracy (range runs that predate that
metric are then malformed); grid runs are always judged by exact match. Malformed runs are
skipped with a warning on stderr and listed in the tables' notes. Bad input (a missing
path, no results.json, no well-formed run, an --out that is empty, a file or below one, an
unknown --metric, a scorecard threshold without --scorecard) gets a one-line error on
stderr and exit status 2, before anything is written; each file is written atomically (a
temporary file, then os.replace), so a disk that fills up is one line too and leaves whole
files only.

Example:
  python -m launch.report sweeps/table1 runs/extra_cell --out=report
  python -m launch.report sweeps/decoder --metric=exact_match --out=report_exact
  python -m launch.report runs/abacus_cpu --out=runs/abacus_cpu/report
"""

import argparse
import pathlib
import sys
from typing import NoReturn, Sequence

from launch import common
from posenc import report as report_lib
from posenc.report import scorecard as scorecard_lib


class _Parser(argparse.ArgumentParser):
  """argparse with the project's one-line errors and exit status 2."""

  def error(self, message: str) -> NoReturn:
    self.exit(
      2,
      f'error: {message} (usage: python -m launch.report WORKDIR... [--out=DIR] '
      '[--full_grid] [--metric=accuracy|exact_match])\n',
    )


def _parse(argv: Sequence[str]) -> argparse.Namespace:
  parser = _Parser(
    prog='python -m launch.report',
    description=(
      'Tables 1 and 4 and Figure 4 of the study, and the arithmetic '
      "study's region table and heatmaps, from run directories."
    ),
  )
  parser.add_argument(
    'workdirs',
    nargs='+',
    metavar='WORKDIR',
    help='run directories, sweep directories or results.json files',
  )
  parser.add_argument(
    '--out', default='report', help='output directory (default: ./report); created if needed'
  )
  parser.add_argument(
    '--full_grid',
    action='store_true',
    help='every task and encoding of the study, not only those with runs; '
    'missing cells shown as missing',
  )
  parser.add_argument(
    '--scorecard',
    action='store_true',
    help='also the robustness scorecard over the members of every run '
    '(scorecard.md, scorecard.json, scorecard_<task>.png): mean, sd, '
    'median, IQR, max (the published statistic), success rate, longest '
    'length generalized, bootstrap intervals, pairwise comparisons',
  )
  # Defaults None: a threshold given without --scorecard is refused, not ignored.
  parser.add_argument(
    '--success_threshold',
    type=float,
    default=None,
    help="scorecard: a member succeeds at a score >= this (default 0.9)",
  )
  parser.add_argument(
    '--length_threshold',
    type=float,
    default=None,
    help='scorecard: a length is generalized at >= this accuracy (exact '
    'match for generated answers; default 0.95)',
  )
  parser.add_argument(
    '--perplexity_tolerance',
    type=float,
    default=None,
    help='scorecard, language models: success within this share of the '
    "member's perplexity at the training length (default 0.1)",
  )
  parser.add_argument(
    '--metric',
    choices=tuple(report_lib.METRICS),
    default='accuracy',
    help='the score of the range tables and figures: per-token accuracy '
    '(default) or exact match of the whole output; grid runs are always '
    'judged by exact match',
  )
  return parser.parse_args(argv)


def _fail(message: str) -> NoReturn:
  print('error: ' + ' '.join(message.split()), file=sys.stderr)  # Always one line.
  sys.exit(2)


# The scorecard's flags: (name, Thresholds field, valid range as text, check).
_THRESHOLDS = (
  ('--success_threshold', 'score', 'in (0, 1]', lambda v: 0 < v <= 1),
  ('--length_threshold', 'length', 'in (0, 1]', lambda v: 0 < v <= 1),
  ('--perplexity_tolerance', 'tolerance', 'a finite number >= 0', lambda v: 0 <= v < float('inf')),
)


def _thresholds(args: argparse.Namespace) -> scorecard_lib.Thresholds | None:
  """The scorecard's thresholds from the flags (None without --scorecard)."""
  given = {
    flag: getattr(args, flag[2:]) for flag, *_ in _THRESHOLDS if getattr(args, flag[2:]) is not None
  }
  if not args.scorecard:
    if given:
      flag, value = next(iter(given.items()))
      _fail(f'{flag}={value} needs --scorecard (it is a threshold of the scorecard)')
    return None
  for flag, _, valid, ok in _THRESHOLDS:
    if flag in given and not ok(given[flag]):
      _fail(f'{flag}={given[flag]} must be {valid}')
  return scorecard_lib.Thresholds(
    **{field: given[flag] for flag, field, *_ in _THRESHOLDS if flag in given}
  )


def main(argv: Sequence[str] | None = None) -> None:
  args = _parse(sys.argv[1:] if argv is None else argv)
  common.check_out_dir(args.out, '--out')
  out = pathlib.Path(args.out)
  thresholds = _thresholds(args)
  try:
    # Everything is rendered in memory first, so bad input leaves nothing on disk.
    report = report_lib.build_report(
      args.workdirs, full_grid=args.full_grid, metric=args.metric, scorecard=thresholds
    )
  except report_lib.ReportError as e:
    _fail(str(e))
  for problem in report.skipped:
    print(f'warning: skipped malformed run: {problem}', file=sys.stderr)
  kept = lambda: 'the files written before it are whole (each is written atomically)'
  try:
    with common.on_full_disk(kept, str(out)):
      report_lib.write_files(out, report.files)
  except OSError as e:
    _fail(f'cannot write to --out={args.out!r}: {e.strerror or e}')
  for text in report.texts.values():
    print(text)
  written = [f'{out}/{name}' for name in report.tables] + list(report.figures)
  print(
    f'wrote {", ".join(written[:-1])} and {written[-1]}'
    if len(written) > 1
    else f'wrote {written[0]}'
  )


if __name__ == '__main__':
  main()
