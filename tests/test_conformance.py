"""The conformance check (posenc/testing): every built-in encoding passes it, and encodings
broken on purpose, made with the public helpers, fail exactly the invariants they break,
each with one line that says what differed (the first non-finite output, or the arrays, the
index, both values and the tolerance)."""

import sys
import textwrap

import numpy as np
import pytest

from posenc import encodings
from posenc import testing
from posenc.testing import compare

# ---------------------------------------------------------------------------------------------
# How outputs are compared.


def test_the_first_non_finite_entry_is_named_with_its_index_value_and_count():
  x = np.array([[1.0, np.nan], [np.inf, 2.0]])
  assert compare.not_finite('logits', x) == 'logits not finite: nan at [0, 1] (and 1 more)'
  assert compare.not_finite('loss', np.float32(np.inf)) == 'loss not finite: inf'
  tree = {'params': {'a': np.ones(2), 'b': np.array([1.0, -np.inf])}, 'steps': np.arange(3)}
  assert compare.not_finite('gradients', tree) == 'gradients of params/b not finite: -inf at [1]'
  assert compare.not_finite('gradients', tree['params']['a']) is None
  with pytest.raises(compare.Violation, match=r'^logits not finite: nan at \[0, 1\]'):
    compare.require_finite('logits', x)


def test_a_difference_with_nan_is_never_zero():
  nan = np.array([np.nan, 1.0])
  assert compare.difference('a and b', nan, nan).size == np.inf
  assert compare.largest(0.5, float('nan')) == np.inf  # max(0.5, nan) would be 0.5
  with pytest.raises(compare.Violation, match='a and b differ by inf at'):
    compare.require_within(compare.difference('a and b', nan, nan), 1e-3)


def test_a_difference_over_its_tolerance_names_where_both_values_and_the_tolerance():
  found = compare.difference('cpu_blocked and reference outputs', np.ones((2, 3)), np.eye(2, 3))
  assert found.size == 1.0 and found.where == (0, 1)
  assert compare.require_within(found, 1.0) == 1.0
  with pytest.raises(compare.Violation) as error:
    compare.require_within(found, 2e-5)
  assert str(error.value) == (
    'cpu_blocked and reference outputs differ by 1.0e+00 at [0, 1] (1 vs 0; tolerance 2.0e-05)'
  )
  grads = compare.difference(
    'gradients',
    {'k': np.ones(2), 'q': np.zeros(2)},
    {'k': np.ones(2), 'q': np.array([0, 3.0])},
    scale=2.0,
  )
  assert grads.describe() == 'gradients of q differ by 1.5e+00 relative to 2 at [1] (0 vs 3'
  with pytest.raises(compare.Violation, match=r'shapes \(2,\) and \(3,\)'):
    compare.difference('a and b', np.ones(2), np.ones(3))


def test_the_largest_difference_over_scalar_leaves_is_kept():
  # A later leaf with a smaller difference does not replace the largest (scalars have no index).
  found = compare.difference('losses', {'a': np.float32(1), 'b': np.float32(0)}, {'a': 0, 'b': 0})
  assert (found.size, found.leaf, found.got, found.want) == (1.0, 'a', 1.0, 0.0)
  assert found.describe() == 'losses of a differ by 1.0e+00 (1 vs 0'


# ---------------------------------------------------------------------------------------------
# Encodings broken on purpose, each with the public helpers.

