"""Golden numbers and invariants of the encodings' functions and modules (posenc/encodings)."""

import math
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from posenc import attention
from posenc import encoding_names
from posenc import encodings
from posenc.attention import reference

# ------------------------------------------------------------------------------------------
# Each function against a closed form.
# ------------------------------------------------------------------------------------------


def test_sinusoid_by_hand():
  # D = 4: ω = [1, 10000^(-1/2)] = [1, 0.01]; concatenated sin | cos halves.
  got = encodings.sinusoid(jnp.array([0, 1, -2]), 4)
  want = [
    [0, 0, 1, 1],
    [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)],
    [math.sin(-2), math.sin(-0.02), math.cos(-2), math.cos(-0.02)],
  ]
  np.testing.assert_allclose(got, want, atol=1e-6)


def test_learned_rows_clamped():
  np.testing.assert_array_equal(
    encodings.learned(jnp.array([0, 5]), jnp.eye(3)), [[1, 0, 0], [0, 0, 1]]
  )


def test_alibi_slopes():
  np.testing.assert_allclose(encodings.alibi_slopes(8), [2.0**-k for k in range(1, 9)])
  # Non-power of two: slopes of 4 heads, then every other slope of the 8-head list.
  np.testing.assert_allclose(
    encodings.alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
  )


def test_alibi_matrix():
  want = np.array([[0, -1, -2, -3], [-0.5, 0, -1, -2], [-1.5, -0.5, 0, -1], [-2.5, -1.5, -0.5, 0]])
  slopes = encodings.alibi_slopes(8)
  got = encodings.alibi_bias(jnp.arange(4), jnp.arange(4), slopes)
  assert got.shape == (8, 4, 4)
  for h, slope in enumerate(slopes):
    np.testing.assert_allclose(got[h], slope * want)
  # Some query rows (one decoding step, a block) are those rows of the whole.
  np.testing.assert_array_equal(
    encodings.alibi_bias(jnp.arange(1, 3), jnp.arange(4), slopes), got[:, 1:3]
  )


def press_alibi(num_queries, num_keys, slopes, distance=lambda d: d):
  """Press et al. (2022), written out: query i attends to key j <= i with bias -m_h (i - j)."""
  bias = np.full((len(slopes), num_queries, num_keys), np.nan)
  for h, m in enumerate(slopes):
    for i in range(num_queries):
      for j in range(i + 1):
        bias[h, i, j] = -m * distance(i - j)
  return bias


def test_causal_alibi_is_press_et_al():
  slopes = encodings.alibi_slopes(4)
  got = np.asarray(encodings.alibi_bias(jnp.arange(6), jnp.arange(6), slopes, causal=True))
  want = press_alibi(6, 6, slopes)
  visible = ~np.isnan(want)
  np.testing.assert_allclose(got[visible], want[visible], rtol=1e-6)
  np.testing.assert_allclose(
    encodings.alibi_bias(jnp.arange(4), jnp.arange(4), np.ones(1), causal=True)[0, 3],
    [-3, -2, -1, 0],
  )
  # Randomized: the drawn distance of each offset, and still nothing on the diagonal.
  table = np.array([0, 2, 3, 7, 9, 12])
  got = np.asarray(
    encodings.alibi_bias(
      jnp.arange(6), jnp.arange(6), slopes, causal=True, distances=jnp.asarray(table)
    )
  )
  want = press_alibi(6, 6, slopes, lambda d: table[d])
  np.testing.assert_allclose(got[visible], want[visible], rtol=1e-6)


def test_randomized_alibi_uses_distance_table():
  # The reference's ALiBi: with distances q = [0, 1, 4, 6, 10] row 0 is 0 -1 -4 -6 -10 and row
  # 2 is -3.5 -0.5 0 -1 -4 (÷ slope).
  got = encodings.alibi_bias(
    jnp.arange(5), jnp.arange(5), np.ones(1, np.float32), distances=jnp.array([0, 1, 4, 6, 10])
  )
  np.testing.assert_allclose(got[0, 0], [0, -1, -4, -6, -10])
  np.testing.assert_allclose(got[0, 2], [-3.5, -0.5, 0, -1, -4])


