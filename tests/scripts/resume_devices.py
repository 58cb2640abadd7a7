"""One phase of a run that moves between device counts; prints a JSON line.

  python tests/scripts/resume_devices.py WORKDIR stop   # train until step 10, then stop
  python tests/scripts/resume_devices.py WORKDIR finish # resume and finish

Run by tests/test_resume.py under XLA_FLAGS=--xla_force_host_platform_device_count=D.
"""

import json
import sys

import jax

from experiments import rpe_table1
from posenc.storage import lease
from posenc import setup
from posenc.training import train


def config():
  c = rpe_table1.get_config('task=parity_check,encoding=randomized_rotary,tiny')
  c.seeds = [0, 1, 2]  # 3 seeds x 2 rates = 6 members: padded to 8 on 8 devices.
  c.learning_rates = [1e-3, 3e-3]
  c.checkpoint_every = 1000
  return c


def main():
  workdir, phase = sys.argv[1], sys.argv[2]
  polls = iter(range(10**6))
  # should_stop is polled once per step: stop before step 10.
  stop = (lambda: next(polls) >= 10) if phase == 'stop' else (lambda: False)
  try:
    results = train.train_and_evaluate(setup.build(config()), workdir, should_stop=stop)
  except lease.Preempted as e:
    print(json.dumps({'preempted_at': e.step, 'devices': jax.local_device_count()}))
    return
  print(
    json.dumps(
      {
        'devices': results['devices'],
        'members': [m['accuracy_by_length'] for m in results['members']],
        'resumed_from_step': results['timing']['resumed_from_step'],
      }
    )
  )


if __name__ == '__main__':
  main()
