"""xPos keeps posenc's invariants, and its logits decay with distance as the paper's."""

import jax
import numpy as np
import pytest

from posenc import encodings
from posenc import testing
import posenc_xpos


def test_xpos_conforms():
  testing.check_encoding('posenc_xpos:XPOS')


def test_logits_carry_zeta_to_the_distance():
  # q = k = a unit vector on pair m: q·k = zeta_m^((n - m') / B) cos((n - m') f_m).
  x = np.zeros((1, 2, 1, 4), np.float32)
  x[..., 2] = 1.0
  q = posenc_xpos.xpos_queries(jax.numpy.asarray(x), jax.numpy.array([0, 7]))
  k = posenc_xpos.xpos_keys(jax.numpy.asarray(x), jax.numpy.array([0, 7]))
  zeta = (2 + 0.4 * 4) / (1.4 * 4)
  f = 10_000.0 ** (-1 / 2)
  np.testing.assert_allclose(
    float((q[0, 1, 0] * k[0, 0, 0]).sum()), zeta ** (7 / 512) * np.cos(7 * f), rtol=1e-5
  )


def test_the_scale_base_is_an_option_of_its_own():
  attention, embedding = encodings.resolve_options('posenc_xpos:XPOS', {'xpos_scale_base': 1024.0})
  assert attention == {'xpos_scale_base': 1024.0} and embedding == {}
  with pytest.raises(ValueError, match='xpos_scale_base=0.0 must be a number > 0'):
    encodings.resolve_options('posenc_xpos:XPOS', {'xpos_scale_base': 0.0})
  x = jax.numpy.ones((1, 2, 1, 4))
  positions = jax.numpy.array([0, 7])
  assert not np.allclose(
    posenc_xpos.xpos_queries(x, positions),
    posenc_xpos.xpos_queries(x, positions, xpos_scale_base=8.0),
  )
