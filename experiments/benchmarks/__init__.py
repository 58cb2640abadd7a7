"""The benchmark suites of `launch.benchmark`, by name, each one version of a fixed list of
cells with its frozen-set checksums and stored baselines in the directory of its name
(`posenc.benchmark`; docs/benchmark.md).

  cpu-v2   the default: three tasks in decoder form, 12 members per cell, on a 2-core CPU
           (sized by measured separating power; stored baselines)
  cpu-v1   its first version: 3 members per cell, too few to separate (superseded by cpu-v2)
  tiny     seconds, for tests (stored baselines of two encodings)
  gpu-v1   the study's scale for one GPU (defined on paper: no checksums or baselines yet)

`DEFAULT` is the suite `launch.benchmark` runs without --suite. A new version of a suite
is registered here, named in the old one's `superseded_by` and made the default.
"""

import importlib


from experiments.benchmarks import cpu_v1
from experiments.benchmarks import cpu_v2
from experiments.benchmarks import gpu_v1
from experiments.benchmarks import tiny
from posenc import benchmark
from posenc import suggest

SUITES: dict[str, benchmark.Suite] = {
  s.name: s for s in (cpu_v2.SUITE, cpu_v1.SUITE, tiny.SUITE, gpu_v1.SUITE)
}
DEFAULT = 'cpu-v2'
# The studies whose pages read their runs through the scorecard (`launch.report
# --scorecard`), as (experiment module, its arg): their members per cell are simulated in the
# coverage table of the intervals, with every suite's (`member_counts`).
SCORECARD_STUDIES = (('robustness', 'cpu'), ('robustness', None), ('encodings_2024', 'cpu'))


def get(name: str) -> benchmark.Suite:
  """The suite `name`; BenchmarkError (one line) listing the suites otherwise."""
  if name not in SUITES:
    raise benchmark.BenchmarkError(
      f'unknown suite {name!r}{suggest.did_you_mean(name, SUITES)}; valid suites: {", ".join(SUITES)}'
    )
  return SUITES[name]


def members_per_cell(config) -> int:
  """The members of one row of a cell's scorecard: seeds x data seeds (each learning rate
  is a row of its own)."""
  return len(config.seeds) * len(config.get('data_seeds') or [None])


def member_counts() -> list[int]:
  """Every number of members per cell that a registered suite or a scorecard study
  compares: the n the coverage table must include."""
  counts = {
    members_per_cell(suite.cell_config(task, 'none'))
    for suite in SUITES.values()
    for task in suite.tasks
  }
  for module, arg in SCORECARD_STUDIES:
    config = importlib.import_module(f'experiments.{module}').get_config(arg)
    counts.add(members_per_cell(config))
  return sorted(counts)
