"""Test-time interventions (posenc/analysis/interventions.py): the identity at neutral settings,
the closed forms of the RoPE scalings, one-line errors, and before / after on a saved run."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rpe_table1
from posenc import config as config_lib
from posenc import encodings
from posenc.analysis import interventions as iv
from posenc.models import encoder as encoder_lib
from posenc.training import train
from posenc import setup
from posenc.encodings import rotary

N = 8  # The tiny configs' training length.


def tiny(encoding, **fields):
  config = rpe_table1.get_config(f'task=reverse_string,encoding={encoding},tiny')
  config.train.max_length = N
  return config_lib.cell_config(config, fields)


def logits(config, params, length=N):
  """The encoder's logits on one batch at `length`, the 'noise' stream fixed."""
  run = setup.build(config)
  task, model = run.task, run.model
  tokens = jax.random.randint(jax.random.key(1), (2, 2 * length), 0, task.vocab_size)
  return model.apply(
    params, tokens, jnp.int32(2 * length), deterministic=True, rngs={'noise': jax.random.key(7)}
  )


def init(config):
  model = setup.build(config).model
  return model.init(
    encoder_lib.init_rngs(jax.random.key(0)),
    jnp.zeros((1, 4), jnp.int32),
    jnp.int32(4),
    deterministic=True,
  )


def test_rope_frequency_closed_forms():
  f = rotary.rope_frequencies(8, 10_000.0)
  np.testing.assert_allclose(f, 10_000.0 ** (-np.arange(4) / 4))
  # NTK: b' = b s^(K/(K-2)); the highest frequency is kept, the lowest divided by s.
  assert rotary.ntk_max_time(10_000.0, 2.0, 4) == pytest.approx(40_000.0)
  g = rotary.rope_frequencies(8, rotary.ntk_max_time(10_000.0, 4.0, 8))
  assert g[0] == 1.0
  assert g[-1] == pytest.approx(f[-1] / 4 ** (3 / 4 * 8 / 6))
  # YaRN as the paper's equation: a ramp in r = L f / 2π turns over the original length L.
  freqs = np.array([2.0, 0.5, 0.05, 0.001])
  y = rotary.yarn_paper_frequencies(freqs, 4.0, 100, alpha=1.0, beta=32.0)
  turns = 100 * freqs / (2 * np.pi)  # [31.8, 7.96, 0.80, 0.016]
  gamma = np.clip((turns - 1) / 31, 0, 1)
  np.testing.assert_allclose(y, freqs * (1 - gamma) / 4 + freqs * gamma)
  assert y[3] == pytest.approx(freqs[3] / 4) and y[2] == pytest.approx(freqs[2] / 4)
  high = rotary.yarn_paper_frequencies(np.array([10.0]), 4.0, 100)
  assert high[0] == 10.0  # more than β turns: kept exactly
  assert rotary.yarn_attention_factor(4.0) == pytest.approx(0.1 * math.log(4) + 1)
  assert rotary.yarn_attention_factor(1.0) == 1.0
  assert rotary.scaling('pi', 4.0, 0, 8, 10_000.0) == (4.0, None, 1.0)


