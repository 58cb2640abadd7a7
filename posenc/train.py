"""Training and range evaluation of a whole seed x learning-rate population at once.

`train_and_evaluate(config, workdir)` is the one loop; `launch/train.py` is its absl
entry point:

  python -m launch.train --config=experiments/rpe_table1.py:task=reverse_string,tiny \
      --workdir=/tmp/run

The population (members, keys, devices, state, optimizer: `posenc.population`) is trained
by one compiled update; checkpoints and `Preempted` are `posenc.checkpoint`'s.

Resume precedence: 1. the latest checkpoint in `workdir/checkpoints`, 2. scratch. A run
killed at any moment and restarted with the same command ends bit for bit where the
uninterrupted run ends: the state (parameters, optimizer, divergence flags and the
metric sums of the current log interval) is checkpointed, and every random draw is a
function of the step. Checkpoints hold the real members only, so a run may resume on
another number of devices (results.json records the device history; parameters then
agree with an unmoved run to float rounding). `should_stop` (SIGTERM in the launchers)
makes the run checkpoint at the next step boundary and raise `Preempted`.

The work directory:
  lock            held while a process runs here: a second process is refused
  config.json     the resolved config (a rerun with a different config is refused)
  metrics.jsonl   one line per logged step: step, per-member loss / accuracy, steps/s
  checkpoints/    orbax, periodic and final
  eval.jsonl      per-length accuracies as they are measured (resumable evaluation)
  results.json    the summary, written atomically at the end
"""

from __future__ import annotations

import collections
import functools
import math
import os
import time
from typing import Any, Callable

from absl import logging
import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp

from posenc import attention
from posenc import checkpoint
from posenc import config as config_lib
from posenc import grid_eval
from posenc import length_eval
from posenc import lm_eval
from posenc import io
from posenc import models as model_lib
from posenc import multitask
from posenc import objectives
from posenc import population as population_lib

P = population_lib.P
POP = population_lib.POP

# On CPU, evaluation runs micro-batches whose attention weights fit this many floats (8 MB:
# the passes over them stay in cache; measured fastest among 2**21..2**27 at T = 200..1,000).
_CPU_ATTENTION_BUDGET = 2**21
# On GPU and TPU a micro-batch's attention weights may take this share of device memory
# (a layer's logits, weights and one temporary live at once).
_ACCELERATOR_MEMORY_SHARE = 0.5
# Device memory assumed when the device does not report it (a program exported for an
# accelerator from another machine): 16 GiB, the smallest of the common ones (TPU v5e).
_DEFAULT_DEVICE_MEMORY = 16 * 2**30


# ---------------------------------------------------------------------------------------
# Model and metrics.


def make_model(config: ml_collections.ConfigDict, task: Any,
               platform: str | None = None) -> Any:
  """The model of `config.model.family` for `task`, its attention backend resolved for
  `platform` (default: JAX's default backend)."""
  c = config.model
  options = config.encoding_options.to_dict()
  if hasattr(task, 'digit_ids'):  # Abacus reads which tokens are digits from the task
    options['digit_ids'] = tuple(task.digit_ids)
  common = dict(
      encoding=config.encoding, num_layers=c.num_layers, d_model=c.d_model,
      num_heads=c.num_heads, ffn_size=c.ffn_size, dropout=c.dropout,
      max_position=c.max_position, encoding_options=tuple(sorted(options.items())),
      norm=c.norm, ffn=c.ffn, recurrences=c.recurrences, injection=c.injection, loop=c.loop,
      attention_impl=attention.resolve(c.attention_impl, platform or population_lib.platform_of()),
      attention_block=c.attention_block,
      fused_implementation=None if c.fused_implementation == 'xla' else c.fused_implementation,
      temperature=c.temperature, temperature_beta=c.temperature_beta,
      dtype=jnp.dtype(c.dtype), param_dtype=jnp.dtype(c.param_dtype))
  if c.family == 'decoder':
    vocab = (task.vocab_size if objectives.is_sequence_task(task)
             else objectives.decoder_vocab(task).size)
    # A head per task: the main task's, then each hint's (posenc.multitask).
    heads = 1 + len(config.get('hints', []) or []) if objectives.is_hinting_task(task) else 1
    return model_lib.Decoder(vocab_size=vocab, tie_embeddings=c.tie_embeddings,
                             num_outputs=heads, **common)
  if objectives.is_language_task(task):  # masked LM: id vocab_size is the mask token
    return model_lib.Encoder(vocab_size=task.vocab_size, num_classes=task.vocab_size, **common)
  return model_lib.Encoder(vocab_size=task.vocab_size, num_classes=task.num_classes, **common)


