"""`launch.bench_forward` is now `launch.speed forward`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('forward')
