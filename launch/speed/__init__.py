"""Speed: `python -m launch.speed NAME [--flags]` (docs/speed.md).

  python -m launch.speed train --populations=1,8    training throughput, against its floor
  python -m launch.speed eval --lengths=41,100      range evaluation: compile, run, floor
  python -m launch.speed plan                       the programs a cell compiles on cpu/gpu/tpu
  python -m launch.speed profile --buckets=20,40    where a training step's time goes
  python -m launch.speed population --populations=8 a suite's population, setting by setting
  python -m launch.speed scale                      P = 30 on 1 and 8 devices; a grid's cost
  python -m launch.speed forward --encodings=alibi  forward passes at T = 1,000
  python -m launch.speed generate                   greedy generation, with and without a cache
  python -m launch.speed samplers --tasks=parity_check   the task samplers' throughput
  python -m launch.speed gpu_check --out=DIR        a GPU machine in 7 minutes (docs/gpu.md)

Each prints measured figures and writes them as JSON (`--out`, default speed_NAME.json);
`python -m launch.speed NAME --help` lists its absl flags (`--flagfile=FILE` reads them from
a file). NAME is the module launch/speed/NAME.py, imported only when chosen; what it measures
is in `posenc.speed`. Bad input is one line `error: ...`, exit status 2, nothing written.
`POSENC_KEEP_FREED_MEMORY=1` makes glibc keep freed memory mapped (docs/speed.md).
"""

NAMES = (
  'eval',
  'forward',
  'generate',
  'gpu_check',
  'plan',
  'population',
  'profile',
  'samplers',
  'scale',
  'train',
)
