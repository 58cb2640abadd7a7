"""The tiny suite: the machinery of cpu-v1 in seconds, for tests (not a measurement).

Two tasks of the study in decoder form, a 2-layer decoder of width 16 trained 20 steps on
lengths 1..8, two seeds, tested at lengths 1..12 on 16 examples each. Its stored baselines
(`none`, `rotary`) let a test rerun one and compare it bit for bit.
"""

import os

from posenc import benchmark
from posenc import config as config_lib

TASKS = {
  'even_pairs': 'one answer token; checks the machinery end to end',
  'parity_check': 'a second task, so that a card has more than one panel',
}


def config(task: str, encoding: str):
  c = config_lib.shrink_to_tiny(config_lib.base_config())
  c.task, c.encoding = task, encoding
  c.model.family = 'decoder'
  c.encoding_options.relative_mode = 'symmetric'
  c.train.programs = 'buckets'  # as its stored baselines trained (cpu_v1.cell says why)
  return c


SUITE = benchmark.Suite(
  name='tiny',
  version=1,
  tasks=TASKS,
  baselines=('none', 'rotary'),
  config=config,
  directory=os.path.join(os.path.dirname(__file__), 'tiny'),
  summary='The tiny suite: seconds per card, for tests; it measures nothing.',
)
