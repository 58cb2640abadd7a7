"""Forward-pass speed: seconds per 512 examples at reverse_string's largest evaluation shape.

reverse_string at length 500 has 500 inputs + 500 output queries, T = 1,000 positions (V = 2,
C = 2). For each encoding, the study's model (5 × d 64 × 8 heads) runs once in eval mode
(deterministic=True; randomized encodings still draw positions), in jitted sub-batches;
encodings causal by definition (CoPE, forgetting, stick-breaking) under a causal mask
(`posenc.speed.timing.forward`). Compile time is measured separately and excluded. The
reference needs 213 s for 8 × 64 examples with randomized relative (the study's model); the
target is <= 30 s.

  python -m launch.speed forward [--encodings=none,alibi] [--sub_batch=64] [--chunk=1]
      [--out=f.json]

By default a sub-batch runs in the micro-batches the evaluator uses at this length
(`posenc.training.protocol.eval_micro_batch`: 1 example at T = 1,000), so the figures are those of a
study's evaluation. With a geometric encoding, the geometric floor
(`posenc.speed.floor.geometric_floor`) follows.
"""

from __future__ import annotations

from absl import flags
import jax

from launch import common
from launch.speed import opening
from posenc import encodings
from posenc.training import protocol as protocol_lib
from posenc.models import encoder as encoder_lib
from posenc import suggest
from posenc.speed import floor as floor_lib
from posenc.speed import timing

_ENCODINGS = flags.DEFINE_string(
  'encodings', ','.join(encodings.NAMES), 'Encodings, comma-separated.'
)
_BATCH = flags.DEFINE_integer('batch', 512, 'Examples timed per encoding.')
_SUB_BATCH = flags.DEFINE_integer('sub_batch', 64, 'Examples per jitted call.')
_CHUNK = flags.DEFINE_integer(
  'chunk',
  None,
  "Examples per lax.map step inside a sub-batch (0: no map; default: the evaluator's "
  'micro-batch at this length).',
)
_LENGTH = flags.DEFINE_integer('length', 500, 'Input length; T = 2·length.')
_OPENING = opening.Opening('forward')


def main(argv: list[str]) -> None:
  common.run(_main, argv)


def _main(argv: list[str]) -> None:
  _OPENING.start(argv)
  for flag, value in (('--batch', _BATCH.value), ('--sub_batch', _SUB_BATCH.value)):
    common.at_least(value, flag)
  common.at_least(_LENGTH.value, '--length')
  chunk, batch, sub_batch, length = _CHUNK.value, _BATCH.value, _SUB_BATCH.value, _LENGTH.value
  if chunk is not None:
    common.at_least(chunk, '--chunk', 0)
  if batch % sub_batch:
    common.fail(f'--batch={batch} must be a multiple of --sub_batch={sub_batch}')
  study = encoder_lib.Encoder(vocab_size=2, num_classes=2, encoding='none')  # its shape
  if chunk is None:
    chunk = protocol_lib.eval_micro_batch(sub_batch, study.num_heads, 2 * length)
  names = _ENCODINGS.value.split(',')
  for name in names:
    if name not in encodings.ENCODINGS:
      common.fail(
        f'unknown encoding {name!r}{suggest.did_you_mean(name, encodings.ENCODINGS, encodings.KNOWN_AS)}; valid encodings: {", ".join(encodings.ENCODINGS)}'
      )

  rows = []
  print(
    f'{"encoding":24s} {"forward s":>10s} {"cpu s":>10s} {"compile s":>10s}   '
    f'({batch} examples, T={2 * length}, sub-batches of {sub_batch} '
    f'in chunks of {chunk}, '
    f'{jax.devices()[0].platform})',
    flush=True,
  )
  for name in names:
    row = timing.forward(name, batch=batch, sub_batch=sub_batch, chunk=chunk, length=length)
    rows.append(row)
    print(
      f'{name:24s} {row["forward_s"]:10.2f} {row["cpu_s"]:10.2f} {row["compile_s"]:10.2f}',
      flush=True,
    )
  result = {
    'backend': jax.devices()[0].platform,
    'jax': jax.__version__,
    'device_count': jax.device_count(),
    'rows': rows,
  }
  if any(name.startswith('geometric') for name in names):
    weights = batch * study.num_layers * study.num_heads * (2 * length) ** 2
    floor = floor_lib.geometric_floor(weights)
    result['geometric_floor'] = floor
    print(
      f'geometric floor: {weights:.3g} attention weights x '
      f'({floor["chain_ns_per_weight"]:.2f} ns exp-log-exp + '
      f'{floor["cumsum_ns_per_weight"]:.2f} ns prefix sum, in a map over cache-resident '
      f'blocks) = {floor["floor_s"]:.1f} s, before the mirror, q.k, weights.v and the '
      'other layers',
      flush=True,
    )
  _OPENING.finish(result)
