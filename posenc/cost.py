"""What a grid would cost on the current devices, from measured throughput.

`estimate` times the first cell's population on this machine (every training bucket
compiled first, then `steps` steps along the curriculum; one evaluation length), then
scales to every cell with a FLOP model of the encoder:

  flops(T) = layers * (T * (4 d^2 + 2 d F) + 2 T^2 d)     (forward, one sequence of T tokens)

Training time of a cell = steps * mean over the curriculum of c_train * flops(T_bucket(L));
evaluation time = sum over evaluated lengths of c_eval * examples * flops(T_bucket(L)); the
constants c_* come from the measurement. Tasks differ through T = L + O(L) (e.g.
duplicate_string has O(L) = 2L); encodings are assumed to cost what the measured one
costs (relative attention costs somewhat more than none) — an estimate, not a promise.

Sequence tasks (the arithmetic study's decoders) are measured at a reduced batch (one
member, 8 sequences per step, 8 samples of cell (n, n)) and scaled to the config's batch
and to every grid cell by a decoder FLOP model (`decoder_flops`), so that a paper-scale
model can be estimated on a small machine.

Example:
  >>> print(format_estimate(estimate(config, cells, steps=20)))  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc import population as population_lib
from posenc import setup
from posenc import sweep as sweep_lib
from posenc import train
from posenc.evaluate import grid
from posenc.evaluate import lengths
from posenc.evaluate import range as range_protocol
import tasks

# Sequence tasks are costed by measuring one member's program at the training size (a
# probe) and scaling by every evaluated group's FLOPs: per protocol, (probe, groups).
SEQUENCE_COSTS = {
  'grid': (grid.probe, grid.eval_sequences),
  'lengths': (lengths.probe, lengths.eval_sequences),
}


def forward_flops(tokens: int, config: ml_collections.ConfigDict) -> float:
  """FLOPs of one forward pass of one sequence of `tokens` tokens (matmuls only)."""
  d, f = config.model.d_model, config.model.ffn_size
  return 2.0 * config.model.num_layers * (tokens * (4 * d * d + 2 * d * f) + 2 * tokens**2 * d)


def tokens(task: Any, length: int, max_length: int, bucket_size: int) -> int:
  """Positions of a sequence of `length` inputs in its padded bucket (inputs + outputs)."""
  bucket = config_lib.bucket_of(length, max_length, bucket_size)
  return bucket + int(task.output_length(bucket))


def cell_work(run: setup.Run) -> tuple[float, float]:
  """(training FLOP units per step, evaluation FLOP units per run) of one cell."""
  config, task = run.config, run.task
  n, m = config.train.max_length, config.eval.max_length
  per_step = (
    np.mean(
      [forward_flops(tokens(task, l, n, config.train.bucket_size), config) for l in range(1, n + 1)]
    )
    * config.train.batch_size
  )
  per_eval = (
    sum(
      forward_flops(tokens(task, l, m, config.eval.bucket_size), config)
      for l in config_lib.eval_lengths(config)
    )
    * config.eval.examples_per_length
  )
  return float(per_step), float(per_eval)


def measure_training(run: setup.Run, steps: int) -> dict[str, Any]:
  """Steady-state training speed of the run's population on its devices.

  Every length bucket is compiled first; then `steps` steps along the curriculum are
  timed. Returns the figures and, for callers that go on measuring, the final `state` and
  the timed `lengths`.
  """
  config, population, curriculum = run.config, run.population, run.curriculum_key
  state = population_lib.init_state(config, run.model, population)
  n = config.train.max_length
  buckets = run.training.buckets(run)
  traces: collections.Counter = collections.Counter()
  members = (population.learning_rates, population.train_keys)
  k = config.train.steps_per_dispatch
  if k > 1:  # One program of K steps: warm it up with one call, then time steps / K calls.
    multi = train.make_multi_step_fn(run, traces)
    t0 = time.time()
    state = jax.block_until_ready(multi(state, jnp.int32(k), *members))
    compile_s = time.time() - t0
    t0 = time.time()
    for start in range(0, steps, k):
      state = multi(state, jnp.int32(min(k, steps - start)), *members)
    jax.block_until_ready(state)
    seconds = time.time() - t0
    lengths = np.asarray(train.curriculum_lengths(curriculum, jnp.int32(k), steps, n))
  else:
    fns = {b: train.make_update_fn(run, b, traces) for b in buckets}
    t0 = time.time()
    for b in buckets:
      state, _ = fns[b](state, jnp.int32(b), *members)
    jax.block_until_ready(state)
    compile_s = time.time() - t0
    lengths = np.asarray(train.curriculum_lengths(curriculum, jnp.int32(0), steps, n))
    t0 = time.time()
    for length in lengths:
      state, _ = fns[train.bucket_of(run, int(length))](state, jnp.int32(length), *members)
    jax.block_until_ready(state)
    seconds = time.time() - t0
  return {
    'population': population.size,
    'steps': steps,
    'seconds': seconds,
    'steps_per_s': steps / seconds,
    'model_updates_per_s': steps * population.size / seconds,
    'warmup_compile_s': compile_s,
    'compiled_programs': traces['train'],
    'buckets': buckets,
    'steps_per_dispatch': k,
    'state': state,
    'lengths': lengths,
  }


def measure(run: setup.Run, steps: int) -> dict[str, float]:
  """Measured seconds per population step and per evaluated example-FLOP of the run."""
  config, task, population = run.config, run.task, run.population
  figures = measure_training(run, steps)
  step_s = figures['seconds'] / steps
  n, size = config.train.max_length, config.train.bucket_size
  measured_work = (
    np.mean([forward_flops(tokens(task, int(l), n, size), config) for l in figures['lengths']])
    * config.train.batch_size
  )
  state = figures['state']
  length = min(config.eval.max_length, max(1, n + 1))
  bucket = config_lib.bucket_of(length, config.eval.max_length, config.eval.bucket_size)
  evaluate = range_protocol.make_eval_fn(run, bucket)
  args = (state['params'], jnp.int32(length), population.eval_keys)
  jax.block_until_ready(evaluate(*args))
  t0 = time.time()
  jax.block_until_ready(evaluate(*args))
  eval_s = time.time() - t0
  eval_work = (
    forward_flops(tokens(task, length, config.eval.max_length, config.eval.bucket_size), config)
    * config.eval.examples_per_length
  )
  return {
    'step_s': step_s,
    'train_s_per_unit': step_s / measured_work,
    'eval_s_per_unit': eval_s / eval_work,
    'population': figures['population'],
    'model_updates_per_s': population.size / step_s,
  }


def decoder_flops(tokens: int, config: ml_collections.ConfigDict, vocab: int) -> float:
  """FLOPs of one forward pass of a decoder over `tokens` tokens (matmuls only): effective
  depth layers x recurrences, three feed-forward matrices for GELU-GLU, the output layer of
  `vocab` tokens."""
  d, f = config.model.d_model, config.model.ffn_size
  ffn = 3 if config.model.ffn == 'gelu_glu' else 2
  depth = config.model.num_layers * config.model.recurrences
  return 2.0 * (
    depth * (tokens * (4 * d * d + ffn * d * f) + 2 * tokens**2 * d) + tokens * d * vocab
  )


def measure_sequence(
  run: setup.Run, steps: int = 3, batch: int = 8, samples: int = 8
) -> dict[str, Any]:
  """One member of a sequence-task `config` (arithmetic, task hinting) timed on the local
  devices at a reduced batch: seconds per training step of `batch` sequences (training
  batches are padded to the widths at n), and seconds per generated example at n (grid cell
  (n, n), or test length n)."""
  config = run.config
  samples = min(samples, config.eval.samples_per_cell, config.eval.batch_size)
  small = setup.build(
    config_lib.cell_config(
      config,
      {
        'seeds': config.seeds[:1],
        'learning_rates': config.learning_rates[:1],
        'train.batch_size': min(batch, config.train.batch_size),
        'eval.samples_per_cell': samples,
        'eval.batch_size': samples,
        'eval.examples_per_length': samples,
      },
    )
  )
  figures = measure_training(small, steps)
  probe, _ = SEQUENCE_COSTS[small.protocol.name]
  evaluate, args, shape = probe(small)
  args = (figures['state']['params'], *args)
  jax.block_until_ready(evaluate(*args))
  t0 = time.time()
  jax.block_until_ready(evaluate(*args))
  return {
    'batch': small.config.train.batch_size,
    'samples': samples,
    'step_s': figures['seconds'] / steps,
    'warmup_compile_s': figures['warmup_compile_s'],
    'example_s': (time.time() - t0) / samples,
    'train_tokens': sum(_train_shape(small)),
    'eval_tokens': sum(shape),
  }


def _train_shape(run: setup.Run) -> tuple[int, int]:
  """(prompt width, answer width) of a sequence run's training batches."""
  return run.training.shape(run, run.config.train.max_length)


