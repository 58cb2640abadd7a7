"""xPos keeps posenc's invariants, and its logits decay with distance as the paper's."""

import jax
import numpy as np

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
