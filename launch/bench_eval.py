"""`launch.bench_eval` is now `launch.speed eval`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('eval')