def sequence_work(run: setup.Run) -> tuple[float, float, float]:
  """(training FLOPs per step, evaluation FLOPs, FLOPs per example at n) of one member:
  training sequences padded to the widths at n; every grid cell's samples at its padded
  widths (arithmetic), or every test length's examples under every distribution (task
  hinting)."""
  config, vocab = run.config, run.task.vocab_size
  per_step = 3 * decoder_flops(sum(_train_shape(run)), config, vocab) * config.train.batch_size
  groups, at_n = SEQUENCE_COSTS[run.protocol.name][1](run)
  per_eval = sum(decoder_flops(tokens, config, vocab) * count for tokens, count in groups)
  return per_step, per_eval, decoder_flops(at_n, config, vocab)


def _sequence_estimate(runs, cells, steps):
  """`estimate` for sequence tasks: the first cell measured by `measure_sequence`; training
  scaled by batch and FLOPs, evaluation by each cell's FLOPs (generation taken as
  FLOP-bound, as it is on this CPU for wide models)."""
  measured = measure_sequence(runs[0], steps)
  base_step, _, base_example = sequence_work(runs[0])
  step_s_per_flop = measured['step_s'] / (
    base_step / runs[0].config.train.batch_size * measured['batch']
  )
  example_s_per_flop = measured['example_s'] / base_example
  rows = []
  for overrides, run in zip(cells, runs):
    config = run.config
    per_step, per_eval, _ = sequence_work(run)
    members = run.population.size
    rows.append(
      {
        'cell': sweep_lib.cell_name(overrides),
        'train_s': members * config.train.steps * per_step * step_s_per_flop,
        'eval_s': members * per_eval * example_s_per_flop,
      }
    )
  return measured, rows


