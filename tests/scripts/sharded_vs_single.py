"""Trains one tiny population on 8 forced CPU devices and on 1; prints whether they agree.

  sharded_vs_single.py ENCODING|hints [FAMILY [data_seeds]]

Run by tests/test_scale.py with XLA_FLAGS=--xla_force_host_platform_device_count=8.
"""

import json
import sys
import tempfile

import jax
import numpy as np

from experiments import rpe_table1
from experiments import sorting_hints
from posenc.training import checkpoint
from posenc.training import population as population_lib
from posenc import setup
from posenc.training import train


def main():
  if sys.argv[1] == 'hints':  # sorting with the successor hint: two heads, alternating steps
    config = sorting_hints.get_config('tiny,hint=successor')
  else:
    config = rpe_table1.get_config(f'task=parity_check,encoding={sys.argv[1]},tiny')
  if len(sys.argv) > 2:
    config.model.family = sys.argv[2]
  config.seeds = [0, 1, 2]  # 3 seeds x 2 lrs = 6 members: padded to 8 on 8 devices.
  config.learning_rates = [1e-3, 3e-3]
  if len(sys.argv) > 3 and sys.argv[3] == 'data_seeds':  # 3 seeds x 2 data seeds x 1 lr
    config.data_seeds, config.learning_rates = [0, 5], [1e-3]
  config.train.steps = 10
  assert jax.local_device_count() == 8
  out = {}
  with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d8:
    r1 = train.train_and_evaluate(setup.build(config, jax.local_devices()[:1]), d1)
    r8 = train.train_and_evaluate(setup.build(config), d8)
    states = []
    for d, devices in ((d1, jax.local_devices()[:1]), (d8, None)):
      run = setup.build(config, devices)
      population = run.population
      manager = checkpoint.checkpoint_manager(d)
      state, _ = checkpoint.restore_state(
        manager, manager.latest_step(), run.abstract_state, population
      )
      states.append(
        jax.tree.map(
          lambda x: np.asarray(x)[: population.size] if np.ndim(x) else np.asarray(x),
          state.params,
        )
      )
    diffs = [
      float(np.max(np.abs(a - b)))
      for a, b in zip(jax.tree.leaves(states[0]), jax.tree.leaves(states[1]))
    ]
    out = {
      'members': len(r8['members']),
      'max_param_diff': max(diffs),
      'bitwise_params': all(d == 0 for d in diffs),
      'same_results': r1['members'] == r8['members'],
      'padded_size': population_lib.Population(config).padded_size,
    }
  print(json.dumps(out))


if __name__ == '__main__':
  main()
