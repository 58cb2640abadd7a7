"""Adding an encoding is one function, one module and one registry entry: a toy encoding
registered inside this test trains and evaluates, runs on every attention backend, in
cached generation and in programs exported for GPU and TPU, with no other file touched."""

from flax import linen as nn
import jax
from jax import export
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rpe_table1
from posenc import attention
from posenc import encodings
from posenc.models import generate as generate_lib
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib
from posenc.training import train
from posenc.training import update
from posenc import config as config_lib
from posenc import setup
from posenc.encodings import core
import tasks


def toy_bias(q_pos: jax.Array, k_pos: jax.Array, slopes: jax.Array) -> jax.Array:
  """bias[h, i, j] = -softplus(s_h) sqrt|i - j|, a square-root ALiBi: positions [Q] and [S]
  give [H, Q, S]; per sequence, [B, Q] and [B, S] give [B, H, Q, S]."""
  dist = jnp.sqrt(jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(jnp.float32))
  return -jax.nn.softplus(slopes)[:, None, None] * dist[..., None, :, :]


class ToyEncoding(core.EncodingModule):
  """One learned slope per head."""

  @nn.compact
  def __call__(self, num_positions, length, inputs, deterministic=True):
    del num_positions, length, inputs, deterministic
    slopes = self.param('toy_slopes', nn.initializers.ones, (self.num_heads,), self.param_dtype)
    return core.AttentionEncoding(
      'toy',
      core.BIAS,
      bias=lambda q, k, qi, ki: core.with_batch(toy_bias(qi, ki, slopes)),
      params={'slopes': slopes},
    )


@pytest.fixture
def toy(monkeypatch):
  monkeypatch.setitem(
    encodings.ENCODINGS, 'toy', encodings.Encoding(core.BIAS, attention=ToyEncoding)
  )
  return 'toy'


def test_toy_encoding_trains_and_evaluates(toy, tmp_path):
  config = config_lib.cell_config(
    rpe_table1.get_config(f'task=parity_check,encoding={toy},tiny'),
    {'train.steps': 4, 'seeds': [0]},
  )
  setup.build(config)
  results = train.train_and_evaluate(setup.build(config), str(tmp_path), progress=lambda line: None)
  assert results['encoding'] == toy and results['members'][0]['score'] is not None


@pytest.mark.parametrize('causal', [False, True])
def test_toy_encoding_on_every_backend(toy, causal):
  keys = jax.random.split(jax.random.key(0), 4)
  b, t, h, k = 2, 9, 2, 8
  q, key, v = (jax.random.normal(kk, (b, t, h, k)) for kk in keys[:3])
  module = encodings.get(toy).attention(num_heads=h, head_dim=k, causal=causal)
  params = module.init(keys[3], t, t, jnp.zeros((b, t, h * k)))
  valid = jnp.arange(t) < 7

  def out(impl, q, key, v):
    enc = module.apply(params, t, 7, jnp.zeros((b, t, h * k)))
    return attention.attend(q, key, v, enc, key_valid=valid, causal=causal, impl=impl, block=4)

  want = out('reference', q, key, v)
  loss = lambda impl: lambda *a: jnp.sum(out(impl, *a)[:, :7] ** 2)
  want_grads = jax.grad(loss('reference'), (0, 1, 2))(q, key, v)
  for impl in attention.IMPLS:
    if impl == 'auto':
      continue
    np.testing.assert_allclose(out(impl, q, key, v)[:, :7], want[:, :7], atol=2e-5)
    grads = jax.grad(loss(impl), (0, 1, 2))(q, key, v)
    for got, expected in zip(grads, want_grads):
      np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_toy_encoding_in_cached_generation(toy):
  model = decoder_lib.Decoder(
    vocab_size=7, encoding=toy, num_layers=2, d_model=16, num_heads=2, ffn_size=32, max_position=64
  )
  params = model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.array([4]),
    deterministic=True,
  )
  tokens = jax.random.randint(jax.random.key(1), (3, 5), 0, 6)
  lengths = jnp.array([3, 5, 1])
  rngs = {'noise': jax.random.key(3)}
  cached = generate_lib.generate(model, params, tokens, lengths, 8, 6, rngs)
  uncached = generate_lib.generate_uncached(model, params, tokens, lengths, 8, 6, rngs)
  np.testing.assert_array_equal(cached, uncached)


def test_toy_encoding_exports_for_gpu_and_tpu(toy):
  config = rpe_table1.get_config(f'task=reverse_string,encoding={toy},tiny')
  run = setup.build(config, platform='gpu')
  population = run.population
  state = run.abstract_state
  update_fn = update.make_update_fn(run, 8)
  step = export.export(update_fn, platforms=['cuda', 'tpu'])(
    state, jax.ShapeDtypeStruct((), jnp.int32), population.learning_rates, population.train_keys
  )
  assert 'stablehlo' in step.mlir_module()
