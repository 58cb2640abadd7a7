"""The invariants of the conformance check, one function each: name -> `Check`.

Each computes its outputs, requires every one to be finite (the first that is not fails it:
'step: decoder logits of the cached step at 6 not finite: nan at [0, 2] (and 13 more)'),
then compares them, failing with the arrays, the index, both values and the tolerance.
What an encoding cannot run is decided by its record, the same for built-ins and outside
encodings: one causal by definition (`causal_only`) runs in its causal form and the decoder
only; one that reads digits (`reads_digits`) trains on addition instead of even_pairs.

Example:
  >>> check_causal('alibi').line()
  'causal       pass  max |difference| 0.0e+00 of the logits before the changed tokens'
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from typing import Any

import jax
from jax import export as jax_export
import jax.numpy as jnp
import numpy as np

from posenc import attention
from posenc import config as config_lib
from posenc import encodings
from posenc.models import generate as generate_lib
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib
from posenc import setup
from posenc.training import train
from posenc.training import update
from posenc.testing import compare
from posenc.testing.compare import Check

B, T, H, K = 2, 9, 2, 4
LENGTH = 7  # real positions of the padded batch
VOCAB, EOS = 7, 6
TINY = dict(num_layers=2, d_model=16, num_heads=2, ffn_size=32, max_position=64)
VALUE_TOLERANCE, GRADIENT_TOLERANCE = 2e-5, 1e-4
NOISE = {'noise': jax.random.key(7)}
# The arguments the backends' gradients are taken for, in the order of `argnums`.
ARGUMENTS = ('parameters', 'q', 'k', 'v', 'layer input')


def _forms(spec: encodings.Encoding) -> tuple[bool, ...]:
  """The masks an encoding runs under: causal only, or both."""
  return (True,) if spec.causal_only else (False, True)


def _form(causal: bool) -> str:
  return 'causal' if causal else 'bidirectional'


@compare.invariant
def check_backends(name: str) -> Check:
  """Every backend against `reference`: the outputs of the real rows and the gradients of
  a loss on them, for the parameters, q, k, v and the layer input."""
  spec = encodings.get(name)
  if spec.attention is None:
    return Check(
      'backends',
      True,
      'n/a: an input encoding (its attention is content only, tested with the model)',
    )
  keys = jax.random.split(jax.random.key(0), 5)
  q, k, v = (jax.random.normal(kk, (B, T, H, K)) for kk in keys[:3])
  x = jax.random.normal(keys[3], (B, T, H * K))
  key_valid = jnp.arange(T) < LENGTH
  options, _ = encodings.resolve_options(name)
  impls = [i for i in attention.IMPLS if i not in ('auto', 'reference')]
  values = grads = 0.0
  for causal in _forms(spec):
    module = spec.attention(max_position=64, num_heads=H, head_dim=K, causal=causal, **options)
    params = module.init({'params': keys[4], **NOISE}, T, LENGTH, x).get('params', {})
    # Away from zero inits, so that every parameter matters.
    params = jax.tree.map(lambda p: p + 0.3 * jax.random.normal(keys[4], p.shape), params)

    def loss(impl, params, q, k, v, x, module=module, causal=causal):
      enc = module.apply({'params': params}, T, LENGTH, x, rngs=NOISE)
      if enc.key_state:
        enc = enc.with_keys(enc.key_state)
      out = attention.attend(q, k, v, enc, key_valid=key_valid, causal=causal, impl=impl, block=4)
      return jnp.sum(jnp.sin(out[:, :LENGTH])), out[:, :LENGTH]

    outputs = {}
    for impl in ('reference', *impls):
      grad = jax.value_and_grad(
        functools.partial(loss, impl), argnums=(0, 1, 2, 3, 4), has_aux=True
      )
      (_, out), arg_grads = jax.jit(grad)(params, q, k, v, x)
      outputs[impl] = out, dict(zip(ARGUMENTS, arg_grads))
    form = _form(causal)
    for impl, (out, arg_grads) in outputs.items():
      compare.require_finite(f'{impl} outputs ({form})', out)
      compare.require_finite(f'{impl} gradients ({form})', arg_grads)
    want, want_grads = outputs['reference']
    scale = max(1.0, max(float(np.max(np.abs(g))) for g in jax.tree.leaves(want_grads)))
    for impl in impls:
      got, got_grads = outputs[impl]
      diff = compare.difference(f'{impl} and reference outputs ({form})', got, want)
      values = compare.largest(values, compare.require_within(diff, VALUE_TOLERANCE))
      diff = compare.difference(
        f'{impl} and reference gradients ({form})', got_grads, want_grads, scale
      )
      grads = compare.largest(grads, compare.require_within(diff, GRADIENT_TOLERANCE))
  forms = ' and '.join(_form(c) for c in _forms(spec))
  return Check(
    'backends',
    True,
    f'max |difference| {values:.1e} (values), {grads:.1e} '
    f'(gradients, relative) over {", ".join(impls)}, {forms}',
    compare.largest(values, grads),
  )


# The model calls of the invariants, compiled: a few programs compile faster than the
# hundreds of operations of a tiny model dispatch one by one.
_apply = lambda model: jax.jit(model.apply, static_argnames=('deterministic', 'num_positions'))


@functools.lru_cache(maxsize=None)
def _decoder(name: str) -> tuple[Any, Any, Any]:
  """(the tiny decoder, its variables, its compiled apply)."""
  model = decoder_lib.Decoder(vocab_size=VOCAB, encoding=name, **TINY)
  init = lambda key: model.init(
    encoder_lib.init_rngs(key), jnp.zeros((1, 4), jnp.int32), jnp.array([4]), deterministic=True
  )
  return model, jax.jit(init)(jax.random.key(0)), _apply(model)


@functools.lru_cache(maxsize=None)
def _encoder(name: str) -> tuple[Any, Any, Any]:
  """(the tiny encoder, its variables, its compiled apply)."""
  model = encoder_lib.Encoder(vocab_size=3, num_classes=4, encoding=name, **TINY)
  init = lambda key: model.init(
    encoder_lib.init_rngs(key), jnp.zeros((1, 4), jnp.int32), jnp.int32(4), deterministic=True
  )
  return model, jax.jit(init)(jax.random.key(0)), _apply(model)


def _sequences(count: int = 2, length: int = 9) -> jax.Array:
  return jax.random.randint(jax.random.key(2), (count, length), 0, EOS)


@compare.invariant
def check_padded(name: str) -> Check:
  """The decoder (and the encoder, where the encoding runs bidirectionally) on a batch padded
  from 7 to 12 tokens: the real positions' outputs equal the unpadded batch's (and every
  output, padding rows included, is finite)."""
  t, wide = 7, 12
  seq = _sequences(2, wide)
  pairs = []
  _, params, apply = _decoder(name)
  run = lambda tokens: apply(params, tokens, jnp.array([t, t]), deterministic=True, rngs=NOISE)[0]
  pairs.append(('decoder', run(seq[:, :t]), run(seq)))
  if not encodings.get(name).causal_only:
    _, params, apply = _encoder(name)
    tokens = seq % 3
    run = lambda tokens: apply(params, tokens, jnp.int32(t), deterministic=True, rngs=NOISE)
    pairs.append(('encoder', run(tokens[:, :t]), run(tokens)))
  for family, exact, padded in pairs:
    compare.require_finite(f'{family} logits of the {t} tokens', exact)
    compare.require_finite(f'{family} logits of the {t} tokens padded to {wide}', padded)
  diff = 0.0
  for family, exact, padded in pairs:
    what = f'{family} logits of the {t} tokens padded to {wide} and unpadded'
    found = compare.difference(what, padded[:, :t], exact)
    diff = compare.largest(diff, compare.require_within(found, VALUE_TOLERANCE))
  return Check(
    'padded',
    True,
    f'max |difference| {diff:.1e} ({t} real tokens padded to {wide}; '
    f'{" and ".join(family for family, _, _ in pairs)})',
    diff,
  )


@compare.invariant
def check_causal(name: str) -> Check:
  """A decoder's logits at positions 0..4 are unchanged when tokens 5.. change."""
  _, params, apply = _decoder(name)
  seq = _sequences()
  other = seq.at[:, 5:].set((seq[:, 5:] + 1) % EOS)
  lengths = jnp.array([9, 9])
  a, _ = apply(params, seq, lengths, deterministic=True, rngs=NOISE)
  b, _ = apply(params, other, lengths, deterministic=True, rngs=NOISE)
  compare.require_finite('decoder logits', a)
  compare.require_finite('decoder logits with tokens 5..8 changed', b)
  what = 'decoder logits of positions 0..4 with tokens 5..8 changed and unchanged'
  diff = compare.require_within(compare.difference(what, b[:, :5], a[:, :5]), VALUE_TOLERANCE)
  return Check(
    'causal',
    True,
    f'max |difference| {diff:.1e} of the logits before the changed tokens',
    diff,
  )


