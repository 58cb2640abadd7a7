"""cpu-v2: two tasks in decoder form with twelve members per cell, chosen by measured
separating power (docs/benchmark.md has the selection table and the measured times).

Every cell is cpu-v1's (`experiments/benchmarks/cpu_v1.py`: `experiments/rpe_decoder.py` at
its `cpu` scale with a 2-layer decoder, width 64, 8 heads, trained on lengths 1..16 with
batches of 32) with twelve members: six seeds × two data orders. With 12 members against
12 the smallest two-sided permutation p is 2 / 2,704,156 = 7.4e-7, far under Holm's first
level for all 240 comparisons among the 16 baselines on the 2 tasks (0.00021) or a card's 32
(0.0016); with cpu-v1's 3 against 3 it is 0.1. Both answers are one token, judged by greedy
generation with a KV cache on frozen sets of 32 examples at every fourth length up to 128
(8× the training length). The score is exact match averaged over the lengths past training.
Members train on two CPU devices (`cpu_devices = 2`: one per core of the machine the suite
is sized for).

Measured and left out: cycle_navigation (cpu-v1's; tested to 8× with 12 members no encoding
succeeds, and it separates no pair of baselines the other two tasks do not, while its 120
comparisons weaken the correction: 99 pairs separated with it, 102 without) and bucket_sort
(cpu-v1's; its cell took 4.1 of the 10.1 minutes of a four-task run of `none`, and its
answer, as long as its input, makes testing to 8× cost the square).
"""

import os

from experiments.benchmarks import cpu_v1
from posenc import benchmark

TASKS = {
  'even_pairs': (
    'regular; one answer token from the whole input. Tested to 8x the training length it '
    'splits the encodings in three: the biases that decay with distance at 96-100%, '
    'randomized rotary, forgetting and CoPE between 80 and 92%, and rotary, none and the '
    'absolute encodings at 49-59% (at 4x the first two groups were closer).'
  ),
  'flip_flop': (
    'a read of the last write (Liu et al. 2023, decoder form; 80% of instructions ignored): '
    'one answer token from one distant position among distractors. It orders the leaders of '
    'even_pairs among themselves (stick-breaking 100%, ALiBi, DAPE and forgetting about 96%, '
    'relative 86%, randomized rotary 80%) and puts CoPE with rotary and none (about 64%).'
  ),
}
STEPS = {'even_pairs': 600, 'flip_flop': 1500}
BASELINES = cpu_v1.BASELINES


def config(task: str, encoding: str):
  c = cpu_v1.cell(task, encoding, STEPS[task])
  c.checkpoint_every = 300
  c.seeds = [0, 1, 2, 3, 4, 5]
  c.data_seeds = [0, 1]
  c.cpu_devices = 2
  c.eval.max_length = 128
  return c


SUITE = benchmark.Suite(
  name='cpu-v2',
  version=2,
  tasks=TASKS,
  baselines=BASELINES,
  config=config,
  directory=os.path.join(os.path.dirname(__file__), 'cpu-v2'),
  summary=(
    'cpu-v2: even_pairs and flip_flop in decoder form; a 2-layer decoder '
    'trained on lengths 1..16 (12 members: 6 seeds × 2 data orders), judged by exact match on '
    'frozen sets of lengths 17..128.'
  ),
)