BROKEN = textwrap.dedent('''
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from posenc import encodings

    def distance(q_pos, k_pos, heads):
      """|i - j| for every head: [Q], [S] -> [H, Q, S] (and per sequence)."""
      d = jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(jnp.float32)
      return jnp.broadcast_to(d[..., None, :, :], d.shape[:-2] + (heads,) + d.shape[-2:])

    def nan_bias(q_pos, k_pos, heads):
      return distance(q_pos, k_pos, heads) * jnp.nan

    def inf_bias(q_pos, k_pos, heads):  # +inf on the diagonal: softmax gives NaN
      return jnp.where(distance(q_pos, k_pos, heads) == 0, jnp.inf, 0.0)

    def inf_weights(scores, q_pos, k_pos, visible):  # an infinite weight on each query's key
      own = visible & (k_pos[..., None, None, :] == q_pos[..., None, :, None])
      return jnp.where(own, jnp.inf, jnp.where(visible, jnp.exp(scores), 0.0))

    def peek(scores, q_pos, k_pos, visible):  # ignores the mask: sees later and padded keys
      return jnp.exp(scores - scores.max(-1, keepdims=True))

    def by_width(q_pos, k_pos, heads, num_positions):  # depends on how wide the batch is
      return -distance(q_pos, k_pos, heads) / num_positions

    def sqrt_bias(q_pos, k_pos, heads, scale):  # d sqrt(u) / du is infinite at u = 0
      return -jnp.sqrt(jax.nn.softplus(scale)[:, None, None] * distance(q_pos, k_pos, heads))

    def dropped(x, pos):  # loses the last channel of every head
      return x[..., :-1]

    def half(x, pos):  # the right shape, in float16
      return x.astype(jnp.float16)

    def heads_plus_one(q_pos, k_pos, heads):  # a bias for one head too many
      return distance(q_pos, k_pos, heads + 1)

    def nan_at(q_pos, k_pos, heads):  # NaN for one query and key, from position 3
      d = distance(q_pos, k_pos, heads)
      spot = (q_pos[..., :, None] == 3) & (k_pos[..., None, :] == 1)
      return jnp.where(spot[..., None, :, :], jnp.nan, -d)

    def raises(q_pos, k_pos, heads):
      return distance(q_pos, k_pos, heads) @ jnp.ones((3, 3))

    def shared(q_pos, k_pos):  # not broken: [Q, S], one bias for every head
      return -jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(jnp.float32)

    NAN_BIAS = encodings.bias(nan_bias)
    NAN_AT = encodings.bias(nan_at)
    DROPPED = encodings.rotation(dropped)
    HALF = encodings.rotation(half)
    HEADS_PLUS_ONE = encodings.bias(heads_plus_one)
    RAISES = encodings.bias(raises)
    SHARED = encodings.bias(shared)
    INF_BIAS = encodings.bias(inf_bias)
    INF_WEIGHTS = encodings.weights(inf_weights)
    PEEK = encodings.weights(peek, normalize=True)
    BY_WIDTH = encodings.bias(by_width)
    NAN_GRADIENT = encodings.bias(sqrt_bias, scale=encodings.param(('heads',)))
''')
CHEAP = ('backends', 'padded', 'causal', 'step', 'generation', 'gradients')
NOT_FINITE = {
  'backends': 'reference outputs (bidirectional) not finite: nan at [0, 0, 0, 0] (and 111 more)',
  'padded': 'decoder logits of the 7 tokens not finite: nan at [0, 0, 0] (and 97 more)',
  'causal': 'decoder logits not finite: nan at [0, 0, 0] (and 125 more)',
  'step': 'decoder logits of the whole sequence not finite: nan at [0, 0, 0] (and 125 more)',
  'generation': 'decoder logits of the generated tokens not finite: nan at [0, 0, 0]',
  'gradients': 'decoder loss not finite: nan',
}
# Each broken encoding: the line of every invariant it fails (the start of the line); the
# others of CHEAP pass.
FAILS = {
  'NAN_BIAS': NOT_FINITE,
  'INF_BIAS': NOT_FINITE,
  'INF_WEIGHTS': {
    **NOT_FINITE,
    'backends': 'reference outputs (bidirectional) not finite: inf at [0, 0, 0, 0]',
  },
  'PEEK': {
    'padded': 'decoder logits of the 7 tokens padded to 12 and unpadded differ by ',
    'causal': 'decoder logits of positions 0..4 with tokens 5..8 changed and unchanged differ by ',
    'step': 'decoder logits of the cached step at 5 and of the whole sequence differ by ',
    'generation': 'cached and re-decoded generation (xla_fused prompt pass) differ in ',
  },
  'BY_WIDTH': {'padded': 'decoder logits of the 7 tokens padded to 12 and unpadded differ by '},
  'NAN_GRADIENT': {
    'backends': 'reference gradients (bidirectional) of parameters/scale not finite: nan at [0]',
    'gradients': 'decoder gradients of params/layer_0/attention/encoding/scale not finite: nan',
  },
}


