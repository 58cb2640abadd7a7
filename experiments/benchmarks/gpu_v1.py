"""gpu-v1: defined on paper, unmeasured (docs/benchmark.md gives its estimated cost)."""

import os

from experiments.benchmarks import cpu_v1
from posenc import benchmark

SUITE = benchmark.Suite(
  name='gpu-v1',
  version=1,
  tasks=cpu_v1.TASKS,
  baselines=cpu_v1.BASELINES,
  config=cpu_v1.config,
  directory=os.path.join(os.path.dirname(__file__), 'gpu-v1'),
  summary='provisional',
  measured=False,
)
