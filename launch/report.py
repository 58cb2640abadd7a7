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

import sys
from typing import Sequence

from absl import flags

from launch import cli
from launch import common
from launch import full_disk
from posenc import report as report_lib
from posenc.storage import store
from posenc.report import scorecard as scorecard_lib

_OUT = flags.DEFINE_string(
  'out', 'report', 'Output directory (default: ./report); created if needed.'
)
_FULL_GRID = flags.DEFINE_bool(
  'full_grid',
  False,
  'Every task and encoding of the study, not only those with runs; missing cells shown as missing.',
)
_SCORECARD = flags.DEFINE_bool(
  'scorecard',
  False,
  'Also the robustness scorecard over the members of every run (scorecard.md, '
  'scorecard.json, scorecard_<task>.png): mean, sd, median, IQR, max (the published '
  'statistic), success rate, longest length generalized, 95% intervals, pairwise '
  'comparisons (permutation tests, Holm over all of them).',
)
# Defaults None: a threshold given without --scorecard is refused, not ignored.
_SUCCESS = flags.DEFINE_float(
  'success_threshold', None, 'Scorecard: a member succeeds at a score >= this (default 0.9).'
)
_LENGTH = flags.DEFINE_float(
  'length_threshold',
  None,
  'Scorecard: a length is generalized at >= this accuracy (exact match for generated '
  'answers; default 0.95).',
)
_TOLERANCE = flags.DEFINE_float(
  'perplexity_tolerance',
  None,
  "Scorecard, language models: success within this share of the member's perplexity at the "
  'training length (default 0.1).',
)
_METRIC = flags.DEFINE_enum(
  'metric',
  'accuracy',
  report_lib.METRICS,
  'The score of the range tables and figures: per-token accuracy (default) or exact match '
  'of the whole output; grid runs are always judged by exact match.',
)


# The scorecard's flags: (flag, Thresholds field, valid range as text, check).
_THRESHOLDS = (
  (_SUCCESS, 'score', 'in (0, 1]', lambda v: 0 < v <= 1),
  (_LENGTH, 'length', 'in (0, 1]', lambda v: 0 < v <= 1),
  (_TOLERANCE, 'tolerance', 'a finite number >= 0', lambda v: 0 <= v < float('inf')),
)


def _thresholds() -> scorecard_lib.Thresholds | None:
  """The scorecard's thresholds from the flags (None without --scorecard)."""
  given = {flag.name: flag.value for flag, *_ in _THRESHOLDS if flag.value is not None}
  if not _SCORECARD.value:
    if given:
      name, value = next(iter(given.items()))
      cli.fail(f'--{name}={value} needs --scorecard (it is a threshold of the scorecard)')
    return None
  for flag, _, valid, ok in _THRESHOLDS:
    if flag.name in given and not ok(flag.value):
      cli.fail(f'--{flag.name}={flag.value} must be {valid}')
  return scorecard_lib.Thresholds(
    **{field: flag.value for flag, field, *_ in _THRESHOLDS if flag.name in given}
  )


def main(argv: Sequence[str] | None = None) -> None:
  """The command line (`argv` None: sys.argv; exits), or in a program the same checks and
  files for `argv` without the program name, returning when done:
  `main(['runs/parity', '--out=report'])`."""
  if argv is None:
    cli.run(_main)
  cli.call(_main, argv)


def _main(argv: Sequence[str]) -> None:
  workdirs = list(argv[1:])
  if not workdirs:
    cli.fail(
      'give the runs: python -m launch.report WORKDIR... [--out=DIR], each a run directory, '
      'a tree of them or a results.json file'
    )
  common.check_out_dir(_OUT.value, '--out')
  for workdir in workdirs:
    common.check_store(workdir, 'run')
  out = store.as_path(_OUT.value)
  thresholds = _thresholds()
  try:
    # Everything is rendered in memory first, so bad input leaves nothing on disk.
    report = report_lib.build_report(
      workdirs, full_grid=_FULL_GRID.value, metric=_METRIC.value, scorecard=thresholds
    )
  except (report_lib.ReportError, store.StoreError) as e:
    cli.fail(e)
  for problem in report.skipped:
    print(f'warning: skipped malformed run: {problem}', file=sys.stderr)
  kept = lambda: 'the files written before it are whole (each is written atomically)'
  try:
    with full_disk.on_full_disk(kept, str(out)):
      report_lib.write_files(out, report.files)
  except (OSError, store.StoreError) as e:
    cli.fail(f'cannot write to --out={_OUT.value!r}: {getattr(e, "strerror", None) or e}')
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
