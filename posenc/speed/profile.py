"""Where a training step's time goes: a trace of its compiled program, read op by op.

A few training steps of one member at one length bucket are traced with `jax.profiler`;
the time of every XLA operation in the trace is attributed, through the compiled program's
metadata (each operation's `op_name`: the Flax module path and the jax function it came
from), to a part of the model (`PARTS`):

  attention: relative position term   the skew product and rel-shift of relative attention
  attention: q·k, softmax, weights·v  the rest of attention's [H, B, T, T] work
  dense products                      q, k, v, out and FFN matrix products
  layer norm, ReLU, dropout, ...      the other per-token work of the layers
  encoding                            drawing positions, sinusoids
  optimizer, loss, curriculum         everything outside the encoder

The relative position term is recognised by the operations of the `cpu_blocked` backend (its
skew product and rel-shift); with another backend its time counts as the rest of attention.

Example (`launch.speed profile --buckets=40`, the study's model on this project's 2-core
development CPU, 2026-11-26):
  >>> state, row = profile_bucket(run, state, 40, steps=3)  # doctest: +SKIP
  >>> row['step_ms'], row['parts']['attention: q·k, softmax, weights·v']  # doctest: +SKIP
  (728.0, 245.6)
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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from posenc.training import run as run_lib
from posenc.training import update

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


def profile_bucket(
  run: run_lib.Run, state: Any, bucket: int, steps: int, trace_dir: str | None = None
) -> tuple[Any, dict[str, Any]]:
  """Times, traces and attributes the training step of `run` at `bucket`.

  The step is compiled once: that executable is timed (6 calls, the first not counted: it
  warms the allocator and caches), traced for `steps` calls and read for its op names.

  Args:
    run: the run (one member is what the figures describe).
    state: its training state (`state.init_state`); the steps update it.
    bucket: a training length bucket of the run (`run.training.buckets(run)`).
    steps: traced steps.
    trace_dir: keep the trace there (for TensorBoard's profiler or Perfetto); default: a
      temporary directory.

  Returns:
    (the state after the steps, {'bucket', 'step_ms' (median of 5 untraced calls),
     'attributed_ms', 'parts', 'ops'} (`attribute`, per traced step)).
  """
  members = (run.population.learning_rates, run.population.train_keys)
  length = jnp.int32(bucket)
  fn = update.make_update_fn(run, bucket).lower(state, length, *members).compile()
  names = op_names(fn.as_text())
  times = []
  for _ in range(6):
    t0 = time.perf_counter()
    state, _ = jax.block_until_ready(fn(state, length, *members))
    times.append(time.perf_counter() - t0)
  times = times[1:]
  with tempfile.TemporaryDirectory() as tmp:
    directory = trace_dir or tmp
    with jax.profiler.trace(directory):
      for _ in range(steps):
        state, _ = fn(state, length, *members)
      jax.block_until_ready(state)
    row = {'bucket': bucket, 'step_ms': 1e3 * float(np.median(times))}
    row.update(attribute(op_seconds(directory), names, steps))
  return state, row
