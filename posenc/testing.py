"""The conformance check of an encoding: the invariants every built-in encoding passes.

  backends     every attention backend equals the readable one (`reference`) in values and
               gradients, on a padded batch, in each form the encoding runs in
  padded       a model's outputs on a sequence padded wider equal those on the sequence
  causal       a decoder's outputs at a position do not depend on later tokens
  step         one decoding step against the cache equals the whole sequence's row
  generation   greedy generation with the KV cache equals re-decoding without it
  gradients    the training loss has finite gradients
  export       the training step lowers for CUDA and TPU (jax.export, no accelerator needed)
  training     a tiny training run trains and evaluates through the one loop

`conformance(name)` runs them and returns one `Check` per invariant; `check_encoding(name)`
is the pytest helper (an AssertionError listing the failures); `launch.check_encoding` the
command. `name` is anything `--config.encoding` takes, an outside encoding included
(`my_pkg.my_module:ENCODING`). A few tiny models: about a minute on a 2-core CPU.

Example:
  >>> for check in conformance('alibi'):                    # doctest: +SKIP
  ...   print(check.line())
  backends     pass  max |difference| 9.5e-07 (values), 3.8e-06 (gradients)
  ...
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from typing import Any, Callable

import jax
from jax import export as jax_export
import jax.numpy as jnp
import numpy as np

from posenc import attention
from posenc import config as config_lib
from posenc import encodings
from posenc import generate as generate_lib
from posenc import models
from posenc import population as population_lib
from posenc import setup
from posenc import train

B, T, H, K = 2, 9, 2, 4
LENGTH = 7  # real positions of the padded batch
VOCAB, EOS = 7, 6
TINY = dict(num_layers=2, d_model=16, num_heads=2, ffn_size=32, max_position=64)
VALUE_TOLERANCE, GRADIENT_TOLERANCE = 2e-5, 1e-4
NOISE = {'noise': jax.random.key(7)}


@dataclasses.dataclass(frozen=True)
class Check:
  """One invariant's outcome: passed, its largest difference (None where it measures none)
  and what it compared."""

  name: str
  passed: bool
  detail: str
  difference: float | None = None

  def line(self) -> str:
    return f'{self.name:<12} {"pass" if self.passed else "FAIL"}  {self.detail}'


def _forms(spec: encodings.Encoding) -> tuple[bool, ...]:
  """The masks an encoding runs under: causal only, or both."""
  return (True,) if spec.causal_only else (False, True)


def _max_diff(a: Any, b: Any) -> float:
  return max(
    (
      float(jnp.max(jnp.abs(jnp.asarray(x, jnp.float32) - jnp.asarray(y, jnp.float32))))
      for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    ),
    default=0.0,
  )


def _within(diff: float, tolerance: float) -> bool:
  return bool(np.isfinite(diff) and diff <= tolerance)


# ---------------------------------------------------------------------------------------------
# The invariants, each name -> Check.


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

    grad = lambda impl: jax.jit(
      jax.value_and_grad(functools.partial(loss, impl), argnums=(0, 1, 2, 3, 4), has_aux=True)
    )
    (_, want), want_grads = grad('reference')(params, q, k, v, x)
    for impl in attention.IMPLS:
      if impl in ('auto', 'reference'):
        continue
      (_, got), got_grads = grad(impl)(params, q, k, v, x)
      values = max(values, _max_diff(got, want))
      scale = max(1.0, max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(want_grads)))
      grads = max(grads, _max_diff(got_grads, want_grads) / scale)
  ok = _within(values, VALUE_TOLERANCE) and _within(grads, GRADIENT_TOLERANCE)
  forms = ' and '.join('causal' if c else 'bidirectional' for c in _forms(spec))
  return Check(
    'backends',
    ok,
    f'max |difference| {values:.1e} (values), {grads:.1e} '
    f'(gradients, relative) over {", ".join(i for i in attention.IMPLS if i not in ("auto", "reference"))}, {forms}',
    max(values, grads),
  )


@functools.lru_cache(maxsize=None)
def _decoder(name: str) -> tuple[Any, Any]:
  model = models.Decoder(vocab_size=VOCAB, encoding=name, **TINY)
  params = model.init(
    models.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.array([4]),
    deterministic=True,
  )
  return model, params


@functools.lru_cache(maxsize=None)
def _encoder(name: str) -> tuple[Any, Any]:
  model = models.Encoder(vocab_size=3, num_classes=4, encoding=name, **TINY)
  params = model.init(
    models.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.int32(4),
    deterministic=True,
  )
  return model, params


def _sequences(count: int = 2, length: int = 9) -> jax.Array:
  return jax.random.randint(jax.random.key(2), (count, length), 0, EOS)


def check_padded(name: str) -> Check:
  """The decoder (and the encoder, where the encoding runs bidirectionally) on a batch padded
  from 7 to 12 tokens: the real positions' outputs equal the unpadded batch's."""
  t, wide = 7, 12
  diffs = []
  model, params = _decoder(name)
  seq = _sequences(2, wide)
  exact, _ = model.apply(params, seq[:, :t], jnp.array([t, t]), deterministic=True, rngs=NOISE)
  padded, _ = model.apply(params, seq, jnp.array([t, t]), deterministic=True, rngs=NOISE)
  diffs.append(_max_diff(padded[:, :t], exact))
  if not encodings.get(name).causal_only:
    model, params = _encoder(name)
    tokens = seq % 3
    exact = model.apply(params, tokens[:, :t], jnp.int32(t), deterministic=True, rngs=NOISE)
    padded = model.apply(params, tokens, jnp.int32(t), deterministic=True, rngs=NOISE)
    diffs.append(_max_diff(padded[:, :t], exact))
  diff = max(diffs)
  return Check(
    'padded',
    _within(diff, VALUE_TOLERANCE),
    f'max |difference| {diff:.1e} ({t} real tokens padded to {wide}; '
    f'{"decoder and encoder" if len(diffs) == 2 else "decoder"})',
    diff,
  )


def check_causal(name: str) -> Check:
  """A decoder's logits at positions 0..4 are unchanged when tokens 5.. change."""
  model, params = _decoder(name)
  seq = _sequences()
  other = seq.at[:, 5:].set((seq[:, 5:] + 1) % EOS)
  lengths = jnp.array([9, 9])
  a, _ = model.apply(params, seq, lengths, deterministic=True, rngs=NOISE)
  b, _ = model.apply(params, other, lengths, deterministic=True, rngs=NOISE)
  diff = _max_diff(a[:, :5], b[:, :5])
  return Check(
    'causal',
    _within(diff, VALUE_TOLERANCE),
    f'max |difference| {diff:.1e} of the logits before the changed tokens',
    diff,
  )


