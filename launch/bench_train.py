"""`launch.bench_train` is now `launch.speed train`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('train')
