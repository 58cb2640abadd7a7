"""cpu-v1: three of the study's tasks in decoder form, sized so that one candidate's card
takes under 10 minutes on a 2-core CPU (docs/benchmark.md has the measured times).

Every cell is `experiments/rpe_decoder.py` at its `cpu` scale with a 2-layer decoder (width
64, 8 heads), trained on lengths 1..16 with batches of 32, three seeds (one data order), and
judged by greedy generation with a KV cache on the frozen sets: 32 examples at every fourth
length from 1 to 64. The score is exact match of the whole
answer averaged over the lengths past training.

Why these tasks: they are the ones where the built-in encodings separate at this scale,
measured on 10 of the study's tasks with none, rotary, randomized_rotary, alibi and
stick_breaking (3 seeds each, 600 and 1,500 steps). modular_arithmetic, parity_check,
duplicate_string, odds_first, solve_equation and stack_manipulation either were not learned
in distribution or left every encoding at the same score.
"""

import os

from experiments import rpe_decoder
from posenc import benchmark

TASKS = {
  'even_pairs': (
    'regular; one answer token from the whole input. Separates the biases that decay with '
    'distance and randomized positions (near 100%) from rotary (about 70%) and none (about 60%) '
    'in 600 steps.'
  ),
  'bucket_sort': (
    'context-sensitive; the answer copies the input in sorted order, so every output token '
    'must attend across the whole input. Separates randomized positions and none (about 30%) '
    'from rotary, alibi and stick_breaking (under 10%) in 1,500 steps.'
  ),
  'cycle_navigation': (
    'regular; a count of moves modulo 5. Separates randomized positions and none (about 60%) '
    'from rotary, alibi and stick_breaking (30-40%) in 1,500 steps: the local biases that win '
    'even_pairs lose here, so the suite does not reward one kind of encoding.'
  ),
}
STEPS = {'even_pairs': 600, 'bucket_sort': 1500, 'cycle_navigation': 1500}
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


def cell(task: str, encoding: str, steps: int):
  """cpu-v1's cell of `task` and `encoding` trained `steps` steps: the CPU scale later suites
  and experiments (cpu-v2, experiments/later_tasks.py) build on."""
  c = rpe_decoder.get_config(f'task={task},encoding={encoding},cpu')
  c.model.num_layers = 2
  c.train.steps = steps
  c.train.batch_size = 32
  c.checkpoint_every = 200
  c.seeds = [0, 1, 2]
  c.data_seeds = [0]
  c.eval.examples_per_length = 32
  c.eval.batch_size = 32
  c.eval.stride = 4
  # The stored baselines trained one program per length bucket: another plan would draw
  # other dropout masks (the same distribution, other draws), so the suite keeps theirs.
  c.train.programs = 'buckets'
  return c


def config(task: str, encoding: str):
  return cell(task, encoding, STEPS[task])


SUITE = benchmark.Suite(
  name='cpu-v1',
  version=1,
  tasks=TASKS,
  baselines=BASELINES,
  config=config,
  directory=os.path.join(os.path.dirname(__file__), 'cpu-v1'),
  summary=(
    'cpu-v1: even_pairs, bucket_sort and cycle_navigation in decoder form; a 2-layer decoder '
    'trained on lengths 1..16 (3 seeds), judged by exact match on frozen sets of lengths 17..64.'
  ),
  superseded_by='cpu-v2',
)