def check_step(name: str) -> Check:
  """The logits of tokens 5..8 from decoding steps against the cache equal the whole
  sequence's, with the same randomized draws."""
  model, params = _decoder(name)
  seq = _sequences()
  lengths = jnp.array([9, 9])
  whole, _ = model.apply(params, seq, lengths, deterministic=True, rngs=NOISE)
  _, cache = model.apply(
    params,
    seq[:, :5],
    jnp.array([5, 5]),
    deterministic=True,
    num_positions=9,
    draw_length=lengths,
    rngs=NOISE,
  )
  cache = generate_lib.pad_cache(cache, 9)
  diff = 0.0
  for t in range(5, 9):
    q_idx = jnp.full((2, 1), t)
    step, cache = model.apply(
      params,
      seq[:, t : t + 1],
      q_idx[:, 0] + 1,
      q_idx=q_idx,
      cache=cache,
      num_positions=9,
      draw_length=lengths,
      deterministic=True,
      rngs=NOISE,
    )
    diff = max(diff, _max_diff(step[:, 0], whole[:, t]))
  return Check(
    'step',
    _within(diff, VALUE_TOLERANCE),
    f'max |difference| {diff:.1e} of the logits of 4 cached steps',
    diff,
  )


def check_generation(name: str) -> Check:
  """Greedy answers of 8 tokens from prompts of lengths 3, 5 and 1: the cached generation
  and re-decoding without a cache give the same tokens, on each backend of the prompt pass."""
  tokens = jax.random.randint(jax.random.key(1), (3, 5), 0, EOS)
  lengths = jnp.array([3, 5, 1])
  _, params = _decoder(name)
  mismatches = 0
  for impl in ('xla_fused', 'cpu_blocked'):
    model = models.Decoder(vocab_size=VOCAB, encoding=name, attention_impl=impl, **TINY)
    run = lambda fn, model=model: jax.jit(lambda p: fn(model, p, tokens, lengths, 8, EOS, NOISE))(
      params
    )
    cached, uncached = run(generate_lib.generate), run(generate_lib.generate_uncached)
    mismatches += int(np.sum(np.asarray(cached) != np.asarray(uncached)))
  return Check(
    'generation',
    mismatches == 0,
    f'{mismatches} of 48 generated tokens differ (2 backends x 3 prompts x 8)',
  )


