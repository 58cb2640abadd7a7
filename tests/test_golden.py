"""The encoder's logits for fixed weights, against the implementation checked against the
reference (tests/data/golden_encoder.npz, written by tests/scripts/make_golden_encoder.py)."""

import functools
import os

from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import encodings
from posenc.models import encoder as encoder_lib

TINY = dict(num_layers=2, d_model=16, num_heads=4, ffn_size=32, max_position=64)


@functools.lru_cache(maxsize=None)
def golden():
  path = os.path.join(os.path.dirname(__file__), 'data', 'golden_encoder.npz')
  return dict(np.load(path))


def params_of(name):
  prefix = f'{name}|params|'
  flat = {k[len(prefix) :]: v for k, v in golden().items() if k.startswith(prefix)}
  return traverse_util.unflatten_dict(flat, sep='/')


@pytest.mark.parametrize('causal', [False, True])
@pytest.mark.parametrize('name', encodings.NAMES)
def test_logits_equal_the_verified_encoder(name, causal):
  # The reference ran ALiBi's bidirectional form under its causal mask too; posenc's causal
  # default is Press et al.'s, so the reference's form is asked for by its option.
  options = (('alibi_reference_form', True),) if causal else ()
  model = encoder_lib.Encoder(
    vocab_size=3, num_classes=4, encoding=name, causal=causal, encoding_options=options, **TINY
  )
  tokens = jnp.asarray(golden()['tokens'])
  logits = model.apply(
    {'params': params_of(name)},
    tokens,
    jnp.int32(9),
    deterministic=True,
    rngs={'noise': jax.random.key(5)},
  )
  want = golden()[f'{name}|logits{"|causal" if causal else ""}']
  # Real positions only: past seq_length the rows are padding.
  np.testing.assert_allclose(np.asarray(logits)[:, :9], want[:, :9], atol=2e-5, rtol=0)


@pytest.mark.parametrize('name', ['alibi', 'randomized_alibi'])
def test_causal_encoder_alibi_defaults_to_press_et_al(name):
  """Without the option a causal encoder's ALiBi is Press et al.'s, so it leaves the
  reference's logits (whose diagonal keeps a relative penalty of s/2)."""
  model = encoder_lib.Encoder(vocab_size=3, num_classes=4, encoding=name, causal=True, **TINY)
  tokens = jnp.asarray(golden()['tokens'])
  logits = model.apply(
    {'params': params_of(name)},
    tokens,
    jnp.int32(9),
    deterministic=True,
    rngs={'noise': jax.random.key(5)},
  )
  want = golden()[f'{name}|logits|causal']
  # Position 0 sees only itself: equal there, different from position 1 on.
  np.testing.assert_allclose(np.asarray(logits)[:, 0], want[:, 0], atol=2e-5, rtol=0)
  assert np.abs(np.asarray(logits)[:, 1:9] - want[:, 1:9]).max() > 1e-3