@compare.invariant
def check_step(name: str) -> Check:
  """The logits of tokens 5..8 from decoding steps against the cache equal the whole
  sequence's, with the same randomized draws."""
  _, params, apply = _decoder(name)
  seq = _sequences()
  lengths = jnp.array([9, 9])
  whole, _ = apply(params, seq, lengths, deterministic=True, rngs=NOISE)
  _, cache = apply(
    params,
    seq[:, :5],
    jnp.array([5, 5]),
    deterministic=True,
    num_positions=9,
    draw_length=lengths,
    rngs=NOISE,
  )
  cache = generate_lib.pad_cache(cache, 9)
  steps = {}
  for t in range(5, 9):
    q_idx = jnp.full((2, 1), t)
    step, cache = apply(
      params,
      seq[:, t : t + 1],
      q_idx[:, 0] + 1,
      q_idx=q_idx,
      cache=cache,
      num_positions=9,
      draw_length=lengths,
      deterministic=True,
      rngs=NOISE,
      # The tokens so far, for encodings that read the sequence (Abacus), as generation
      # gives them.
      context=jnp.where(jnp.arange(9) <= t, seq, 0),
    )
    steps[t] = step[:, 0]
  compare.require_finite('decoder logits of the whole sequence', whole)
  for t, step in steps.items():
    compare.require_finite(f'decoder logits of the cached step at {t}', step)
  diff = 0.0
  for t, step in steps.items():
    what = f'decoder logits of the cached step at {t} and of the whole sequence'
    found = compare.difference(what, step, whole[:, t])
    diff = compare.largest(diff, compare.require_within(found, VALUE_TOLERANCE))
  return Check(
    'step',
    True,
    f'max |difference| {diff:.1e} of the logits of 4 cached steps',
    diff,
  )


