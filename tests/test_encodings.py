"""Golden numbers and invariants of the positional encodings (posenc/encodings.py)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from posenc import encodings

# ------------------------------------------------------------------------------------------
# Golden numbers.
# ------------------------------------------------------------------------------------------


def test_sinusoid_table_by_hand():
  # D = 4: ω = [1, 10000^(-1/2)] = [1, 0.01]; concatenated sin | cos halves.
  got = encodings.sinusoid_table(jnp.array([0, 1, -2]), 4)
  want = [[0, 0, 1, 1],
          [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)],
          [math.sin(-2), math.sin(-0.02), math.cos(-2), math.cos(-0.02)]]
  np.testing.assert_allclose(got, want, atol=1e-6)


def test_alibi_slopes():
  np.testing.assert_allclose(encodings.alibi_slopes(8), [2.0**-k for k in range(1, 9)])
  # Non-power of two: slopes of 4 heads, then every other slope of the 8-head list.
  np.testing.assert_allclose(encodings.alibi_slopes(6),
                             [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])


def test_alibi_matrix():
  want = np.array([[0, -1, -2, -3], [-.5, 0, -1, -2], [-1.5, -.5, 0, -1], [-2.5, -1.5, -.5, 0]])
  got = encodings.alibi_bias(8, 4)
  assert got.shape == (8, 4, 4)
  for h, slope in enumerate(encodings.alibi_slopes(8)):
    np.testing.assert_allclose(got[h], slope * want)
  # A block of heads and query rows (as the model asks for it) is that part of the whole.
  block = encodings.alibi_bias(8, 4, heads=slice(3, 5), queries=slice(1, 3))
  np.testing.assert_array_equal(block, got[3:5, 1:3])


def test_randomized_alibi_uses_distance_table():
  # The reference's ALiBi: with distances q = [0, 1, 4, 6, 10] row 0 is 0 -1 -4 -6 -10 and row 2
  # is -3.5 -0.5 0 -1 -4 (÷ slope).
  got = encodings.alibi_bias(1, 5, distances=jnp.array([0, 1, 4, 6, 10])) / 2.0**-8
  np.testing.assert_allclose(got[0, 0], [0, -1, -4, -6, -10])
  np.testing.assert_allclose(got[0, 2], [-3.5, -0.5, 0, -1, -4])
  # A block of query rows is those rows of the whole matrix.
  rows = encodings.alibi_bias(1, 5, distances=jnp.array([0, 1, 4, 6, 10]),
                              queries=slice(2, 4)) / 2.0**-8
  np.testing.assert_array_equal(rows, got[:, 2:4])


def test_rel_shift_identity():
  t = 5
  x = jnp.broadcast_to(jnp.arange(2 * t), (3, t, 2 * t))
  i, j = np.arange(t)[:, None], np.arange(t)[None, :]
  np.testing.assert_array_equal(encodings.rel_shift(x)[1], t + j - i)


def test_rope_two_positions_by_hand():
  # K = 4: f = [1, 0.01]; pairs (x0, x1) and (x2, x3) rotate by p·f_m.
  x = jnp.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])  # [T=2, K=4]
  got = encodings.apply_rope(x, jnp.array([0, 1]))
  c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)
  want = [[1, 2, 3, 4], [1 * c1 - 2 * s1, 2 * c1 + 1 * s1, 3 * c2 - 4 * s2, 4 * c2 + 3 * s2]]
  np.testing.assert_allclose(got, want, atol=1e-6)


def test_randomized_relative_positions_example():
  # The docstring example: T = 3, r = [0, 2, 5], L = 8.
  key = _key_with_distances([0, 2, 5], 8)
  sym = encodings.randomized_relative_positions(key, 3, max_position=8)
  ref = encodings.randomized_relative_positions(key, 3, max_position=8, mode='reference')
  np.testing.assert_array_equal(sym, [-5, -5, -2, 0, 2, 5])
  np.testing.assert_array_equal(ref, [3, 3, 6, 7, 7, 7])


def _key_with_distances(want, max_position):
  for seed in range(10_000):
    key = jax.random.key(seed)
    got = encodings.random_distances(key, len(want), max_position=max_position)
    if list(np.asarray(got)) == want:
      return key
  raise AssertionError('no key found')


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
  q, k = jax.random.normal(jax.random.key(0), (2, 1, 8))
  t = 9
  qr = encodings.apply_rope(jnp.broadcast_to(q, (t, 8)), jnp.arange(t))
  kr = encodings.apply_rope(jnp.broadcast_to(k, (t, 8)), jnp.arange(t))
  _depends_only_on_offset(qr @ kr.T)


def test_relative_logits_depend_only_on_offset():
  t, h, d = 7, 2, 4
  keys = jax.random.split(jax.random.key(1), 5)
  q = jnp.broadcast_to(jax.random.normal(keys[0], (h, 1, 1, d)), (h, 1, t, d))  # [H,B,T,K]
  k = jnp.broadcast_to(jax.random.normal(keys[1], (h, 1, 1, d)), (h, 1, t, d))
  rel = jax.random.normal(keys[2], (h, 2 * t, d))
  u, v = jax.random.normal(keys[3], (2, h, d))
  logits = encodings.relative_logits(q, k, rel, u, v)
  for head in range(h):
    _depends_only_on_offset(logits[head, 0])


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
        encodings.random_distances(key, length, max_position=30))


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
  expected = np.array([math.comb(x, rank) * math.comb(big_l - 1 - x, t - 1 - rank)
                       for x in m]) / math.comb(big_l, t) * n
  keep = expected > 0
  assert observed[~keep].sum() == 0
  _, p_value = stats.chisquare(observed[keep], expected[keep])
  assert p_value > 1e-3, p_value
  # Every value is equally likely to be drawn at all: T / L.
  counts = np.bincount(np.asarray(draws).ravel(), minlength=big_l)
  _, p_value = stats.chisquare(counts)
  assert p_value > 1e-3, p_value


def _hook_weights(module, q, k, noise_seed=0, key_valid=None):
  """Normalized attention weights [H, B, T, T] of a hook (q, k [H, B, T, K]); variables."""
  key_valid = jnp.ones(q.shape[2], bool) if key_valid is None else key_valid
  rngs = {'params': jax.random.key(0), 'noise': jax.random.key(noise_seed)}
  scores, variables = module.init_with_output(
      rngs, q, k, inputs=jnp.zeros((q.shape[1], q.shape[2], 8)), key_valid=key_valid,
      causal=False)
  return encodings.attention_matrix(scores), variables


@pytest.mark.parametrize('mode', ['reference', 'symmetric'])
def test_randomized_relative_modes(mode):
  # k = 0 leaves only the position term (q + v)·rel[j - i] in the logits.
  q = jax.random.normal(jax.random.key(0), (2, 1, 6, 4))  # [H, B, T, K]
  k = jnp.zeros_like(q)
  module = encodings.RelativeAttention(max_position=64, randomized=True, relative_mode=mode)
  weights, _ = _hook_weights(module, q, k)
  for i in range(6):
    right = np.asarray(weights[:, 0, i, i:])  # keys at or right of the query
    constant = np.allclose(right, right[:, :1], rtol=1e-5)
    if i < 5:
      assert constant == (mode == 'reference'), (i, right)


@pytest.mark.parametrize('module', [
    encodings.AlibiAttention(max_position=64, randomized=True),
    encodings.RotaryAttention(max_position=64, randomized=True),
    encodings.RelativeAttention(max_position=64, randomized=True),
])
def test_randomized_draws_shared_by_batch_differ_by_call(module):
  q = jnp.broadcast_to(jax.random.normal(jax.random.key(0), (2, 1, 6, 4)), (2, 3, 6, 4))
  w0, variables = _hook_weights(module, q, q, noise_seed=0)
  np.testing.assert_allclose(w0[:, 0], w0[:, 2], atol=1e-6)  # one draw for the whole batch
  w0_again, _ = _hook_weights(module, q, q, noise_seed=0)
  w1, _ = _hook_weights(module, q, q, noise_seed=1)
  np.testing.assert_array_equal(w0, w0_again)
  assert not np.allclose(w0, w1)


def test_randomized_rotary_shares_positions_for_q_and_k():
  # K = 2 and q_i = k_j = c: logit_ij = |c|² cos(p_i - p'_j) / sqrt(2), largest on the
  # diagonal iff q and k use the same positions p = p'. Weights are exp(logit - row max).
  q = jnp.full((1, 1, 6, 2), 3.0)
  module = encodings.RotaryAttention(max_position=1000, randomized=True)
  for seed in range(3):
    weights = module.apply({}, q, q, inputs=None, key_valid=jnp.ones(6, bool),
                           causal=False, rngs={'noise': jax.random.key(seed)}).full()
    np.testing.assert_allclose(jnp.diagonal(weights[0, 0]), 1.0, rtol=1e-6)
    assert np.all(np.asarray(weights[0, 0]) <= 1.0)


def test_layers_draw_independently():
  from posenc import model as model_lib
  # Two layers of randomized ALiBi with q = k = 0: weights are the softmax of the bias only.
  captured = []
  m = model_lib.Transformer(2, 2, 'randomized_alibi', num_layers=2, d_model=8, num_heads=2,
                            ffn_size=8, max_position=100)
  tokens = jnp.zeros((1, 6), jnp.int32)
  variables = m.init(model_lib.init_rngs(jax.random.key(0)), tokens, jnp.int32(6),
                     deterministic=True)
  _, state = m.apply(variables, tokens, jnp.int32(6), deterministic=True,
                     rngs={'noise': jax.random.key(1)}, capture_intermediates=True,
                     mutable=['intermediates'])
  inter = state['intermediates']
  for layer in range(2):
    weights = inter[f'layer_{layer}']['attention']['encoding']['__call__'][0].full()
    captured.append(np.asarray(weights))
  assert not np.allclose(captured[0], captured[1])


def test_geometric_matches_brute_force_and_rows_at_most_one():
  rng = np.random.default_rng(0)
  for t in (1, 2, 5, 9):
    s = rng.normal(size=(t, t)) * 2
    valid = np.arange(t) < max(1, t - 2)
    got = np.asarray(encodings.geometric_weights(jnp.asarray(s)[None, None],
                                                 jnp.asarray(valid)))[0, 0]
    np.testing.assert_allclose(got, _geometric_brute_force(s, valid), atol=1e-6)
    assert np.all(got.sum(-1) <= 1 + 1e-6) and np.all(got >= 0)
    assert np.all(got[:, ~valid] == 0) and np.all(np.diag(got) == 0)


@pytest.mark.parametrize('causal', [False, True])
def test_geometric_query_blocks_equal_whole_rows(causal):
  rng = np.random.default_rng(2)
  t, padded = 11, 14
  s = jnp.asarray(rng.normal(size=(2, t, padded)) * 2, jnp.float32)
  valid = jnp.asarray(np.arange(padded) < t - 1)
  whole = encodings.geometric_weights(s, valid, causal=causal)
  blocks = [encodings.geometric_weights(s[:, a:a + 4], valid, causal=causal, first_query=a)
            for a in range(0, t, 4)]
  np.testing.assert_allclose(np.concatenate(blocks, 1), whole, atol=2e-6)


@pytest.mark.parametrize('first_query,q,t', [
    (0, 1, 1), (0, 2, 2), (0, 3, 5), (0, 7, 7), (0, 40, 64), (3, 2, 5), (6, 1, 7), (30, 10, 64)])
def test_mirror_reflects_each_row_about_its_query(first_query, q, t):
  cum = np.arange(q * t, dtype=np.float32).reshape(q, t) + 1
  want = [[0 if 2 * (first_query + r) - j < 0 else cum[r, min(2 * (first_query + r) - j, t - 1)]
           for j in range(t)] for r in range(q)]
  got = encodings._mirror(jnp.asarray(cum), first_query)
  np.testing.assert_array_equal(np.asarray(got), want)


def test_geometric_with_padded_keys_equals_square():
  # GeometricAttention pads keys to a multiple of the cumsum block; padding keys are
  # invalid and must not change the real rows.
  rng = np.random.default_rng(1)
  t, padded = 9, 16
  s = rng.normal(size=(padded, padded)) * 2
  valid = np.arange(padded) < t - 2
  square = _geometric_brute_force(s, valid)[:t]
  got = np.asarray(encodings.geometric_weights(jnp.asarray(s[:t])[None], jnp.asarray(valid)))
  np.testing.assert_allclose(got[0], square, atol=1e-6)
  assert encodings._padded_keys(1000) == 1024 and encodings._padded_keys(40) == 40


def _geometric_brute_force(s, valid):
  """O(T³) stick-breaking straight from the definition (Csordás et al. 2022)."""
  t = s.shape[-1]
  p = 1 / (1 + np.exp(-s))
  out = np.zeros_like(s)
  for i in range(t):
    for j in range(t):
      if i == j or not valid[j]:
        continue
      out[i, j] = p[i, j]
      for k in range(t):
        closer = abs(k - i) < abs(j - i) or (j < i and k == 2 * i - j)
        if k != i and valid[k] and closer:
          out[i, j] *= 1 - p[i, k]
  return out


def test_geometric_picks_nearest_matching_key():
  t = 10
  matches = np.zeros(t, bool)
  matches[[1, 4, 8]] = True
  s = np.where(matches[None, :], 8.0, -8.0) * np.ones((t, 1))
  weights = np.asarray(encodings.geometric_weights(jnp.asarray(s)[None, None],
                                                   jnp.ones(t, bool)))[0, 0]
  best = weights.argmax(-1)
  assert best[5] == 4  # distance 1 to the left beats distance 3 to the right
  assert best[6] == 8  # a tie at distance 2: the right key wins
  assert best[2] == 1 and best[9] == 8
  assert weights[5, 4] > 0.99


@pytest.mark.parametrize('side', ['left', 'right'])
def test_geometric_directional_tells_left_from_right(side):
  t, h, d = 7, 2, 4
  q = jnp.zeros((h, 1, t, d))  # [H, B, T, K]
  module = encodings.GeometricAttention(directional=True)
  _, variables = _hook_weights(module, q, q)
  params = jax.tree_util.tree_map(jnp.zeros_like, variables['params'])
  # Bias layout per head: (left, right). Favour one side strongly.
  bias = jnp.array([5.0, -5.0] if side == 'left' else [-5.0, 5.0])
  params['direction']['bias'] = jnp.tile(bias, h)
  params['gamma'] = jnp.ones(())
  params['rho'] = jnp.ones(())
  weights = module.apply({'params': params}, q, q, inputs=jnp.ones((1, t, 8)),
                         key_valid=jnp.ones(t, bool), causal=False).full()
  w = np.asarray(weights[0, 0])
  i = 3
  if side == 'left':
    assert w[i, i - 1] > 0.9 and w[i, i + 1] < 0.01
  else:
    assert w[i, i + 1] > 0.9 and w[i, i - 1] < 0.01


# ------------------------------------------------------------------------------------------
# Registry.
# ------------------------------------------------------------------------------------------


def test_registry():
  assert encodings.NAMES == (
      'none', 'sin_cos', 'relative', 'alibi', 'rotary', 'learned', 'randomized_sin_cos',
      'randomized_relative', 'randomized_alibi', 'randomized_rotary', 'randomized_learned',
      'geometric', 'geometric_directional')
  assert set(encodings.ENCODINGS) == set(encodings.NAMES)
  with pytest.raises(ValueError, match="'nope'.*randomized_rotary"):
    encodings.get('nope')


def test_resolve_options():
  attention, embedding = encodings.resolve_options('randomized_relative',
                                                   (('relative_mode', 'reference'),))
  assert attention['relative_mode'] == 'reference' and embedding == {}
  assert encodings.resolve_options('randomized_relative')[0]['relative_mode'] == 'symmetric'
  # Options of other encodings are ignored; unknown keys and bad modes raise.
  assert encodings.resolve_options('none', (('relative_mode', 'reference'),)) == ({}, {})
  with pytest.raises(ValueError, match='unknown encoding options'):
    encodings.resolve_options('none', (('relativ_mode', 'reference'),))
  with pytest.raises(ValueError, match='relative_mode'):
    encodings.resolve_options('randomized_relative', (('relative_mode', 'clamped'),))


def test_rel_shift_query_block():
  # Queries 1..2 of T = 4 take columns 1..6 of the [2T] table (relative positions -3..2).
  t, queries = 4, slice(1, 3)
  window = encodings.relative_window(t, queries)
  assert (window.start, window.stop) == (1, 7)
  columns = np.arange(2 * t)[window]  # the table column each window column holds
  x = np.broadcast_to(columns - t, (2, len(columns)))  # the relative position of each
  i = np.arange(1, 3)[:, None]
  j = np.arange(t)[None, :]
  np.testing.assert_array_equal(encodings.rel_shift(jnp.asarray(x), num_keys=t), j - i)


def test_relative_position_logits_custom_vjp_matches_autodiff():
  keys = jax.random.split(jax.random.key(0), 3)
  qv = jax.random.normal(keys[0], (2, 3, 5, 4))  # [H, B, T, K]
  rel = jax.random.normal(keys[1], (2, 10, 4))
  g = jax.random.normal(keys[2], (2, 3, 5, 5))
  plain = lambda qv, rel: encodings.rel_shift(jnp.einsum('hbik,hck->hbic', qv, rel))
  out, vjp = jax.vjp(encodings.relative_position_logits, qv, rel)
  want_out, want_vjp = jax.vjp(plain, qv, rel)
  np.testing.assert_allclose(out, want_out, rtol=1e-6)
  for got, want in zip(vjp(g), want_vjp(g)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(encodings.rel_unshift(jnp.array([[1., 2.], [3., 4.]])),
                                [[0, 0, 1, 2], [0, 3, 4, 0]])
  # A block of Q = 2 queries against T = 5 keys.
  rel_block = rel[:, :7]
  plain = lambda qv, rel: encodings.rel_shift(jnp.einsum('hbik,hck->hbic', qv, rel), 5)
  out, vjp = jax.vjp(encodings.relative_position_logits, qv[:, :, :2], rel_block)
  want_out, want_vjp = jax.vjp(plain, qv[:, :, :2], rel_block)
  np.testing.assert_allclose(out, want_out, rtol=1e-6)
  for got, want in zip(vjp(g[:, :, :2]), want_vjp(g[:, :, :2])):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_take_heads_static_slice_or_traced_index():
  x = jnp.arange(24.0).reshape(4, 2, 3)
  np.testing.assert_array_equal(encodings.take_heads(x, slice(1, 3)), x[1:3])
  got = jax.jit(encodings.take_heads)(x, jnp.int32(2))
  np.testing.assert_array_equal(got, x[2:3])
