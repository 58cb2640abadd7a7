"""The encoder transformer (posenc/model.py): parameter counts, padding, layout, RNG streams."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import encodings
from posenc.models import encoder as encoder_lib
from posenc.models import layers

TINY = dict(num_layers=2, d_model=16, num_heads=4, ffn_size=32, max_position=64)

PARAMS_V2_C2 = {
  'none': 248_962,
  'sin_cos': 248_962,
  'alibi': 248_962,
  'rotary': 248_962,
  'randomized_sin_cos': 248_962,
  'randomized_alibi': 248_962,
  'randomized_rotary': 248_962,
  'relative': 270_082,
  'randomized_relative': 270_082,
  'learned': 380_034,
  'randomized_learned': 380_034,
  # Not in the reference: +5 × (u 8×8, γ, s0) and + 5 × (W_p 64×16 + b_p 16 + ρ).
  'geometric': 249_292,
  'geometric_directional': 254_497,
}


@pytest.mark.parametrize('name', encodings.NAMES)
def test_parameter_count(name):
  model = encoder_lib.Encoder(vocab_size=2, num_classes=2, encoding=name)
  assert encoder_lib.num_params(model) == PARAMS_V2_C2[name]


def test_parameter_count_other_vocab():
  # The reference's sizes: modular_arithmetic_brackets (V=11, C=5).
  counts = [
    encoder_lib.num_params(encoder_lib.Encoder(vocab_size=11, num_classes=5, encoding=name))
    for name in ('none', 'relative', 'learned')
  ]
  assert counts == [249_733, 270_853, 380_805]


@functools.lru_cache(maxsize=None)
def _tiny(name, causal=False):
  model = encoder_lib.Encoder(vocab_size=3, num_classes=4, encoding=name, causal=causal, **TINY)
  tokens = jnp.zeros((1, 4), jnp.int32)
  variables = model.init(
    encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(4), deterministic=True
  )
  return model, variables


@pytest.mark.parametrize('name', encodings.NAMES)
def test_padded_equals_exact(name):
  model, variables = _tiny(name)
  t, t_max = 7, 12
  tokens = jax.random.randint(jax.random.key(1), (2, t), 0, 4)
  padded = jnp.concatenate([tokens, jnp.full((2, t_max - t), 1)], axis=1)
  rngs = {'noise': jax.random.key(5)}
  exact = model.apply(variables, tokens, jnp.int32(t), deterministic=True, rngs=rngs)
  apply = jax.jit(lambda x, n: model.apply(variables, x, n, deterministic=True, rngs=rngs))
  got = apply(padded, jnp.int32(t))
  assert got.shape == (2, t_max, 4)
  assert np.all(np.isfinite(got))
  np.testing.assert_allclose(got[:, :t], exact, atol=1e-5)
  # No NaN even when every key is padding.
  assert np.all(np.isfinite(apply(padded, jnp.int32(0))))


@pytest.mark.parametrize('name', ['none', 'relative', 'randomized_rotary', 'geometric'])
def test_causal_mask(name):
  model, variables = _tiny(name, causal=True)
  tokens = jax.random.randint(jax.random.key(1), (1, 8), 0, 4)
  changed = tokens.at[0, 5:].set((tokens[0, 5:] + 1) % 4)
  rngs = {'noise': jax.random.key(5)}
  a, b = (
    model.apply(variables, x, jnp.int32(8), deterministic=True, rngs=rngs)
    for x in (tokens, changed)
  )
  np.testing.assert_allclose(a[:, :5], b[:, :5], atol=1e-5)
  assert not np.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize(
  'name,causal',
  [(name, False) for name in encodings.NAMES]
  + [
    ('none', True),
    ('randomized_relative', True),
    ('randomized_alibi', True),
    ('geometric_directional', True),
  ],
)
def test_blocked_attention_equals_whole(name, causal):
  # Per-head query blocks (long sequences) compute the same function as one block, on a
  # padded batch, with the same position draws.
  model, variables = _tiny(name, causal)
  blocked = model.clone(attention_block=3, attention_impl='cpu_blocked')
  tokens = jax.random.randint(jax.random.key(1), (2, 11), 0, 4)
  rngs = {'noise': jax.random.key(5)}
  whole, split = (
    jax.jit(lambda x, n, m=m: m.apply(variables, x, n, deterministic=True, rngs=rngs))(
      tokens, jnp.int32(8)
    )
    for m in (model, blocked)
  )
  np.testing.assert_allclose(split[:, :8], whole[:, :8], atol=2e-5)


def test_randomized_encodings_draw_at_evaluation():
  model, variables = _tiny('randomized_sin_cos')
  tokens = jax.random.randint(jax.random.key(1), (2, 6), 0, 4)
  a, b = (
    model.apply(
      variables, tokens, jnp.int32(6), deterministic=True, rngs={'noise': jax.random.key(seed)}
    )
    for seed in (0, 1)
  )
  assert not np.allclose(a, b)


def test_dropout_only_when_not_deterministic():
  model, variables = _tiny('sin_cos')
  tokens = jax.random.randint(jax.random.key(1), (2, 6), 0, 4)
  run = lambda det, seed: model.apply(
    variables, tokens, jnp.int32(6), deterministic=det, rngs={'dropout': jax.random.key(seed)}
  )
  np.testing.assert_array_equal(run(True, 0), run(True, 1))
  assert not np.allclose(run(False, 0), run(False, 1))


def test_randomized_sequence_too_long_raises():
  model = encoder_lib.Encoder(vocab_size=3, num_classes=4, encoding='randomized_alibi', **TINY)
  tokens = jnp.zeros((1, 65), jnp.int32)
  with pytest.raises(ValueError, match='max_position'):
    model.init(encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(65), deterministic=True)


def test_initialisation_matches_haiku():
  model = encoder_lib.Encoder(vocab_size=2, num_classes=2, encoding='learned')
  params = model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.int32(4),
    deterministic=True,
  )['params']
  # hk.Linear: TruncNormal(1/sqrt(fan_in)) cut at 2σ; biases 0; LayerNorm eps 1e-5.
  ffn = np.asarray(params['layer_0']['Dense_0']['kernel'])  # [64, 256]
  assert np.abs(ffn).max() <= 2 / 8 and 0.8 / 8 < ffn.std() < 0.95 / 8
  assert not np.any(params['layer_0']['Dense_0']['bias'])
  table = np.asarray(params['position_embed']['embedding'])
  assert table.shape == (2048, 64) and np.abs(table).max() <= 2 and 0.8 < table.std() < 0.95
  token = np.asarray(params['token_embed']['embedding'])
  assert token.shape == (3, 64) and np.abs(token).max() <= 0.04


def test_empty_output_layout_and_read_outputs():
  inputs = jnp.array([[1, 0, 1, 0]])
  tokens, seq_length = encoder_lib.empty_output_layout(inputs, jnp.int32(3), jnp.int32(2), 4, 2)
  np.testing.assert_array_equal(tokens, [[1, 0, 1, 2, 2, 0, 0, 0]])
  assert int(seq_length) == 5
  logits = jnp.arange(8, dtype=jnp.float32).reshape(1, 8, 1)
  np.testing.assert_array_equal(
    encoder_lib.read_outputs(logits, jnp.int32(3), 4)[0, :, 0], [3, 4, 5, 6]
  )


def test_dropout_keep_mask_rate_determinism_and_vmap():
  keys = jax.random.split(jax.random.key(0), 3)
  drop = [~np.asarray(layers.dropout_keep_mask(k, (64, 40, 32), 0.1)) for k in keys]
  for d in drop:
    assert abs(d.mean() - 0.1) < 0.005
  assert abs((drop[0] & drop[1]).mean() - 0.01) < 0.002  # independent across keys
  assert abs((drop[0][..., 1:] & drop[0][..., :-1]).mean() - 0.01) < 0.002  # and neighbours
  batched = jax.vmap(lambda k: layers.dropout_keep_mask(k, (64, 40, 32), 0.1))(keys)
  np.testing.assert_array_equal(~np.asarray(batched[1]), drop[1])
