"""Every attention backend equals the readable definition: one decoding step against the
whole sequence for every encoding, content attention's values and gradients, and the CPU
backend's pieces. Every encoding's values and gradients on each backend are the conformance
check's (tests/test_conformance.py)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import attention
from posenc import encoding_names
from posenc import encodings
from posenc.attention import cpu_blocked
from posenc.attention import geometric_prefix
from posenc.attention import reference

B, T, H, K = 2, 9, 2, 4
LENGTH = 7  # real positions; the rest is padding


# The randomized twins of the bias families share their plain ones' function: two of them
# stand for the rest (the others run with -m slow).
TWINS = [
  encoding_names.twin(f)
  for f in encoding_names.FAMILIES
  if encoding_names.twin(f) not in ('randomized_type2', 'randomized_t5')
]


def attention_names(causal=True):
  """Every registry encoding with an attention part, plus content-only attention (in the
  bidirectional form: those not causal by definition)."""
  return ['none'] + [
    n if n not in TWINS else pytest.param(n, marks=pytest.mark.slow)
    for n, e in encodings.ENCODINGS.items()
    if e.attention is not None and (causal or not e.causal_only)
  ]


@functools.lru_cache(maxsize=None)
def setup(name, t=T, causal=False):
  """(module or None, params, q, k, v, x) for encoding `name` at sequence length t, in its
  causal or bidirectional form."""
  spec = encodings.get(name)
  keys = jax.random.split(jax.random.key(0), 5)
  q, k, v = (jax.random.normal(kk, (B, t, H, K)) for kk in keys[:3])
  x = jax.random.normal(keys[3], (B, t, H * K))
  if spec.attention is None:
    return None, {}, q, k, v, x
  options, _ = encodings.resolve_options(name)
  module = spec.attention(max_position=64, num_heads=H, head_dim=K, causal=causal, **options)
  params = module.init({'params': keys[4], 'noise': jax.random.key(7)}, t, LENGTH, x)
  params = jax.tree.map(
    lambda p: p + 0.3 * jax.random.normal(keys[4], p.shape), params.get('params', {})
  )  # away from the zero inits
  return module, params, q, k, v, x


def run(
  name, impl, params, q, k, v, x, *, causal, key_valid, q_idx=None, k_idx=None, block=4, keys_x=None
):
  """x: the layer input of the queries; keys_x: of every key (default x), for encodings
  that cache a feature of each key (`key_state`), as the model's cache does."""
  module = setup(name, q.shape[1] if q_idx is None else k.shape[1], causal)[0]
  if module is None:
    enc = encodings.AttentionEncoding('content', 'content')
  else:
    apply = lambda inputs: module.apply(
      {'params': params}, k.shape[1], jnp.sum(key_valid), inputs, rngs={'noise': jax.random.key(7)}
    )
    enc = apply(x)
    if enc.key_state:
      enc = enc.with_keys(apply(x if keys_x is None else keys_x).key_state)
  return attention.attend(
    q,
    k,
    v,
    enc,
    key_valid=key_valid,
    causal=causal,
    impl=impl,
    q_idx=q_idx,
    k_idx=k_idx,
    block=block,
  )


# Every backend equals `reference` in values and gradients for every encoding: the
# conformance check's `backends` invariant (tests/test_conformance.py, every built-in).


@pytest.mark.parametrize('impl', ['xla_fused', 'cpu_blocked'])
@pytest.mark.parametrize('causal', [False, True])
def test_content_attention_backend_equals_reference_values_and_gradients(impl, causal):
  # The same for attention without an encoding (the conformance check's n/a).
  _, params, q, k, v, x = setup('none', causal=causal)
  key_valid = jnp.arange(T) < LENGTH

  def loss(impl, q, k, v):
    out = run('none', impl, params, q, k, v, x, causal=causal, key_valid=key_valid)
    # Real rows only: padding rows average every key and are thrown away by the model.
    return jnp.sum(jnp.sin(out[:, :LENGTH])), out

  (want, want_out), want_grads = jax.value_and_grad(
    functools.partial(loss, 'reference'), argnums=(0, 1, 2), has_aux=True
  )(q, k, v)
  (got, got_out), got_grads = jax.jit(
    jax.value_and_grad(functools.partial(loss, impl), argnums=(0, 1, 2), has_aux=True)
  )(q, k, v)
  np.testing.assert_allclose(got_out[:, :LENGTH], want_out[:, :LENGTH], atol=2e-5)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  for g, w in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads)):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('impl', ['reference', 'xla_fused', 'cpu_blocked'])