def test_rope_two_positions_by_hand():
  # K = 4: f = [1, 0.01]; pairs (x0, x1) and (x2, x3) rotate by p·f_m.
  x = jnp.array([[[1.0, 2.0, 3.0, 4.0]], [[1.0, 2.0, 3.0, 4.0]]])  # [T=2, H=1, K=4]
  got = encodings.apply_rope(x, jnp.array([0, 1]))[:, 0]
  c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)
  want = [[1, 2, 3, 4], [1 * c1 - 2 * s1, 2 * c1 + 1 * s1, 3 * c2 - 4 * s2, 4 * c2 + 3 * s2]]
  np.testing.assert_allclose(got, want, atol=1e-6)


def test_relative_bias_by_brute_force():
  keys = jax.random.split(jax.random.key(0), 5)
  t, h, d = 5, 2, 4
  q, k = (jax.random.normal(kk, (1, t, h, d)) for kk in keys[:2])
  u, v = jax.random.normal(keys[2], (2, h, d))
  w_r = jax.random.normal(keys[3], (h * d, h * d))
  offsets = encodings.relative_offset_positions(t)
  got = encodings.relative_bias(
    q, k, jnp.arange(t), jnp.arange(t), u=u, v=v, w_r=w_r, offset_positions=offsets
  )
  want = np.zeros((h, t, t))
  for i in range(t):
    for j in range(t):
      r = (encodings.sinusoid(jnp.array(j - i), h * d) @ w_r).reshape(h, d)
      want[:, i, j] = (np.sum(u * k[0, j], -1) + np.sum((q[0, i] + v) * r, -1)) / math.sqrt(d)
  np.testing.assert_allclose(got[0], want, atol=1e-4)


def test_relative_offset_positions_example():
  # The docstring example: T = 3, r = [0, 2, 5], L = 8.
  r = jnp.array([0, 2, 5])
  np.testing.assert_array_equal(encodings.relative_offset_positions(3), [-2, -1, 0, 1, 2])
  np.testing.assert_array_equal(
    encodings.relative_offset_positions(3, distances=r, max_position=8), [-5, -2, 0, 2, 5]
  )
  np.testing.assert_array_equal(
    encodings.relative_offset_positions(3, distances=r, mode='reference', max_position=8),
    [3, 6, 7, 7, 7],
  )


def _geometric_brute_force(s, valid):
  """O(T³) stick-breaking straight from the definition (Csordás et al. 2022)."""
  t = s.shape[-1]
  p = 1 / (1 + np.exp(-s))
  out = np.zeros_like(s)
  for i in range(s.shape[0]):
    for j in range(t):
      if i == j or not valid[j]:
        continue
      out[i, j] = p[i, j]
      for k in range(t):
        closer = abs(k - i) < abs(j - i) or (j < i and k == 2 * i - j)
        if k != i and valid[k] and closer:
          out[i, j] *= 1 - p[i, k]
  return out


def test_geometric_matches_brute_force_and_rows_at_most_one():
  rng = np.random.default_rng(0)
  for t in (1, 2, 5, 9):
    s = rng.normal(size=(t, t)) * 2
    valid = np.arange(t) < max(1, t - 2)
    got = np.asarray(
      encodings.geometric_weights(
        jnp.asarray(s), jnp.arange(t), jnp.arange(t), jnp.asarray(valid)[None, :]
      )
    )
    np.testing.assert_allclose(got, _geometric_brute_force(s, valid), atol=1e-6)
    assert np.all(got.sum(-1) <= 1 + 1e-6) and np.all(got >= 0)
    assert np.all(got[:, ~valid] == 0) and np.all(np.diag(got) == 0)
  # Padded keys (invalid) do not change the real rows.
  s = rng.normal(size=(16, 16)) * 2
  valid = np.arange(16) < 7
  got = encodings.geometric_weights(
    jnp.asarray(s[:9]), jnp.arange(9), jnp.arange(16), jnp.asarray(valid)[None, :]
  )
  np.testing.assert_allclose(got, _geometric_brute_force(s, valid)[:9], atol=1e-6)


def test_geometric_picks_nearest_matching_key():
  t = 10
  matches = np.zeros(t, bool)
  matches[[1, 4, 8]] = True
  s = np.where(matches[None, :], 8.0, -8.0) * np.ones((t, 1))
  weights = np.asarray(
    encodings.geometric_weights(
      jnp.asarray(s), jnp.arange(t), jnp.arange(t), jnp.ones((1, t), bool)
    )
  )
  best = weights.argmax(-1)
  assert best[5] == 4  # distance 1 to the left beats distance 3 to the right
  assert best[6] == 8  # a tie at distance 2: the right key wins
  assert best[2] == 1 and best[9] == 8
  assert weights[5, 4] > 0.99


