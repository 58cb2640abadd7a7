"""The decoder family, greedy generation with a KV cache, looped blocks and output heads."""

import functools

from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import encodings
from posenc.models import generate as generate_lib
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib

TINY = dict(num_layers=2, d_model=16, num_heads=2, ffn_size=32, max_position=64)
VOCAB = 7
EOS = 6


def decoder(name, **kw):
  return decoder_lib.Decoder(vocab_size=VOCAB, encoding=name, **{**TINY, **kw})


@functools.lru_cache(maxsize=None)
def variables(name, **kw):
  model = decoder(name, **dict(kw))
  return model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.array([4]),
    deterministic=True,
  )


def prompts():
  """Three prompts of lengths 3, 5 and 1, left-aligned and padded to 5."""
  tokens = jax.random.randint(jax.random.key(1), (3, 5), 0, EOS)
  return tokens, jnp.array([3, 5, 1])


# Cached generation equals re-decoding, and a decoding step the whole sequence, for every
# encoding on both backends of the prompt pass: the conformance check's `generation` and
# `step` invariants (tests/test_conformance.py, every built-in).


def test_decoder_alibi_weights_are_press_et_al():
  # With q = 0 the logits are the bias alone: row i must be softmax_j<=i(-m_h (i - j)), with
  # nothing left on the diagonal (the bidirectional form leaves it -m_h / 2 behind). The
  # backends equal this readable definition (the conformance check, tests/test_conformance.py).
  model = decoder('alibi', num_layers=1)
  params = traverse_util.flatten_dict(variables('alibi', num_layers=1))
  params[('params', 'layer_0', 'attention', 'query', 'kernel')] *= 0
  params = traverse_util.unflatten_dict(params)
  tokens = jax.random.randint(jax.random.key(2), (1, 6), 0, EOS)
  _, state = model.apply(
    params, tokens, jnp.array([6]), deterministic=True, mutable='intermediates'
  )
  weights = np.asarray(jax.tree.leaves(state['intermediates'])[0])[0]  # [H, Q, S]
  slopes = encodings.alibi_slopes(TINY['num_heads'])
  i, j = np.arange(6)[:, None], np.arange(6)[None, :]
  logits = np.where(j <= i, -slopes[:, None, None] * (i - j), -np.inf)
  want = np.exp(logits - logits.max(-1, keepdims=True))
  np.testing.assert_allclose(weights, want / want.sum(-1, keepdims=True), atol=1e-6)


def test_generation_stops_at_eos_and_fills_after_it():
  model = decoder('none')
  params = jax.tree.map(jnp.zeros_like, variables('none'))
  # Zero weights but the output bias: every step emits EOS.
  params['params']['head']['bias'] = jnp.zeros(VOCAB).at[EOS].set(1.0)
  tokens, lengths = prompts()
  out = generate_lib.generate(model, params, tokens, lengths, 6, EOS, {'noise': jax.random.key(0)})
  np.testing.assert_array_equal(out, np.full((3, 6), EOS))


def test_per_sequence_draws():
  # Randomized positions are drawn per sequence: one sequence's logits do not depend on the
  # others in the batch, and two copies of a sequence get different draws.
  model = decoder('randomized_rotary')
  params = variables('randomized_rotary')
  seq = jax.random.randint(jax.random.key(2), (1, 6), 0, EOS)
  both = jnp.concatenate([seq, seq])
  rngs = {'noise': jax.random.key(3)}
  logits, _ = model.apply(params, both, jnp.array([6, 6]), deterministic=True, rngs=rngs)
  assert not np.allclose(logits[0], logits[1])


# ---------------------------------------------------------------------------------------
# Looped blocks.


@pytest.mark.parametrize('name', ['relative', 'sin_cos', 'geometric_directional'])
def test_looped_block_at_one_recurrence_without_injection_is_the_plain_model(name):
  # (Randomized encodings draw other, equally distributed positions inside the loop.)
  plain = encoder_lib.Encoder(vocab_size=3, num_classes=2, encoding=name, **TINY)
  looped = plain.clone(loop=True)
  tokens = jax.random.randint(jax.random.key(1), (2, 7), 0, 3)
  params = plain.init(
    encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(7), deterministic=True
  )['params']
  flat = traverse_util.flatten_dict(params, sep='/')
  as_block = traverse_util.unflatten_dict(
    {(f'block/{k}' if k.startswith('layer_') else k): v for k, v in flat.items()}, sep='/'
  )
  rngs = {'noise': jax.random.key(5)}
  a = plain.apply({'params': params}, tokens, jnp.int32(6), deterministic=True, rngs=rngs)
  b = looped.apply({'params': as_block}, tokens, jnp.int32(6), deterministic=True, rngs=rngs)
  np.testing.assert_allclose(a[:, :6], b[:, :6], atol=1e-5)


def _looped(**kw):
  model = encoder_lib.Encoder(
    vocab_size=3,
    num_classes=2,
    encoding='none',
    **{**TINY, 'num_layers': 1, 'recurrences': 4, **kw},
  )
  tokens = jax.random.randint(jax.random.key(1), (2, 5), 0, 3)
  params = model.init(
    encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(5), deterministic=True
  )['params']
  return model, params, tokens


