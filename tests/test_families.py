"""The bias families of the distance against their closed forms, in a model, and their
options."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import config as config_lib
from posenc import encodings
from posenc import setup
from posenc.encodings import families
from experiments import rpe_table1

T = np.arange(0, 40, dtype=np.float32)


def _heads(x):  # [H, 1, T] -> [H, T]
  return np.asarray(x)[:, 0, :]


def test_each_family_against_its_closed_form():
  t = jnp.asarray(T)[None, :]  # [Q = 1, S]
  r, k = np.array([0.5, 1.5], np.float32), np.array([0.2, 1.0], np.float32)
  np.testing.assert_allclose(
    _heads(families.kerple_log(t, r, k)), -r[:, None] * np.log(1 + k[:, None] * T), rtol=1e-6
  )
  np.testing.assert_allclose(
    _heads(families.kerple_power(t, r, k)), -k[:, None] * T ** r[:, None], rtol=1e-5, atol=1e-6
  )
  np.testing.assert_allclose(families.type1(T), np.log(1 / (T + 1) ** 2), rtol=1e-6)
  np.testing.assert_allclose(families.type2(T), -(np.log(T + 1) ** 2), rtol=1e-6)
  np.testing.assert_allclose(families.inverse_n(T), np.log(1 / (T + 1)), rtol=1e-6)
  n = np.maximum(T + 1, 2)
  np.testing.assert_allclose(families.inverse_n_log_n(T), -np.log(n * np.log(n)), rtol=1e-6)
  assert families.inverse_n_log_n(jnp.float32(0)) == families.inverse_n_log_n(jnp.float32(1))
  window = np.asarray(families.sliding_window(T, 3))
  assert (window[:4] == 0).all() and (window[4:] == families.OUTSIDE).all()
  # Sandwich: s_h (Σ_{j=1}^{d/2} cos(t / 10000^{2j/d}) - d/2), s_h = H / (8h).
  d, h = 8, 4
  scales = families.sandwich_scales(h)
  np.testing.assert_allclose(scales, [4 / 8, 4 / 16, 4 / 24, 4 / 32])
  want = sum(np.cos(T / 10_000 ** (2 * j / d)) for j in range(1, d // 2 + 1)) - d // 2
  np.testing.assert_allclose(
    _heads(families.sandwich(t, scales, d)), scales[:, None] * want, rtol=1e-5, atol=1e-5
  )
  assert (np.asarray(families.sandwich(t, scales, d)) <= 1e-6).all()


def _t5_reference(offset, bidirectional, num_buckets, max_distance):
  """T5's `_relative_position_bucket`, one offset at a time in Python."""
  ret, n = 0, -offset
  if bidirectional:
    num_buckets //= 2
    ret += num_buckets if n < 0 else 0
    n = abs(n)
  else:
    n = max(n, 0)
  exact = num_buckets // 2
  if n < exact:
    return ret + n
  large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
  return ret + min(large, num_buckets - 1)


@pytest.mark.parametrize('bidirectional', [False, True])
def test_t5_buckets_match_t5(bidirectional):
  offsets = np.arange(-300, 301)
  got = np.asarray(
    families.t5_buckets(
      jnp.asarray(offsets), bidirectional=bidirectional, num_buckets=32, max_distance=128
    )
  )
  want = [_t5_reference(int(o), bidirectional, 32, 128) for o in offsets]
  np.testing.assert_array_equal(got, want)


def _module_bias(name, t=6, causal=False, **options):
  spec = encodings.get(name)
  attention, _ = encodings.resolve_options(name, options)
  module = spec.attention(max_position=64, num_heads=2, head_dim=4, causal=causal, **attention)
  x = jnp.zeros((1, t, 8))
  variables = module.init({'params': jax.random.key(0), 'noise': jax.random.key(1)}, t, t, x)

  def run(v):
    enc = module.apply(v, t, t, x, rngs={'noise': jax.random.key(1)})
    idx = jnp.arange(t)
    return enc, enc.bias(None, None, idx, idx)[0]

  return variables, run


def test_module_uses_its_learned_parameters_and_the_distance():
  variables, run = _module_bias('kerple_log')
  enc, bias = run(variables)
  r, k = variables['params']['r'], variables['params']['k']
  t = np.abs(np.arange(6)[None, :] - np.arange(6)[:, None])
  want = -np.maximum(r, 0.01)[:, None, None] * np.log1p(np.maximum(k, 0.01)[:, None, None] * t)
  np.testing.assert_allclose(bias, want, rtol=1e-5)
  # Below KERPLE's floor, the value is clipped and the gradient still reaches r.
  low = jax.tree.map(lambda x: x, variables)
  low['params']['r'] = jnp.full((2,), -1.0)
  np.testing.assert_allclose(
    run(low)[1], -0.01 * np.log1p(np.maximum(k, 0.01)[:, None, None] * t), rtol=1e-5
  )
  grad = jax.grad(lambda v: run(v)[1].sum())(low)['params']['r']
  assert (np.asarray(grad) != 0).all()


def test_two_sided_parameters_tell_left_from_right():
  variables, run = _module_bias('kerple_power', bias_two_sided=True)
  assert set(variables['params']) == {'r_left', 'k_left', 'r_right', 'k_right'}
  bias = np.asarray(run(variables)[1])
  assert not np.allclose(bias[:, 3, 1], bias[:, 1, 3])  # distance 2, on the left / right
  # Causal models have one side only.
  variables, _ = _module_bias('kerple_power', causal=True, bias_two_sided=True)
  assert set(variables['params']) == {'r', 'k'}


def test_fixed_parameters_and_randomized_positions():
  variables, run = _module_bias('kerple_log', bias_r=2.0, bias_k=0.5)
  assert 'params' not in variables or not variables['params']
  t = np.abs(np.arange(6)[None, :] - np.arange(6)[:, None])
  np.testing.assert_allclose(run(variables)[1][0], -2.0 * np.log1p(0.5 * t), rtol=1e-6)
  # Randomized: the distances are those of one sorted draw of positions in 0..63.
  variables, run = _module_bias('randomized_type1')
  enc, bias = run(variables)
  p = np.asarray(enc.params['positions'])
  assert (np.diff(p) > 0).all() and p.max() < 64
  np.testing.assert_allclose(bias[0], -2 * np.log1p(np.abs(p[None, :] - p[:, None])), rtol=1e-6)


@pytest.mark.parametrize(
  'options, needle',
  [
    ({'bias_r': 0.0}, 'bias_r=0.0 must be > 0'),
    ({'bias_k': -1.0}, 'bias_k=-1.0 must be > 0'),
    ({'bias_window': 0}, 'bias_window=0 must be an integer >= 1'),
    ({'t5_max_distance': 8}, 't5_max_distance=8 must be an integer > t5_buckets / 2 = 16'),
  ],
)
def test_bad_fixed_parameters_are_config_errors(options, needle):
  config = rpe_table1.get_config('task=parity_check,encoding=kerple_log,tiny')
  for key, value in options.items():
    config.encoding_options[key] = value
  with pytest.raises(config_lib.ConfigError, match=needle.replace('(', r'\(').replace(')', r'\)')):
    setup.build(config)


def test_power_exponent_above_two_is_refused_for_the_power_family_only():
  with pytest.raises(ValueError, match='bias_r=3.0 must be > 0 and <= 2 for kerple_power'):
    encodings.resolve_options('kerple_power', {'bias_r': 3.0})
  encodings.resolve_options('kerple_log', {'bias_r': 3.0})