def test_abacus_positions_by_hand():
  # `98+385=27` and `5*0=` (ids: digits 0-9, '+' 10, '*' 12, '=' 13): each number counts
  # from its first (least significant) digit; other tokens get 0.
  tokens = jnp.array([[9, 8, 10, 3, 8, 5, 13, 2, 7], [5, 12, 0, 13, 13, 13, 13, 13, 13]])
  got = encodings.embeddings.abacus_positions(tokens, tokens < 10)
  np.testing.assert_array_equal(got, [[1, 2, 0, 1, 2, 3, 0, 1, 2], [1, 0, 1, 0, 0, 0, 0, 0, 0]])


def test_abacus_embedding_shares_one_offset_in_training_and_none_at_evaluation():
  module = encodings.embeddings.AbacusEmbedding(width=4, max_position=20, abacus_offset=5)
  tokens = jnp.array([[1, 2, 10, 3, 4, 5], [7, 10, 8, 8, 8, 8]])
  variables = module.init({'params': jax.random.key(0)}, 6, 6, tokens, True)
  table = variables['params']['embedding']
  evaluation = module.apply(variables, 6, 6, tokens, True)
  np.testing.assert_array_equal(evaluation[0], table[jnp.array([1, 2, 0, 1, 2, 3])])
  for seed in range(4):
    trained = module.apply(variables, 6, 6, tokens, False, rngs={'noise': jax.random.key(seed)})
    # The row read for index 1 of the first number reveals k; every digit is shifted by it.
    k = int(np.argmin(np.abs(table - trained[0, 0]).sum(-1))) - 1
    assert 0 <= k <= 5
    want = jnp.where(jnp.array([1, 2, 0, 1, 2, 3]) > 0, jnp.array([1, 2, 0, 1, 2, 3]) + k, 0)
    np.testing.assert_allclose(trained[0], table[want])
    np.testing.assert_allclose(
      trained[1], table[jnp.array([1, 0, 1, 2, 3, 4]) + k * (jnp.array([1, 0, 1, 2, 3, 4]) > 0)]
    )


def test_fire_against_a_direct_numpy_formula():
  rng = np.random.default_rng(0)
  w1, b1 = rng.normal(size=(1, 32)), rng.normal(size=32)
  w2, b2 = rng.normal(size=(32, 3)), rng.normal(size=3)
  mlp = lambda x: encodings.biases.fire_mlp(
    x, (jnp.asarray(w1), jnp.asarray(w2)), (jnp.asarray(b1), jnp.asarray(b2))
  )
  c, threshold = 0.3, 4.0
  q_pos, k_pos = np.arange(7), np.arange(7)
  got = encodings.biases.fire_bias(
    jnp.asarray(q_pos), jnp.asarray(k_pos), mlp, c=c, threshold=threshold
  )
  psi = lambda x: np.log(abs(c * x) + 1)
  want = np.zeros((3, 7, 7))
  for i in q_pos:
    for j in k_pos:
      x = np.sign(i - j) * psi(abs(i - j)) / (psi(max(threshold, i)) + 1e-6)
      want[:, i, j] = np.maximum(x * w1[0] + b1, 0) @ w2 + b2
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------
# Invariants.
# ------------------------------------------------------------------------------------------


def _depends_only_on_offset(logits):
  """logits [T, T]: every diagonal (fixed j - i) is constant."""
  t = logits.shape[-1]
  for offset in range(-t + 1, t):
    diag = np.diagonal(np.asarray(logits), offset)
    np.testing.assert_allclose(diag, diag[0], atol=1e-4)


def test_rope_logits_depend_only_on_offset():
  q, k = jax.random.normal(jax.random.key(0), (2, 1, 1, 8))
  t = 9
  qr = encodings.apply_rope(jnp.broadcast_to(q, (t, 1, 8)), jnp.arange(t))[:, 0]
  kr = encodings.apply_rope(jnp.broadcast_to(k, (t, 1, 8)), jnp.arange(t))[:, 0]
  _depends_only_on_offset(qr @ kr.T)