def _answer_logits(apply: Any, params: Any, prompts: Any, lengths: Any, answers: Any) -> Any:
  """The logits that picked each generated token: the prompts with their answers [B, N],
  decoded once (`apply`, the decoder's) as `generate_lib.generate_uncached`'s last step
  does, at the real positions ([B, P + N - 1, V], 0 past each sequence's end)."""
  b, p = prompts.shape
  n = answers.shape[1]
  total = p + n - 1
  seq = jnp.zeros((b, total + 1), jnp.int32).at[:, :p].set(prompts)
  seq = seq.at[jnp.arange(b)[:, None], lengths[:, None] + jnp.arange(n)].set(answers)
  ends = lengths + n - 1
  logits, _ = apply(
    params,
    seq[:, :total],
    ends,
    deterministic=True,
    num_positions=total,
    draw_length=ends,
    rngs=NOISE,
  )
  return jnp.where((jnp.arange(total) < ends[:, None])[..., None], logits, 0.0)


@compare.invariant
def check_generation(name: str) -> Check:
  """Greedy answers of 8 tokens from prompts of lengths 3, 5 and 1: the cached generation
  and re-decoding without a cache give the same tokens, on each backend of the prompt pass
  (and the logits that picked the first backend's tokens are finite)."""
  tokens = jax.random.randint(jax.random.key(1), (3, 5), 0, EOS)
  lengths = jnp.array([3, 5, 1])
  _, params, apply = _decoder(name)
  answers = {}
  for impl in ('xla_fused', 'cpu_blocked'):
    model = decoder_lib.Decoder(vocab_size=VOCAB, encoding=name, attention_impl=impl, **TINY)
    run = lambda fn, model=model: jax.jit(lambda p: fn(model, p, tokens, lengths, 8, EOS, NOISE))(
      params
    )
    answers[impl] = run(generate_lib.generate), run(generate_lib.generate_uncached)
  answers = {impl: (np.asarray(a), np.asarray(b)) for impl, (a, b) in answers.items()}
  picked = _answer_logits(apply, params, tokens, lengths, answers['xla_fused'][0])
  compare.require_finite('decoder logits of the generated tokens', picked)
  for impl, (cached, uncached) in answers.items():
    differ = np.argwhere(cached != uncached)
    if len(differ):
      row, col = differ[0]
      raise compare.Violation(
        f'cached and re-decoded generation ({impl} prompt pass) differ in {len(differ)} of '
        f'{cached.size} tokens, first at prompt {row} token {col} ({cached[row, col]} vs '
        f'{uncached[row, col]})'
      )
  return Check('generation', True, '0 of 48 generated tokens differ (2 backends x 3 prompts x 8)')


