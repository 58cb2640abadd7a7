"""The cost model: measured on the first cell, scaled to the others by the FLOP model
(`posenc.training.cost_model`), for a grid of any kind (`posenc.sweep.cost`)."""

import numpy as np
import pytest

from experiments import sweep_tiny
from posenc.sweep import cost
from posenc.training import cost_model
from posenc import config as config_lib
from posenc import setup
from posenc.programs import devices
from posenc.training import settings
from posenc.kinds.grid import cost as grid_cost
from posenc.kinds.range import cost as range_cost
import tasks


def test_flop_model_grows_quadratically_with_tokens():
  model = settings.ModelSettings.of(sweep_tiny.get_config())
  f = [model.flops(t) for t in (10, 20, 40)]
  assert f[0] < f[1] < f[2] and (f[2] - f[1]) > 2 * (f[1] - f[0])


def test_estimate_covers_every_cell_and_scales_with_sequence_length():
  config = sweep_tiny.get_config()
  est = cost.estimate(config, sweep_tiny.grid(), steps=3)
  assert [r['cell'] for r in est['cells']] == [
    'parity_check__none',
    'parity_check__randomized_relative',
    'reverse_string__none',
    'reverse_string__randomized_relative',
  ]
  rows = {r['cell']: r for r in est['cells']}
  # reverse_string has L outputs, parity_check one: more tokens, more time.
  assert rows['reverse_string__none']['train_s'] > rows['parity_check__none']['train_s'] > 0
  assert est['wall_clock_s'] == sum(r['train_s'] + r['eval_s'] for r in est['cells'])
  assert est['device_hours'] == est['wall_clock_s'] * est['devices'] / 3600
  text = cost.format_estimate(est)
  assert 'device-hours' in text and 'parity_check' in text


@pytest.mark.slow
def test_roofline_is_max_of_compute_and_memory_time_per_program():
  config = sweep_tiny.get_config()
  cells = sweep_tiny.grid()[:1]  # parity_check / none
  fits = range_cost.program_costs(config_lib.cell_config(config, cells[0]))
  assert fits['train'].shape == fits['eval'].shape == (2, 3)
  est = cost.roofline(config, cells, 'H100')
  spec = devices.DEVICES['H100']
  task = tasks.get('parity_check')

  def seconds(kind, t):
    flops, nbytes = (max(0.0, float(np.polyval(c, t))) for c in fits[kind])
    return max(flops / spec.peak_flops['float32'], nbytes / spec.bandwidth)

  n, m = config.train.max_length, config.eval.max_length
  step = np.mean(
    [
      seconds('train', cost_model.tokens(task, l, n, config.train.bucket_size))
      for l in range(1, n + 1)
    ]
  )
  members = len(config.seeds) * len(config.learning_rates)
  row = est['cells'][0]
  assert row['train_s'] == pytest.approx(members * config.train.steps * step)
  assert row['eval_s'] > 0
  assert est['chip_hours'] == pytest.approx((row['train_s'] + row['eval_s']) / 3600)
  assert '1 chip' in cost.format_roofline(est) and '8 chips' in cost.format_roofline(est, 8)
  with pytest.raises(
    config_lib.ConfigError, match="unknown --device 'B200'; valid devices: H100, A100, v4, v5e"
  ):
    cost.roofline(config, cells, 'B200')


def test_sequence_task_estimate_measures_one_member_and_scales_by_flops():
  from experiments import abacus_arithmetic

  base = abacus_arithmetic.get_config('tiny')
  cells = [
    {'encoding': 'abacus'},
    {'encoding': 'abacus', 'train.batch_size': 16, 'eval.samples_per_cell': 8},
  ]
  est = cost.estimate(base, cells, steps=2)
  assert est['per_member'] and est['measured']['batch'] == base.train.batch_size
  small, big = est['cells']
  # Twice the batch and the samples: twice the training and evaluation time.
  assert big['train_s'] == pytest.approx(2 * small['train_s'])
  assert big['eval_s'] == pytest.approx(2 * small['eval_s'])
  assert 'one model: train' in cost.format_estimate(est)
  # The FLOP model: effective depth is layers x recurrences; the grid adds every cell.
  work = lambda overrides: cost_model.sequence_work(
    setup.build(config_lib.cell_config(base, overrides)), grid_cost.groups
  )
  assert work({'model.recurrences': 4})[0] > 3 * work({'model.recurrences': 1})[0]
  assert work({'eval.grid_max': 6})[1] > work({})[1]
