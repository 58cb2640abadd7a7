"""gpu-v1: the tasks of cpu-v1 at the study's model size, for one GPU. Defined on paper and
unmeasured: no checksums, no baselines, no measured cost (docs/benchmark.md says why).

Every cell is `experiments/rpe_decoder.py` at the study's scale (5 layers, width 64, 8
heads, lengths 1..40 in training at batch 128, 41..500 in evaluation) with 100,000 steps
instead of 2,000,000, five seeds, and 128 examples at every tenth length.
"""

import os

from experiments import rpe_decoder
from experiments.benchmarks import cpu_v1
from posenc import benchmark


def config(task: str, encoding: str):
  c = rpe_decoder.get_config(f'task={task},encoding={encoding}')
  c.train.steps = 100_000
  c.seeds = [0, 1, 2, 3, 4]
  c.eval.examples_per_length = 128
  c.eval.stride = 10
  return c


SUITE = benchmark.Suite(
  name='gpu-v1',
  version=1,
  tasks=cpu_v1.TASKS,
  baselines=cpu_v1.BASELINES,
  config=config,
  directory=os.path.join(os.path.dirname(__file__), 'gpu-v1'),
  summary=(
    'gpu-v1 (unmeasured): the tasks of cpu-v1 with the study-size decoder (5 layers), '
    '100,000 steps, 5 seeds, lengths 1..40 in training and 41..500 in evaluation.'
  ),
  measured=False,
)