@pytest.fixture(scope='module')
def broken(tmp_path_factory):
  """The module `posenc_broken` on the Python path, as a user's would be; its directory."""
  root = tmp_path_factory.mktemp('broken')
  (root / 'posenc_broken.py').write_text(BROKEN)
  sys.path.insert(0, str(root))
  yield root
  sys.path.remove(str(root))
  sys.modules.pop('posenc_broken', None)


def _failures(name, checks):
  """{invariant: its line's detail} of the failed invariants; every line one line."""
  results = testing.conformance(name, checks)
  assert [c.name for c in results] == list(checks)
  for check in results:
    assert '\n' not in check.line() and check.detail.strip(), check.line()
  return {c.name: c.detail for c in results if not c.passed}


def _assert_fails(failed, want):
  assert set(failed) == set(want), failed
  for check, start in want.items():
    assert failed[check].startswith(start), (check, failed[check])


# One invariant of each kind of failure in the default suite (a few seconds each); every
# broken encoding through every cheap invariant with -m slow.
@pytest.mark.parametrize(
  'attribute, checks',
  [
    ('NAN_BIAS', ('backends', 'step')),
    ('NAN_GRADIENT', ('gradients',)),
    ('PEEK', ('causal',)),
    ('BY_WIDTH', ('padded',)),
  ]
  + [pytest.param(a, CHEAP, marks=pytest.mark.slow) for a in FAILS],
)
def test_a_broken_encoding_fails_exactly_what_it_breaks(broken, attribute, checks):
  failed = _failures(f'posenc_broken:{attribute}', checks)
  _assert_fails(failed, {c: line for c, line in FAILS[attribute].items() if c in checks})


# The first pass names each defect in the encoding's terms, in one line, in seconds.
FIRST_PASS = {
  'DROPPED': 'rotation (bidirectional) returned 3 channels for head_dim 4, expected at least 4 '
  '(the queries)',
  'HALF': 'rotation (bidirectional) returned float16 for float32 queries, expected float32',
  'HEADS_PLUS_ONE': 'bias (bidirectional) returned shape (3, 9, 9) for 2 heads, 9 queries and 9 '
  'keys, expected [H, Q, S] = (2, 9, 9), [Q, S] or [B, H, Q, S] with B = 3',
  'NAN_BIAS': 'bias (bidirectional) is NaN at head 0, query 0, key 0 (and 161 more)',
  'NAN_AT': 'bias (bidirectional) is NaN at head 0, query 3, key 1 (and 1 more)',
  'RAISES': 'bias (bidirectional) raised TypeError: ',
}


@pytest.mark.parametrize('attribute', FIRST_PASS)
def test_the_first_pass_names_the_defect_in_one_line(broken, attribute):
  (check,) = testing.conformance(f'posenc_broken:{attribute}', ('outputs',))
  assert not check.passed and '\n' not in check.line()
  assert check.detail.startswith(FIRST_PASS[attribute]), check.detail
  if attribute == 'RAISES':  # where in the encoding's own code, not in jax's
    assert 'posenc_broken.py:' in check.detail and 'jax' not in check.detail, check.detail


@pytest.mark.parametrize(
  'name, checks',
  [
    ('posenc_broken:SHARED', ('outputs', 'backends')),
    ('randomized_posenc_broken:SHARED', ('outputs', 'step')),
  ],
)
def test_a_bias_shared_by_the_heads_runs_as_its_helper_declares(broken, name, checks):
  # [Q, S] (and [B, Q, S] with a randomized twin's positions per sequence) is one bias for
  # every head: the helper gives it a heads axis of 1, which every backend broadcasts.
  assert _failures(name, checks) == {}