def format_sequence_measurement(m: dict[str, Any]) -> str:
  return (
    f'{m["step_s"]:.2f} s per training step of {m["batch"]} sequences of '
    f'{m["train_tokens"]} tokens, {m["example_s"] * 1e3:.0f} ms per generated example '
    f'of {m["eval_tokens"]} tokens (one member; scaled to the config\'s batch and '
    'samples by FLOPs)'
  )


def estimate(
  base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]], steps: int = 20
) -> dict[str, Any]:
  """Measures the first cell, then predicts every cell of `cells` on this machine."""
  runs = [setup.build(config_lib.cell_config(base, c)) for c in cells]
  configs = [run.config for run in runs]
  devices = jax.local_devices()
  if runs[0].protocol.name in SEQUENCE_COSTS:
    measured, rows = _sequence_estimate(runs, cells, steps)
    wall = sum(r['train_s'] + r['eval_s'] for r in rows)
    return {
      'measured_cell': sweep_lib.cell_name(cells[0]),
      'measured': measured,
      'sequence': True,
      'devices': len(devices),
      'device_kind': devices[0].device_kind,
      'cells': rows,
      'wall_clock_s': wall,
      'device_hours': wall * len(devices) / 3600,
      'members_per_cell': len(config_lib.members(configs[0])),
      'train_steps': configs[0].train.steps,
    }
  measured = measure(runs[0], steps)
  rows = []
  for overrides, run in zip(cells, runs):
    config = run.config
    per_step, per_eval = cell_work(run)
    train_s = config.train.steps * per_step * measured['train_s_per_unit']
    eval_s = per_eval * measured['eval_s_per_unit']
    rows.append({'cell': sweep_lib.cell_name(overrides), 'train_s': train_s, 'eval_s': eval_s})
  wall = sum(r['train_s'] + r['eval_s'] for r in rows)
  return {
    'measured_cell': sweep_lib.cell_name(cells[0]),
    'measured': measured,
    'devices': len(devices),
    'device_kind': devices[0].device_kind,
    'cells': rows,
    'wall_clock_s': wall,
    'device_hours': wall * len(devices) / 3600,
    'members_per_cell': measured['population'],
    'train_steps': configs[0].train.steps,
  }