@pytest.mark.parametrize(
  'length, factor, head_dim, low, high',
  [
    # K ln(L / 2π r) / (2 ln b): at L = 16, K = 16: r = 32 -> -2.20 (0), r = 1 -> 0.81 (1).
    (16, 4.0, 16, 0, 1),
    # At L = 512, K = 64: r = 32 -> 3.25 (floor 3), r = 1 -> 15.29 (ceil 16).
    (512, 8.0, 64, 3, 16),
  ],
)
def test_yarn_is_the_authors_dimension_ramp(length, factor, head_dim, low, high):
  """The closed form of the authors' code (jquesnelle/yarn, and the LM libraries' YaRN),
  written out: pairs below floor(m(32)) keep f_m, pairs from ceil(m(1)) take f_m / s, a
  linear ramp in the pair index m between, where m(r) = K ln(L / (2π r)) / (2 ln b)."""
  b = 10_000.0
  m_of = lambda r: head_dim * math.log(length / (2 * math.pi * r)) / (2 * math.log(b))
  assert (max(math.floor(m_of(32)), 0), min(math.ceil(m_of(1)), head_dim - 1)) == (low, high)
  expected = []
  for m in range(head_dim // 2):
    f = b ** (-2 * m / head_dim)
    interpolate = min(max((m - low) / (high - low), 0.0), 1.0)
    expected.append(f * (1 - interpolate) + f / factor * interpolate)
  np.testing.assert_allclose(
    rotary.yarn_frequencies(head_dim, b, factor, length), expected, rtol=1e-12
  )
  divisor, freqs, scale = rotary.scaling('yarn', factor, length, head_dim, b)
  assert divisor == 1 and scale == pytest.approx(0.1 * math.log(factor) + 1)
  np.testing.assert_allclose(freqs, expected, rtol=1e-12)
  # The paper's ramp over turns is another set of frequencies (by a third or more here);
  # at L = 16 it divides even the fastest pair, which the authors' code keeps.
  assert freqs[0] == 1.0
  paper = rotary.scaling('yarn_paper', factor, length, head_dim, b)[1]
  np.testing.assert_array_equal(
    paper, rotary.yarn_paper_frequencies(rotary.rope_frequencies(head_dim, b), factor, length)
  )
  assert np.max(np.abs(paper / freqs - 1)) > 0.3
  assert (paper[0] < 1.0) == (length == 16)


def test_position_interpolation_is_rope_at_divided_positions():
  x = jax.random.normal(jax.random.key(0), (1, 6, 2, 8))
  positions = jnp.arange(6)
  np.testing.assert_allclose(
    rotary.apply_rope(x, positions / 3.0),
    rotary.apply_rope(x, jnp.asarray([0, 1 / 3, 2 / 3, 1, 4 / 3, 5 / 3])),
    rtol=1e-6,
  )


@pytest.mark.parametrize(
  'encoding, intervention, params, exact',
  [
    ('rotary', 'position_interpolation', {'scale': 1.0}, True),
    ('rotary', 'ntk', {'scale': 1.0}, True),
    ('rotary', 'yarn', {'scale': 1.0, 'original_length': 8.0}, True),
    ('rotary', 'yarn_paper', {'scale': 1.0, 'original_length': 8.0}, True),
    ('alibi', 'slope_scale', {'scale': 1.0}, True),
    ('type1', 'slope_scale', {'scale': 1.0}, True),
    ('relative', 'scalable_softmax', {'s': 1 / math.log(2 * N)}, False),
  ],
)
def test_identity_at_the_neutral_setting(encoding, intervention, params, exact):
  config = tiny(encoding)
  weights = init(config)
  changed = iv.apply(setup.build(config), intervention, params)
  assert changed.to_json() != config.to_json()
  # An encoder at length 2N (inputs and queries): every query attends 2N keys.
  before, after = logits(config, weights), logits(changed, weights)
  if exact:
    np.testing.assert_array_equal(before, after)
  else:
    np.testing.assert_allclose(before, after, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
  'encoding, intervention, params',
  [
    ('rotary', 'position_interpolation', {'scale': 2.0}),
    ('rotary', 'ntk', {'scale': 4.0}),
    ('rotary', 'yarn', {'scale': 4.0, 'original_length': 4.0}),
    ('rotary', 'yarn_paper', {'scale': 4.0, 'original_length': 4.0}),
    ('alibi', 'slope_scale', {'scale': 0.5}),
    ('type1', 'slope_scale', {'scale': 0.5}),
    ('relative', 'scalable_softmax', {'s': 1.0}),
  ],
)
def test_a_non_neutral_setting_changes_the_logits(encoding, intervention, params):
  config = tiny(encoding)
  weights = init(config)
  assert not np.allclose(
    logits(config, weights),
    logits(iv.apply(setup.build(config), intervention, params), weights),
    atol=1e-4,
  )


@pytest.mark.parametrize('name', [n for n, e in encodings.ENCODINGS.items() if e.randomized])
def test_ordered_positions_reads_the_same_weights(name):
  config = tiny(name, **{'model.max_position': 64})
  ordered = iv.apply(setup.build(config), 'ordered_positions', {})
  assert ordered.encoding == name.removeprefix('randomized_')
  weights = init(config)
  assert jax.tree.structure(weights) == jax.tree.structure(init(ordered))
  # Ordered: the draw no longer matters.
  out = logits(ordered, weights)
  assert np.all(np.isfinite(out))


def test_defaults_follow_the_config():
  config = tiny('rotary')
  config.eval.max_length = 4 * N
  assert iv.resolve(setup.build(config), 'ntk', {}) == {'scale': 4.0}
  assert iv.resolve(setup.build(config), 'yarn', {}) == {'scale': 4.0, 'original_length': N}
  assert iv.resolve(setup.build(config), 'scalable_softmax', {}) == {
    's': pytest.approx(1 / math.log(N))
  }
  assert iv.resolve(
    setup.build(tiny('alibi', **{'eval.max_length': 4 * N})), 'slope_scale', {}
  ) == {'scale': 0.25}


@pytest.mark.parametrize(
  'text, encoding, message',
  [
    ('bogus', 'rotary', "unknown intervention 'bogus'; valid: position_interpolation, ntk"),
    ('ntk:scale=big', 'rotary', "intervention parameter scale='big' is not a number"),
    ('ntk:scale', 'rotary', "intervention parameter 'scale' is not key=value"),
    ('ntk:factor=2', 'rotary', "unknown parameter 'factor' of ntk; valid: scale"),
    ('ntk:scale=-1', 'rotary', 'ntk scale=-1 must be a positive number'),
    ('yarn:original_length=2.5', 'rotary', 'original_length=2.5 must be an integer >= 2'),
    (
      'ntk',
      'alibi',
      "encoding 'alibi' has no rope_scaling; it applies to rotary, randomized_rotary",
    ),
    ('ordered_positions', 'rotary', "encoding 'rotary' is not randomized"),
    ('slope_scale', 'rotary', "encoding 'rotary' has no slope_scale"),
  ],
)
def test_bad_interventions_are_one_line(text, encoding, message):
  config = tiny(encoding)
  with pytest.raises(iv.InterventionError) as e:
    name, params = iv.parse(text)
    iv.resolve(setup.build(config), name, params)
  assert message in str(e.value) and '\n' not in str(e.value)


def test_scalable_softmax_refuses_a_run_with_a_temperature():
  config = tiny('rotary', **{'model.temperature': 'fixed'})
  with pytest.raises(iv.InterventionError, match='already has an attention temperature'):
    iv.resolve(setup.build(config), 'scalable_softmax', {})


def test_before_and_after_on_a_saved_run(cli, tmp_path):
  config = tiny(
    'rotary',
    **{'train.steps': 4, 'seeds': [0, 1], 'learning_rates': [1e-3], 'eval.max_length': 2 * N},
  )
  train.train_and_evaluate(setup.build(config), str(tmp_path / 'run'))
  neutral = iv.intervene(str(tmp_path / 'run'), 'ntk', {'scale': 1.0})
  assert neutral['after'] == neutral['before']
  assert len(neutral['before']['members']) == 2
  changed = iv.intervene(str(tmp_path / 'run'), 'ntk', {'scale': 8.0})
  assert changed['before'] == neutral['before'] and changed['after'] != changed['before']
  out = tmp_path / 'out'
  proc = cli.run(
    [
      'launch.analyze',
      'intervene',
      str(tmp_path / 'run'),
      '--intervention=ntk:scale=8',
      f'--out={out}',
    ]
  )
  assert proc.returncode == 0, proc.stderr
  written = json.loads((out / 'intervene_ntk.json').read_text())
  assert written['after'] == json.loads(json.dumps(changed['after']))
  assert '| length | before | after | change |' in (out / 'intervene_ntk.md').read_text()
  for bad, message in (
    ('--intervention=bogus', "unknown intervention 'bogus'"),
    ('--intervention=slope_scale', "encoding 'rotary' has no slope_scale"),
  ):
    proc = cli.run(
      ['launch.analyze', 'intervene', str(tmp_path / 'run'), bad, f'--out={tmp_path / "bad"}']
    )
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / 'bad').exists()
