"""Where a training step's time goes: `python -m launch.speed profile [--buckets=20,40]`.

Traces a few training steps of the study's model (one member, one length bucket at a
time) with `jax.profiler`, reads the time of every XLA operation from the trace and
attributes it, through the compiled program's metadata (each operation's `op_name`: the
Flax module path and the jax function it came from), to a part of the model
(posenc/speed/profile.py names the parts): relative position term, the rest of attention,
dense products, the other per-token work of the layers, the encoding, and everything
outside the encoder (optimizer, loss, curriculum).

Prints per bucket the step's median time, the share of each part and the 12 costliest
operations; writes them as JSON (`--out`). `--trace_dir=DIR` keeps the trace for
TensorBoard's profiler or Perfetto (ui.perfetto.dev).

Example (2026-11-26, this project's 2-core development CPU):
  python -m launch.speed profile --buckets=40
  bucket 40: step 728 ms (median of 5, untraced); attributed 720 ms per traced step:
    245.6 ms  34.1%  attention: q·k, softmax, weights·v
    215.6 ms  29.9%  attention: relative position term
    ...
"""

from __future__ import annotations

import os

from absl import flags

from launch import common
from launch.speed import opening
from posenc.training import state as state_lib
from posenc.speed import profile as profile_lib

_OPENING = opening.Opening('profile', cell='rpe_table1 arg of the cell to time.')
_BUCKETS = flags.DEFINE_list('buckets', ['40'], 'Training length buckets to profile.')
_STEPS = flags.DEFINE_integer('steps', 3, 'Traced steps per bucket.')
_TRACE_DIR = flags.DEFINE_string('trace_dir', None, 'Keep the traces here (default: discard).')


def main(argv):
  common.run(_main, argv)


def _main(argv):
  config = _OPENING.start(argv)
  common.at_least(_STEPS.value, '--steps')
  config.seeds, config.learning_rates = [0], list(config.learning_rates)[:1]
  run = opening.build(config)
  valid = run.training.buckets(run)
  buckets = common.positive_ints(_BUCKETS.value, '--buckets')
  bad = [b for b in buckets if b not in valid]
  if bad:
    common.fail(f'--buckets {bad} are not training buckets; valid: {",".join(map(str, valid))}')
  if _TRACE_DIR.value:
    common.make_dir(_TRACE_DIR.value, '--trace_dir')
  state = state_lib.init_state(run)
  rows = []
  for bucket in buckets:
    trace_dir = os.path.join(_TRACE_DIR.value, f'bucket_{bucket}') if _TRACE_DIR.value else None
    state, row = profile_lib.profile_bucket(run, state, bucket, _STEPS.value, trace_dir)
    rows.append(row)
    total = row['attributed_ms']
    print(
      f'bucket {bucket}: step {row["step_ms"]:.0f} ms (median of 5, untraced); '
      f'attributed {total:.0f} ms per traced step:',
      flush=True,
    )
    for part, ms in row['parts'].items():
      print(f'  {ms:7.1f} ms {100 * ms / total:5.1f}%  {part}')
    print('  costliest operations:')
    for op, ms in row['ops']:
      print(f'  {ms:7.1f} ms  {op[-110:]}')
  _OPENING.finish({'cell': _OPENING.cell, 'rows': rows})