def test_relative_bias_depends_only_on_offset():
  t, h, d = 7, 2, 4
  keys = jax.random.split(jax.random.key(1), 5)
  q = jnp.broadcast_to(jax.random.normal(keys[0], (1, 1, h, d)), (1, t, h, d))
  k = jnp.broadcast_to(jax.random.normal(keys[1], (1, 1, h, d)), (1, t, h, d))
  u, v = jax.random.normal(keys[3], (2, h, d))
  bias = encodings.relative_bias(
    q,
    k,
    jnp.arange(t),
    jnp.arange(t),
    u=u,
    v=v,
    w_r=jax.random.normal(keys[2], (h * d, h * d)),
    offset_positions=encodings.relative_offset_positions(t),
  )
  for head in range(h):
    _depends_only_on_offset(bias[0, head])


def test_random_positions_sorted_unique_in_range():
  for seed in range(5):
    pos = np.asarray(encodings.random_positions(jax.random.key(seed), 40, max_position=50))
    assert np.all(np.diff(pos) > 0) and pos.min() >= 0 and pos.max() < 50
  dist = np.asarray(encodings.random_distances(jax.random.key(0), 10, max_position=100))
  assert dist[0] == 0 and np.all(np.diff(dist) > 0) and dist.max() < 100


def test_random_positions_padded_equals_exact():
  key = jax.random.key(3)

  @jax.jit
  def padded(length):
    return encodings.random_positions(key, 12, max_position=30, length=length)

  for length in (1, 5, 12):
    exact = encodings.random_positions(key, length, max_position=30)
    np.testing.assert_array_equal(padded(length)[:length], exact)
    np.testing.assert_array_equal(
      encodings.random_distances(key, 12, max_position=30, length=length)[:length],
      encodings.random_distances(key, length, max_position=30),
    )


def test_random_positions_too_long_raises():
  with pytest.raises(ValueError, match='exceeds'):
    encodings.random_positions(jax.random.key(0), 11, max_position=10)


def test_random_positions_uniform_chi_square():
  # The 3rd smallest of a uniform 5-subset of {0..19} has P(m) = C(m,2) C(19-m,2) / C(20,5).
  n, big_l, t, rank = 20_000, 20, 5, 2
  keys = jax.random.split(jax.random.key(42), n)
  draws = jax.vmap(lambda k: encodings.random_positions(k, t, max_position=big_l))(keys)
  observed = np.bincount(np.asarray(draws[:, rank]), minlength=big_l)
  m = np.arange(big_l)
  expected = (
    np.array([math.comb(x, rank) * math.comb(big_l - 1 - x, t - 1 - rank) for x in m])
    / math.comb(big_l, t)
    * n
  )
  keep = expected > 0
  assert observed[~keep].sum() == 0
  _, p_value = stats.chisquare(observed[keep], expected[keep])
  assert p_value > 1e-3, p_value
  # Every value is equally likely to be drawn at all: T / L.
  counts = np.bincount(np.asarray(draws).ravel(), minlength=big_l)
  _, p_value = stats.chisquare(counts)
  assert p_value > 1e-3, p_value


# ------------------------------------------------------------------------------------------
# The modules: parameters, draws, options.
# ------------------------------------------------------------------------------------------


def _weights(name, q, k, noise_seed=0, params=None, x=None, **options):
  """The attention matrix [B, H, T, T] of encoding `name` (reference backend), its params."""
  b, t, h, d = q.shape
  resolved, _ = encodings.resolve_options(name, options)
  module = encodings.get(name).attention(max_position=64, num_heads=h, head_dim=d, **resolved)
  x = jnp.zeros((b, t, h * d)) if x is None else x
  rngs = {'params': jax.random.key(0), 'noise': jax.random.key(noise_seed)}
  if params is None:
    params = module.init(rngs, t, t, x).get('params', {})
  enc = module.apply({'params': params}, t, t, x, rngs=rngs)
  eye = jnp.broadcast_to(jnp.eye(t)[None, :, None, :], (b, t, h, t))  # v = one-hot keys
  out = attention.attend(
    q, k, eye, enc, key_valid=jnp.ones(t, bool), causal=False, impl='reference'
  )
  return out.transpose(0, 2, 1, 3), params


@pytest.mark.parametrize('mode', ['reference', 'symmetric'])
def test_randomized_relative_modes(mode):
  # k = 0 leaves only the position term (q + v)·R(j - i) in the logits: in the released
  # code's mode every key at or right of the query gets the same weight.
  q = jax.random.normal(jax.random.key(0), (1, 6, 2, 4))
  weights, _ = _weights('randomized_relative', q, jnp.zeros_like(q), relative_mode=mode)
  for i in range(5):
    right = np.asarray(weights[0, :, i, i:])
    assert np.allclose(right, right[:, :1], rtol=1e-5) == (mode == 'reference'), (i, right)


