"""Generation speed: `python -m launch.bench generate [--answer_lengths=100,500] [--out=...]`.

The decoder study's model (5 layers, d 64, 8 heads; reverse_string's tokens) generates
greedily from a batch of prompts, once with a KV cache (`posenc.generate.generate`: a prompt
pass, then one token per step) and once by re-decoding the whole sequence for every token
(`generate_uncached`). For each answer length A the prompts have A tokens (reverse_string's
shape); no end-of-sequence token is ever emitted, so both run all A steps. Compile time is
measured apart. Then the training speed of the decoder study's model (P = 1, batch 128,
lengths U{1..40}).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from experiments import rpe_decoder
from launch import common
from posenc import config as config_lib
from posenc import cost
from posenc import generate
from posenc import io
from posenc import models
from posenc import objectives
from posenc import setup


def time_generation(fn, model, variables, prompts, lengths, max_new) -> dict[str, float]:
  """Compile and run one generation; seconds of each, and generated tokens per second."""
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


def main(argv: list[str]) -> None:
  parser = common.ArgumentParser(prog='python -m launch.bench generate')
  parser.add_argument('--answer_lengths', default='100,500', help='comma-separated')
  parser.add_argument('--batch', type=int, default=8, help='prompts generated at once')
  parser.add_argument('--encoding', default='randomized_rotary')
  parser.add_argument(
    '--train_steps', type=int, default=50, help='timed training steps (0: no training figure)'
  )
  parser.add_argument('--out', default='bench_generate.json')
  args = parser.parse_args(argv[1:])
  common.check_output_file(args.out, '--out')
  lengths = common.positive_ints(args.answer_lengths.split(','), '--answer_lengths')
  if args.batch < 1:
    parser.error(f'--batch={args.batch} must be a positive integer')
  common.at_least(args.train_steps, '--train_steps', 0)
  config = rpe_decoder.get_config(f'task=reverse_string,encoding={args.encoding}')
  config.seeds, config.learning_rates = [0], [1e-4]
  config.model.max_position = max(config.model.max_position, 2 * max(lengths) + 2)
  try:
    run = setup.build(config)
  except config_lib.ConfigError as e:
    common.fail(e)
  task, model = run.task, run.model
  vocab = objectives.decoder_vocab(task)
  variables = jax.jit(
    lambda k: model.init(
      models.init_rngs(k), jnp.zeros((1, 4), jnp.int32), jnp.array([4]), deterministic=True
    )
  )(jax.random.key(0))
  rows = []
  print(
    f'{"answer":>6s} {"cached tok/s":>13s} {"uncached tok/s":>15s} {"speed-up":>9s}   '
    f'(batch {args.batch}, prompts as long as the answer, {args.encoding}, '
    f'{jax.devices()[0].platform})',
    flush=True,
  )
  for length in lengths:
    prompts = jax.random.randint(jax.random.key(2), (args.batch, length), 0, vocab.sep)
    prompts = prompts.at[:, -1].set(vocab.sep)
    prompt_lengths = jnp.full((args.batch,), length)
    row = {'answer_length': length, 'batch': args.batch}
    for name, fn in (('cached', generate.generate), ('uncached', generate.generate_uncached)):
      row[name] = time_generation(fn, model, variables, prompts, prompt_lengths, length)
    row['speedup'] = row['cached']['tokens_per_s'] / row['uncached']['tokens_per_s']
    rows.append(row)
    print(
      f'{length:6d} {row["cached"]["tokens_per_s"]:13.1f} '
      f'{row["uncached"]["tokens_per_s"]:15.1f} {row["speedup"]:8.1f}x   (compile '
      f'{row["cached"]["compile_s"]:.1f} / {row["uncached"]["compile_s"]:.1f} s)',
      flush=True,
    )
  result = {'encoding': args.encoding, 'backend': jax.devices()[0].platform, 'rows': rows}
  if args.train_steps:
    figures = cost.measure_training(run, args.train_steps)
    result['train'] = {k: v for k, v in figures.items() if k not in ('state', 'lengths')}
    print(
      f'training, P = 1, batch {config.train.batch_size}, lengths U{{1..'
      f'{config.train.max_length}}}: {figures["steps_per_s"]:.2f} steps/s '
      f'({figures["compiled_programs"]} programs, warm-up compile '
      f'{figures["warmup_compile_s"]:.1f} s)',
      flush=True,
    )
  io.write_json_atomic(args.out, result)
  print(f'wrote {args.out}')
