"""Theoretical receptive fields against Qin et al.'s numbers and exact sums; the
convergence diagnostic; `launch.analyze trf`."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from posenc import encodings
from posenc.analysis import receptive
from posenc import config as config_lib
from posenc import setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The digest's table: TRF at ε = 0.1 and 0.01, horizons 512 / 9216 / 10^7 (1/(t+1) and
# 1/(n ln n) at 10^7 given there to two digits: 1.9M, 8.5M, 5.1M).
GOLDEN = {
  'type1': ((6, 6, 6), (54, 60, 61)),
  'type2': ((4, 4, 4), (9, 9, 9)),
  'inverse_n': ((259, 3492, 1.9e6), (479, 8364, 8.5e6)),
  'inverse_n_log_n': ((87, 538, 35925), (417, 6599, 5.1e6)),
}
HORIZONS = (512, 9216, 10_000_000)


@pytest.mark.parametrize('name', sorted(GOLDEN))
def test_trf_matches_the_papers_table(name):
  for h, want_1, want_01 in zip(HORIZONS, *GOLDEN[name]):
    got = receptive.trf(receptive.weights(name, h, num_heads=1), [0.1, 0.01])[0]
    for value, want in zip(got, (want_1, want_01)):
      if want >= 1e6:  # given to two significant digits
        assert abs(value - want) <= 0.05e6, (name, h, value, want)
      else:
        assert value == want, (name, h, value, want)


@pytest.mark.parametrize('slope, want', [(1.0, (3, 5)), (1 / 16, (37, 74))])
def test_trf_of_alibi_against_exact_geometric_sums(slope, want):
  for h in HORIZONS[:2]:
    w = np.exp(-slope * np.arange(h))[None]
    got = receptive.trf(w, [0.1, 0.01])[0]
    assert tuple(got) == want
    # B_j = (1 - e^{-kj}) / (1 - e^{-k}): the smallest j with B_j > (1 - ε) B_H.
    for eps, value in zip((0.1, 0.01), got):
      target = (1 - eps) * (1 - np.exp(-slope * h))
      j = np.arange(1, h + 1)
      assert value == j[np.argmax(1 - np.exp(-slope * j) > target)]


def test_trf_of_the_registrys_alibi_heads():
  # Slopes 2^(-8h/H): with H = 2, 1/16 and 1/256.
  fields = receptive.trf(receptive.weights('alibi', 9216, num_heads=2), [0.1, 0.01])
  np.testing.assert_array_equal(fields[0], (37, 74))
  np.testing.assert_array_equal(fields[1], (590, 1179))


def test_convergence_flags_the_negative_controls_and_passes_the_others():
  for name in ('inverse_n', 'inverse_n_log_n', 't5'):
    result = receptive.convergence(name, num_heads=2)
    assert not result['converges'] and not result['settles'], name
  for name in ('type1', 'type2', 'alibi', 'sliding_window'):
    result = receptive.convergence(name, num_heads=2)
    assert result['converges'] and result['settles'], name
  assert 'condition for extrapolation holds' in receptive.diagnostic('type1', num_heads=2)
  assert 'diverges in every head' in receptive.diagnostic('randomized_inverse_n', num_heads=2)
  assert receptive.diagnostic('rotary') is None


@pytest.mark.parametrize(
  'p, converges, settles',
  [
    (2.0, True, True),
    (1.5, True, False),
    (1.01, True, False),
    (1.0, False, False),
    (0.5, False, False),
  ],
)
def test_convergence_of_p_series_is_decided_by_p(p, converges, settles):
  # kerple_log with k = 1 is the p-series Σ (1 + t)^-p: it converges iff p > 1, however slowly
  # its receptive field settles (p = 1.5: ~5.6k keys at ε = 0.01; p = 1.01: past 10^7).
  options = {'bias_r': p, 'bias_k': 1.0}
  result = receptive.convergence('kerple_log', options=options, num_heads=2)
  assert (result['converges'], result['settles'], result['basis']) == (
    converges,
    settles,
    'closed form',
  )
  if p == 1.5:
    assert 5_000 < max(result['trf'][-1]) < 6_000
  line = receptive.diagnostic('kerple_log', options=options, num_heads=2)
  want = {
    (True, True): 'converges (',
    (True, False): 'converges, slowly',
    (False, False): 'diverges in every head',
  }[converges, settles]
  assert want in line and 'has not settled' not in line, line


@pytest.mark.slow
def test_convergence_per_head_at_kerples_initialisation():
  # KERPLE-log starts at r ~ U(0, 2): the heads with r <= 1 diverge, the others converge.
  # KERPLE-power's e^{-k t^r} converges for every k, r > 0, slowly for small r.
  params, _ = receptive._used_params('kerple_log', 8, 64, None, None)  # pylint: disable=protected-access
  result = receptive.convergence('kerple_log', num_heads=8)
  assert result['divergent_heads'] == np.flatnonzero(params['r'] <= 1).tolist()
  assert 0 < len(result['divergent_heads']) < 8 and not result['converges']
  power = receptive.convergence('kerple_power', num_heads=8)
  assert power['converges'] and power['divergent_heads'] == []
  assert 'converges, slowly' in receptive.diagnostic('kerple_power', num_heads=8)


def test_sandwich_has_no_closed_form_and_is_judged_by_its_trf():
  result = receptive.convergence('sandwich', num_heads=2)
  assert result['basis'] == 'TRF' and result['converges'] == result['settles']


def test_trf_rejects_eps_outside_the_unit_interval():
  with pytest.raises(ValueError, match='eps=1.0 must lie in'):
    receptive.trf(np.ones((1, 4)), 1.0)
  assert receptive.trf(np.ones(4), 0.3) == 3


def test_analyze_trf_writes_json_and_plot_and_refuses_bad_input(cli, tmp_path):
  out = tmp_path / 'trf'
  run = lambda *args: cli.run(['launch.analyze', *args])
  proc = run('trf', '--encodings=type2,inverse_n', '--horizons=512,4096', f'--out={out}')
  assert proc.returncode == 0, proc.stderr
  data = json.load(open(out / 'trf.json'))
  by_name = {r['encoding']: r for r in data['encodings']}
  assert by_name['type2']['settles'] and not by_name['inverse_n']['settles']
  assert by_name['type2']['eps']['0.01']['trf'][0] == [9] * 8
  assert (out / 'trf.png').stat().st_size > 0
  for args, needle in [
    (('nope',), "unknown analysis 'nope'; valid: trf"),
    (('trf', '--eps=0'), 'every ε must lie in (0, 1)'),
    (('trf', '--encodings=rotary'), "encoding 'rotary' has no distance"),
    (('trf', '--horizons=512'), 'needs at least two horizons'),
    (('trf', '--num_heads=0'), '--num_heads=0 must be a positive integer'),
    (('trf', '--head_dim=-4'), '--head_dim=-4 must be a positive integer'),
    (('trf', '--bogus'), "Unknown command line flag 'bogus'"),
    (('trf', f'--out={out / "trf.json"}'), 'is a file, not a directory'),
  ]:
    proc = run(*args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, lines)


def test_training_a_bias_family_prints_the_diagnostic_first(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.train',
      '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_type2,tiny',
      f'--workdir={tmp_path}',
      '--config.train.steps=2',
      '--config.seeds=[0]',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr
  first = proc.stdout.splitlines()[0]
  assert first.startswith(
    'randomized_type2: at its initial parameters the bias series converges'
  ), first


def test_erf_on_hand_built_attention_rows():
  causal = np.array([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.05, 0.15, 0.8, 0], [0.4, 0.3, 0.2, 0.1]])
  # Query 3's mass by distance: 0.1, 0.2, 0.3, 0.4.
  np.testing.assert_allclose(receptive.mass_by_distance(causal, True)[3], [0.1, 0.2, 0.3, 0.4])
  np.testing.assert_array_equal(receptive.erf(causal, 0.1, True), [1, 2, 2, 4])
  np.testing.assert_array_equal(
    receptive.erf(causal, [0.5, 0.05], True), [[1, 2, 1, 3], [1, 2, 2, 4]]
  )
  # Bidirectional: distance d holds keys i - d and i + d.
  both = np.full((3, 3), 1 / 3)
  np.testing.assert_allclose(
    receptive.mass_by_distance(both, False),
    [[1 / 3, 1 / 3, 1 / 3], [1 / 3, 2 / 3, 0], [1 / 3, 1 / 3, 1 / 3]],
  )
  np.testing.assert_array_equal(receptive.erf(both, 0.1, False), [3, 2, 3])


@pytest.mark.slow
def test_erf_of_a_trained_run_and_its_bad_input(cli, tmp_path):
  from posenc import analysis
  from posenc.training import train
  from experiments import rpe_table1

  config = config_lib.cell_config(
    rpe_table1.get_config('task=reverse_string,encoding=alibi,tiny'),
    {'train.steps': 4, 'seeds': [0, 1]},
  )
  train.train_and_evaluate(setup.build(config), str(tmp_path / 'run'))
  run = analysis.load_run(str(tmp_path / 'run'), member=1)
  assert run.member['seed'] == 1
  rows = analysis.attention_rows(run, length=6, examples=3)
  assert len(rows['weights']) == config.model.num_layers and not rows['causal']
  w = rows['weights'][0]
  assert w.shape[:2] == (3, config.model.num_heads)
  np.testing.assert_allclose(w.sum(-1)[:, :, : int(rows['lengths'][0])], 1, atol=1e-5)
  # A learned table ends at max_position: longer inputs are refused, not clamped.
  learned = dataclasses.replace(
    run.built,
    model=run.model.clone(encoding='learned', max_position=8),
    parsed=encodings.parse('learned', {}),
  )
  bounded = dataclasses.replace(run, built=learned)
  assert analysis.check_inputs(bounded, 4) == 8  # reverse_string: input and output
  with pytest.raises(
    analysis.AnalysisError, match='gives inputs of 10 tokens, beyond model.max_position=8'
  ):
    analysis.attention_rows(bounded, length=5, examples=1)
  summary = analysis.erf_summary(rows, (0.1,))['eps']['0.1']
  for heads in summary['layers']:
    for head in heads:
      assert 1 <= head['q10'] <= head['q50'] <= head['q90'] <= w.shape[-1]
      assert 0 < head['mean_share'] <= 1
  # A workdir with a config but no checkpoint; a missing one.
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'empty' / 'config.json').write_text((tmp_path / 'run' / 'config.json').read_text())
  run_cli = lambda *args: cli.run(['launch.analyze', 'erf', *args])
  for args, needle in [
    ((f'--workdir={tmp_path / "empty"}',), 'has no checkpoint'),
    ((f'--workdir={tmp_path / "nope"}',), 'holds no run'),
    ((f'--workdir={tmp_path / "run"}', '--member=5'), '--member=5 is not'),
    ((f'--workdir={tmp_path / "run"}', '--eps=2'), 'must lie in (0, 1)'),
    (
      (f'--workdir={tmp_path / "run"}', '--length=6', '--max_memory_gb=1e-6'),
      'needs about 0.0 GiB for the attention weights (2 layers x 8 x',
    ),
    (
      (f'--workdir={tmp_path / "run"}', '--max_memory_gb=0'),
      '--max_memory_gb=0.0 must be a positive number',
    ),
  ]:
    proc = run_cli(*args, f'--out={tmp_path / "out"}')
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, lines)
    assert not (tmp_path / 'out').exists()
  proc = run_cli(f'--workdir={tmp_path / "run"}', '--length=6', f'--out={tmp_path / "out"}')
  assert proc.returncode == 0, proc.stderr
  data = json.load(open(tmp_path / 'out' / 'erf.json'))
  assert data['encoding'] == 'alibi' and set(data['eps']) == {'0.1', '0.01'}
  assert (tmp_path / 'out' / 'erf.png').stat().st_size > 0
  # The attention maps and the activation PCA of the same run.
  for analysis_name, extra in (('attention_maps', ()), ('activation_pca', ('--layer=-1',))):
    proc = cli.run(
      [
        'launch.analyze',
        analysis_name,
        f'--workdir={tmp_path / "run"}',
        '--lengths=4,8',
        *extra,
        f'--out={tmp_path / "out"}',
      ]
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / 'out' / f'{analysis_name}.png').stat().st_size > 0
  pca = json.load(open(tmp_path / 'out' / 'activation_pca.json'))
  assert pca['layer'] == config.model.num_layers - 1 and pca['lengths'] == [4, 8]
  proc = cli.run(['launch.analyze', 'activation_pca', f'--workdir={tmp_path / "run"}', '--layer=9'])
  assert proc.returncode == 2 and '--layer=9 is not a layer' in proc.stderr
  proc = cli.run(
    [
      'launch.analyze',
      'prefix_shuffle',
      f'--workdir={tmp_path / "run"}',
      f'--out={tmp_path / "shuf"}',
    ]
  )
  assert proc.returncode == 2 and 'needs a causal decoder' in proc.stderr
  assert not (tmp_path / 'shuf').exists()
  proc = cli.run(
    [
      'launch.analyze',
      'position_probe',
      f'--workdir={tmp_path / "run"}',
      '--length=6',
      '--test_length=8',
      '--steps=20',
      f'--out={tmp_path / "out"}',
    ]
  )
  assert proc.returncode == 0, proc.stderr
  layers = json.load(open(tmp_path / 'out' / 'position_probe.json'))['layers']
  assert len(layers) == config.model.num_layers
  assert all(r['mean_abs_distance'] >= 0 and r['baseline'] > 0 for r in layers)


def test_activation_pca_and_attention_map_on_fabricated_rows():
  from posenc import analysis

  # Activations that vary along one direction with position: the first component has all
  # the variance and orders the tokens by position.
  direction = np.array([3.0, 4.0]) / 5
  hidden = (np.arange(6)[:, None] * direction)[None]  # [1, 6, 2]
  rows = {
    'hidden': [hidden],
    'lengths': np.array([4]),
    'weights': [np.random.default_rng(0).random((1, 2, 6, 6))],
  }
  result = analysis.activation_pca(rows, [rows, {**rows, 'lengths': np.array([6])}], 0)
  assert result['explained'][0] == pytest.approx(1.0)
  first = result['points'][1][:, 0]
  assert np.all(np.diff(first) > 0) or np.all(np.diff(first) < 0)
  assert len(result['points'][0]) == 4 and len(result['points'][1]) == 6
  m = analysis.attention_map(rows, 0)
  np.testing.assert_array_equal(m, rows['weights'][0][0].max(axis=0)[:4, :4])