@pytest.mark.parametrize('name', ['randomized_alibi', 'randomized_rotary', 'randomized_relative'])
def test_randomized_draws_shared_by_batch_differ_by_call(name):
  q = jnp.broadcast_to(jax.random.normal(jax.random.key(0), (1, 6, 2, 4)), (3, 6, 2, 4))
  w0, params = _weights(name, q, q, noise_seed=0)
  np.testing.assert_allclose(w0[0], w0[2], atol=1e-6)  # one draw for the whole batch
  np.testing.assert_array_equal(w0, _weights(name, q, q, 0, params)[0])
  assert not np.allclose(w0, _weights(name, q, q, 1, params)[0])


def test_randomized_rotary_shares_positions_for_q_and_k():
  # K = 2 and q_i = k_j = c: logit_ij = |c|² cos(p_i - p'_j) / sqrt(2), largest on the
  # diagonal iff q and k use the same positions p = p'.
  q = jnp.full((1, 6, 1, 2), 3.0)
  for seed in range(3):
    weights, _ = _weights('randomized_rotary', q, q, noise_seed=seed)
    np.testing.assert_array_equal(np.argmax(weights[0, 0], -1), np.arange(6))


def test_layers_draw_independently():
  from posenc.models import encoder as encoder_lib

  m = encoder_lib.Encoder(
    vocab_size=2,
    num_classes=2,
    encoding='randomized_alibi',
    num_layers=2,
    d_model=8,
    num_heads=2,
    ffn_size=8,
    max_position=100,
  )
  tokens = jnp.zeros((1, 6), jnp.int32)
  variables = m.init(
    encoder_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(6), deterministic=True
  )
  _, state = m.apply(
    variables,
    tokens,
    jnp.int32(6),
    deterministic=True,
    rngs={'noise': jax.random.key(1)},
    capture_intermediates=True,
    mutable=['intermediates'],
  )
  draws = [
    state['intermediates'][f'layer_{i}']['attention']['encoding']['__call__'][0].params['distances']
    for i in range(2)
  ]
  assert not np.array_equal(draws[0], draws[1])


@pytest.mark.parametrize('side', ['left', 'right'])
def test_geometric_directional_tells_left_from_right(side):
  t, h, d = 7, 2, 4
  q = jnp.zeros((1, t, h, d))
  _, params = _weights('geometric_directional', q, q)
  params = jax.tree.map(jnp.zeros_like, params)
  # Bias layout per head: (left, right). Favour one side strongly.
  params['direction']['bias'] = jnp.tile(
    jnp.array([5.0, -5.0] if side == 'left' else [-5.0, 5.0]), h
  )
  params['gamma'], params['rho'] = jnp.ones(()), jnp.ones(())
  w, _ = _weights('geometric_directional', q, q, params=params, x=jnp.ones((1, t, h * d)))
  w = np.asarray(w[0, 0])
  i = 3
  near, far = (i - 1, i + 1) if side == 'left' else (i + 1, i - 1)
  assert w[i, near] > 0.9 and w[i, far] < 0.01


def test_visible_keys_only():
  got = reference.visible(jnp.arange(2), jnp.arange(3), jnp.array([1, 1, 0], bool), False)
  np.testing.assert_array_equal(got[0, 0], [[True, True, False]] * 2)


# ------------------------------------------------------------------------------------------
# Registry.
# ------------------------------------------------------------------------------------------


def test_registry_holds_every_name_in_the_names_module_s_order():
  assert tuple(encodings.ENCODINGS) == encoding_names.ALL
  assert encodings.NAMES == encoding_names.STUDY and len(encodings.NAMES) == 13
  assert encodings.RECENT == encoding_names.RECENT
  assert set(encoding_names.ALL) == {
    *encoding_names.STUDY,
    *encoding_names.ARITHMETIC,
    *encoding_names.RECENT,
    *encoding_names.FAMILIES,
    *map(encoding_names.twin, encoding_names.FAMILIES),
  }
  # Each twin is its encoding's, and nothing else draws.
  for name, spec in encodings.ENCODINGS.items():
    assert spec.randomized == (name in map(encoding_names.twin, encoding_names.TWINS)), name
  with pytest.raises(ValueError, match="'nope'.*randomized_rotary"):
    encodings.get('nope')
  kinds = {n: e.kind for n, e in encodings.ENCODINGS.items()}
  assert kinds['sin_cos'] == 'embedding' and kinds['rotary'] == 'rotation'
  assert kinds['alibi'] == kinds['relative'] == 'bias' and kinds['geometric'] == 'geometric'


