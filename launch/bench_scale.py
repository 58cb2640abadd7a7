"""`launch.bench_scale` is now `launch.speed scale`: a one-line pointer (launch/bench.py)."""

from launch import bench

if __name__ == '__main__':
  bench.point('scale')
