"""Benchmark entry points: bad input is one `error:` line, exit status 2, nothing written."""

import os
import subprocess
import sys

import pytest

from experiments import sweep_tiny
from launch import bench
from launch import bench_forward
from launch import bench_train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
  'args, needle',
  [
    (['nope'], "unknown benchmark 'nope'; choose one of"),
    (['samplers', '--tasks=nope'], "unknown task 'nope'; valid tasks: even_pairs"),
    (['samplers', '--lengths=x'], "--lengths='x' must be comma-separated positive integers"),
    (['samplers', '--bogus'], 'unrecognized arguments: --bogus'),
    (['forward', '--encodings=nope'], "unknown encoding 'nope'; valid encodings: none"),
  ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, args, needle):
  out = tmp_path / 'out.json'
  extra = [f'--out={out}'] if args[0] in ('samplers', 'forward') else []
  proc = cli.run(['launch.bench', *args, *extra])
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert not out.exists()


def test_keep_freed_memory_is_opt_in(monkeypatch):
  monkeypatch.delenv('POSENC_KEEP_FREED_MEMORY', raising=False)
  assert bench.keep_freed_memory() is False
  if sys.platform.startswith('linux'):  # applied in a child process: it is process-wide
    env = dict(os.environ, POSENC_KEEP_FREED_MEMORY='1')
    out = subprocess.run(
      [sys.executable, '-c', 'from launch import bench; print(bench.keep_freed_memory())'],
      cwd=ROOT,
      env=env,
      capture_output=True,
      text=True,
      check=True,
    ).stdout
    assert out.strip() == 'True'


def test_dense_products_are_three_per_weight_with_the_model_shapes():
  config = sweep_tiny.get_config()
  d, f = config.model.d_model, config.model.ffn_size
  products = bench_train.dense_products(7, config)
  assert len(products) == 3 * 6
  # The forward products' FLOPs are the token-linear part of the forward FLOP model.
  forward = sum(2 * m * k * n for m, k, n in products[0::3])
  assert forward == 2 * 7 * (4 * d * d + 2 * d * f)
  assert products[12:15] == [(7, d, f), (7, f, d), (d, 7, f)]


def test_dense_product_floor_averages_buckets_over_the_curriculum():
  config = sweep_tiny.get_config()
  config.train.max_length, config.train.bucket_size = 8, 3
  floor = bench_train.dense_product_floor(config, repeats=2)
  # Lengths 1-3 -> bucket 3, 4-6 -> 6, 7-8 -> 8 (capped at N).
  assert sorted(floor['bucket_ms']) == [3, 6, 8]
  ms = floor['bucket_ms']
  mean = (3 * ms[3] + 3 * ms[6] + 2 * ms[8]) / 8
  assert abs(floor['mean_step_ms'] - mean) < 1e-6 * mean
  assert floor['max_updates_per_s'] == pytest.approx(1e3 / floor['mean_step_ms'])
  assert floor['gflops_per_s'] > 0


def test_geometric_floor_scales_with_weights():
  floor = bench_forward.geometric_floor(1e6, block=(4, 64), num_blocks=2, repeats=2)
  assert floor['chain_ns_per_weight'] > 0 and floor['cumsum_ns_per_weight'] > 0
  per_weight = floor['chain_ns_per_weight'] + floor['cumsum_ns_per_weight']
  assert floor['floor_s'] == pytest.approx(per_weight * 1e-9 * 1e6)