@pytest.mark.parametrize('name', attention_names())
def test_one_decoding_step_equals_the_whole_sequence(name, impl):
  # Query t against keys 0..t of a causal sequence: row t of the whole sequence's output.
  _, params, q, k, v, x = setup(name, causal=True)
  key_valid = jnp.ones(T, bool)
  whole = run(name, 'reference', params, q, k, v, x, causal=True, key_valid=key_valid)
  for t in (0, 4, T - 1):
    step = run(
      name,
      impl,
      params,
      q[:, t : t + 1],
      k,
      v,
      x[:, t : t + 1],
      causal=True,
      key_valid=key_valid,
      q_idx=jnp.array([t]),
      k_idx=jnp.arange(T),
      keys_x=x,
    )
    np.testing.assert_allclose(step[:, 0], whole[:, t], atol=2e-5)


@pytest.mark.parametrize(
  'name',
  ['none', 'randomized_relative', 'alibi', 'geometric_directional', 'dape', 'stick_breaking'],
)
def test_cpu_blocks_on_long_sequences_equal_one_block(name):
  # Per-head query blocks (sequential heads for relative, ALiBi, geometric) give the same
  # function as one block, on a padded batch.
  key_valid = jnp.arange(T) < LENGTH
  for causal in (True,) if encodings.get(name).causal_only else (False, True):
    _, params, q, k, v, x = setup(name, causal=causal)
    whole = run(
      name, 'cpu_blocked', params, q, k, v, x, causal=causal, key_valid=key_valid, block=0
    )
    blocked = jax.jit(
      lambda p, q, k, v, x: run(
        name, 'cpu_blocked', p, q, k, v, x, causal=causal, key_valid=key_valid, block=3
      )
    )(params, q, k, v, x)
    np.testing.assert_allclose(blocked[:, :LENGTH], whole[:, :LENGTH], atol=2e-5)


def test_generic_cpu_path_serves_an_encoding_without_a_specialization():
  # A new encoding family runs on cpu_blocked through its readable functions.
  _, params, q, k, v, x = setup('alibi')
  key_valid = jnp.arange(T) < LENGTH
  module = setup('alibi')[0]
  enc = module.apply({'params': params}, T, LENGTH, x, rngs={'noise': jax.random.key(7)})
  renamed = encodings.AttentionEncoding('some_new_bias', enc.kind, bias=enc.bias)
  for causal in (False, True):
    want = attention.attend(q, k, v, enc, key_valid=key_valid, causal=causal, impl='reference')
    got = attention.attend(
      q, k, v, renamed, key_valid=key_valid, causal=causal, impl='cpu_blocked', block=4
    )
    np.testing.assert_allclose(got[:, :LENGTH], want[:, :LENGTH], atol=2e-5)


def test_auto_picks_by_platform():
  assert attention.resolve('auto', 'cpu') == 'cpu_blocked'
  assert attention.resolve('auto', 'gpu') == 'xla_fused'
  assert attention.resolve('auto', 'tpu') == 'xla_fused'
  assert attention.resolve('reference', 'tpu') == 'reference'
  with pytest.raises(ValueError, match="unknown attention impl 'fast'"):
    attention.resolve('fast')


def test_visible_mask():
  got = reference.visible(jnp.array([1]), jnp.arange(3), jnp.array([True, True, False]), True)
  np.testing.assert_array_equal(got, [[[[True, True, False]]]])
  # One query index and one key mask per sequence.
  got = reference.visible(
    jnp.array([[0], [2]]), jnp.arange(3), jnp.array([[True, True, True], [True, False, True]]), True
  )
  np.testing.assert_array_equal(got[:, 0, 0], [[True, False, False], [True, False, True]])


# ---------------------------------------------------------------------------------------
# cpu_blocked's pieces.


def test_attention_blocks_layout():
  blocks = cpu_blocked.attention_blocks(2, 10, 4)
  assert [(h.start, h.stop, q.start, q.stop) for h, q in blocks] == [
    (0, 1, 0, 3),
    (0, 1, 3, 7),
    (0, 1, 7, 10),
    (1, 2, 0, 3),
    (1, 2, 3, 7),
    (1, 2, 7, 10),
  ]
  assert cpu_blocked.attention_blocks(2, 4, 4) == [(slice(0, 2), slice(0, 4))]
  assert cpu_blocked.attention_blocks(2, 10, 0) == [(slice(0, 2), slice(0, 10))]


