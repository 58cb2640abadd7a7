"""Writes tests/data/hand_written.npz: what sin/cos, learned, relative, ALiBi, RoPE, FIRE and
the bias families (and each one's randomized twin) give for fixed parameters and draws: their
parameters' names, shapes and initial values, and their biases, rotations and embeddings,
with one draw for the batch and one per sequence, bidirectional and causal, in evaluation
and in training. tests/test_hand_written.py holds the encodings to it.

The file was written with these encodings' hand-written Linen modules (each twin a
`randomized=True` module), before they were made with the helpers of posenc.encodings.define;
rewriting it replaces that guard.

  python tests/scripts/make_hand_written.py
"""

import os

from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from posenc import encodings

B, T, H, K, L = 2, 6, 2, 4, 64
# (name, options): every encoding the helpers make, the twins' own options among them.
CASES = [(n, {}) for n in ('sin_cos', 'learned', 'relative', 'alibi', 'rotary', 'fire')]
CASES += [(f, {}) for f in encodings.families.FAMILIES]
CASES += [(f'randomized_{n}', o) for n, o in CASES]
CASES += [
  ('randomized_relative', {'relative_mode': 'reference'}),
  ('randomized_relative', {'randomize_both_sides': True, 'max_time': 100.0}),
  ('randomized_alibi', {'randomize_both_sides': True}),
  ('alibi', {'alibi_reference_form': True, 'slope_scale': 2.0}),
  ('rotary', {'rope_scaling': 'yarn', 'rope_factor': 2.0, 'rope_original_length': 4}),
  ('randomized_fire', {'fire_variant': 'pc'}),
  ('randomized_kerple_log', {'bias_two_sided': True, 'kerple_r_min': 1.01}),
  ('randomized_kerple_power', {'bias_k': 0.5, 'slope_scale': 0.5}),
  ('randomized_t5', {'t5_buckets': 8, 't5_max_distance': 10}),
  ('randomized_sliding_window', {'bias_window': 2}),
  ('randomized_sandwich', {'sandwich_dim': 2}),
  ('randomized_sin_cos', {'max_time': 100.0}),
]


def tag(name, options):
  return name + '|' + ','.join(f'{k}={v}' for k, v in sorted(options.items()))


def record(name, options, out):
  spec = encodings.get(name)
  attention, embedding = encodings.resolve_options(name, options)
  keys = jax.random.split(jax.random.key(3), 3)
  q = jax.random.normal(keys[0], (B, T, H, K))
  k = jax.random.normal(keys[1], (B, T, H, K))
  tokens = jax.random.randint(keys[2], (B, T), 0, 10)
  idx = jnp.arange(T)
  # One length for the batch (an encoder's draw), one per sequence (a decoder's).
  for lengths in (T, jnp.array([T, 4])):
    for causal in (False, True):
      where = f'{tag(name, options)}|{np.ndim(lengths)}|{causal}'
      if spec.embedding is not None:
        module = spec.embedding(width=H * K, max_position=L, **embedding)
      else:
        module = spec.attention(max_position=L, num_heads=H, head_dim=K, causal=causal, **attention)
      args = (T, lengths, tokens if spec.embedding is not None else jnp.zeros((B, T, H * K)))
      variables = module.init({'params': jax.random.key(0), 'noise': jax.random.key(1)}, *args)
      if np.ndim(lengths) == 0:  # the parameters do not depend on the lengths
        flat = traverse_util.flatten_dict(variables.get('params', {}), sep='/')
        for path, value in flat.items():
          out[f'{tag(name, options)}|{causal}|param|{path}'] = np.asarray(value)
      for deterministic in (True, False):
        got = module.apply(variables, *args, deterministic, rngs={'noise': jax.random.key(5)})
        at = f'{where}|{deterministic}'
        if spec.embedding is not None:
          out[at] = np.asarray(got)
        elif got.kind == 'bias':
          out[at] = np.asarray(got.bias(q, k, idx, idx))
          out[at + '|step'] = np.asarray(got.bias(q[:, 3:4], k, idx[3:4], idx))
        else:
          out[at] = np.asarray(got.rotate(q, idx))
          out[at + '|keys'] = np.asarray((got.rotate_keys or got.rotate)(k, idx))


PATH = os.path.join(os.path.dirname(__file__), '..', 'data', 'hand_written.npz')

if __name__ == '__main__':
  out = {}
  for name, options in CASES:
    record(name, options, out)
  np.savez_compressed(PATH, **out)
  print(f'{len(out)} arrays in {PATH}')
