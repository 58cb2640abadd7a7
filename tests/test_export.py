"""Accelerator programs without an accelerator: the study's training and evaluation steps,
exported for CUDA and TPU with jax.export, take the fused attention path and no CPU path.

What this shows: the programs lower for both platforms, and their structure (which attention
path, which loops). What it cannot show: that they compile and how fast they run on real
hardware.
"""

import functools
import re

import jax
import jax.numpy as jnp
from jax import export
import pytest

from experiments import rpe_table1
from posenc import encodings
from posenc.training import protocol as protocol_lib
from posenc.training import update
from posenc import setup
from posenc.kinds.range import protocol as range_protocol
import tasks

EVAL_BUCKET = 512  # reverse_string at length 500: T = 1,024 positions


@functools.lru_cache(maxsize=None)
def exported(name, family='encoder'):
  """(training step at bucket 40, evaluation step at length 500), lowered for GPU and TPU."""
  config = rpe_table1.get_config(f'task=reverse_string,encoding={name}')
  config.seeds, config.learning_rates = [0, 1], [1e-4]
  config.model.family = family
  run = setup.build(config, platform='gpu')
  population = run.population
  state = run.abstract_state
  length = jax.ShapeDtypeStruct((), jnp.int32)
  update_fn = update.make_update_fn(run, 40)
  evaluate = range_protocol.make_eval_fn(run, EVAL_BUCKET)
  platforms = ['cuda', 'tpu']
  step = export.export(update_fn, platforms=platforms)(
    state, length, population.learning_rates, population.train_keys
  )
  evaluation = export.export(evaluate, platforms=platforms)(
    state.params, length, population.eval_keys
  )
  return step.mlir_module(), evaluation.mlir_module()


def loops(text):
  """The `stablehlo.while` loops of an exported module, but for cumulative sums' scans: from
  jax 0.12 on, `cumsum` lowers for GPU to `chlo.scan`, which the exported module spells as a
  while loop over the summed axis and XLA compiles to one scan kernel (CUB), not a loop of
  the program. Each loop is named by its location (`loc("cumsum:"(...))`)."""
  names = dict(re.findall(r'^(#loc\d+) = loc\("([^"]*)"', text, re.M))
  lines = text.splitlines()
  found = []
  for i, line in enumerate(lines):
    if '= stablehlo.while(' not in line:
      continue
    indent = line[: len(line) - len(line.lstrip())]
    end = next(l for l in lines[i + 1 :] if l.startswith(indent + '} loc('))
    loc = re.match(r'\s*\} loc\((#loc\d+)\)', end)
    name = names.get(loc.group(1), '') if loc else ''
    if not name.startswith('cumsum'):
      found.append(name)
  return found


def later(causal):
  """The later methods that run on the study's tasks (not the digit readers) in an encoder
  (causal False) or a decoder."""
  return [
    n
    for n in encodings.RECENT
    if not encodings.get(n).reads_digits and (causal or not encodings.get(n).causal_only)
  ]


def encoder_names():
  return list(encodings.NAMES) + later(False)


@pytest.mark.parametrize('name', encoder_names())
def test_accelerator_programs_take_the_fused_path(name):
  for program, text in zip(('train', 'eval'), exported(name)):
    assert 'attention_xla_fused' in text, program
    assert 'attention_cpu_blocked' not in text, program  # no per-head loops or query blocks
    # Softmax attention in XLA's fused op; NDR geometric attention by prefix sums (other
    # replacements of the softmax run their readable, already loop-free, functions).
    if encodings.get(name).kind != 'geometric':
      assert 'dot_product_attention' in text, program
    elif name.startswith('geometric'):
      assert 'geometric_prefix_sums' in text, program
  train_text, eval_text = exported(name)
  # Members are batched (vmap) on accelerators: the training step has no loop at all.
  assert loops(train_text) == []
  # Evaluation loops over members and sub-batches only: a whole sub-batch of 64 examples
  # at T = 1,024 runs at once (no micro-batches).
  assert 'eval_micro_batches' not in eval_text
  assert len(loops(eval_text)) == 2


def test_accelerator_micro_batch_comes_from_device_memory():
  assert protocol_lib.eval_micro_batch(64, 8, 1024, 'cpu') == 1
  assert protocol_lib.eval_micro_batch(64, 8, 1024, 'gpu', 16 * 2**30) == 64
  assert protocol_lib.eval_micro_batch(64, 8, 1024, 'tpu', 2 * 2**30) == 8
  assert protocol_lib.eval_micro_batch(64, 8, 1024, 'gpu', 80 * 2**30) == 64


@pytest.mark.parametrize('name', list(encodings.NAMES) + later(True))
def test_decoder_training_and_generation_export_on_the_fused_path(name):
  # The decoder's evaluation step generates with a KV cache: a prompt pass, then one token
  # per step in a while loop; its attention takes the fused path too.
  for program, text in zip(('train', 'generate'), exported(name, 'decoder')):
    assert 'attention_xla_fused' in text, program
    assert 'attention_cpu_blocked' not in text, program
  train_text, generate_text = exported(name, 'decoder')
  assert loops(train_text) == []
  assert len(loops(generate_text)) == 3  # members, sub-batches, tokens


@pytest.mark.parametrize(
  'name', ['abacus'] + [n for n in encodings.RECENT if encodings.get(n).reads_digits]
)
def test_digit_readers_export_their_addition_training_step(name):
  # Encodings that read digit tokens run on the arithmetic tasks: the decoder's training
  # step on addition lowers for CUDA and TPU on the fused path.
  from experiments import abacus_arithmetic

  config = abacus_arithmetic.get_config(f'task=addition,encoding={name},tiny')
  run = setup.build(config, platform='gpu')
  state = run.abstract_state
  update_fn = update.make_update_fn(run, config.train.max_length)
  text = export.export(update_fn, platforms=['cuda', 'tpu'])(
    state,
    jax.ShapeDtypeStruct((), jnp.int32),
    run.population.learning_rates,
    run.population.train_keys,
  ).mlir_module()
  assert 'attention_xla_fused' in text and 'attention_cpu_blocked' not in text