@functools.partial(jax.jit, static_argnames=('count', 'max_length'))
def curriculum_lengths(key: jax.Array, start: jax.Array, count: int,
                       max_length: int) -> jax.Array:
  """Lengths ~ U{1..max_length} of steps start..start+count-1, drawn on the device.

  The host reads them only to pick the compiled program of each step's length bucket.
  """
  steps = start + jnp.arange(count)
  return jax.vmap(lambda s: jax.random.randint(
      jax.random.fold_in(key, s), (), 1, max_length + 1))(steps)


# ---------------------------------------------------------------------------------------
# The update step.


def _local_update(config: ml_collections.ConfigDict, task: Any,
                  model: model_lib.Encoder, bucket: int, batch_key: jax.Array,
                  loop: str) -> Callable[..., Any]:
  """One step of a device's members on a batch padded to `bucket` input tokens.

  local_update(state, length, learning_rates [p], train_keys [p]) -> (state, {loss,
  accuracy} [p]), for the p members on this device; `length` is the step's real length
  (traced) and the batch is sampled from the step's key on the device.
  """
  tx = population_lib.optimizer(config)
  sequences = objectives.is_sequence_task(task)
  hinting = objectives.is_hinting_task(task)
  task_list = multitask.tasks_of(config) if hinting else None
  shape = train_shape(config, task) if sequences else bucket
  objective = objectives.make(config, task, model, shape)
  r, alpha = config.model.recurrences, config.train.progressive_alpha

  def member_update(params, opt, diverged, learning_rate, key, batch, step):
    member_step = jax.random.fold_in(key, step)
    dropout, noise = jax.random.split(member_step)
    rngs = {'dropout': dropout, 'noise': noise}

    def loss_fn(p):
      if alpha == 0:
        return objective.loss(p, batch, rngs)
      # The progressive loss: n recurrences without gradient, then k with.
      k_n, k_k = jax.random.split(jax.random.fold_in(member_step, population_lib.PROGRESSIVE))
      n = jax.random.randint(k_n, (), 0, r)
      k = jax.random.randint(k_k, (), 1, jnp.maximum(1, jnp.minimum(r - n, r // 2)) + 1)
      loss, accuracy = objective.loss(p, batch, rngs, window=(n, n + k))
      if alpha < 1:
        full, accuracy = objective.loss(p, batch, rngs)
        loss = (1 - alpha) * full + alpha * loss
      return loss, accuracy

    (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    if config.train.scale_block_gradients and 'block' in grads:
      grads = {**grads, 'block': jax.tree.map(lambda g: g / r, grads['block'])}
    updates, new_opt = tx.update(grads, opt, params)
    rate = learning_rate * population_lib.learning_rate_scale(config, step)
    new_params = jax.tree.map(lambda p, u: (p - rate * u).astype(p.dtype), params, updates)
    # A member whose loss is not finite is frozen and marked; the others go on.
    diverged = diverged | ~jnp.isfinite(loss)
    keep = lambda new, old: jnp.where(diverged, old, new)
    return (jax.tree.map(keep, new_params, params), jax.tree.map(keep, new_opt, opt),
            diverged, loss, accuracy)

  def local_update(state, length, learning_rates, keys):
    key = jax.random.fold_in(batch_key, state['step'])
    if hinting:  # the main task and its hints, each through its own head
      batch = multitask.train_batch(config, task_list, key, population_lib.dataset_key(config),
                                    state['step'], shape)
    elif sequences:  # every example its own lengths, drawn stratified over [1..n]^2
      batch = task.sample_train(key, config.train.batch_size, config.train.max_length, *shape)
    else:
      batch = task.sample_padded(key, config.train.batch_size, length, bucket)
    members = (state['params'], state['opt'], state['diverged'], learning_rates, keys)
    one = lambda m: member_update(*m, batch, state['step'])
    if loop == 'map':
      params, opt, diverged, loss, accuracy = jax.lax.map(one, members)
    else:
      params, opt, diverged, loss, accuracy = jax.vmap(one)(members)
    sums = {'loss': state['sums']['loss'] + loss,
            'accuracy': state['sums']['accuracy'] + accuracy}
    new_state = {'params': params, 'opt': opt, 'diverged': diverged, 'sums': sums,
                 'count': state['count'] + 1, 'step': state['step'] + 1}
    return new_state, {'loss': loss, 'accuracy': accuracy}

  return local_update


def train_buckets(config: ml_collections.ConfigDict) -> list[int]:
  """The padded input lengths training runs at, ascending (one, N, for sequence tasks, whose
  batches mix every length up to N).

  Example: N = 40, bucket_size 5 -> [5, 10, ..., 40].
  """
  n, size = config.train.max_length, config.train.bucket_size
  if objectives.is_sequence_task(config_lib.task_of(config)):
    return [n]
  return sorted({config_lib.bucket_of(l, n, size) for l in range(1, n + 1)})


def bucket_of(config: ml_collections.ConfigDict, length: int) -> int:
  """The training bucket of a step of curriculum length `length`."""
  buckets = train_buckets(config)
  if len(buckets) == 1:
    return buckets[0]
  return config_lib.bucket_of(length, config.train.max_length, config.train.bucket_size)


def train_shape(config: ml_collections.ConfigDict, task: Any) -> tuple[int, int]:
  """(prompt width, answer width) of a sequence task's training batches: its bounds at n
  (a hinting task's: the widest of it and its hints)."""
  n = config.train.max_length
  if objectives.is_hinting_task(task):
    return multitask.train_shape(multitask.tasks_of(config), n)
  return task.max_prompt(n, n), task.max_answer(n, n)


def make_update_fn(config: ml_collections.ConfigDict, task: Any, model: model_lib.Encoder,
                   population: population_lib.Population, bucket: int, batch_key: jax.Array,
                   traces: collections.Counter | None = None,
                   platform: str | None = None) -> Callable[..., Any]:
  """The jitted update for batches padded to `bucket` input tokens.

  update(state, length, learning_rates [P], train_keys [P]) -> (state, {loss, accuracy} [P])
  `length` is the step's real length (traced); the batch is sampled inside the program
  from the step's key, so no data crosses from the host. `traces['train']` counts how
  often it is traced (= compiled).
  """
  local = _local_update(config, task, model, bucket, batch_key,
                        population_lib.population_loop(config, platform or population.platform))

  def local_update(*args):
    if traces is not None:
      traces['train'] += 1
    return local(*args)

  state_specs = jax.tree.map(lambda s: P(POP) if s.ndim else P(),
                             population_lib.init_state(config, model, population, abstract=True))
  update = population.shard_map(
      local_update, in_specs=(state_specs, P(), P(POP), P(POP)),
      out_specs=(state_specs, P(POP)))
  return jax.jit(update, donate_argnums=0)


def make_multi_step_fn(config: ml_collections.ConfigDict, task: Any,
                       model: model_lib.Encoder, population: population_lib.Population,
                       curriculum_key: jax.Array, batch_key: jax.Array,
                       traces: collections.Counter | None = None,
                       platform: str | None = None) -> Callable[..., Any]:
  """The jitted update of up to K = `train.steps_per_dispatch` consecutive steps.

  update(state, num_steps, learning_rates [P], train_keys [P]) -> state after min(K,
  num_steps) steps (num_steps traced). A `lax.scan` over K steps draws each step's length
  on the device and runs the update of its length bucket (`lax.switch` over every bucket),
  so one program serves every chunk of steps and the host dispatches once per K steps.
  Step for step the same computation as `make_update_fn`'s programs.
  """
  k, n, size = config.train.steps_per_dispatch, config.train.max_length, config.train.bucket_size
  loop = population_lib.population_loop(config, platform or population.platform)
  buckets = train_buckets(config)
  branches = [_local_update(config, task, model, b, batch_key, loop) for b in buckets]

  def local_multi(state, num_steps, learning_rates, keys):
    if traces is not None:
      traces['train'] += 1

    def one_step(state, i):
      length = jax.random.randint(jax.random.fold_in(curriculum_key, state['step']), (), 1,
                                  n + 1)
      index = jnp.minimum((length + size - 1) // size, len(buckets)) - 1
      step = lambda s: jax.lax.switch(index, [lambda s, b=b: b(s, length, learning_rates,
                                                               keys)[0] for b in branches], s)
      return jax.lax.cond(i < num_steps, step, lambda s: s, state), None

    return jax.lax.scan(one_step, state, jnp.arange(k))[0]

  state_specs = jax.tree.map(lambda s: P(POP) if s.ndim else P(),
                             population_lib.init_state(config, model, population, abstract=True))
  update = population.shard_map(local_multi, in_specs=(state_specs, P(), P(POP), P(POP)),
                                out_specs=state_specs)
  return jax.jit(update, donate_argnums=0)


# ---------------------------------------------------------------------------------------
# Range evaluation.


def _divisor_at_most(n: int, limit: int) -> int:
  """The largest divisor of n that is <= limit (at least 1)."""
  return max(d for d in range(1, n + 1) if n % d == 0 and d <= max(limit, 1))


def device_memory(platform: str) -> int:
  """Bytes of memory of one local device of `platform`, or `_DEFAULT_DEVICE_MEMORY` when no
  such device is here or it does not say."""
  try:
    stats = jax.local_devices(backend=platform)[0].memory_stats() or {}
  except RuntimeError:
    stats = {}
  return int(stats.get('bytes_limit', _DEFAULT_DEVICE_MEMORY))


def eval_micro_batch(batch_size: int, num_heads: int, tokens: int, platform: str = 'cpu',
                     memory_bytes: int | None = None) -> int:
  """Examples per evaluation micro-batch, a divisor of `batch_size`.

  On CPU: the most whose [H, T, T] attention weights fit `_CPU_ATTENTION_BUDGET` floats, so
  each pass over them stays in cache. On GPU and TPU: the most whose weights (with the
  logits and a temporary) fit `_ACCELERATOR_MEMORY_SHARE` of the device's memory: the whole
  sub-batch unless sequences are very long.

  Example: eval_micro_batch(64, 8, 1000) -> 1; eval_micro_batch(64, 8, 100) -> 16;
    eval_micro_batch(64, 8, 1000, 'tpu', 16 * 2**30) -> 64.
  """
  if platform == 'cpu':
    return _divisor_at_most(batch_size, _CPU_ATTENTION_BUDGET // (num_heads * tokens * tokens))
  memory = device_memory(platform) if memory_bytes is None else memory_bytes
  per_example = 3 * 4 * num_heads * tokens * tokens
  return _divisor_at_most(batch_size, int(_ACCELERATOR_MEMORY_SHARE * memory) // per_example)


def make_eval_fn(config: ml_collections.ConfigDict, task: Any, model: Any,
                 population: population_lib.Population, bucket: int, data_key: jax.Array,
                 traces: collections.Counter | None = None,
                 platform: str | None = None) -> Callable[..., dict[str, jax.Array]]:
  """The jitted evaluation of one length, for lengths padded to `bucket` input tokens.

  evaluate(params [P], length, eval_keys [P]) -> {'accuracy', 'exact_match'} [P]: the mean
  over examples_per_length / batch_size sub-batches of the pooled per-token accuracy and of
  the share of examples whose every masked output is right (`objectives`: the encoder reads
  its outputs in one pass, the decoder generates them greedily). The data of (length,
  sub-batch j) is the same for every model; randomized positions and (with eval_dropout)
  dropout are redrawn per sub-batch.

  Members run one after another, and a sub-batch runs in micro-batches sized for the
  platform (`eval_micro_batch`): on CPU at T = 1,000 a whole sub-batch of 64 would stream
  2 GB per attention pass through memory. All micro-batches of a sub-batch share its
  position draw (the 'noise' key), so the result is that of one call on the sub-batch.
  """
  batch_size = config.eval.batch_size
  num_sub = config.eval.examples_per_length // batch_size
  max_output = int(task.output_length(bucket))
  tokens = bucket + max_output
  micro = eval_micro_batch(batch_size, config.model.num_heads, tokens,
                           platform or population.platform)
  objective = objectives.make(config, task, model, bucket)

  def local_eval(params, length, keys):
    if traces is not None:
      traces['eval'] += 1

    def sub_batch(j):
      batch = task.sample_padded(
          jax.random.fold_in(jax.random.fold_in(data_key, length), j), batch_size, length,
          bucket)
      per_example = {k: v for k, v in batch.items() if k not in ('length', 'output_length')}
      micro_batches = jax.tree.map(
          lambda x: x.reshape(batch_size // micro, micro, *x.shape[1:]), per_example)

      def member(args):
        p, key = args
        dropout, noise = jax.random.split(
            jax.random.fold_in(jax.random.fold_in(key, length), j))

        def counts(args):
          i, mb = args
          mb = {**mb, 'length': batch['length'], 'output_length': batch['output_length']}
          return objective.counts(p, mb, {'dropout': jax.random.fold_in(dropout, i),
                                          'noise': noise})

        if micro == batch_size:
          sums = counts((0, jax.tree.map(lambda x: x[0], micro_batches)))
        else:
          with jax.named_scope('eval_micro_batches'):
            sums = jax.tree.map(jnp.sum, jax.lax.map(
                counts, (jnp.arange(batch_size // micro), micro_batches)))
        return {'accuracy': sums['correct'] / sums['total'],
                'exact_match': sums['exact'] / sums['examples']}

      return jax.lax.map(member, (params, keys))

    return jax.tree.map(lambda x: jnp.mean(x, axis=0),
                        jax.lax.map(sub_batch, jnp.arange(num_sub)))

  param_specs = jax.tree.map(lambda _: P(POP),
                             population_lib.init_state(config, model, population, abstract=True)['params'])
  evaluate = population.shard_map(local_eval, in_specs=(param_specs, P(), P(POP)),
                                  out_specs=P(POP))
  return jax.jit(evaluate)


# ---------------------------------------------------------------------------------------
# The work directory.


def prepare_workdir(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Creates `workdir` with config.json, or checks a rerun asks for the same run
  (`config.config_changes`: equal but for the resumable fields)."""
  path = os.path.join(workdir, 'config.json')
  new = config_lib.as_json(config)
  if os.path.exists(path):
    changes = config_lib.config_changes(io.read_json(path), new)
    if changes:
      raise config_lib.ConfigError(
          f'workdir {workdir} holds a run with a different config '
          f'({config_lib.describe_changes(changes)}); use a new --workdir or the same config')
  os.makedirs(workdir, exist_ok=True)
  io.write_json_atomic(path, new)


def versions() -> dict[str, Any]:
  device = jax.local_devices()[0]
  return {'jax': jax.__version__, 'flax': flax.__version__, 'optax': optax.__version__,
          'orbax_checkpoint': getattr(ocp, '__version__', 'unknown'),
          'device_kind': device.device_kind, 'platform': device.platform,
          'local_device_count': jax.local_device_count()}


def _finite_or_none(x: float) -> float | None:
  return float(x) if math.isfinite(x) else None


def _next_multiple(step: int, every: int) -> int:
  """The first multiple of `every` after `step`. Example: _next_multiple(10, 5) == 15."""
  return (step // every + 1) * every


def _duration(seconds: float) -> str:
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f'{h}h{m:02d}m{s:02d}s' if h else f'{m}m{s:02d}s'


# ---------------------------------------------------------------------------------------
# The loop.


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       devices: list[Any] | None = None,
                       progress: Callable[[str], None] = logging.info,
                       should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
  """Trains the config's population in `workdir` (resuming it) and evaluates it.

  Args:
    config: see `posenc.config.base_config` for the surface.
    workdir: the run's directory; created if needed, resumed if it holds a run.
    devices: the devices the population is sharded over (default: all local devices).
    progress: receives the human-readable progress lines.
    should_stop: polled at every step boundary and between evaluation lengths; when it
      returns True the run writes a checkpoint (training) or keeps its measured lengths
      (evaluation) and raises `Preempted`.

  Returns:
    The contents of results.json.

  Raises:
    ConfigError: the config cannot run, or `workdir` holds a run of another config.
    io.DirectoryBusy: another live process is running in `workdir`.
    Preempted: `should_stop` asked the run to stop.
  """
  config_lib.validate(config)
  os.makedirs(workdir, exist_ok=True)
  with io.DirectoryLock(workdir):
    return _train_and_evaluate(config, workdir, devices, progress, should_stop)


def _train_and_evaluate(config, workdir, devices, progress, should_stop):
  task = config_lib.task_of(config)
  population = population_lib.Population(config, devices)
  model = make_model(config, task, population.platform)
  prepare_workdir(config, workdir)
  curriculum_key, batch_key, eval_data_key = population_lib.data_keys(config)
  here = {'devices': population.num_devices, 'platform': population.platform}

  # 1. The newest checkpoint that restores (damaged ones are set aside), else 2. scratch.
  manager = checkpoint.checkpoint_manager(workdir)
  latest, state, history, damaged = checkpoint.restore_newest(
      manager, population_lib.init_state(config, model, population, abstract=True), population,
      functools.partial(checkpoint.set_aside_damaged, workdir))
  if damaged:
    manager.reload()
    damaged = 'damaged: ' + '; '.join(damaged) + ', and '
  if latest is None:
    state = population_lib.init_state(config, model, population)
    history = [{'from_step': 0, **here}]
    if damaged:
      progress(damaged + 'no other checkpoint: started from scratch')
  else:
    moved = {k: history[-1][k] for k in here} != here
    if moved:
      history.append({'from_step': latest, **here})
    progress((damaged or '') + f'resumed from the checkpoint at step {latest}' + (
        f' on {here["devices"]} {here["platform"]} devices (was {history[-2]["devices"]} '
        f'{history[-2]["platform"]}): parameters now agree with an unmoved run to float '
        'rounding, not bit for bit' if moved else ''))
  start = int(state['step'])
  # Per member: the leading axis of every leaf is the population.
  num_params = int(sum(np.prod(x.shape[1:]) for x in jax.tree.leaves(state['params'])))

  metrics_path = os.path.join(workdir, 'metrics.jsonl')
  # Lines logged after the restored checkpoint are redone identically.
  io.read_jsonl(metrics_path, keep=lambda r: r['step'] <= start, rewrite=True)

  # The metric sums restart each log interval; jitted so the state keeps its shardings
  # (a host-made zero would change the update's input types and retrace it).
  reset_interval = jax.jit(
      lambda s: {**s, 'sums': jax.tree.map(jnp.zeros_like, s['sums']),
                 'count': jnp.zeros_like(s['count'])},
      donate_argnums=0, out_shardings=population.state_sharding(state))
  steps, n = config.train.steps, config.train.max_length
  update_fns: dict[int, Callable[..., Any]] = {}
  traces: collections.Counter = collections.Counter()
  multi_step = None
  if config.train.steps_per_dispatch > 1:
    multi_step = make_multi_step_fn(config, task, model, population, curriculum_key,
                                    batch_key, traces)
  chunk = max(config.train.log_every, 1)
  lengths = np.zeros(0, np.int32)
  t_start = time.time()
  t_log, step_log = t_start, start
  first_update_s = None
  step = start
  while step < steps:
    if should_stop():
      if step > start:  # The checkpoint at `start` already exists.
        checkpoint.save_state(manager, step, state, population, history)
        manager.wait_until_finished()
      raise checkpoint.Preempted(step, f'preempted at step {step} of training: checkpoint written')
    if multi_step is None:
      # One program per length bucket; the host reads the curriculum to pick it.
      offset = (step - start) % chunk
      if offset == 0:
        lengths = np.asarray(curriculum_lengths(curriculum_key, jnp.int32(step), chunk, n))
      length = int(lengths[offset])
      bucket = bucket_of(config, length)
      if bucket not in update_fns:
        update_fns[bucket] = make_update_fn(config, task, model, population, bucket,
                                            batch_key, traces)
      state, _ = update_fns[bucket](state, jnp.int32(length), population.learning_rates,
                                    population.train_keys)
      done = step + 1
    else:
      # Up to K steps in one call, ending at the next log or checkpoint boundary.
      boundary = min(_next_multiple(step, config.train.log_every),
                     _next_multiple(step, config.checkpoint_every), steps)
      done = min(step + config.train.steps_per_dispatch, boundary)
      state = multi_step(state, jnp.int32(done - step), population.learning_rates,
                         population.train_keys)
    if first_update_s is None:
      jax.block_until_ready(state['step'])
      first_update_s = time.time() - t_start
    if done % config.train.log_every == 0 or done == steps:
      sums = jax.device_get(state['sums'])
      count = int(state['count'])
      now = time.time()
      rate = (done - step_log) / max(now - t_log, 1e-9)
      loss = sums['loss'][:population.size] / count
      accuracy = sums['accuracy'][:population.size] / count
      io.append_jsonl(metrics_path, {
          'step': done, 'loss': [_finite_or_none(x) for x in loss],
          'accuracy': [_finite_or_none(x) for x in accuracy], 'steps_per_s': rate})
      state = reset_interval(state)
      elapsed = now - t_start
      eta = (steps - done) * elapsed / max(done - start, 1)
      progress(f'step {done}/{steps} | {rate:.1f} steps/s ({rate * population.size:.1f} '
               f'model-updates/s) | elapsed {_duration(elapsed)} | ETA {_duration(eta)} | '
               f'loss {np.nanmean(loss):.4f} | acc {np.nanmean(accuracy):.4f}')
      t_log, step_log = now, done
    if done % config.checkpoint_every == 0 or done == steps:
      checkpoint.save_state(manager, done, state, population, history)
    step = done
  manager.wait_until_finished()
  train_seconds = time.time() - t_start

  diverged = np.asarray(jax.device_get(state['diverged']))[:population.size]
  if objectives.is_hinting_task(task):
    evaluation = _length_results(config, task, model, population, state['params'],
                                 eval_data_key, workdir, progress, traces, should_stop,
                                 diverged)
  elif objectives.is_language_task(task):
    evaluation = _perplexity_results(config, task, model, population, state['params'],
                                     workdir, progress, traces, should_stop, diverged)
  elif objectives.is_sequence_task(task):
    evaluation = _grid_results(config, task, model, population, state['params'],
                               eval_data_key, workdir, progress, traces, should_stop, diverged)
  else:
    evaluation = _range_results(config, task, model, population, state['params'],
                                eval_data_key, workdir, progress, traces, should_stop, diverged)
  # With steps_per_dispatch > 1 every bucket lives in one program.
  compiled = {'train': traces['train'],
              'train_buckets': sorted(update_fns) if multi_step is None else train_buckets(config),
              'eval': traces['eval']}
  results = {
      'task': config.task, 'encoding': config.encoding, 'family': config.model.family,
      'encoding_options': population_lib.encoding_options(config),
      'num_params': num_params, 'architecture': architecture(config),
      'train_steps': steps, 'train_length': n, **evaluation, 'versions': versions(),
      'compiled_programs': compiled,
      'timing': {'first_update_s': first_update_s, 'train_s': train_seconds,
                 'resumed_from_step': start},
      'devices': {'history': history,
                  'count_changed': len({h['devices'] for h in history}) > 1},
      'config': config_lib.as_json(config)}
  io.write_json_atomic(os.path.join(workdir, 'results.json'), results)
  return results


def architecture(config: ml_collections.ConfigDict) -> str:
  """'standard', 'standard_ii' (with input injection) or 'looped LxR' (McLeish et al.).

  Example: 8 layers, 2 recurrences -> 'looped 8x2'.
  """
  c = config.model
  if c.recurrences > 1 or c.loop:
    return f'looped {c.num_layers}x{c.recurrences}'
  return 'standard' if c.injection == 'none' else 'standard_ii'


def _perplexity_results(config, task, model, population, params, workdir, progress, traces,
                        should_stop, diverged) -> dict[str, Any]:
  """results.json's evaluation of a text corpus: perplexity per length and window mode."""
  by = lm_eval.evaluate(config, task, model, population, params, workdir, progress, traces,
                        should_stop)
  lengths = list(config.eval.lengths)
  n = config.train.max_length
  members = []
  for i, member in enumerate(population.members):
    ppl = {mode: {str(l): by[l][mode][i] for l in lengths} for mode in lm_eval.modes(config)}
    first = ppl[lm_eval.modes(config)[0]]
    at_n, longest = first.get(str(n)), first[str(max(lengths))]
    # Qin et al.'s Def. 0.1: |ppl_L - ppl_m| / ppl_m at the longest length.
    members.append({**member, 'diverged': bool(diverged[i]),
                    'score': None if diverged[i] else longest,
                    'degradation': (None if diverged[i] or at_n is None
                                    else abs(longest - at_n) / at_n),
                    'perplexity_by_length': ppl})
  return {'evaluation': 'perplexity', 'eval_lengths': lengths, 'corpus': task.split_info(),
          'eval_seconds': {str(l): by[l]['seconds'] for l in lengths}, 'members': members}


def _length_results(config, task, model, population, params, data_key, workdir, progress,
                    traces, should_stop, diverged) -> dict[str, Any]:
  """results.json's evaluation of a hinting task: the main head's full-sequence accuracy,
  edit distance and token accuracy per test distribution and length, per member."""
  by_cell = length_eval.evaluate(config, task, model, population, params, data_key, workdir,
                                 progress, traces, should_stop)
  lengths = [int(n) for n in config.eval.lengths]
  unseen = [n for n in lengths if n > config.train.max_length]
  first = config.eval.distributions[0]
  members = []
  for i, member in enumerate(population.members):
    table = {metric: {d: {str(n): by_cell[(d, n)][metric][i] for n in lengths}
                      for d in config.eval.distributions} for metric in length_eval.METRICS}
    score = (float(np.mean([table['exact_match'][first][str(n)] for n in unseen]))
             if unseen and not diverged[i] else None)
    members.append({**member, 'diverged': bool(diverged[i]), 'score': score,
                    **{f'{metric}_by_length': table[metric] for metric in length_eval.METRICS}})
  return {'evaluation': 'lengths', 'hints': list(config.hints),
          'hint_schedule': config.train.hint_schedule, 'eval_lengths': lengths,
          'distributions': list(config.eval.distributions), 'score_distribution': first,
          'score_lengths': unseen, 'members': members}


def _range_results(config, task, model, population, params, data_key, workdir, progress,
                   traces, should_stop, diverged) -> dict[str, Any]:
  """results.json's evaluation of the study's tasks: per-length metrics per member."""
  by = evaluate_population(config, task, model, population, params, data_key, workdir,
                           progress, traces, should_stop)
  eval_list = config_lib.eval_lengths(config)
  unseen = [l for l in eval_list if l > config.train.max_length]
  members = []
  for i, member in enumerate(population.members):
    by_length = {str(l): by[l]['accuracy'][i] for l in eval_list}
    exact = {str(l): by[l].get('exact_match', [None] * (i + 1))[i] for l in eval_list}
    mean_unseen = lambda values: (float(np.mean([values[str(l)] for l in unseen]))
                                  if unseen and not diverged[i] else None)
    exact_score = None if None in exact.values() else mean_unseen(exact)
    members.append({**member, 'diverged': bool(diverged[i]), 'score': mean_unseen(by_length),
                    'accuracy_by_length': by_length, 'exact_match_score': exact_score,
                    'exact_match_by_length': exact})
  return {'evaluation': 'range', 'eval_lengths': eval_list,
          'score_lengths': [unseen[0], unseen[-1]] if unseen else None, 'members': members}


def _grid_results(config, task, model, population, params, data_key, workdir, progress,
                  traces, should_stop, diverged) -> dict[str, Any]:
  """results.json's evaluation of sequence tasks: exact match per grid cell and region."""
  by_cell = grid_eval.evaluate(config, task, model, population, params, data_key, workdir,
                               progress, traces, should_stop)
  regions = grid_eval.region_means(by_cell, config)
  token_regions = grid_eval.region_means(by_cell, config, 'accuracy')
  members = []
  for i, member in enumerate(population.members):
    cell = lambda metric: {f'{a},{b}': v[metric][i] for (a, b), v in by_cell.items()}
    members.append({**member, 'diverged': bool(diverged[i]),
                    'score': None if diverged[i] else regions[i]['ood'],
                    'regions': regions[i], 'token_accuracy_regions': token_regions[i],
                    'exact_match_by_cell': cell('exact_match'),
                    'accuracy_by_cell': cell('accuracy')})
  return {'evaluation': 'grid', 'axes': list(task.axes),
          'grid': {'max': config.eval.grid_max, 'stride': config.eval.grid_stride,
                   'beyond': list(config.eval.beyond),
                   'samples_per_cell': config.eval.samples_per_cell},
          'members': members}


def evaluate_population(config: ml_collections.ConfigDict, task: Any, model: Any,
                        population: population_lib.Population, params: Any, data_key: jax.Array, workdir: str,
                        progress: Callable[[str], None] = logging.info,
                        traces: collections.Counter | None = None,
                        should_stop: Callable[[], bool] = lambda: False
                        ) -> dict[int, dict[str, list[float]]]:
  """Per-length metrics of every member: {length: {'accuracy': [member i], 'exact_match':
  [member i]}}.

  Lengths already in `workdir/eval.jsonl` (from an interrupted evaluation of the same
  final parameters) are not measured again. `should_stop` is polled between lengths
  (raises `Preempted`).
  """
  path = os.path.join(workdir, 'eval.jsonl')
  wanted = config_lib.eval_lengths(config)
  done = {r['length']: {k: v for k, v in r.items() if k != 'length'}
          for r in io.read_jsonl(path, rewrite=True)}
  eval_fns: dict[int, Callable[..., Any]] = {}
  m = config.eval.max_length
  t0 = time.time()
  todo = [l for l in wanted if l not in done]
  for k, length in enumerate(todo):
    if should_stop():
      raise checkpoint.Preempted(config.train.steps, f'preempted during evaluation, before length '
                      f'{length}: the lengths measured so far are kept')
    bucket = config_lib.bucket_of(length, m, config.eval.bucket_size)
    if bucket not in eval_fns:
      eval_fns[bucket] = make_eval_fn(config, task, model, population, bucket, data_key,
                                      traces)
    metrics = jax.device_get(eval_fns[bucket](params, jnp.int32(length),
                                              population.eval_keys))
    metrics = {name: [float(a) for a in np.asarray(values)[:population.size]]
               for name, values in metrics.items()}
    io.append_jsonl(path, {'length': length, **metrics})
    done[length] = metrics
    if (k + 1) % 25 == 0 or k + 1 == len(todo):
      elapsed = time.time() - t0
      progress(f'eval length {length} ({k + 1}/{len(todo)}) | elapsed {_duration(elapsed)} | '
               f'ETA {_duration(elapsed / (k + 1) * (len(todo) - k - 1))}')
  return {l: done[l] for l in wanted}
