"""Benchmarks: `python -m launch.bench NAME [--flags]`.

Each benchmark lives in `launch/bench_NAME.py` and exposes `main(argv)`; it prints
measured figures and writes them as JSON (`--out`, default `bench_NAME.json`).
"""
import importlib
import pkgutil
import sys

import launch
from launch import common


def available() -> list[str]:
  return sorted(m.name[len('bench_'):] for m in pkgutil.iter_modules(launch.__path__)
                if m.name.startswith('bench_'))


def main() -> None:
  names = available()
  if len(sys.argv) < 2 or sys.argv[1] not in names:
    got = sys.argv[1] if len(sys.argv) > 1 else '(none)'
    print(f'error: unknown benchmark {got!r}; choose one of {", ".join(names)}', file=sys.stderr)
    sys.exit(2)
  common.keep_freed_memory()
  module = importlib.import_module(f'launch.bench_{sys.argv[1]}')
  module.main([sys.argv[0]] + sys.argv[2:])


if __name__ == '__main__':
  main()
