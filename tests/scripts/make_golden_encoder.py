"""Writes tests/data/golden_encoder.npz: parameters and logits of a tiny encoder per encoding.

The file was written by the implementation whose logits were checked against the reference
implementation (google-deepmind/randomized_positional_encodings) for the same weights; the
tests hold every later implementation to it. Rewriting the file replaces that guard.

  python tests/scripts/make_golden_encoder.py
"""

import os

from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from posenc import encodings
from posenc.models import encoder as encoder_lib

TINY = dict(num_layers=2, d_model=16, num_heads=4, ffn_size=32, max_position=64)
out = {}
tokens = jax.random.randint(jax.random.key(1), (2, 12), 0, 4)
for causal in (False, True):
  for name in encodings.NAMES:
    model = encoder_lib.Encoder(vocab_size=3, num_classes=4, encoding=name, causal=causal, **TINY)
    variables = model.init(
      encoder_lib.init_rngs(jax.random.key(0)), tokens[:, :4], jnp.int32(4), deterministic=True
    )
    logits = model.apply(
      variables, tokens, jnp.int32(9), deterministic=True, rngs={'noise': jax.random.key(5)}
    )
    flat = traverse_util.flatten_dict(variables['params'], sep='/')
    for k, v in flat.items():
      key = f'{name}|params|{k}'
      if key in out:
        assert np.array_equal(out[key], np.asarray(v))
      out[key] = np.asarray(v)
    out[f'{name}|logits{"|causal" if causal else ""}'] = np.asarray(logits)
out['tokens'] = np.asarray(tokens)
np.savez_compressed(
  os.path.join(os.path.dirname(__file__), '..', 'data', 'golden_encoder.npz'), **out
)
