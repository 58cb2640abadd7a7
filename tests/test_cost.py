"""The cost model: measured on the first cell, scaled to the others by the FLOP model."""

import pytest

from experiments import sweep_tiny
from posenc import cost


def test_flop_model_grows_quadratically_with_tokens():
  config = sweep_tiny.get_config()
  f = [cost.forward_flops(t, config) for t in (10, 20, 40)]
  assert f[0] < f[1] < f[2] and (f[2] - f[1]) > 2 * (f[1] - f[0])


def test_estimate_covers_every_cell_and_scales_with_sequence_length():
  config = sweep_tiny.get_config()
  est = cost.estimate(config, sweep_tiny.grid(), steps=3)
  assert [r['cell'] for r in est['cells']] == [
      'parity_check__none', 'parity_check__randomized_relative', 'reverse_string__none',
      'reverse_string__randomized_relative']
  rows = {r['cell']: r for r in est['cells']}
  # reverse_string has L outputs, parity_check one: more tokens, more time.
  assert rows['reverse_string__none']['train_s'] > rows['parity_check__none']['train_s'] > 0
  assert est['wall_clock_s'] == sum(r['train_s'] + r['eval_s'] for r in est['cells'])
  assert est['device_hours'] == est['wall_clock_s'] * est['devices'] / 3600
  text = cost.format_estimate(est)
  assert 'device-hours' in text and 'parity_check' in text
