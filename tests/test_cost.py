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


def test_dense_products_are_three_per_weight_with_the_model_shapes():
  config = sweep_tiny.get_config()
  d, f = config.model.d_model, config.model.ffn_size
  products = cost.dense_products(7, config)
  assert len(products) == 3 * 6
  # The forward products' FLOPs are the token-linear part of the forward FLOP model.
  forward = sum(2 * m * k * n for m, k, n in products[0::3])
  assert forward == 2 * 7 * (4 * d * d + 2 * d * f)
  assert products[12:15] == [(7, d, f), (7, f, d), (d, 7, f)]


def test_dense_product_floor_averages_buckets_over_the_curriculum():
  config = sweep_tiny.get_config()
  config.train.max_length, config.train.bucket_size = 8, 3
  floor = cost.dense_product_floor(config, repeats=2)
  # Lengths 1-3 -> bucket 3, 4-6 -> 6, 7-8 -> 8 (capped at N).
  assert sorted(floor['bucket_ms']) == [3, 6, 8]
  ms = floor['bucket_ms']
  mean = (3 * ms[3] + 3 * ms[6] + 2 * ms[8]) / 8
  assert abs(floor['mean_step_ms'] - mean) < 1e-6 * mean
  assert floor['max_updates_per_s'] == pytest.approx(1e3 / floor['mean_step_ms'])
  assert floor['gflops_per_s'] > 0


def test_geometric_floor_scales_with_weights():
  floor = cost.geometric_floor(1e6, block=(4, 64), num_blocks=2, repeats=2)
  assert floor['chain_ns_per_weight'] > 0 and floor['cumsum_ns_per_weight'] > 0
  per_weight = floor['chain_ns_per_weight'] + floor['cumsum_ns_per_weight']
  assert floor['floor_s'] == pytest.approx(per_weight * 1e-9 * 1e6)