@pytest.mark.parametrize('injection', ['none', 'layer'])
def test_progressive_window_cuts_the_gradient_of_earlier_recurrences(injection):
  # The embedding reaches the loss through recurrence 0 (and, injected, every recurrence):
  # a window starting after recurrence 0 leaves it no gradient unless it is injected.
  model, params, tokens = _looped(injection=injection)

  def embedding_grad(window):
    loss = lambda p: jnp.sum(
      model.apply({'params': p}, tokens, jnp.int32(5), deterministic=True, window=window) ** 2
    )
    return jax.grad(loss)(params)['token_embed']['embedding']

  assert np.abs(embedding_grad((0, 4))).max() > 0
  cut = np.abs(embedding_grad((2, 3))).max()
  assert (cut == 0) == (injection == 'none'), cut
  # Recurrences past the window do not run: (0, 2) is the model with R = 2.
  two = model.apply({'params': params}, tokens, jnp.int32(5), deterministic=True, recurrences=2)
  windowed = model.apply(
    {'params': params}, tokens, jnp.int32(5), deterministic=True, window=(0, 2)
  )
  np.testing.assert_allclose(two, windowed, atol=1e-6)


def test_more_recurrences_at_evaluation_than_in_training():
  model, params, tokens = _looped(injection='block')
  four, eight = (
    model.apply({'params': params}, tokens, jnp.int32(5), deterministic=True, recurrences=r)
    for r in (4, 8)
  )
  assert np.all(np.isfinite(eight)) and not np.allclose(four, eight)


# ---------------------------------------------------------------------------------------
# Several output heads, options.


def test_each_example_uses_the_head_of_its_task():
  model = encoder_lib.Encoder(vocab_size=3, num_classes=2, encoding='none', num_outputs=2, **TINY)
  tokens = jax.random.randint(jax.random.key(1), (4, 5), 0, 3)
  params = model.init(
    encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(5), deterministic=True
  )['params']
  task = jnp.array([0, 0, 1, 1])

  def head_grads(weights):
    loss = lambda p: jnp.sum(
      weights[:, None, None]
      * model.apply({'params': p}, tokens, jnp.int32(5), deterministic=True, task=task)
    )
    return np.abs(jax.grad(loss)(params)['heads']['kernel']).max(axis=(0, 2))  # per head

  only_task0 = head_grads(jnp.array([1.0, 1.0, 0.0, 0.0]))
  assert only_task0[0] > 0 and only_task0[1] == 0
  only_task1 = head_grads(jnp.array([0.0, 0.0, 1.0, 1.0]))
  assert only_task1[0] == 0 and only_task1[1] > 0


@pytest.mark.parametrize(
  'options',
  [
    dict(norm='pre'),
    dict(ffn='gelu_glu'),
    dict(tie_embeddings=True),
    dict(temperature='learned', temperature_beta=0.5),
    dict(temperature='fixed'),
    dict(recurrences=2, injection='layer'),
    dict(dtype=jnp.bfloat16),
  ],
)
def test_decoder_options_generate_consistently(options):
  # Every option keeps cached generation equal to re-decoding.
  model = decoder('rotary', **options)
  params = model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.array([4]),
    deterministic=True,
  )
  tokens, lengths = prompts()
  rngs = {'noise': jax.random.key(3)}
  cached = generate_lib.generate(model, params, tokens, lengths, 6, EOS, rngs)
  uncached = generate_lib.generate_uncached(model, params, tokens, lengths, 6, EOS, rngs)
  if options.get('dtype') == jnp.bfloat16:  # rounding may break near-ties: most agree
    assert np.mean(np.asarray(cached) == np.asarray(uncached)) > 0.7
  else:
    np.testing.assert_array_equal(cached, uncached)
  if 'temperature' in options and options['temperature'] == 'learned':
    assert 'temperature_beta' in params['params']['layer_0']['attention']


def test_temperature_grows_with_the_keys_attended():
  from posenc import attention

  tau = attention.temperature(jnp.float32(1.0), jnp.array([0, 1, 5]), jnp.int32(9), True)
  np.testing.assert_allclose(tau, [[np.log(2), np.log(2), np.log(6)]], rtol=1e-6)
  tau = attention.temperature(jnp.float32(2.0), jnp.array([0, 1]), jnp.array([3, 9]), False)
  np.testing.assert_allclose(tau, [[2 * np.log(3)] * 2, [2 * np.log(9)] * 2], rtol=1e-6)


@pytest.mark.parametrize(
  'name', [pytest.param('randomized_alibi', marks=pytest.mark.slow), 'forgetting']
)
def test_generation_under_a_population_vmap_equals_each_member_alone(name):
  model = decoder(name)
  keys = jax.random.split(jax.random.key(0), 2)
  members = jax.vmap(
    lambda k: model.init(
      encoder_lib.init_rngs(k), jnp.zeros((1, 4), jnp.int32), jnp.array([4]), deterministic=True
    )
  )(keys)
  tokens, lengths = prompts()
  rngs = {'noise': jax.random.key(3)}
  run = lambda v: generate_lib.generate(model, v, tokens, lengths, 6, EOS, rngs)
  together = jax.jit(jax.vmap(run))(members)
  for i in range(2):
    np.testing.assert_array_equal(together[i], run(jax.tree.map(lambda x: x[i], members)))


def test_looped_program_size_does_not_grow_with_recurrences():
  # Recurrences run in a scan: the compiled program is the same size for any R.
  sizes = []
  for r in (2, 16):
    model = encoder_lib.Encoder(
      vocab_size=3, num_classes=2, encoding='rotary', **{**TINY, 'num_layers': 1, 'recurrences': r}
    )
    tokens = jnp.zeros((1, 5), jnp.int32)
    params = model.init(
      encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(5), deterministic=True
    )
    text = (
      jax.jit(lambda p: model.apply(p, tokens, jnp.int32(5), deterministic=True))
      .lower(params)
      .as_text()
    )
    sizes.append(text.count('\n'))  # operations, one per line
  assert sizes[0] == sizes[1], sizes