def _encoding_leaves(grads: Any) -> list[tuple[str, Any]]:
  """(path, gradient) of the encoding's parameters: those under a module named for it."""
  flat = jax.tree_util.tree_flatten_with_path(grads)[0]
  path_of = lambda path: '/'.join(str(getattr(p, 'key', p)) for p in path)
  return [
    (path_of(path), g)
    for path, g in flat
    if any('encod' in str(getattr(p, 'key', '')) for p in path)
  ]


@compare.invariant
def check_gradients(name: str) -> Check:
  """The decoder's next-token loss (and the encoder's, where the encoding runs
  bidirectionally) has finite gradients, and some parameter of the encoding gets a nonzero
  one where it has any."""
  seq = _sequences()
  rngs = {**NOISE, 'dropout': jax.random.key(8)}
  decoder, decoder_params, _ = _decoder(name)

  def decoder_loss(p):
    logits, _ = decoder.apply(p, seq[:, :-1], jnp.array([8, 8]), deterministic=False, rngs=rngs)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), seq[:, 1:, None], -1))

  losses = [('decoder', decoder_loss, decoder_params)]
  if not encodings.get(name).causal_only:
    encoder, encoder_params, _ = _encoder(name)

    def encoder_loss(p):
      logits = encoder.apply(p, seq % 3, jnp.int32(8), deterministic=False, rngs=rngs)
      labels = seq % 4
      return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[..., None], -1))

    losses.append(('encoder', encoder_loss, encoder_params))
  outputs = [(family, *jax.jit(jax.value_and_grad(fn))(p)) for family, fn, p in losses]
  for family, loss, grads in outputs:
    compare.require_finite(f'{family} loss', loss)
    compare.require_finite(f'{family} gradients', grads)
  counts = []
  for family, _, grads in outputs:
    encoding = _encoding_leaves(grads)
    if encoding and not any(bool(jnp.any(g != 0)) for _, g in encoding):
      raise compare.Violation(
        f"the encoding's {len(encoding)} parameter arrays get zero gradients in the "
        f'{family}: {", ".join(path for path, _ in encoding)}'
      )
    counts.append(f'{len(jax.tree.leaves(grads))} parameter arrays of the {family}')
  moving = _encoding_leaves(outputs[0][2])
  return Check(
    'gradients',
    True,
    f'finite over {" and ".join(counts)}'
    + (f"; the encoding's {len(moving)} move" if moving else ''),
  )