def test_rel_shift_identity_and_query_block():
  t = 5
  x = jnp.broadcast_to(jnp.arange(2 * t), (3, t, 2 * t))
  i, j = np.arange(t)[:, None], np.arange(t)[None, :]
  np.testing.assert_array_equal(cpu_blocked.rel_shift(x)[1], t + j - i)
  # Queries 1..2 of T = 4 take columns 1..6 of the [2T] table (relative positions -3..2).
  t, queries = 4, slice(1, 3)
  window = cpu_blocked.relative_window(t, queries)
  assert (window.start, window.stop) == (1, 7)
  x = np.broadcast_to(np.arange(2 * t)[window] - t, (2, 6))
  np.testing.assert_array_equal(
    cpu_blocked.rel_shift(jnp.asarray(x), num_keys=t),
    np.arange(t)[None, :] - np.arange(1, 3)[:, None],
  )


def test_relative_position_logits_custom_vjp_matches_autodiff():
  keys = jax.random.split(jax.random.key(0), 3)
  qv = jax.random.normal(keys[0], (2, 3, 5, 4))  # [H, B, T, K]
  rel = jax.random.normal(keys[1], (2, 10, 4))
  g = jax.random.normal(keys[2], (2, 3, 5, 5))
  for q_rows, table in ((5, rel), (2, rel[:, :7])):
    plain = lambda qv, rel: cpu_blocked.rel_shift(jnp.einsum('hbik,hck->hbic', qv, rel), 5)
    out, vjp = jax.vjp(cpu_blocked.relative_position_logits, qv[:, :, :q_rows], table)
    want_out, want_vjp = jax.vjp(plain, qv[:, :, :q_rows], table)
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    for got, want in zip(vjp(g[:, :, :q_rows]), want_vjp(g[:, :, :q_rows])):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(
    cpu_blocked.rel_unshift(jnp.array([[1.0, 2.0], [3.0, 4.0]])), [[0, 0, 1, 2], [0, 3, 4, 0]]
  )


def test_take_heads_static_slice_or_traced_index():
  x = jnp.arange(24.0).reshape(4, 2, 3)
  np.testing.assert_array_equal(cpu_blocked.take_heads(x, slice(1, 3)), x[1:3])
  np.testing.assert_array_equal(jax.jit(cpu_blocked.take_heads)(x, jnp.int32(2)), x[2:3])


@pytest.mark.parametrize(
  'first_query,q,t',
  [(0, 1, 1), (0, 2, 2), (0, 3, 5), (0, 7, 7), (0, 40, 64), (3, 2, 5), (6, 1, 7), (30, 10, 64)],
)
def test_mirror_reflects_each_row_about_its_query(first_query, q, t):
  cum = np.arange(q * t, dtype=np.float32).reshape(q, t) + 1
  want = [
    [
      0 if 2 * (first_query + r) - j < 0 else cum[r, min(2 * (first_query + r) - j, t - 1)]
      for j in range(t)
    ]
    for r in range(q)
  ]
  got = geometric_prefix.mirror(jnp.asarray(cum), first_query)
  np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize('causal', [False, True])
def test_geometric_prefix_sums_equal_the_readable_function(causal):
  rng = np.random.default_rng(2)
  t, padded = 11, 14  # keys padded (invalid) past the sequence, as cpu_blocked pads them
  s = jnp.asarray(rng.normal(size=(2, t, padded)) * 2, jnp.float32)
  valid = jnp.asarray(np.arange(padded) < t - 1)
  want = encodings.geometric_weights(
    s,
    jnp.arange(t),
    jnp.arange(padded),
    reference.visible(jnp.arange(t), jnp.arange(padded), valid, causal)[0, 0],
  )
  whole = geometric_prefix.geometric_weights(s, valid, causal=causal)
  np.testing.assert_allclose(whole, want, atol=2e-6)
  blocks = [
    geometric_prefix.geometric_weights(s[:, a : a + 4], valid, causal=causal, first_query=a)
    for a in range(0, t, 4)
  ]
  np.testing.assert_allclose(np.concatenate(blocks, 1), want, atol=2e-6)
  assert geometric_prefix.padded_keys(1000) == 1024 and geometric_prefix.padded_keys(40) == 40


def test_blocked_cumsum():
  x = jax.random.normal(jax.random.key(0), (3, 70))
  np.testing.assert_allclose(geometric_prefix.blocked_cumsum(x), jnp.cumsum(x, -1), atol=1e-5)
