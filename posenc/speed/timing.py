"""Timed work: training throughput, range evaluation, forward passes and generation.

Each function compiles what it times apart from running it, and returns its figures as a
dict (the rows `launch.speed` prints and writes as JSON; docs/speed.md has the measured
ones with their commands).

Example (`launch.speed eval --lengths=100`):
  >>> run = setup.build(config)                 # one member of the study's model  # doctest: +SKIP
  >>> params = state.init_state(run).params  # doctest: +SKIP
  >>> eval_length(run, params, 100)  # doctest: +SKIP
  {'length': 100, 'bucket': 128, 'examples': 512, 'compile_s': ..., 'run_s': ...,
   'accuracy': ...}
"""

from __future__ import annotations

import copy
import tempfile
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections

from posenc.training import cost_model
from posenc import encodings
from posenc.models import encoder as encoder_lib
from posenc.training import run as run_lib
from posenc import setup
from posenc.training import train
from posenc.kinds.range import protocol as range_protocol


def first_update_seconds(config: ml_collections.ConfigDict) -> float:
  """Seconds from nothing to the first update of a fresh run of `config` (init, the first
  compile and one step), measured by `train.train_and_evaluate` in a temporary workdir: one
  training step, one evaluation length past training."""
  config = copy.deepcopy(config)
  config.train.steps = 1
  config.eval.lengths = [config.train.max_length + 1]  # one length, past training: scored
  config.eval.examples_per_length = config.eval.batch_size
  with tempfile.TemporaryDirectory() as workdir:
    return train.train_and_evaluate(setup.build(config), workdir)['timing']['first_update_s']


def steady_state(run: run_lib.Run, steps: int) -> dict[str, Any]:
  """`cost_model.measure_training` of `run` over `steps` steps, without its state and lengths:
  every length bucket compiled first, then the steps timed along the curriculum."""
  figures = cost_model.measure_training(run, steps)
  return {k: v for k, v in figures.items() if k not in ('state', 'lengths')}


def eval_length(run: run_lib.Run, params: Any, length: int) -> dict[str, Any]:
  """Compile and run the range evaluation of `run`'s members at `length`: its seconds of
  each, and the first member's accuracy."""
  bucket = range_protocol.eval_bucket(run, length)
  fn = range_protocol.make_eval_fn(run, bucket)
  args = (params, jnp.int32(length), run.population.eval_keys)
  t0 = time.time()
  compiled = fn.lower(*args).compile()
  compile_s = time.time() - t0
  t0 = time.time()
  accuracy = jax.block_until_ready(compiled(*args))['accuracy']
  run_s = time.time() - t0
  return {
    'length': length,
    'bucket': bucket,
    'examples': run.eval_settings.examples_per_length,
    'compile_s': compile_s,
    'run_s': run_s,
    'accuracy': float(accuracy[0]),
  }


def forward(
  name: str, *, batch: int, sub_batch: int, chunk: int, length: int, seed: int = 0
) -> dict[str, Any]:
  """Compile and time one forward pass of the study's encoder (5 × d 64 × 8 heads,
  reverse_string's V = C = 2) with encoding `name` over `batch` examples of T = 2·length
  positions, in eval mode (randomized encodings still draw positions); an encoding causal
  by definition runs under a causal mask.

  Each jitted call takes `sub_batch` examples and runs them `chunk` at a time with lax.map
  (one noise draw shared by the sub-batch), which keeps the [chunk, H, T, T] attention
  intermediates cache-sized; chunk 0 runs the sub-batch in one piece. The model alone is
  timed, no task or population: it is built here, not by `setup.build`.
  """
  causal = encodings.get(name).causal_only
  model = encoder_lib.Encoder(vocab_size=2, num_classes=2, encoding=name, causal=causal)
  key = jax.random.key(seed)
  params = jax.jit(
    lambda k: model.init(
      encoder_lib.init_rngs(k), jnp.zeros((1, 4), jnp.int32), jnp.int32(4), deterministic=True
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
  def run(params, tokens, noise):
    if not chunk:
      return apply(params, tokens, noise)
    return jax.lax.map(lambda x: apply(params, x[None], noise)[0], tokens, batch_size=chunk)

  sub = tokens[:sub_batch]
  start = time.perf_counter()
  compiled = run.lower(params, sub, key).compile()
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


def generation(
  fn: Callable[..., jax.Array],
  model: Any,
  variables: Any,
  prompts: jax.Array,
  lengths: jax.Array,
  max_new: int,
) -> dict[str, float]:
  """Compile and run one greedy generation `fn` (`posenc.models.generate.generate` or
  `generate_uncached`) of `max_new` tokens from `prompts` [B, P] (no end-of-sequence id, so
  every step runs): seconds of each, and generated tokens per second."""
  rngs = {'noise': jax.random.key(1)}
  run = jax.jit(lambda v, p, n: fn(model, v, p, n, max_new, -1, rngs))
  t0 = time.perf_counter()
  compiled = run.lower(variables, prompts, lengths).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  jax.block_until_ready(compiled(variables, prompts, lengths))
  run_s = time.perf_counter() - t0
  return {
    'compile_s': compile_s,
    'run_s': run_s,
    'tokens_per_s': prompts.shape[0] * max_new / run_s,
  }