def _tiny_config(name: str, steps: int = 6) -> Any:
  """A tiny decoder run of the encoding (`config.shrink_to_tiny`, one member): addition
  (operands up to 3 digits, tested to 5) when it reads digits, else even_pairs. One length
  bucket in training and one in evaluation: each bucket is a program of its own to
  compile, and the loop is the same with one."""
  config = config_lib.shrink_to_tiny(config_lib.base_config())
  config.model.family = 'decoder'
  config.encoding = name
  config.seeds, config.learning_rates = [0], [1e-3]
  config.train.steps = config.checkpoint_every = steps
  if encodings.get(name).reads_digits:
    config.task = 'addition'
    config.train.max_length, config.encoding_options.abacus_offset = 3, 9
    config.eval.grid_max, config.eval.samples_per_cell, config.eval.bucket_size = 5, 4, 4
  else:
    config.task = 'even_pairs'
    config.eval.bucket_size = config.eval.max_length
  config.train.bucket_size = config.train.max_length
  return config


@compare.invariant
def check_export(name: str) -> Check:
  """The training step of a tiny decoder run lowers for CUDA and TPU (a program, no values
  to check)."""
  run = setup.build(_tiny_config(name), platform='gpu')
  state = run.abstract_state
  update_fn = update.make_update_fn(run, run.training.buckets(run)[-1])
  exported = jax_export.export(update_fn, platforms=['cuda', 'tpu'])(
    state,
    jax.ShapeDtypeStruct((), jnp.int32),
    run.population.learning_rates,
    run.population.train_keys,
  )
  if 'stablehlo' not in exported.mlir_module():
    raise compare.Violation('the exported training step holds no StableHLO module')
  return Check('export', True, 'the training step lowers for cuda and tpu (jax.export)')


def _losses(workdir: str) -> list[tuple[int, Any]]:
  """(step, the member's mean training loss over the interval ending there; None where not
  finite) of every line of the run's metrics.jsonl."""
  path = os.path.join(workdir, 'metrics.jsonl')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    lines = [json.loads(line) for line in f if line.strip()]
  return [(line['step'], line['loss'][0]) for line in lines]


@compare.invariant
def check_training(name: str) -> Check:
  """Six steps of a tiny decoder run and its evaluation, through `train.train_and_evaluate`:
  finite training losses, a member that did not diverge and a finite score."""
  config = _tiny_config(name)
  with tempfile.TemporaryDirectory(prefix='posenc-check-') as workdir:
    results = train.train_and_evaluate(setup.build(config), workdir, progress=lambda line: None)
    losses = _losses(workdir)
  member = results['members'][0]
  run = f'{config.train.steps} steps of {config.task}'
  bad = [step for step, loss in losses if loss is None]
  if bad:
    later = len(bad) - 1
    raise compare.Violation(
      f'{run}: the training loss is not finite at step {bad[0]}'
      + (f' (and {later} later logged step{"s" if later > 1 else ""})' if later else '')
      + f'; diverged {member["diverged"]}'
    )
  if member['diverged']:
    raise compare.Violation(f'{run}: the member diverged (a training loss was not finite)')
  score = member['score']
  if score is None or not np.isfinite(score):
    raise compare.Violation(f'{run}: the evaluation score is not finite: {score}')
  return Check(
    'training',
    True,
    f'{run} and its evaluation: losses {", ".join(f"{loss:.3f}" for _, loss in losses)}, '
    f'score {score:.4g}',
  )
