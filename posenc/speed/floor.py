"""Floors: measured lower bounds on what a program can take on these devices.

The dense-product floor: a transformer step is mostly matrix products of its dense layers
(q, k, v, out, FFN). Timing each of those products on its own, at the shape the program
uses, and summing gives a measured lower bound on the program: it cannot be faster on these
devices with XLA's matrix products, whatever attention, normalisation and the optimiser
add. `launch.speed train` and `launch.speed eval` print how close training and range
evaluation come to it; docs/speed.md records the fractions.

The geometric floor (`geometric_floor`): geometric attention's own per-weight work, which
`launch.speed forward` sets beside the forward passes of the geometric encodings.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from posenc import programs
from posenc.training import cost_model
from posenc.training import run as run_lib
from posenc.attention import geometric_prefix
from posenc.training import protocol as protocol_lib

_CALLS_PER_TIMING = 4

Product = tuple[int, int, int]


def dense_products(tokens: int, model: Any, backward: bool = True) -> list[Product]:
  """The (m, k, n) matrix products of one layer's dense weights over `tokens` rows.

  Each weight W [k, n] (q, k, v, out projections [d, d]; FFN [d, F] and [F, d]) costs the
  forward x @ W [tokens, k] x [k, n] and, with `backward`, the input gradient g @ W^T
  [tokens, n] x [n, k] and the weight gradient x^T @ g [k, tokens] x [tokens, n].

  Example: d = 2, F = 4, tokens = 3 -> the first triple is (3, 2, 2), (3, 2, 2), (2, 3, 2);
    with backward=False the list is [(3, 2, 2)] * 4 + [(3, 2, 4), (3, 4, 2)].
  """
  d, f = model.d_model, model.ffn_size
  out = []
  for k, n in [(d, d)] * 4 + [(d, f), (f, d)]:
    out += [(tokens, k, n)] + ([(tokens, n, k), (k, tokens, n)] if backward else [])
  return out


class ProductTimer:
  """Median seconds of one jitted `a @ b` per shape, each shape timed once.

  Example: ProductTimer(repeats=5)((128, 64, 64)) -> about 4e-5 (seconds) on a 2-core CPU.
  """

  def __init__(self, repeats: int = 20):
    self.repeats = repeats
    self.seconds: dict[Product, float] = {}

  def __call__(self, shape: Product) -> float:
    if shape not in self.seconds:
      m, k, n = shape
      a, b = jnp.ones((m, k), jnp.float32), jnp.ones((k, n), jnp.float32)
      f = jax.jit(jnp.matmul)
      jax.block_until_ready(f(a, b))
      times = []
      for _ in range(self.repeats):  # a few calls in flight per timing: no host latency per call
        t0 = time.perf_counter()
        jax.block_until_ready([f(a, b) for _ in range(_CALLS_PER_TIMING)])
        times.append((time.perf_counter() - t0) / _CALLS_PER_TIMING)
      self.seconds[shape] = float(np.median(times))
    return self.seconds[shape]


def products_cost(products: list[Product], timer: ProductTimer) -> tuple[float, float]:
  """(seconds, FLOPs) of running `products` one after another."""
  return sum(timer(p) for p in products), sum(2.0 * np.prod(p) for p in products)


def training_floor(run: run_lib.Run, repeats: int = 20) -> dict[str, Any]:
  """The dense-product floor of one member's training step over the curriculum of `run`.

  Every product of `dense_products` at each training bucket's shape (batch_size x
  T_bucket rows) is timed on its own; a step's floor is their sum times the number of
  layers, and the curriculum's floor is the mean over lengths 1..N of the floor of each
  length's bucket. P members cost P times as much.

  Returns:
    {'bucket_ms': {bucket: ms}, 'mean_step_ms', 'max_updates_per_s' (at P = 1),
     'gflops_per_s' (the products' achieved rate over the curriculum)}.
  """
  model, task = run.model_settings, run.task
  n, size = run.train_settings.max_length, run.train_settings.bucket_size
  timer = ProductTimer(repeats)
  per_length, bucket_s = [], {}  # (seconds, FLOPs) of each length 1..N's bucket
  for length in range(1, n + 1):
    rows = run.train_settings.batch_size * cost_model.tokens(task, length, n, size)
    seconds, flops = products_cost(dense_products(rows, model), timer)
    per_length.append((model.num_layers * seconds, model.num_layers * flops))
    bucket_s[programs.data_width(length, n, size)] = per_length[-1][0]
  mean_s, mean_flops = (float(x) for x in np.mean(per_length, axis=0))
  return {
    'bucket_ms': {b: 1e3 * t for b, t in sorted(bucket_s.items())},
    'mean_step_ms': 1e3 * mean_s,
    'max_updates_per_s': 1.0 / mean_s,
    'gflops_per_s': mean_flops / mean_s / 1e9,
  }


def evaluation_floor(
  run: run_lib.Run, length: int, timer: ProductTimer | None = None
) -> dict[str, float]:
  """The dense-product floor of evaluating one member of `run` at `length`, and its model
  FLOPs.

  The range evaluation runs examples_per_length examples, padded to the length's bucket,
  in micro-batches (`protocol_lib.eval_micro_batch`, for the run's platform); the floor times the
  forward products at one micro-batch's shape and multiplies by the number of micro-batches
  and layers. 'flops' are the model's FLOPs (`ModelSettings.flops`: the dense layers and
  attention's two products) over the padded tokens, the figure an achieved FLOP/s divides.

  Example (the study's model on reverse_string, this 2-core CPU): evaluation_floor(run,
    100) -> {'tokens': 256, 'micro_batch': 4, 'floor_s': ~0.9, 'dense_gflops_per_s': ~71,
    'flops': 1.07e11}.
  """
  model, settings = run.model_settings, run.eval_settings
  tokens = cost_model.tokens(run.task, length, settings.max_length, settings.bucket_size)
  micro = protocol_lib.eval_micro_batch(settings.batch_size, model.num_heads, tokens, run.platform)
  calls = settings.examples_per_length // micro * model.num_layers
  seconds, flops = products_cost(
    dense_products(micro * tokens, model, backward=False), timer or ProductTimer()
  )
  return {
    'tokens': tokens,
    'micro_batch': micro,
    'floor_s': calls * seconds,
    'dense_gflops_per_s': float(flops / seconds / 1e9),
    'flops': settings.examples_per_length * model.flops(tokens),
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
