"""cpu-v2: four tasks in decoder form with twelve members per cell, sized so that the
verdicts can decide (docs/benchmark.md has the selection table and the measured times).

Every cell is cpu-v1's (`experiments/benchmarks/cpu_v1.py`: `experiments/rpe_decoder.py` at
its `cpu` scale with a 2-layer decoder, width 64, 8 heads, trained on lengths 1..16 with
batches of 32) with twelve members: six seeds × two data orders. With 12 members against
12 the smallest two-sided permutation p is 2 / 2,704,156 = 7.4e-7, under Holm's first level
for all 480 comparisons among the 16 baselines on the 4 tasks (0.00010); with 8 against 8 it
is 0.00016, enough for a card's 60 comparisons but not for every pair, and with cpu-v1's 3
against 3 it is 0.1.
Judged by greedy generation with a KV cache on frozen sets of 32 examples at every fourth
length: up to 128 (8× the training length) where the answer is one token, up to 64 for
bucket_sort (its answer is as long as its input). The score is exact match of the whole
answer averaged over the lengths past training. Members train on two CPU devices
(`cpu_devices = 2`: one per core of the machine the suite is sized for).
"""

import os

from experiments import rpe_decoder
from posenc import benchmark

TASKS = {
  'even_pairs': (
    'regular; one answer token from the whole input. Up to 8× the training length it '
    'separates the biases that decay with distance and randomized positions from rotary and '
    'none, and (past 4×) the leaders among themselves.'
  ),
  'flip_flop': (
    'a read of the last write (Liu et al. 2023, decoder form; 80% of instructions ignored): '
    'one answer token that depends on one distant position among distractors. Separates the '
    'leaders of even_pairs among themselves.'
  ),
  'cycle_navigation': (
    'regular; a count of moves modulo 5. No encoding succeeds (no member reaches 90% past '
    'training): it ranks partial generalization, and the local biases that win even_pairs '
    'lose here, so the suite does not reward one kind of encoding.'
  ),
  'bucket_sort': (
    'context-sensitive; the answer copies the input in sorted order, so every output token '
    'must attend across the whole input. No encoding succeeds: it ranks partial '
    'generalization (randomized positions and none above most biases).'
  ),
}
STEPS = {'even_pairs': 600, 'flip_flop': 1500, 'cycle_navigation': 1500, 'bucket_sort': 1500}
# Where the answer is as long as the input, generation costs grow with the square of the
# length: bucket_sort stays at 4x.
MAX_LENGTH = {'even_pairs': 128, 'flip_flop': 128, 'cycle_navigation': 128, 'bucket_sort': 64}
BASELINES = (
  'none',
  'sin_cos',
  'learned',
  'rotary',
  'randomized_rotary',
  'relative',
  'randomized_relative',
  'alibi',
  'kerple_log',
  'fire',
  'stick_breaking',
  'dape',
  'dape_v2',
  'cope',
  'forgetting',
  'pope',
)


def config(task: str, encoding: str):
  c = rpe_decoder.get_config(f'task={task},encoding={encoding},cpu')
  c.model.num_layers = 2
  c.train.steps = STEPS[task]
  c.train.batch_size = 32
  c.checkpoint_every = 300
  c.seeds = [0, 1, 2, 3, 4, 5]
  c.data_seeds = [0, 1]
  c.cpu_devices = 2
  c.eval.max_length = MAX_LENGTH[task]
  c.eval.examples_per_length = 32
  c.eval.batch_size = 32
  c.eval.stride = 4
  return c


SUITE = benchmark.Suite(
  name='cpu-v2',
  version=2,
  tasks=TASKS,
  baselines=BASELINES,
  config=config,
  directory=os.path.join(os.path.dirname(__file__), 'cpu-v2'),
  summary=(
    'cpu-v2: even_pairs, flip_flop, cycle_navigation and bucket_sort in decoder form; a '
    '2-layer decoder trained on lengths 1..16 (12 members: 6 seeds × 2 data orders), judged by '
    'exact match on frozen sets of lengths 17..128 (bucket_sort 17..64).'
  ),
)