def _by_task(cells: Sequence[dict[str, Any]]) -> list[str]:
  """One line per task: its cells and their summed training and evaluation hours."""
  by_task = collections.defaultdict(lambda: [0.0, 0.0, 0])
  for row in cells:
    task = row['cell'].split('__')[0]
    by_task[task][0] += row['train_s']
    by_task[task][1] += row['eval_s']
    by_task[task][2] += 1
  return [
    f'  {task:28s} {k:2d} cells  train {t / 3600:10.1f} h  eval {e / 3600:8.1f} h'
    for task, (t, e, k) in by_task.items()
  ]


def format_estimate(est: dict[str, Any]) -> str:
  m = est['measured']
  if est.get('sequence'):
    speed = format_sequence_measurement(m)
  else:
    speed = (
      f'{est["members_per_cell"]} members: {1 / m["step_s"]:.2f} population steps/s = '
      f'{m["model_updates_per_s"]:.1f} model-updates/s'
    )
  lines = [
    f'measured on {est["devices"]} x {est["device_kind"]}: cell {est["measured_cell"]}, {speed}',
    f'grid: {len(est["cells"])} cells x {est["members_per_cell"]} members x '
    f'{est["train_steps"]:,} steps, run one cell after another on all devices:',
  ]
  if est.get('sequence'):  # Few, expensive cells: each one, per member (one model).
    members = est['members_per_cell']
    lines += [
      f'  {r["cell"]:48s} one model: train {r["train_s"] / members / 3600:8.1f} h  '
      f'eval {r["eval_s"] / members / 3600:8.1f} h'
      for r in est['cells']
    ]
  else:
    lines += _by_task(est['cells'])
  wall = est['wall_clock_s']
  lines.append(
    f'total: wall-clock {wall / 3600:,.1f} h ({wall / 86400:,.1f} days), '
    f'{est["device_hours"]:,.1f} device-hours'
  )
  return '\n'.join(lines)


# ---------------------------------------------------------------------------------------
# A roofline estimate for accelerators that are not here.

# Per chip, from the vendors' datasheets: dense matrix throughput (FLOP/s) in the precision
# XLA uses for a float32 model by default (TF32 on NVIDIA tensor cores, one bfloat16 pass on
# TPU MXUs) and for bfloat16, and memory bandwidth (bytes/s).
DEVICES: dict[str, dict[str, Any]] = {
  'H100': {
    'name': 'NVIDIA H100 SXM',
    'flops': {'float32': 494.7e12, 'bfloat16': 989.4e12},
    'bandwidth': 3.35e12,
  },
  'A100': {
    'name': 'NVIDIA A100 SXM 80GB',
    'flops': {'float32': 156e12, 'bfloat16': 312e12},
    'bandwidth': 2.039e12,
  },
  'v4': {
    'name': 'TPU v4 chip',
    'flops': {'float32': 275e12, 'bfloat16': 275e12},
    'bandwidth': 1.2e12,
  },
  'v5e': {
    'name': 'TPU v5e chip',
    'flops': {'float32': 197e12, 'bfloat16': 197e12},
    'bandwidth': 0.819e12,
  },
}