def check_gradients(name: str) -> Check:
  """The next-token loss of the decoder (and the encoder's loss where it runs) has finite
  gradients, and some parameter of the encoding gets a nonzero one where it has any."""
  model, params = _decoder(name)
  seq = _sequences()
  rngs = {**NOISE, 'dropout': jax.random.key(8)}

  def loss(p):
    logits, _ = model.apply(p, seq[:, :-1], jnp.array([8, 8]), deterministic=False, rngs=rngs)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), seq[:, 1:, None], -1))

  grads = jax.grad(loss)(params)
  leaves = jax.tree.leaves(grads)
  finite = all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  flat = jax.tree_util.tree_flatten_with_path(grads)[0]
  encoding = [g for path, g in flat if any('encod' in str(getattr(p, 'key', '')) for p in path)]
  moving = not encoding or any(bool(jnp.any(g != 0)) for g in encoding)
  detail = f'{"finite" if finite else "NOT finite"} over {len(leaves)} parameter arrays' + (
    ''
    if not encoding
    else f'; the encoding\'s {len(encoding)} {"move" if moving else "get zero gradients"}'
  )
  return Check('gradients', finite and moving, detail)


def _tiny_config(name: str, steps: int = 6) -> Any:
  """A tiny decoder run of the encoding (`config.shrink_to_tiny`, one member): addition
  (operands up to 3 digits, tested to 5) when it reads digits, else even_pairs."""
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
  return config


def check_export(name: str) -> Check:
  """The training step of a tiny decoder run lowers for CUDA and TPU."""
  run = setup.build(_tiny_config(name), platform='gpu')
  state = population_lib.init_state(run.config, run.model, run.population, abstract=True)
  update = train.make_update_fn(run, run.training.buckets(run)[-1])
  exported = jax_export.export(update, platforms=['cuda', 'tpu'])(
    state,
    jax.ShapeDtypeStruct((), jnp.int32),
    run.population.learning_rates,
    run.population.train_keys,
  )
  ok = 'stablehlo' in exported.mlir_module()
  return Check('export', ok, 'the training step lowers for cuda and tpu (jax.export)')


def check_training(name: str) -> Check:
  """Six steps of a tiny decoder run and its evaluation, through `train.train_and_evaluate`."""
  config = _tiny_config(name)
  with tempfile.TemporaryDirectory(prefix='posenc-check-') as workdir:
    results = train.train_and_evaluate(setup.build(config), workdir, progress=lambda line: None)
  member = results['members'][0]
  ok = not member['diverged'] and member['score'] is not None
  return Check(
    'training',
    ok,
    f'{config.train.steps} steps of {config.task} and its '
    f'evaluation: score {member["score"]}, diverged {member["diverged"]}',
  )


CHECKS: dict[str, Callable[[str], Check]] = {
  'backends': check_backends,
  'padded': check_padded,
  'causal': check_causal,
  'step': check_step,
  'generation': check_generation,
  'gradients': check_gradients,
  'export': check_export,
  'training': check_training,
}


def conformance(
  name: str,
  checks: tuple[str, ...] | None = None,
  report: Callable[[Check], None] = lambda check: None,
) -> list[Check]:
  """Every invariant (or those named in `checks`) of encoding `name`, each a `Check`
  (an exception inside one is its failure, named in one line); `report` is called as each
  finishes.

  Raises:
    ValueError: `name` is not an encoding (one line), or `checks` names an unknown check.
  """
  encodings.get(name)
  unknown = sorted(set(checks or ()) - set(CHECKS))
  if unknown:
    raise ValueError(f'unknown checks {unknown}; valid: {", ".join(CHECKS)}')
  out = []
  for check_name in checks or tuple(CHECKS):
    try:
      check = CHECKS[check_name](name)
    except Exception as e:  # pylint: disable=broad-except  (a failing invariant, reported)
      message = ' '.join(f'{type(e).__name__}: {e}'.split())
      check = Check(check_name, False, f'error: {message[:300]}')
    report(check)
    out.append(check)
  return out


def check_encoding(name: str, checks: tuple[str, ...] | None = None) -> list[Check]:
  """The pytest helper: `conformance(name, checks)`, raising AssertionError naming every
  failed invariant.

  Example (in a test of one's own package):
    def test_my_encoding_conforms():
      posenc.testing.check_encoding('my_pkg.my_module:MY_ENCODING')
  """
  results = conformance(name, checks)
  failed = [c for c in results if not c.passed]
  if failed:
    raise AssertionError(
      f'encoding {name!r} breaks {len(failed)} invariant(s):\n'
      + '\n'.join(c.line() for c in failed)
    )
  return results
