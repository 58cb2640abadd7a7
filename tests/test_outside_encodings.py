"""Encodings from outside posenc: an Encoding record at an import path or an installed
package's entry point, built with the public helpers, used like a built-in encoding (its own
options set from the command line); what cannot be loaded is one line; the conformance helper
passes them (and fails broken ones: tests/test_conformance.py)."""

import json
import os
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posenc import encodings
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib
from posenc import testing
from posenc.encodings import core
from posenc.encodings import outside

MODULE = textwrap.dedent('''
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from posenc import encodings

    def sqrt_alibi(q_pos, k_pos, slopes):
      """-softplus(s_h) sqrt|i - j|: [Q], [S] -> [H, Q, S] (and per sequence)."""
      dist = jnp.sqrt(jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(jnp.float32))
      return -jax.nn.softplus(slopes)[:, None, None] * dist[..., None, :, :]

    SQRT_ALIBI = encodings.bias(sqrt_alibi,
                                slopes=encodings.param(('heads',), nn.initializers.ones))

    def halved(x, positions):
      return encodings.apply_rope(x, positions / 2)

    HALF_ROPE = encodings.rotation(halved)

    def table(positions, width, scale):
      return encodings.sinusoid(positions, width) * scale

    SCALED_SIN_COS = encodings.embedding(table, scale=encodings.param((1,), nn.initializers.ones))

    def window(scores, q_pos, k_pos, visible):
      # [Q, S], or [B, 1, Q, S] for positions per sequence: the heads' axis is the second.
      near = jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]) <= 2
      near = near[:, None] if near.ndim == 3 else near
      w = jnp.where(visible & near, jnp.exp(scores - scores.max(-1, keepdims=True)), 0.0)
      return w

    WINDOW = encodings.weights(window, normalize=True)
    NOT_A_RECORD = sqrt_alibi
    BAD_KIND = encodings.Encoding('sideways')
''')


@pytest.fixture(scope='module')
def outside_module(tmp_path_factory):
  """A module `posenc_outside_example` on the Python path, as a user's would be."""
  root = tmp_path_factory.mktemp('outside')
  (root / 'posenc_outside_example.py').write_text(MODULE)
  sys.path.insert(0, str(root))
  yield 'posenc_outside_example'
  sys.path.remove(str(root))
  sys.modules.pop('posenc_outside_example', None)


@pytest.mark.parametrize(
  'attribute, kind',
  [
    ('SQRT_ALIBI', 'bias'),
    ('HALF_ROPE', 'rotation'),
    ('SCALED_SIN_COS', 'embedding'),
    ('WINDOW', 'geometric'),
  ],
)
def test_an_import_path_is_an_encoding_of_each_kind(outside_module, attribute, kind):
  name = f'{outside_module}:{attribute}'
  spec = encodings.get(name)
  assert isinstance(spec, encodings.Encoding) and spec.kind == kind
  model = decoder_lib.Decoder(
    vocab_size=7, encoding=name, num_layers=1, d_model=16, num_heads=2, ffn_size=32, max_position=64
  )
  variables = model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.array([4]),
    deterministic=True,
  )
  logits, _ = model.apply(
    variables,
    jnp.ones((2, 5), jnp.int32),
    jnp.array([5, 3]),
    deterministic=True,
    rngs={'noise': jax.random.key(1)},
  )
  assert logits.shape == (2, 5, 7) and np.all(np.isfinite(logits))


def test_combinations_and_randomized_twins(outside_module):
  combined = encodings.get(f'sin_cos+{outside_module}:SQRT_ALIBI')
  assert combined.embedding is not None and combined.kind == core.BIAS
  twin = encodings.get(f'randomized_{outside_module}:SQRT_ALIBI')
  assert twin.randomized and not encodings.get(f'{outside_module}:SQRT_ALIBI').randomized
  # The twin draws its positions: two noise keys, two sets of logits.
  model = encoder_lib.Encoder(
    vocab_size=3,
    num_classes=2,
    encoding=f'randomized_{outside_module}:SQRT_ALIBI',
    num_layers=1,
    d_model=16,
    num_heads=2,
    ffn_size=32,
    max_position=64,
  )
  variables = model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 6), jnp.int32),
    jnp.int32(6),
    deterministic=True,
  )
  tokens = jnp.array([[0, 1, 2, 1, 0, 2]])
  out = [
    model.apply(
      variables, tokens, jnp.int32(6), deterministic=True, rngs={'noise': jax.random.key(k)}
    )
    for k in (1, 2)
  ]
  assert not np.allclose(out[0], out[1])


@pytest.mark.parametrize(
  'name, message',
  [
    ('no_such_module_xyz:ENC', "no module named 'no_such_module_xyz'"),
    (
      '{m}:MISSING',
      "has no attribute 'MISSING'; its Encoding records: BAD_KIND, "
      'HALF_ROPE, SCALED_SIN_COS, SQRT_ALIBI, WINDOW',
    ),
    (
      '{m}:NOT_A_RECORD',
      'is a function, not a posenc Encoding record; build one with '
      'posenc.encodings.bias, rotation, embedding or weights',
    ),
    ('{m}:BAD_KIND', "has kind 'sideways'; valid kinds: embedding, rotation, bias, geometric"),
    ('randomized_no_such_module_xyz:ENC', "no module named 'randomized_no_such_module_xyz'"),
    (
      'nothing_installed_by_this_name',
      "unknown encoding 'nothing_installed_by_this_name'; valid encodings: none, sin_cos",
    ),
  ],
)
def test_what_cannot_be_loaded_is_one_line(outside_module, name, message):
  with pytest.raises(ValueError) as error:
    encodings.get(name.format(m=outside_module))
  assert message in str(error.value) and '\n' not in str(error.value)


