"""The methods of 2024-2025 against their definitions: stick-breaking against the brute-force
product, forgetting attention with a constant gate against ALiBi, CoPE's counts and
interpolation by hand; causal-only encodings refuse a bidirectional model in one line."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rpe_table1
from posenc import config as config_lib
from posenc import encodings
from posenc.models import encoder as encoder_lib
from posenc import setup
from posenc.encodings import biases
from posenc.encodings import contextual
from posenc.encodings import forgetting
from posenc.encodings import stick_breaking

T = 7


def brute_force_stick_breaking(z, attend_self, remainder):
  p = 1 / (1 + np.exp(-np.asarray(z, np.float64)))
  out = np.zeros_like(p)
  for i in range(z.shape[0]):
    for j in range(i + 1 if attend_self else i):
      out[i, j] = p[i, j] * np.prod(
        [1 - p[i, t] for t in range(j + 1, i + 1 if attend_self else i)]
      )
    if remainder == 'self':
      out[i, i] += 1 - out[i].sum()
  return out


@pytest.mark.parametrize('attend_self', [False, True])
@pytest.mark.parametrize('remainder', ['none', 'self'])
def test_stick_breaking_equals_the_brute_force_product(attend_self, remainder):
  z = 2 * jax.random.normal(jax.random.key(0), (T, T))
  idx = jnp.arange(T)
  got = stick_breaking.stick_breaking_weights(
    z, idx, idx, jnp.ones((T, T), bool), attend_self, remainder
  )
  want = brute_force_stick_breaking(z, attend_self, remainder)
  np.testing.assert_allclose(got, want, atol=1e-6)
  sums = np.asarray(got).sum(-1)
  if remainder == 'none':
    assert np.all(sums <= 1 + 1e-6)
    assert sums[0] == 0 if not attend_self else sums[0] > 0
  else:
    np.testing.assert_allclose(sums, 1, atol=1e-6)


def test_stick_breaking_by_hand_and_without_underflow():
  # Every z = 0 (σ = 1/2): from query 2 key 1 gets 1/2, key 0 1/4, the remainder 1/4.
  idx = jnp.arange(3)
  got = stick_breaking.stick_breaking_weights(jnp.zeros((3, 3)), idx, idx, jnp.ones((3, 3), bool))
  np.testing.assert_allclose(got[2], [0.25, 0.5, 0.25])
  # A thousand open gates between key and query: log space keeps the far key's weight
  # (2^-1000 underflows, but the near keys take it all, and nothing is NaN).
  n = 1024
  idx = jnp.arange(n)
  w = stick_breaking.stick_breaking_weights(
    jnp.zeros((1, n)), idx[-1:], idx, jnp.ones((1, n), bool), remainder='none'
  )
  assert np.all(np.isfinite(w)) and abs(float(w[0, -2]) - 0.5) < 1e-7


def test_forgetting_with_a_constant_gate_is_alibi_with_slope_minus_log_f():
  f = np.array([0.9, 0.5], np.float32)  # one gate per head
  log_forget = jnp.broadcast_to(jnp.log(f), (1, T, 2))
  idx = jnp.arange(T)
  got = forgetting.forgetting_bias(log_forget, idx, idx)[0]
  want = biases.alibi_bias(idx, idx, -np.log(f), causal=True)
  visible = np.tril(np.ones((T, T), bool))
  np.testing.assert_allclose(np.where(visible, got, 0), np.where(visible, want, 0), atol=1e-5)


def test_forgetting_bias_sums_the_gates_between_key_and_query():
  log_forget = jnp.log(jnp.array([[[0.5], [0.25], [0.8]]]))  # [1, 3, 1]
  got = forgetting.forgetting_bias(log_forget, jnp.arange(3), jnp.arange(3))[0, 0]
  np.testing.assert_allclose(got[2], [math.log(0.25 * 0.8), math.log(0.8), 0], rtol=1e-6)
  np.testing.assert_allclose(got[0], [0, 0, 0])  # keys right of the query: masked, 0


def test_cope_with_every_gate_open_counts_relative_positions_from_the_query():
  gates = jnp.tril(jnp.ones((T, T)))
  i, j = np.arange(T)[:, None], np.arange(T)[None, :]
  np.testing.assert_array_equal(
    contextual.contextual_positions(gates), np.where(j <= i, i - j + 1, 0)
  )


def test_cope_bias_against_a_direct_formula():
  keys = jax.random.split(jax.random.key(1), 3)
  b, h, k, p = 1, 2, 4, 5
  q = jax.random.normal(keys[0], (b, T, h, k))
  kk = jax.random.normal(keys[1], (b, T, h, k))
  table = jax.random.normal(keys[2], (k, p))
  got = contextual.cope_bias(q, kk, jnp.arange(T), jnp.arange(T), table)
  qn, kn, tn = (np.asarray(x, np.float64) for x in (q, kk, table))
  want = np.zeros((b, h, T, T))
  for hh in range(h):
    for i in range(T):
      for jj in range(i + 1):
        pos = sum(
          1 / (1 + np.exp(-qn[0, i, hh] @ kn[0, t, hh] / math.sqrt(k))) for t in range(jj, i + 1)
        )
        pos = min(pos, p - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        z = qn[0, i, hh] @ tn
        want[0, hh, i, jj] = z[lo] * (1 - (pos - lo)) + z[hi] * (pos - lo)
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize('name', [n for n, e in encodings.ENCODINGS.items() if e.causal_only])
def test_causal_only_encodings_refuse_an_encoder_in_one_line(name):
  config = rpe_table1.get_config(f'task=even_pairs,encoding={name}')
  config.model.family = 'encoder'
  with pytest.raises(config_lib.ConfigError, match=f"encoding '{name}' is causal by definition"):
    setup.build(config)
  model = encoder_lib.Encoder(
    vocab_size=2, num_classes=2, encoding=name, num_layers=1, d_model=8, num_heads=2, ffn_size=8
  )
  with pytest.raises(ValueError, match='needs a causal model'):
    model.init(
      encoder_lib.init_rngs(jax.random.key(0)), jnp.zeros((1, 3), jnp.int32), 3, deterministic=True
    )
  config.model.family = 'decoder'
  config_lib.validate(config)


def _coupled_ids(text, start, length=None, width=None):
  """The coupled ids of `text` (arithmetic tokens, zeros past it to `width`) at offset
  `start`, its first `length` tokens real (default all)."""
  from posenc.encodings import embeddings
  from tasks import arithmetic

  ids = arithmetic.encode(text)
  tokens = jnp.asarray([ids + [0] * ((width or len(ids)) - len(ids))])
  real = embeddings.real_tokens(tokens, jnp.asarray([length or len(ids)]))
  return np.asarray(embeddings.coupled_positions(tokens, tokens < 10, start, real))[0]


def test_position_coupling_gives_digits_of_equal_significance_one_id():
  # 98282 + 3859172 = 2787472 (every number least-significant digit first).
  text = '98282+3859172=2787472'
  ids = _coupled_ids(text, 1)
  want = [2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  np.testing.assert_array_equal(ids, want)
  # Significance k sits at id k + 2 in both operands and the answer.
  numbers = text.split('+')[0], text.split('+')[1].split('=')[0], text.split('=')[1]
  starts = [0, len(numbers[0]) + 1, len(numbers[0]) + len(numbers[1]) + 2]
  for k in range(5):
    assert len({ids[s + k] for s in starts}) == 1


def test_position_coupling_ids_match_the_authors_by_hand():
  """The authors' ids (HanseulJo/position-coupling, `AdditionDatasetWithCoupledPositions`
  with their addition config: operands zero-padded to one length and written most
  significant digit first, the answer zero-padded to one digit more and reversed, `[EOS]`
  first (BOS) and last) for the same additions, written out: every digit of significance k
  gets s + k + 1, '+' and '=' s, EOS and padding 0, s ~ U{1..max_pos - len(answer)}."""
  from posenc.encodings import embeddings
  from tasks import arithmetic

  p = 33  # the authors' max_pos: the largest id in training
  # 28289 + 2719583 = 2747872. Theirs: [EOS] 0028289+2719583=27478720 [EOS], answer 8 long,
  # s in 1..25; at s = 1 and s = 25:
  theirs_1 = [0, 8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
  theirs_25 = [
    0,
    32,
    31,
    30,
    29,
    28,
    27,
    26,
    25,
    32,
    31,
    30,
    29,
    28,
    27,
    26,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    0,
  ]
  assert (min(theirs_1[1:-1]), max(theirs_25)) == (1, 33)
  # Ours: 98282+3859172=2787472$ (no zeros written: the answer, 7 digits, is the longest
  # number), fed without its last token (real length 21, the EOS past it): s in 1..26.
  text = '98282+3859172=2787472$'
  tokens = jnp.asarray([arithmetic.encode(text)])
  real = embeddings.real_tokens(tokens, jnp.asarray([21]))
  assert int(embeddings.coupling_offset_bound(tokens, tokens < 10, real, p)[0]) == 26
  ours_1 = [2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0]
  ours_26 = [27, 28, 29, 30, 31, 26, 27, 28, 29, 30, 31, 32, 33, 26, 27, 28, 29, 30, 31, 32, 33, 0]
  np.testing.assert_array_equal(_coupled_ids(text, 1, 21), ours_1)
  np.testing.assert_array_equal(_coupled_ids(text, 26, 21), ours_26)
  # The same range of ids, [1, 33], and the same ids by significance at each s: digit k of
  # the answer (theirs from index 17, ours from 14) and of the longer operand.
  assert (min(ours_1[:-1]), max(ours_26)) == (1, 33)
  for s, theirs, ours in ((1, theirs_1, ours_1), (25, theirs_25, None)):
    ours = ours or list(_coupled_ids(text, s, 21))
    assert theirs[17:24] == ours[14:21] and theirs[9:16][::-1] == ours[6:13]
    assert theirs[8] == theirs[16] == ours[5] == ours[13] == s  # '+' and '='
  # With a carry out the answer is the longest number in both forms: 5+5=01 (theirs
  # [EOS] 5+5=01 [EOS]) draws s in 1..31 and reaches 33 in both.
  np.testing.assert_array_equal(
    _coupled_ids('5+5=01$', 31, 6, width=12), [32, 31, 32, 31, 32, 33] + [0] * 6
  )
  # Without one, theirs writes 12+03=510 (three answer digits) and ours 21+3=51: s reaches
  # one further here, and both reach max_pos. `coupling_padded_answer` draws as theirs.
  for text, written, padded in (
    ('21+3=51', p - 2, p - 3),
    ('5+5=01', p - 2, p - 2),
    ('98282+3859172=2787472', 26, 25),
  ):
    tokens = jnp.asarray([arithmetic.encode(text)])
    real = embeddings.real_tokens(tokens, jnp.asarray([len(text)]))
    for flag, want in ((False, written), (True, padded)):
      assert int(embeddings.coupling_offset_bound(tokens, tokens < 10, real, p, flag)[0]) == want


# Rows of different real lengths (the decoder is fed a sequence without its last token, the
# EOS), padded with token 0, the digit 0, and their bounds at P = 26 by hand: 26 minus the
# digits of the longest number.
_ROWS = (
  ('5+5=01$', 6, 24),
  ('98282+3859172=2787472$', 21, 19),
  ('3+4=7$', 5, 25),
  ('0+0=0$', 5, 25),
  ('123456+7=823456$', 15, 20),
)


def _padded_batch(width):
  from tasks import arithmetic

  ids = [arithmetic.encode(text) for text, _, _ in _ROWS]
  tokens = jnp.asarray([row + [0] * (width - len(row)) for row in ids])
  return tokens, jnp.asarray([length for _, length, _ in _ROWS])


def test_position_coupling_offset_range_is_each_rows_own():
  from posenc.encodings import embeddings

  want = [bound for _, _, bound in _ROWS]
  # As the authors' zero-padded answers, one digit longer than the longest operand.
  padded = [24, 18, 24, 24, 19]
  for width in (22, 24, 40):
    tokens, lengths = _padded_batch(width)
    real = embeddings.real_tokens(tokens, lengths)
    got = embeddings.coupling_offset_bound(tokens, tokens < 10, real, 26)
    np.testing.assert_array_equal(got, want)
    got = embeddings.coupling_offset_bound(tokens, tokens < 10, real, 26, padded_answer=True)
    np.testing.assert_array_equal(got, padded)
  # Counting the padding as digits would cut the range: at width 40 the first row ends in 33
  # zeros (its EOS, then padding), a number longer than P.
  assert int(embeddings.coupling_offset_bound(tokens, tokens < 10, tokens >= 0, 26)[0]) == 1


def test_position_coupling_draws_each_rows_offset_from_its_own_range():
  from posenc.encodings import embeddings
  from tasks import arithmetic

  copies, width, p = 200, 40, 26
  tokens, lengths = _padded_batch(width)
  tokens, lengths = jnp.repeat(tokens, copies, axis=0), jnp.repeat(lengths, copies)
  # A table whose row i is the one-hot of i reads the ids back.
  module = embeddings.CouplingEmbedding(width=p + 1, max_position=p + 1)
  params = {'params': {'embedding': jnp.eye(p + 1)}}
  ids = np.argmax(
    module.apply(
      params, width, lengths, tokens, deterministic=False, rngs={'noise': jax.random.key(1)}
    ),
    -1,
  )
  real = np.arange(width)[None, :] < np.asarray(lengths)[:, None]
  assert ids.max() <= p and (ids[~real] == 0).all() and (ids[real] >= 1).all()
  plus = np.argmax(np.asarray(tokens) == arithmetic.PLUS, -1)
  offsets = ids[np.arange(len(ids)), plus].reshape(len(_ROWS), copies)  # '+' gets s
  for (text, _, bound), row in zip(_ROWS, offsets):
    assert (row.min(), row.max()) == (1, bound), text
  # At evaluation s = 1.
  ids = np.argmax(module.apply(params, width, lengths, tokens), -1)
  assert (ids[np.arange(len(ids)), plus] == 1).all()
  # As for the authors' zero-padded answers.
  module = embeddings.CouplingEmbedding(
    width=p + 1, max_position=p + 1, coupling_padded_answer=True
  )
  ids = np.argmax(
    module.apply(
      params, width, lengths, tokens, deterministic=False, rngs={'noise': jax.random.key(1)}
    ),
    -1,
  )
  offsets = ids[np.arange(len(ids)), plus].reshape(len(_ROWS), copies)
  assert [row.max() for row in offsets] == [24, 18, 24, 24, 19]


def test_position_coupling_refuses_ids_past_its_table():
  from posenc.encodings import embeddings

  module = embeddings.CouplingEmbedding(width=4, max_position=20, coupling_max_position=20)
  with pytest.raises(ValueError, match=r'coupling_max_position=20 must be in 0\.\.19'):
    module.init({'params': jax.random.key(0)}, 3, 3, jnp.zeros((1, 3), jnp.int32))
  from experiments import encodings_2024

  config = encodings_2024.get_config('tiny,study=arithmetic')
  config.encoding_options.coupling_max_position = config.model.max_position
  with pytest.raises(config_lib.ConfigError, match='coupling_max_position=64 must be in 0..63'):
    setup.build(config)


@pytest.mark.parametrize('name', ['dape', 'dape_v2'])
@pytest.mark.parametrize('base', ['alibi', 'kerple_log', 'fire'])
def test_dape_with_f_zero_is_its_base(name, base):
  from posenc.encodings import dape

  keys = jax.random.split(jax.random.key(2), 4)
  q, k = (jax.random.normal(kk, (2, T, 2, 4)) for kk in keys[:2])
  x = jax.random.normal(keys[2], (2, T, 8))
  module = encodings.get(name).attention(
    max_position=64, num_heads=2, head_dim=4, dape_base=base, causal=True
  )
  params = module.init({'params': keys[3]}, T, T, x)['params']
  zero = {**params, 'w2': jnp.zeros_like(params['w2']), 'b2': jnp.zeros_like(params['b2'])}
  idx = jnp.arange(T)
  got = module.apply({'params': zero}, T, T, x).bias(q, k, idx, idx)
  base_module = dape.DAPE_BASES[base](max_position=64, num_heads=2, head_dim=4, causal=True)
  want = base_module.apply({'params': params.get('base', {})}, T, T, x).bias(q, k, idx, idx)
  np.testing.assert_allclose(got, jnp.broadcast_to(want, got.shape), atol=1e-6)
  # With f at its initialisation the correction is not zero.
  full = module.apply({'params': params}, T, T, x).bias(q, k, idx, idx)
  assert float(jnp.max(jnp.abs(full - got))) > 1e-3


def test_dape_v2_convolution_reads_neighbouring_keys_and_ignores_padding():
  from posenc.encodings import dape

  x = jnp.arange(1.0, 4.0).reshape(1, 1, 3, 1)
  shift = jnp.array([[[1.0]], [[0.0]], [[0.0]]])
  np.testing.assert_allclose(dape.conv_keys(x, shift, jnp.zeros(1))[0, 0, :, 0], [0, 1, 2])
  # A padded encoder sequence gives the logits of its unpadded self.
  keys = jax.random.split(jax.random.key(3), 4)
  n, t = 5, T
  q, k = (jax.random.normal(kk, (1, t, 2, 4)) for kk in keys[:2])
  x = jax.random.normal(keys[2], (1, t, 8))
  module = encodings.get('dape_v2').attention(max_position=64, num_heads=2, head_dim=4)
  params = module.init({'params': keys[3]}, t, n, x)
  padded = module.apply(params, t, n, x).bias(q, k, jnp.arange(t), jnp.arange(t))
  exact = module.apply(params, n, n, x[:, :n]).bias(
    q[:, :n], k[:, :n], jnp.arange(n), jnp.arange(n)
  )
  np.testing.assert_allclose(padded[..., :n, :n], exact, atol=1e-5)


def _zero_padded_dape_v2(q, k, base, seen, real, conv1, b1, conv2, b2):
  """DAPE-V2's bias as it was before the key after the axis' last was read: both
  convolutions zero-padded ('same') at both ends."""
  from posenc.encodings import dape

  def conv(x, kernel, bias):
    padded = jnp.pad(x, [(0, 0), (0, 0), (1, 1), (0, 0)])
    return sum(padded[:, :, t : t + x.shape[2]] @ kernel[t] for t in range(3)) + bias

  x = dape.dape_features(q, k, base)
  mask = lambda m: jnp.broadcast_to(m, (x.shape[0], 1) + x.shape[1:3]).transpose(0, 2, 3, 1)
  h = jax.nn.leaky_relu(conv(jnp.where(mask(seen), x, 0.0), conv1, b1))
  g = conv(jnp.where(mask(real), h, 0.0), conv2, b2)
  return base + g.transpose(0, 3, 1, 2)


@pytest.mark.parametrize('causal', [True, False])
def test_dape_v2_whole_sequences_keep_the_zero_padded_convolution_bit_for_bit(causal):
  # Over a whole sequence (real length <= the key axis) no real key follows the axis: the
  # bias is bit for bit the zero-padded convolutions' (training is unchanged).
  from posenc.encodings import core
  from posenc.encodings import dape

  keys = jax.random.split(jax.random.key(5), 4)
  q, k = (jax.random.normal(kk, (2, T, 2, 4)) for kk in keys[:2])
  x = jax.random.normal(keys[2], (2, T, 8))
  module = encodings.get('dape_v2').attention(
    max_position=64, num_heads=2, head_dim=4, causal=causal
  )
  params = module.init({'params': keys[3]}, T, T, x)['params']
  base_module = dape.DAPE_BASES['alibi'](max_position=64, num_heads=2, head_dim=4, causal=causal)
  idx = jnp.arange(T)
  base = base_module.apply({'params': params.get('base', {})}, T, T, x).bias(q, k, idx, idx)
  base = core.with_batch(base)
  for n in (T, 4):
    got = module.apply({'params': params}, T, n, x).bias(q, k, idx, idx)
    real = jnp.broadcast_to(idx < n, (T, T))
    seen = real & (idx[None, :] <= idx[:, None]) if causal else real
    want = _zero_padded_dape_v2(
      q, k, base, seen, real, params['w1'], params['b1'], params['w2'], params['b2']
    )
    np.testing.assert_array_equal(got, want)


def test_dape_v2_prompt_pass_equals_the_rows_of_the_whole_sequence():
  # A causal pass over keys 0..n-1 of a sequence of T real tokens (a generation's prompt
  # pass: the later keys come in decoding steps) gives the whole sequence's rows 0..n-1,
  # the last included: the hidden features of key n enter it as in the whole sequence.
  keys = jax.random.split(jax.random.key(6), 4)
  n = 4
  q, k = (jax.random.normal(kk, (2, T, 2, 4)) for kk in keys[:2])
  x = jax.random.normal(keys[2], (2, T, 8))
  module = encodings.get('dape_v2').attention(max_position=64, num_heads=2, head_dim=4, causal=True)
  params = module.init({'params': keys[3]}, T, T, x)
  enc = module.apply(params, T, T, x)
  whole = enc.bias(q, k, jnp.arange(T), jnp.arange(T))
  prompt = enc.bias(q[:, :n], k[:, :n], jnp.arange(n), jnp.arange(n))
  np.testing.assert_allclose(prompt, whole[..., :n, :n], atol=1e-6)
  # The sequence of n real tokens has no key n: its last row is another.
  ended = module.apply(params, T, n, x).bias(q[:, :n], k[:, :n], jnp.arange(n), jnp.arange(n))
  assert float(jnp.max(jnp.abs(ended[..., n - 1, :] - whole[..., n - 1, :n]))) > 1e-4


def test_pope_logits_are_magnitudes_times_cosines_of_the_offset():
  from posenc.encodings import polar

  keys = jax.random.split(jax.random.key(4), 3)
  k_dim, h = 4, 2
  q = jax.random.normal(keys[0], (1, T, h, k_dim))
  kk = jax.random.normal(keys[1], (1, T, h, k_dim))
  delta = -jax.random.uniform(keys[2], (h, k_dim))
  idx = jnp.arange(T)
  got = jnp.einsum(
    'bqhk,bshk->bhqs', polar.apply_pope(q, idx), polar.apply_pope(kk, idx, phase_shift=delta)
  )
  theta = polar.pope_frequencies(k_dim)
  sp = lambda x: np.log1p(np.exp(np.asarray(x, np.float64)))
  want = np.zeros((1, h, T, T))
  for hh in range(h):
    for t in range(T):
      for s in range(T):
        want[0, hh, t, s] = np.sum(
          sp(q[0, t, hh]) * sp(kk[0, s, hh]) * np.cos((s - t) * theta + np.asarray(delta[hh]))
        )
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # The keys' phase shift is clamped to [-2π, 0] (initialised at 0).
  module = encodings.get('pope').attention(num_heads=h, head_dim=k_dim)
  params = module.init({'params': keys[2]}, T, T, q.reshape(1, T, -1))
  assert float(jnp.abs(params['params']['phase_shift']).max()) == 0
  shifted = jax.tree.map(lambda p: p - 10.0, params)
  keys_of = lambda variables: module.apply(variables, T, T, q).rotate_keys(kk, idx)
  np.testing.assert_allclose(keys_of(params), polar.apply_pope(kk, idx), atol=1e-6)
  np.testing.assert_allclose(
    keys_of(shifted),
    polar.apply_pope(kk, idx, phase_shift=jnp.full((h, k_dim), -2 * math.pi)),
    atol=1e-6,
  )


@pytest.mark.parametrize('arg', ['cpu', 'cpu,study=arithmetic', 'tiny,study=arithmetic'])
def test_the_comparison_s_cells_validate(arg):
  from experiments import encodings_2024

  config = encodings_2024.get_config(arg)
  cells = encodings_2024.grid(arg)
  assert len(cells) == (
    len(encodings_2024.ARITHMETIC)
    if 'arithmetic' in arg
    else len(encodings_2024.TASKS) * (len(encodings_2024.NEW) + len(encodings_2024.BASELINES))
  )
  for cell in cells:
    setup.build(config_lib.cell_config(config, cell))
  with pytest.raises(config_lib.ConfigError, match="unknown study 'nope'; valid: tasks"):
    encodings_2024.get_config('study=nope')


@pytest.mark.slow
@pytest.mark.parametrize(
  'arg, encoding', [('tiny', 'forgetting'), ('tiny,study=arithmetic', 'position_coupling')]
)
def test_a_tiny_cell_of_each_study_trains_and_evaluates(tmp_path, arg, encoding):
  from experiments import encodings_2024
  from posenc.training import train

  config = encodings_2024.get_config(arg)
  config.encoding = encoding
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  assert all(m['score'] is not None for m in results['members'])
