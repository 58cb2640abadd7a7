"""Forward-pass benchmark: seconds per 512 examples at reverse_string's largest evaluation shape.

reverse_string at length 500 has 500 inputs + 500 output queries, T = 1,000 positions (V = 2,
C = 2). For each encoding, the study's model (5 × d 64 × 8 heads) runs once in eval mode
(deterministic=True; randomized encodings still draw positions), in jitted sub-batches;
encodings causal by definition (CoPE, forgetting, stick-breaking) under a causal mask.
Compile time is measured separately and excluded. The reference needs 213 s for 8 × 64
examples with randomized relative (the study's model); the target is <= 30 s.

  python -m launch.bench forward [--encodings=none,alibi] [--sub_batch=64] [--chunk=1]
      [--out=f.json]

By default a sub-batch runs in the micro-batches the evaluator uses at this length
(`posenc.evaluate.eval_micro_batch`: 1 example at T = 1,000), so the figures are those of a
study's evaluation.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from launch import common
from posenc.attention import geometric_prefix
from posenc import io
from posenc import encodings
from posenc import models as model_lib
from posenc import evaluate


def bench_one(
  name: str, *, batch: int, sub_batch: int, chunk: int, length: int, seed: int = 0
) -> dict:
  """Compile and time one forward pass over `batch` examples of T = 2·length positions.

  Each jitted call takes `sub_batch` examples and runs them `chunk` at a time with lax.map
  (one noise draw shared by the sub-batch), which keeps the [chunk, H, T, T] attention
  intermediates cache-sized; chunk 0 runs the sub-batch in one piece.
  """
  # Encodings causal by definition run under a causal mask; the others bidirectional.
  causal = encodings.get(name).causal_only
  model = model_lib.Encoder(vocab_size=2, num_classes=2, encoding=name, causal=causal)
  key = jax.random.key(seed)
  params = jax.jit(
    lambda k: model.init(
      model_lib.init_rngs(k), jnp.zeros((1, 4), jnp.int32), jnp.int32(4), deterministic=True
    )
  )(key)['params']
  t = 2 * length
  inputs = jax.random.randint(jax.random.key(seed + 1), (batch, length), 0, 2)
  tokens = jnp.concatenate([inputs, jnp.full((batch, length), 2, jnp.int32)], axis=1)

  def apply(params, tokens, noise):
    return model.apply(
      {'params': params}, tokens, jnp.int32(t), deterministic=True, rngs={'noise': noise}
    )

  @jax.jit
  def forward(params, tokens, noise):
    if not chunk:
      return apply(params, tokens, noise)
    return jax.lax.map(lambda x: apply(params, x[None], noise)[0], tokens, batch_size=chunk)

  sub = tokens[:sub_batch]
  start = time.perf_counter()
  compiled = forward.lower(params, sub, key).compile()
  compile_s = time.perf_counter() - start
  noise_keys = jax.random.split(jax.random.key(seed + 2), batch // sub_batch)
  jax.block_until_ready(compiled(params, sub, noise_keys[0]))  # warm-up (allocations)
  start, cpu_start = time.perf_counter(), time.process_time()
  for i in range(batch // sub_batch):
    out = compiled(params, tokens[i * sub_batch : (i + 1) * sub_batch], noise_keys[i])
    jax.block_until_ready(out)
  forward_s = time.perf_counter() - start
  # CPU seconds of this process: less sensitive than wall time to other jobs on the machine.
  cpu_s = time.process_time() - cpu_start
  return {
    'encoding': name,
    'causal': causal,
    'forward_s': round(forward_s, 2),
    'cpu_s': round(cpu_s, 2),
    'compile_s': round(compile_s, 2),
    'batch': batch,
    'sub_batch': sub_batch,
    'chunk': chunk,
    'positions': t,
  }


def geometric_floor(
  num_weights: float, block: tuple[int, int] = (250, 1024), num_blocks: int = 64, repeats: int = 5
) -> dict[str, float]:
  """A measured lower bound on geometric attention: its own per-weight work.

  Beyond the q·k and weights·v products every attention needs,
  `geometric_prefix.geometric_weights` computes for every weight exp(-|s|), log(1 + e) and a
  final exp, and a blocked prefix sum of its row (`geometric_prefix.blocked_cumsum`). Each
  of the two is jitted alone in a `lax.map` over `num_blocks` cache-resident [Q, T'] blocks
  (the layout of a forward pass at T = 1,000, buffers reused, the result reduced per row so
  no output is written), best of `repeats`; the floor is their summed rate times
  `num_weights`. A forward pass also makes the mirror,
  the two products and every non-attention layer, so it cannot be faster than this with
  XLA's elementwise math and matmuls on these devices.

  Example: num_weights = 512 examples · 5 layers · 8 heads · 1,000² (T = 1,000) = 2.05e10.

  Returns:
    {'chain_ns_per_weight', 'cumsum_ns_per_weight' (wall, all cores), 'floor_s'}.
  """
  x = jax.random.normal(jax.random.key(0), (num_blocks, *block), jnp.float32)

  def ns_per_weight(fn):
    f = jax.jit(lambda a: jax.lax.map(lambda b: fn(b).sum(-1), a))
    jax.block_until_ready(f(x))
    best = float('inf')
    for _ in range(repeats):
      t0 = time.perf_counter()
      jax.block_until_ready(f(x))
      best = min(best, time.perf_counter() - t0)
    return 1e9 * best / x.size

  chain = ns_per_weight(lambda s: jnp.exp(s + jnp.log(1.0 + jnp.exp(-jnp.abs(s)))))
  cumsum = ns_per_weight(geometric_prefix.blocked_cumsum)
  return {
    'chain_ns_per_weight': chain,
    'cumsum_ns_per_weight': cumsum,
    'floor_s': 1e-9 * (chain + cumsum) * num_weights,
  }


def main(argv: list[str]) -> None:
  parser = common.ArgumentParser(prog='python -m launch.bench forward')
  parser.add_argument('--encodings', default=','.join(encodings.NAMES))
  parser.add_argument('--batch', type=int, default=512)
  parser.add_argument('--sub_batch', type=int, default=64)
  parser.add_argument(
    '--chunk',
    type=int,
    default=None,
    help='examples per lax.map step inside a sub-batch (0: no map; default: '
    'the evaluator\'s micro-batch at this length)',
  )
  parser.add_argument('--length', type=int, default=500, help='input length; T = 2·length')
  parser.add_argument('--out', default='bench_forward.json')
  args = parser.parse_args(argv[1:])
  common.check_output_file(args.out, '--out')
  for flag, value in (
    ('--batch', args.batch),
    ('--sub_batch', args.sub_batch),
    ('--length', args.length),
  ):
    common.at_least(value, flag)
  if args.chunk is not None:
    common.at_least(args.chunk, '--chunk', 0)
  if args.batch % args.sub_batch:
    parser.error('--batch must be a multiple of --sub_batch')
  study = model_lib.Encoder(vocab_size=2, num_classes=2, encoding='none')  # its shape
  if args.chunk is None:
    args.chunk = evaluate.eval_micro_batch(args.sub_batch, study.num_heads, 2 * args.length)
  for name in args.encodings.split(','):
    if name not in encodings.ENCODINGS:
      parser.error(f'unknown encoding {name!r}; valid encodings: {", ".join(encodings.ENCODINGS)}')

  rows = []
  print(
    f'{"encoding":24s} {"forward s":>10s} {"cpu s":>10s} {"compile s":>10s}   '
    f'({args.batch} examples, T={2 * args.length}, sub-batches of {args.sub_batch} '
    f'in chunks of {args.chunk}, '
    f'{jax.devices()[0].platform})',
    flush=True,
  )
  for name in args.encodings.split(','):
    row = bench_one(
      name, batch=args.batch, sub_batch=args.sub_batch, chunk=args.chunk, length=args.length
    )
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
  if any(name.startswith('geometric') for name in args.encodings.split(',')):
    weights = args.batch * study.num_layers * study.num_heads * (2 * args.length) ** 2
    floor = geometric_floor(weights)
    result['geometric_floor'] = floor
    print(
      f'geometric floor: {weights:.3g} attention weights x '
      f'({floor["chain_ns_per_weight"]:.2f} ns exp-log-exp + '
      f'{floor["cumsum_ns_per_weight"]:.2f} ns prefix sum, in a map over cache-resident '
      f'blocks) = {floor["floor_s"]:.1f} s, before the mirror, q.k, weights.v and the '
      'other layers',
      flush=True,
    )
  io.write_json_atomic(args.out, result)
  print(f'wrote {args.out}')