# Token counts the per-program costs are measured at (reverse_string: T = 2 x bucket); other
# token counts come from the quadratic through them (exact for FLOPs: the dense layers are
# linear in T, attention quadratic).
_FIT_TRAIN_BUCKETS = (10, 20, 40)
_FIT_EVAL_BUCKETS = (64, 256, 512)


def _compiled_cost(fn: Any, *args: Any) -> tuple[float, float]:
  """(FLOPs, bytes accessed) of XLA's cost analysis of `fn` compiled for `args`."""
  analysis = fn.lower(*args).compile().cost_analysis()
  if isinstance(analysis, (list, tuple)):  # one entry per program in older JAX versions
    analysis = analysis[0]
  return float(analysis['flops']), float(analysis['bytes accessed'])


def program_costs(config: ml_collections.ConfigDict) -> dict[str, np.ndarray]:
  """Quadratics in T of one member's accelerator programs: {'train', 'eval'} -> [2, 3]
  (rows: FLOPs, bytes; columns: polyfit coefficients, highest power first).

  'train' is one training step of batch_size sequences of T tokens; 'eval' one evaluation
  sub-batch. The programs are those an accelerator runs (xla_fused attention, no CPU
  blocking), compiled by this machine's XLA: its fusion decides the bytes.
  """
  run = setup.build(
    config_lib.cell_config(
      config, {'task': 'reverse_string', 'seeds': [0], 'learning_rates': [1e-4]}
    ),
    platform='gpu',
  )
  config, task, population, model = run.config, run.task, run.population, run.model
  state = population_lib.init_state(config, model, population, abstract=True)
  length = jax.ShapeDtypeStruct((), jnp.int32)
  # The evaluation's programs at one sub-batch per length.
  one_batch = setup.build(
    config_lib.cell_config(config, {'eval.examples_per_length': config.eval.batch_size}),
    platform='gpu',
  )
  points = {'train': [], 'eval': []}
  for bucket in _FIT_TRAIN_BUCKETS:
    fn = train.make_update_fn(run, bucket)
    points['train'].append(
      (
        tokens(task, bucket, bucket, 1),
        *_compiled_cost(fn, state, length, population.learning_rates, population.train_keys),
      )
    )
  for bucket in _FIT_EVAL_BUCKETS:
    fn = range_protocol.make_eval_fn(one_batch, bucket)
    points['eval'].append(
      (
        tokens(task, bucket, bucket, 1),
        *_compiled_cost(fn, state['params'], length, population.eval_keys),
      )
    )
  fits = {}
  for kind, rows in points.items():
    t, flops, nbytes = (np.array(c, np.float64) for c in zip(*rows))
    fits[kind] = np.stack([np.polyfit(t, flops, 2), np.polyfit(t, nbytes, 2)])
  return fits