def test_the_names_module_needs_neither_jax_nor_flax():
  code = (
    'import sys; from posenc import encoding_names; '
    "assert not {'jax', 'flax'} & set(sys.modules), sorted(sys.modules)"
  )
  subprocess.run([sys.executable, '-c', code], check=True, timeout=60)


def test_combinations():
  combo = encodings.get('sin_cos+alibi')
  assert combo.embedding is encodings.ENCODINGS['sin_cos'].embedding
  assert combo.attention is encodings.ENCODINGS['alibi'].attention and combo.kind == 'bias'
  assert encodings.get('randomized_rotary+learned').randomized
  assert encodings.resolve_options('sin_cos+relative', (('max_time', 500.0),)) == (
    {'max_time': 500.0},
    {'max_time': 500.0},
  )
  for bad in (
    'sin_cos+learned',
    'alibi+rotary',
    'sin_cos+sin_cos',
    'sin_cos+alibi+rotary',
    'sin_cos+nope',
  ):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
      encodings.get(bad)


def test_resolve_options():
  attention_options, embedding = encodings.resolve_options(
    'randomized_relative', (('relative_mode', 'reference'),)
  )
  assert attention_options['relative_mode'] == 'reference' and embedding == {}
  assert encodings.resolve_options('randomized_relative')[0]['relative_mode'] == 'symmetric'
  # Options of other encodings are ignored; unknown keys and bad values raise, in one line.
  assert encodings.resolve_options('none', (('relative_mode', 'reference'),)) == ({}, {})
  with pytest.raises(
    ValueError, match=r"unknown encoding option 'relativ_mode' \(did you mean 'relative_mode'\?\)"
  ):
    encodings.resolve_options('none', (('relativ_mode', 'reference'),))
  with pytest.raises(
    ValueError,
    match="encoding_options.relative_mode='clamped' must be one of 'symmetric', 'reference'$",
  ):
    encodings.resolve_options('randomized_relative', (('relative_mode', 'clamped'),))
  # A twin's own option is not its plain encoding's: ignored there, as another encoding's.
  assert encodings.resolve_options('relative', {'relative_mode': 'clamped'}) == (
    {'max_time': 10_000.0},
    {},
  )
  # Test-time options only when given.
  assert encodings.resolve_options('rotary', {'rope_factor': 2.0})[0] == {
    'max_time': 10_000.0,
    'rope_factor': 2.0,
  }
  with pytest.raises(ValueError, match=r"rope_scaling='x' must be one of 'none', 'pi'"):
    encodings.resolve_options('rotary', {'rope_scaling': 'x'})


@pytest.mark.parametrize('name', [n for n in encodings.ENCODINGS if n != 'none'])
def test_every_option_is_declared_with_a_valid_default_and_a_meaning(name):
  spec = encodings.get(name)
  defaults = {n: o.default for n, o in spec.options}
  for option_name, declared in spec.options:
    assert declared.doc and declared.part in ('embedding', 'attention')
    declared.check(option_name, declared.default, defaults)
  # A Linen module's fields have the declared defaults (the helpers fill them in).
  factory = spec.embedding or spec.attention
  if not isinstance(factory, encodings.define.Maker):
    fields = getattr(factory, 'func', factory).__dataclass_fields__
    for option_name in spec.embedding_options + spec.attention_options:
      assert fields[option_name].default == defaults[option_name], option_name


def test_every_built_in_says_what_it_is_and_cites_its_paper():
  keys = {}
  for name, record in encodings.ENCODINGS.items():
    assert record.about and record.papers, name
    for paper in record.papers:
      assert keys.setdefault(paper.key, paper) == paper, paper.key  # one record per key
      assert paper.bibtex().startswith(f'@{paper.kind}{{{paper.key},')
      assert paper.url.startswith('https://'), paper.key
  # A twin adds the randomized study; a combination joins its parts.
  twin = encodings.ENCODINGS['randomized_rotary']
  assert twin.papers == (*encodings.ENCODINGS['rotary'].papers, encodings.papers.RUOSS2023)
  both = encodings.get('sin_cos+alibi')
  assert both.papers == encodings.ENCODINGS['sin_cos'].papers + encodings.ENCODINGS['alibi'].papers
  assert encodings.papers.PRESS2022.cite == 'Press et al. 2022'
