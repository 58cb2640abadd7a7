"""`launch.bench_generate` is now `launch.speed generate`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('generate')
