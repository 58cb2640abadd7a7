"""Generation speed: `python -m launch.speed generate [--answer_lengths=100,500] [--out=...]`.

The decoder study's model (5 layers, d 64, 8 heads; reverse_string's tokens) generates
greedily from a batch of prompts, once with a KV cache (`posenc.models.generate.generate`: a prompt
pass, then one token per step) and once by re-decoding the whole sequence for every token
(`generate_uncached`). For each answer length A the prompts have A tokens (reverse_string's
shape); no end-of-sequence token is ever emitted, so both run all A steps. Compile time is
measured apart (`posenc.speed.timing.generation`). Then the training speed of the decoder
study's model (P = 1, batch 128, lengths U{1..40}).
"""

from __future__ import annotations

from absl import flags
import jax
import jax.numpy as jnp

from experiments import rpe_decoder
from launch import common
from launch.speed import opening
from posenc.models import generate
from posenc.models import encoder as encoder_lib
from posenc.models import objectives
from posenc.speed import timing

_ANSWER_LENGTHS = flags.DEFINE_string('answer_lengths', '100,500', 'Comma-separated.')
_BATCH = flags.DEFINE_integer('batch', 8, 'Prompts generated at once.')
_ENCODING = flags.DEFINE_string('encoding', 'randomized_rotary', 'The encoding.')
_TRAIN_STEPS = flags.DEFINE_integer(
  'train_steps', 50, 'Timed training steps (0: no training figure).'
)
_OPENING = opening.Opening('generate')


def main(argv: list[str]) -> None:
  common.run(_main, argv)


def _main(argv: list[str]) -> None:
  _OPENING.start(argv)
  lengths = common.positive_ints(_ANSWER_LENGTHS.value.split(','), '--answer_lengths')
  batch = _BATCH.value
  if batch < 1:
    common.fail(f'--batch={batch} must be a positive integer')
  common.at_least(_TRAIN_STEPS.value, '--train_steps', 0)
  config = rpe_decoder.get_config(f'task=reverse_string,encoding={_ENCODING.value}')
  config.seeds, config.learning_rates = [0], [1e-4]
  config.model.max_position = max(config.model.max_position, 2 * max(lengths) + 2)
  run = opening.build(config)
  task, model = run.task, run.model
  vocab = objectives.decoder_vocab(task)
  variables = jax.jit(
    lambda k: model.init(
      encoder_lib.init_rngs(k), jnp.zeros((1, 4), jnp.int32), jnp.array([4]), deterministic=True
    )
  )(jax.random.key(0))
  rows = []
  print(
    f'{"answer":>6s} {"cached tok/s":>13s} {"uncached tok/s":>15s} {"speed-up":>9s}   '
    f'(batch {batch}, prompts as long as the answer, {_ENCODING.value}, '
    f'{jax.devices()[0].platform})',
    flush=True,
  )
  for length in lengths:
    prompts = jax.random.randint(jax.random.key(2), (batch, length), 0, vocab.sep)
    prompts = prompts.at[:, -1].set(vocab.sep)
    prompt_lengths = jnp.full((batch,), length)
    row = {'answer_length': length, 'batch': batch}
    for name, fn in (('cached', generate.generate), ('uncached', generate.generate_uncached)):
      row[name] = timing.generation(fn, model, variables, prompts, prompt_lengths, length)
    row['speedup'] = row['cached']['tokens_per_s'] / row['uncached']['tokens_per_s']
    rows.append(row)
    print(
      f'{length:6d} {row["cached"]["tokens_per_s"]:13.1f} '
      f'{row["uncached"]["tokens_per_s"]:15.1f} {row["speedup"]:8.1f}x   (compile '
      f'{row["cached"]["compile_s"]:.1f} / {row["uncached"]["compile_s"]:.1f} s)',
      flush=True,
    )
  result = {'encoding': _ENCODING.value, 'backend': jax.devices()[0].platform, 'rows': rows}
  if _TRAIN_STEPS.value:
    figures = timing.steady_state(run, _TRAIN_STEPS.value)
    result['train'] = figures
    print(
      f'training, P = 1, batch {config.train.batch_size}, lengths U{{1..'
      f'{config.train.max_length}}}: {figures["steps_per_s"]:.2f} steps/s '
      f'({figures["compiled_programs"]} programs, warm-up compile '
      f'{figures["warmup_compile_s"]:.1f} s)',
      flush=True,
    )
  _OPENING.finish(result)
