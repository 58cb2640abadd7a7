"""The program plan: its choice by cost, its modes, the data a merged program draws, the
evaluation it computes, its record in a work directory, and its bad input."""

import collections
import itertools
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rpe_table1
from posenc.storage import lease
from posenc import config as config_lib
from posenc import programs
from posenc.programs import devices
from posenc.training import settings
from posenc import setup
from posenc.training import train
from posenc.kinds.range import protocol as range_protocol
import tasks


def tiny(**overrides):
  config = rpe_table1.get_config('task=parity_check,encoding=randomized_relative,tiny')
  return config_lib.cell_config(config, overrides)


def brute_force(data, calls, seconds, compile_s):
  """The cheapest plan by trying every subset of the data widths holding the widest."""
  best = None
  for n in range(len(data)):
    for subset in itertools.combinations(data[:-1], n):
      widths = tuple(subset) + (data[-1],)
      plan = programs.Plan('train', '', tuple(data), widths)
      total = compile_s(len(widths)) + sum(
        c * seconds(plan.program_of(d)) for d, c in zip(data, calls)
      )
      if best is None or total < best[0] - 1e-9:
        best = (total, widths)
  return best[1]


@pytest.mark.parametrize('seed', range(20))
def test_the_chosen_widths_are_the_cheapest(seed):
  rng = np.random.default_rng(seed)
  k = int(rng.integers(1, 8))
  data = tuple(int(x) for x in np.cumsum(rng.integers(1, 20, k)))
  calls = tuple(float(x) for x in rng.integers(0, 2000, k))
  per_width = rng.uniform(1e-4, 1e-2)
  fixed = rng.uniform(0, 2)
  seconds = lambda w: fixed * 1e-3 + per_width * w
  compile_s = lambda n: rng.uniform(0.5, 20) * 0 + 3.0 * n + 5.0 * -(-n // 2)
  assert programs.choose_widths(data, calls, seconds, compile_s) == brute_force(
    data, calls, seconds, compile_s
  )


def test_long_runs_keep_their_buckets_and_short_ones_merge():
  data, steps = (5, 10, 15, 20, 25, 30, 35, 40), 2_000_000
  seconds = lambda w: 0.003 + 0.002 * w  # a CPU: the step grows with the width
  compile_s = lambda n: 5.0 * n
  assert programs.choose_widths(data, [steps / 8] * 8, seconds, compile_s) == data
  assert programs.choose_widths(data, [100 / 8] * 8, seconds, compile_s) == (40,)
  flat = lambda w: 0.005  # launch-bound: every width costs the same
  assert programs.choose_widths(data, [steps / 8] * 8, flat, compile_s) == (40,)


def test_plan_modes_parse_and_refuse():
  assert programs.parse('auto', 'train.programs') == 'auto'
  assert programs.parse(' buckets ', 'train.programs') == 'buckets'
  assert programs.parse('40, 20', 'train.programs') == (20, 40)
  assert programs.parse([8, 16], 'eval.programs') == (8, 16)
  for bad in ('fast', '0,8', '', 'a,b'):
    with pytest.raises(config_lib.ConfigError, match='is not a plan; valid: auto, buckets, one'):
      programs.parse(bad, 'train.programs')
  with pytest.raises(config_lib.ConfigError, match='cannot hold the widest data width 16'):
    programs.check_holds('train.programs', (8, 12), (8, 16))


def test_a_plan_maps_data_widths_to_programs():
  plan = programs.Plan('train', 'widths', (5, 10, 15, 20), (10, 20))
  assert [plan.program_of(d) for d in plan.data] == [10, 10, 20, 20]
  assert plan.serves(10) == (5, 10) and plan.serves(20) == (15, 20)
  assert plan.widths_for([5, 15]) == [10, 20]
  assert programs.Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
  assert plan.describe().startswith('training: 2 programs [10, 20] for data widths')


def test_steps_per_dispatch_zero_is_chosen_by_platform():
  config = tiny(**{'train.steps_per_dispatch': 0})
  k = lambda platform: settings.TrainSettings.of(config, platform).steps_per_dispatch
  assert k('cpu') == 1 and k('gpu') == devices.platform('gpu').steps_per_dispatch == 8
  config.train.steps_per_dispatch = 3
  assert k('tpu') == 3


def test_a_merged_program_draws_the_bucket_s_examples():
  """A step of length 3 (bucket 4) in a program of width 8: the examples of bucket 4,
  padded with the zeros a sampler writes past the length."""
  task = tasks.get('reverse_string')
  key = jax.random.key(3)
  narrow = task.sample_padded(key, 4, 3, 4)
  draw = lambda d: task.sample_padded(key, 4, jnp.int32(3), d)
  at = programs.data_width(jnp.int32(3), 8, 4)
  wide = jax.jit(
    lambda: programs.widened(8, (4, 8), draw, lambda b, w: tasks.base.widen(task, b, w), at)
  )()
  assert wide['inputs'].shape == (4, 8) and wide['targets'].shape == (4, 8)
  np.testing.assert_array_equal(wide['inputs'][:, :4], narrow['inputs'])
  np.testing.assert_array_equal(wide['inputs'][:, 4:], 0)
  for name in ('targets', 'mask', 'output_valid'):
    np.testing.assert_array_equal(wide[name][:, :4], narrow[name])
    np.testing.assert_array_equal(wide[name][:, 4:], 0)
  assert int(wide['length']) == 3


def test_one_evaluation_program_measures_what_one_per_bucket_does(tmp_path):
  """The same trained members evaluated by one program and by one per bucket: equal."""
  buckets = str(tmp_path / 'buckets')
  config = tiny(**{'train.steps': 10, 'train.programs': 'buckets', 'eval.programs': 'buckets'})
  first = train.train_and_evaluate(setup.build(config), buckets)
  assert first['compiled_programs']['plans']['eval']['widths'] == [6, 12]
  one = str(tmp_path / 'one')
  shutil.copytree(buckets, one)
  for name in ('eval.jsonl', 'results.json'):
    os.remove(os.path.join(one, name))
  plan = json.load(open(os.path.join(one, train.PLAN_FILE)))
  plan['eval']['widths'] = [12]
  with open(os.path.join(one, train.PLAN_FILE), 'w') as f:
    json.dump(plan, f)
  lines = []
  second = train.train_and_evaluate(setup.build(config), one, progress=lines.append)
  assert 'evaluation: 1 program [12] for data widths [6, 12] (buckets)' in lines
  assert second['compiled_programs']['eval'] == 1
  for a, b in zip(first['members'], second['members']):
    assert a['accuracy_by_length'] == b['accuracy_by_length']


def test_a_run_keeps_the_plan_it_recorded(tmp_path):
  config = tiny(**{'train.steps': 10, 'checkpoint_every': 5})
  lines = []
  train.train_and_evaluate(setup.build(config), str(tmp_path), progress=lines.append)
  recorded = json.load(open(tmp_path / train.PLAN_FILE))
  assert recorded['train']['mode'] == 'auto'
  # The plan is printed, then every program is compiled before the first step.
  assert lines[0].startswith('training: ') and lines[1].startswith('evaluation: ')
  assert lines[2].startswith('compiling ')
  first_step = next(i for i, line in enumerate(lines) if line.startswith('step '))
  assert sum(line.startswith('compiled ') for line in lines[:first_step]) >= 2

  # Stopped at step 5, then resumed asking for another plan: the recorded one is kept.
  workdir, stopped = str(tmp_path / 'stopped'), []
  with pytest.raises(lease.Preempted):
    train.train_and_evaluate(
      setup.build(config), workdir, should_stop=lambda: bool(stopped), checkpointed=stopped.append
    )
  config.train.programs = 'buckets'
  results = train.train_and_evaluate(setup.build(config), workdir)
  assert results['timing']['resumed_from_step'] == 5
  assert results['compiled_programs']['plans']['train'] == recorded['train']


def test_training_stage_counts_the_curriculum_s_steps():
  run = setup.build(tiny(**{'train.steps': 80}))
  stage = train.training_stage(run, collections.Counter())
  assert stage.data == (4, 8) and stage.calls == (40.0, 40.0)  # lengths 1..4 and 5..8
  plan, lowered = programs.plan(stage, 'cpu')
  kept = plan.mode == 'auto' and plan.serves(8) == (8,)  # the widest, lowered by the plan
  assert plan.widths[-1] == 8 and bool(lowered) == kept
  assert range_protocol.programs(run).data == (6, 12)
