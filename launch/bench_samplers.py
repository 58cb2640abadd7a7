"""`launch.bench_samplers` is now `launch.speed samplers`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('samplers')
