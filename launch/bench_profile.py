"""`launch.bench_profile` is now `launch.speed profile`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('profile')