# An outside encoding with an option of its own; its function writes the value it is traced
# with to $POSENC_POWER_SEEN, so a test sees what reached it.
POWER_MODULE = textwrap.dedent('''
    import os
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from posenc import encodings

    def power_alibi(q_pos, k_pos, slopes, *, power):
      with open(os.environ['POSENC_POWER_SEEN'], 'a') as f:
        f.write(f'{power!r}\\n')
      dist = jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(jnp.float32) ** power
      return -jax.nn.softplus(slopes)[:, None, None] * dist[..., None, :, :]

    POWER_ALIBI = encodings.bias(
        power_alibi,
        slopes=encodings.param(('heads',), nn.initializers.ones),
        options={'power': encodings.option(
            0.5, 'the distance is raised to it', valid=encodings.declare.number(0),
            must_be='a number > 0')})
''')
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_an_outside_encoding_s_own_option_is_set_from_the_command_line(cli, tmp_path):
  (tmp_path / 'posenc_power.py').write_text(POWER_MODULE)
  seen = tmp_path / 'seen'

  def train(option, workdir):
    return cli.run(
      [
        'launch.train',
        f'--config={ROOT}/experiments/rpe_table1.py:task=parity_check,tiny',
        f'--workdir={workdir}',
        '--config.encoding=posenc_power:POWER_ALIBI',
        f'--config.encoding_options.{option}',
        '--config.train.steps=2',
        '--config.seeds=[0]',
        '--config.learning_rates=[0.001]',
        '--config.eval.lengths=[9]',
      ],
      cwd=tmp_path,
      env={'POSENC_POWER_SEEN': str(seen)},
    )

  proc = train('power=0.25', tmp_path / 'run')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert set(seen.read_text().split()) == {'0.25'}  # every trace of the function got it
  with open(tmp_path / 'run' / 'results.json') as f:
    assert json.load(f)['encoding_options'] == {'power': 0.25}
  # A name no encoding takes, and a value outside the option's: one line, nothing written.
  for option, message in (
    ('powr=0.25', "error: unknown encoding option 'powr' (did you mean 'power'?); valid: ["),
    ('power=-1.0', 'error: encoding_options.power=-1.0 must be a number > 0'),
  ):
    proc = train(option, tmp_path / 'bad')
    last = proc.stderr.splitlines()[-1]
    assert proc.returncode == 2 and last.startswith(message), proc.stderr[-2000:]
    assert not (tmp_path / 'bad').exists()
  assert message == last


def test_an_option_declared_without_the_helper_is_one_line(tmp_path):
  (tmp_path / 'posenc_bad_option.py').write_text(
    textwrap.dedent('''
      from posenc import encodings
      ENC = encodings.bias(lambda q_pos, k_pos: 0 * q_pos, options={'strength': 2.0})
    ''')
  )
  sys.path.insert(0, str(tmp_path))
  try:
    with pytest.raises(ValueError) as error:
      encodings.get('posenc_bad_option:ENC')
  finally:
    sys.path.remove(str(tmp_path))
  assert "option 'strength' is 2.0; declare it with posenc.encodings.option(default, doc)" in str(
    error.value
  )
  assert '\n' not in str(error.value)


def test_a_twin_needs_positions():
  with pytest.raises(ValueError, match="no randomized twin: its module 'DapeEncoding'"):
    encodings.randomized_twin(encodings.get('dape'))


def test_an_entry_point_is_used_by_its_name(outside_module, tmp_path, monkeypatch):
  """An installed package's entry point (the metadata pip writes, on the path)."""
  info = tmp_path / 'posenc_outside_example-1.0.dist-info'
  info.mkdir()
  (info / 'METADATA').write_text(
    'Metadata-Version: 2.1\nName: posenc-outside-example\nVersion: 1.0\n'
  )
  (info / 'entry_points.txt').write_text(
    f'[posenc.encodings]\nsqrt_alibi = {outside_module}:SQRT_ALIBI\n'
    f'broken = {outside_module}:NOPE\n'
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  outside.entry_points.cache_clear()
  outside.load.cache_clear()
  try:
    assert encodings.get('sqrt_alibi') is encodings.get(f'{outside_module}:SQRT_ALIBI')
    assert encodings.get('randomized_sqrt_alibi').randomized
    with pytest.raises(
      ValueError, match="entry point 'broken' of an installed package does not load: AttributeError"
    ):
      encodings.get('broken')
    with pytest.raises(
      ValueError,
      match=r'installed package\'s \(entry point group '
      r'posenc.encodings: broken, sqrt_alibi\)',
    ):
      encodings.get('nope')
  finally:
    outside.entry_points.cache_clear()
    outside.load.cache_clear()


@pytest.mark.parametrize(
  'attribute',
  ['SQRT_ALIBI']
  + [pytest.param(a, marks=pytest.mark.slow) for a in ('HALF_ROPE', 'SCALED_SIN_COS', 'WINDOW')],
)
def test_the_conformance_helper_passes_outside_encodings(outside_module, attribute):
  checks = testing.check_encoding(
    f'{outside_module}:{attribute}',
    ('backends', 'padded', 'causal', 'step', 'generation', 'gradients'),
  )
  assert [c.name for c in checks] == [
    'backends',
    'padded',
    'causal',
    'step',
    'generation',
    'gradients',
  ] and all(c.passed for c in checks)