def roofline(
  base: ml_collections.ConfigDict,
  cells: Sequence[dict[str, Any]],
  device: str,
  progress: Any = lambda line: None,
) -> dict[str, Any]:
  """Each cell's time on `device` from XLA's cost analysis: max(FLOPs / peak, bytes /
  bandwidth) per program, summed over the cell's training steps and evaluation sub-batches
  for every member (one chip runs one member's work at a time; a slice of C chips divides
  the total by C).

  Raises:
    ConfigError: an unknown device.
  """
  if device not in DEVICES:
    raise config_lib.ConfigError(
      f'unknown --device {device!r}; valid devices: {", ".join(DEVICES)}'
    )
  spec = DEVICES[device]
  runs = [setup.build(config_lib.cell_config(base, c)) for c in cells]
  configs = [run.config for run in runs]
  for overrides, run in zip(cells, runs):
    config = run.config
    if run.family.generates:
      # XLA's cost analysis counts a loop's body once, and generation is a loop of unknown
      # trip count: the estimate would leave out most of the evaluation.
      raise config_lib.ConfigError(
        f'--device estimates cover model.family=encoder only, not {config.model.family!r}'
      )
    # The fit compiles reverse_string programs up to the longest bucket, which an encoding
    # whose positions stop at max_position cannot encode.
    longest = tokens(tasks.get('reverse_string'), _FIT_EVAL_BUCKETS[-1], _FIT_EVAL_BUCKETS[-1], 1)
    if run.encoding.bounded and config.model.max_position < longest:
      raise config_lib.ConfigError(
        f'--device: the roofline fits programs of up to {longest} tokens, beyond '
        f'model.max_position={config.model.max_position} of encoding {config.encoding!r} '
        f'(cell {sweep_lib.cell_name(overrides)}); raise --config.model.max_position to '
        f'{longest}, or leave out --device to measure this machine'
      )
  fits = {}
  rows = []
  for overrides, run in zip(cells, runs):
    config = run.config
    key = (config.encoding, config.model.dtype)
    if key not in fits:
      progress(f'cost analysis of {config.encoding} ({config.model.dtype}) programs')
      fits[key] = program_costs(config)
    peak = spec['flops'][config.model.dtype]

    def seconds(kind, t):
      flops, nbytes = (max(0.0, float(np.polyval(c, t))) for c in fits[key][kind])
      return max(flops / peak, nbytes / spec['bandwidth'])

    task = run.task
    n, m = config.train.max_length, config.eval.max_length
    step = np.mean(
      [seconds('train', tokens(task, l, n, config.train.bucket_size)) for l in range(1, n + 1)]
    )
    sub_batches = config.eval.examples_per_length // config.eval.batch_size
    evaluation = sum(
      sub_batches * seconds('eval', tokens(task, l, m, config.eval.bucket_size))
      for l in config_lib.eval_lengths(config)
    )
    members = len(config_lib.members(config))
    rows.append(
      {
        'cell': sweep_lib.cell_name(overrides),
        'train_s': members * config.train.steps * step,
        'eval_s': members * evaluation,
      }
    )
  total = sum(r['train_s'] + r['eval_s'] for r in rows)
  return {
    'device': device,
    'device_name': spec['name'],
    'peak_flops': spec['flops'],
    'bandwidth': spec['bandwidth'],
    'cells': rows,
    'chip_hours': total / 3600,
    'members_per_cell': len(config_lib.members(configs[0])),
    'train_steps': configs[0].train.steps,
    'dtype': configs[0].model.dtype,
  }


def format_roofline(est: dict[str, Any], chips: int = 1) -> str:
  dtype = est['dtype']
  lines = [
    f'roofline on {est["device_name"]}: {est["peak_flops"][dtype] / 1e12:,.1f} TFLOP/s '
    f'({dtype} matmuls as XLA runs them by default), {est["bandwidth"] / 1e12:.2f} TB/s',
    'assumptions: each program runs at max(FLOPs / peak, bytes / bandwidth), the FLOPs and '
    'bytes of XLA\'s cost analysis of the accelerator program (xla_fused attention) as this '
    "machine's XLA compiles it; no launch overheads, no idle time; chips fully packed. Small "
    'models like this one run far below peak on real hardware: a lower bound, not a promise.',
    f'grid: {len(est["cells"])} cells x {est["members_per_cell"]} members x '
    f'{est["train_steps"]:,} steps:',
  ]
  lines += _by_task(est['cells'])
  hours = est['chip_hours']
  lines.append(
    f'total: {hours:,.1f} chip-hours; on {chips} chip{"s" * (chips > 1)}: '
    f'{hours / chips:,.1f} h wall-clock'
  )
  return '\n'.join(lines)
