"""xPos (Sun et al., "A Length-Extrapolatable Transformer", ACL 2023) as a posenc encoding.

RoPE whose rotation is scaled per pair m of coordinates by zeta_m = (m / (K/2) + gamma) /
(1 + gamma), gamma = 0.4: the query at position n by zeta^(n / B), the key at position m by
zeta^(-m / B), B = 512 (the scale base). q·k then carries zeta^((n - m) / B) < 1 for a key
before the query: attention decays with distance, fastest on the pairs with the smallest
zeta, the high-frequency ones (small m). As in the authors' code (torchscale), interleaved
pairs are rotated as posenc's `apply_rope` rotates them.

Installed, posenc finds it by its entry point (pyproject.toml: group posenc.encodings):

  pip install -e examples/outside_encoding
  python -m launch.check_encoding xpos
  python -m launch.benchmark --encoding=xpos --suite=tiny --workdir=runs/xpos_tiny

Without installing: `--config.encoding=posenc_xpos:XPOS` with this directory on the path.
Its option B is set as a built-in's options are: `--config.encoding_options.xpos_scale_base=1024`.
"""

import jax
import jax.numpy as jnp
import numpy as np

from posenc import encodings

GAMMA = 0.4
SCALE_BASE = 512.0


def xpos_scale(head_dim: int, positions: jax.Array, scale_base: float = SCALE_BASE) -> jax.Array:
  """zeta^(p / B) per position and coordinate: [..., T] -> [..., T, 1, K], each pair's two
  coordinates sharing their zeta_m = (2m + gamma K) / ((1 + gamma) K).

  Example: K = 4 -> zeta = [0.2857, 0.6429]; at p = 0 every scale is 1.
  """
  zeta = (np.arange(0, head_dim, 2) + GAMMA * head_dim) / ((1 + GAMMA) * head_dim)
  zeta = jnp.asarray(np.repeat(zeta, 2), jnp.float32)  # interleaved pairs
  power = jnp.asarray(positions, jnp.float32)[..., None, None] / scale_base
  return zeta**power


def xpos_queries(
  x: jax.Array, positions: jax.Array, *, xpos_scale_base: float = SCALE_BASE
) -> jax.Array:
  """RoPE at the positions, times zeta^(n / B): [B, T, H, K] -> [B, T, H, K]."""
  scale = xpos_scale(x.shape[-1], positions, xpos_scale_base)
  return (encodings.apply_rope(x, positions).astype(jnp.float32) * scale).astype(x.dtype)


def xpos_keys(
  x: jax.Array, positions: jax.Array, *, xpos_scale_base: float = SCALE_BASE
) -> jax.Array:
  """RoPE at the positions, times zeta^(-m / B)."""
  scale = xpos_scale(x.shape[-1], positions, xpos_scale_base)
  return (encodings.apply_rope(x, positions).astype(jnp.float32) / scale).astype(x.dtype)


XPOS = encodings.rotation(
  xpos_queries,
  keys=xpos_keys,
  name='xpos',
  options={
    'xpos_scale_base': encodings.option(
      SCALE_BASE,
      "B: the scale falls by zeta over B positions (the authors' scale_base)",
      valid=lambda b, _: isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0,
      must_be='a number > 0',
    )
  },
  about='xPos: RoPE with an exponential scale per frequency, growing with the position for '
  'the queries and shrinking for the keys, so that attention decays with distance.',
  papers=(
    encodings.Paper(
      'sun2023xpos',
      'Sun, Yutao and Dong, Li and Patra, Barun and Ma, Shuming and Huang, Shaohan and '
      'Benhaim, Alon and Chaudhary, Vishrav and Song, Xia and Wei, Furu',
      'A Length-Extrapolatable Transformer',
      2023,
      'ACL 2023',
      'https://arxiv.org/abs/2212.10554',
      (('booktitle', 'Proceedings of the 61st Annual Meeting of the ACL'),),
    ),
  ),
)
