"""Where a training step's time goes: `python -m launch.bench profile [--buckets=20,40]`.

Traces a few training steps of the study's model (one member, one length bucket at a
time) with `jax.profiler`, reads the time of every XLA operation from the trace and
attributes it, through the compiled program's metadata (each operation's `op_name`: the
Flax module path and the jax function it came from), to a part of the model:

  attention: relative position term   the skew product and rel-shift of relative attention
  attention: q·k, softmax, weights·v  the rest of attention's [H, B, T, T] work
  dense products                      q, k, v, out and FFN matrix products
  layer norm, ReLU, dropout, ...      the other per-token work of the layers
  encoding                            drawing positions, sinusoids
  optimizer, loss, curriculum         everything outside the encoder

Prints per bucket the step's median time, the share of each part and the 12 costliest
operations; writes them as JSON (`--out`). `--trace_dir=DIR` keeps the trace for
TensorBoard's profiler or Perfetto (ui.perfetto.dev).

The relative position term is recognised by the operations of the `cpu_blocked` backend (its
skew product and rel-shift); with another backend its time counts as the rest of attention.

Example (2026-11-26, this project's 2-core development CPU):
  python -m launch.bench profile --buckets=40
  bucket 40: step 728 ms (median of 5, untraced); attributed 720 ms per traced step:
    245.6 ms  34.1%  attention: q·k, softmax, weights·v
    215.6 ms  29.9%  attention: relative position term
    ...
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import re
import tempfile
import time

from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from launch import common
from posenc import config as config_lib
from posenc import io
from posenc import population as population_lib
from posenc import setup
from posenc import train

_CELL = flags.DEFINE_string(
  'cell', 'task=reverse_string,encoding=randomized_relative', 'rpe_table1 arg of the cell to time.'
)
_BUCKETS = flags.DEFINE_list('buckets', ['40'], 'Training length buckets to profile.')
_STEPS = flags.DEFINE_integer('steps', 3, 'Traced steps per bucket.')
_TRACE_DIR = flags.DEFINE_string('trace_dir', None, 'Keep the traces here (default: discard).')
_OUT = flags.DEFINE_string('out', 'bench_profile.json', 'Where to write the figures.')

# (part, substrings of an operation's op_name), first match wins; the order matters.
PARTS = (
  ('encoding (position draw, sinusoids)', ('attention/encoding',)),
  (
    'attention: relative position term',
    ('hbik,hck', 'hbic,hck', 'hbik,hbic', '_pad)', 'attention_cpu_blocked/slice'),
  ),
  ('dense products', ('Dense_', '/query/', '/key/', '/value/', '/out/')),
  ('attention: q·k, softmax, weights·v', ('/attention/',)),
  ('layer norm, ReLU, dropout, residuals, embeddings', ('Encoder', 'Decoder')),
)
OTHER = 'optimizer, loss, curriculum'


def part_of(op_name: str) -> str:
  """The part of the model an operation belongs to, from its op_name.

  Example: part_of('jvp(Encoder)/layer_0/Dense_1/dot_general') -> 'dense products';
    part_of('adam/mul') -> 'optimizer, loss, curriculum'.
  """
  for part, needles in PARTS:
    if any(n in op_name for n in needles):
      return part
  return OTHER


def op_names(hlo_text: str) -> dict[str, str]:
  """{instruction name: its op_name with layer indices folded} of compiled HLO text.

  The jitted function's name and the training loop's body are dropped from the front.

  Example: '%dot.3 = f32[2]{0} dot(%a, %b), metadata={op_name="jit(f)/layer_1/x"}'
    -> {'dot.3': 'layer_N/x'}.
  """
  out = {}
  for line in hlo_text.splitlines():
    m = re.match(r'\s*(?:ROOT )?%?([\w.\-]+) = .*?metadata=\{[^}]*?op_name="([^"]*)"', line)
    if m:
      op = re.sub(r'^jit\([^)]*\)/(while/body/)?(closed_call/)?', '', m.group(2))
      out[m.group(1)] = re.sub(r'layer_\d+', 'layer_N', op)
  return out


def op_seconds(trace_dir: str) -> dict[str, float]:
  """{event name: total seconds} of the complete events in the trace under `trace_dir`."""
  files = glob.glob(os.path.join(trace_dir, '**', '*.trace.json.gz'), recursive=True)
  if not files:
    raise RuntimeError(f'no *.trace.json.gz under {trace_dir}: the profiler wrote no trace')
  seconds: collections.Counter = collections.Counter()
  with gzip.open(files[0]) as f:
    for event in json.load(f)['traceEvents']:
      if event.get('ph') == 'X':
        seconds[event['name']] += event['dur'] * 1e-6
  return dict(seconds)


def attribute(seconds: dict[str, float], names: dict[str, str], steps: int) -> dict:
  """Per step: {'attributed_ms', 'parts': {part: ms}, 'ops': [(op_name, ms)] costliest first}.

  Only events that are operations of the program (`names`) count; the runtime's own events
  (e.g. the executor's wait) are not operations.
  """
  by_op: collections.Counter = collections.Counter()
  for event, s in seconds.items():
    if event in names:
      by_op[names[event]] += 1e3 * s / steps
  parts: collections.Counter = collections.Counter()
  for op, ms in by_op.items():
    parts[part_of(op)] += ms
  return {
    'attributed_ms': sum(by_op.values()),
    'parts': dict(parts.most_common()),
    'ops': by_op.most_common(12),
  }


def main(argv):
  common.run(_main, argv)


def _main(argv):
  del argv
  common.check_output_file(_OUT.value, '--out')
  common.at_least(_STEPS.value, '--steps')
  config = common.cell_config(_CELL.value)
  config.seeds, config.learning_rates = [0], list(config.learning_rates)[:1]
  try:
    setup.build(config)
  except config_lib.ConfigError as e:
    common.fail(e)
  run = setup.build(config)
  valid = run.training.buckets(run)
  buckets = common.positive_ints(_BUCKETS.value, '--buckets')
  bad = [b for b in buckets if b not in valid]
  if bad:
    common.fail(f'--buckets {bad} are not training buckets; valid: {",".join(map(str, valid))}')
  if _TRACE_DIR.value:
    common.make_dir(_TRACE_DIR.value, '--trace_dir')
  members = (run.population.learning_rates, run.population.train_keys)
  state = population_lib.init_state(config, run.model, run.population)
  rows = []
  for bucket in buckets:
    # Compiled once: the same executable is timed, traced and read for its op names.
    fn = train.make_update_fn(run, bucket).lower(state, jnp.int32(bucket), *members).compile()
    names = op_names(fn.as_text())
    times = []
    for _ in range(6):  # the first call warms the allocator and caches; it is not counted
      t0 = time.perf_counter()
      state, _ = jax.block_until_ready(fn(state, jnp.int32(bucket), *members))
      times.append(time.perf_counter() - t0)
    times = times[1:]
    with tempfile.TemporaryDirectory() as tmp:
      trace_dir = os.path.join(_TRACE_DIR.value, f'bucket_{bucket}') if _TRACE_DIR.value else tmp
      with jax.profiler.trace(trace_dir):
        for _ in range(_STEPS.value):
          state, _ = fn(state, jnp.int32(bucket), *members)
        jax.block_until_ready(state)
      row = {'bucket': bucket, 'step_ms': 1e3 * float(np.median(times))}
      row.update(attribute(op_seconds(trace_dir), names, _STEPS.value))
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
  io.write_json_atomic(_OUT.value, {'cell': _CELL.value, 'rows': rows})
  print(f'wrote {_OUT.value}')
