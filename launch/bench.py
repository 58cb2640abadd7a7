"""Benchmarks: `python -m launch.bench NAME [--flags]`.

Each benchmark lives in `launch/bench_NAME.py` and exposes `main(argv)`; it prints
measured figures and writes them as JSON (`--out`, default `bench_NAME.json`).
"""

import ctypes
import ctypes.util
import importlib
import os
import pkgutil
import sys

import launch


def keep_freed_memory() -> bool:
  """Opt-in (`POSENC_KEEP_FREED_MEMORY=1`): glibc's malloc keeps freed memory for reuse.

  XLA's CPU runtime allocates each execution's temporaries as one large block that glibc
  maps and unmaps every time; one arena without mmap or trimming keeps it mapped. Its
  effect on this project's benchmarks is mixed (docs/benchmarks.md), so it is off by
  default. Process-wide, so only the benchmark entry point calls it, before the JAX backend
  starts its threads. Returns whether it was applied.
  """
  if not sys.platform.startswith('linux') or os.environ.get('POSENC_KEEP_FREED_MEMORY') != '1':
    return False
  try:
    mallopt = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6').mallopt
  except (OSError, AttributeError):
    return False
  m_trim_threshold, m_top_pad, m_mmap_max, m_arena_max = -1, -2, -4, -8
  return all(
    mallopt(option, value) == 1
    for option, value in (
      (m_arena_max, 1),
      (m_mmap_max, 0),
      (m_trim_threshold, 2**31 - 1),
      (m_top_pad, 256 << 20),
    )
  )


def available() -> list[str]:
  return sorted(
    m.name[len('bench_') :]
    for m in pkgutil.iter_modules(launch.__path__)
    if m.name.startswith('bench_')
  )


def main() -> None:
  names = available()
  if len(sys.argv) >= 2 and sys.argv[1] in ('-h', '-help', '--help', '--helpshort', '--helpfull'):
    print(
      __doc__.strip() + f'\n\nbenchmarks: {", ".join(names)}; '
      '`python -m launch.bench NAME --help` lists the flags of one.'
    )
    sys.exit(0)
  if len(sys.argv) < 2 or sys.argv[1] not in names:
    got = sys.argv[1] if len(sys.argv) > 1 else '(none)'
    print(f'error: unknown benchmark {got!r}; choose one of {", ".join(names)}', file=sys.stderr)
    sys.exit(2)
  keep_freed_memory()
  module = importlib.import_module(f'launch.bench_{sys.argv[1]}')
  # Deferred: `launch.bench --help` and an unknown name take 0.07 s without absl and
  # ml_collections, 0.15 s with them; the benchmark module has imported it by now.
  from launch import common  # pylint: disable=g-import-not-at-top

  with common.on_full_disk(
    lambda: 'nothing else was written (the figures are printed above)', 'the --out file'
  ):
    module.main([sys.argv[0]] + sys.argv[2:])


if __name__ == '__main__':
  main()