def test_after_a_failed_first_pass_the_invariants_are_skipped(broken):
  results = testing.conformance('posenc_broken:DROPPED')
  assert [c.name for c in results] == list(testing.CHECKS)
  assert results[0].line().startswith('outputs      FAIL  rotation (bidirectional) returned 3')
  assert all(c.skipped and not c.passed for c in results[1:])
  assert results[1].line() == 'backends     skip  not run: the first pass (outputs) failed'
  with pytest.raises(AssertionError, match=r'fails 1 check\(s\):\noutputs      FAIL  rotation'):
    testing.check_encoding('posenc_broken:HALF')


@pytest.mark.slow
def test_a_nan_bias_fails_training_and_still_lowers(broken):
  failed = _failures('posenc_broken:NAN_BIAS', ('export', 'training'))
  _assert_fails(failed, {'training': '6 steps of even_pairs: the training loss is not finite'})


def test_the_command_exits_1_with_a_line_per_failed_invariant(cli, broken):
  proc = cli.run(['launch.check_encoding', 'posenc_broken:NAN_BIAS', '--checks=causal'], cwd=broken)
  assert proc.returncode == 1, proc.stderr[-2000:]
  lines = proc.stdout.strip().splitlines()
  assert lines[0] == 'causal       FAIL  ' + NOT_FINITE['causal'], lines
  assert lines[1].startswith('posenc_broken:NAN_BIAS: 0 of 1 checks pass (failed: causal)')
  assert len(lines) == 2 and 'Warning' not in proc.stderr, proc.stderr[-2000:]


def test_an_exception_without_a_message_says_where_it_was_raised():
  def bare():
    raise AssertionError

  try:
    bare()
  except AssertionError as e:
    line = testing._error(e)  # pylint: disable=protected-access
  assert line.startswith('error: AssertionError: (no message) at '), line
  assert line.endswith(': raise AssertionError') and 'test_conformance.py:' in line, line


# ---------------------------------------------------------------------------------------------
# The built-ins pass the check a candidate must pass.

# Every built-in, and the combinations the studies run.
BUILT_INS = list(encodings.ENCODINGS) + ['sin_cos+alibi', 'abacus+fire', 'abacus+rotary']
# What the check finds in a built-in and is not fixed here, because the fix changes the
# encoding's stored results: {encoding: {invariant: the start of its line}}. None now
# (dape_v2's `step` was one until its prompt pass read the key after its last: docs/benchmark.md).
KNOWN: dict[str, dict[str, str]] = {}
# Training and lowering a whole run cost most of the check: in the default suite for one
# encoding only.
TRAINED = ('none',)


def _keeps(name, checks):
  """Every invariant of `checks` passes, or fails as KNOWN says (then xfail)."""
  failed = _failures(name, checks)
  known = {c: line for c, line in KNOWN.get(name, {}).items() if c in checks}
  _assert_fails(failed, known)
  if known:
    pytest.xfail(f'{name}: {"; ".join(f"{c} {failed[c]}" for c in known)}')


# The default suite runs the first two on a sample (conftest.EVERY_ENCODING): the backends
# on REPRESENTATIVES (every method with code of its own), the models on ONE_PER_KIND.
@pytest.mark.parametrize('name', BUILT_INS)
def test_a_builtin_s_backends_equal_the_reference(name):
  _keeps(name, ('backends',))


@pytest.mark.parametrize('name', BUILT_INS)
def test_a_builtin_keeps_the_model_invariants(name):
  _keeps(name, ('padded', 'causal', 'step', 'generation', 'gradients'))


@pytest.mark.parametrize(
  'name', [n if n in TRAINED else pytest.param(n, marks=pytest.mark.slow) for n in BUILT_INS]
)
def test_a_builtin_lowers_and_trains(name):
  _keeps(name, testing.EXPENSIVE)
