"""The benchmark suites of `launch.benchmark`, by name, each one version of a fixed list of
cells with its frozen-set checksums and stored baselines in the directory of its name
(`posenc.benchmark`; docs/benchmark.md).

  cpu-v1   the study's tasks in decoder form on a 2-core CPU (measured, stored baselines)
  tiny     seconds, for tests (stored baselines of two encodings)
  gpu-v1   the study's scale for one GPU (defined on paper: no checksums or baselines yet)
"""

from experiments.benchmarks import cpu_v1
from experiments.benchmarks import gpu_v1
from experiments.benchmarks import tiny
from posenc import benchmark

SUITES: dict[str, benchmark.Suite] = {s.name: s for s in (cpu_v1.SUITE, tiny.SUITE, gpu_v1.SUITE)}


def get(name: str) -> benchmark.Suite:
  """The suite `name`; BenchmarkError (one line) listing the suites otherwise."""
  if name not in SUITES:
    raise benchmark.BenchmarkError(f'unknown suite {name!r}; valid suites: {", ".join(SUITES)}')
  return SUITES[name]
