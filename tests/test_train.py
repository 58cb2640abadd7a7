"""The engine end to end on tiny configs: schema, compile bound, resume, divergence, errors."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from experiments import rpe_table1
from posenc.training import checkpoint
from posenc import config as config_lib
from posenc import programs
from posenc.storage import io
from posenc.training import state as state_lib
from posenc import sweep
from posenc.training import train
from posenc.training import update
from posenc import setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny(**overrides):
  config = rpe_table1.get_config('task=parity_check,encoding=randomized_relative,tiny')
  return config_lib.cell_config(config, overrides)


def final_params(workdir, config):
  run = setup.build(config)
  manager = checkpoint.checkpoint_manager(workdir)
  state, _ = checkpoint.restore_state(
    manager, manager.latest_step(), run.abstract_state, run.population
  )
  return jax.device_get(state)


def test_tiny_run_writes_the_results_schema(tmp_path):
  config = tiny()
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  on_disk = io.read_json(str(tmp_path / 'results.json'))
  assert on_disk['members'] == json.loads(json.dumps(results['members']))
  for key in (
    'task',
    'encoding',
    'num_params',
    'train_steps',
    'train_length',
    'eval_lengths',
    'versions',
    'members',
  ):
    assert key in on_disk
  assert on_disk['eval_lengths'] == list(range(1, config.eval.max_length + 1))
  assert set(on_disk['versions']) >= {'jax', 'flax', 'device_kind'}
  assert len(on_disk['members']) == len(config.seeds) * len(config.learning_rates)
  n = config.train.max_length
  for member in on_disk['members']:
    assert set(member) >= {'seed', 'learning_rate', 'diverged', 'score', 'accuracy_by_length'}
    accs = member['accuracy_by_length']
    assert sorted(map(int, accs)) == on_disk['eval_lengths']
    assert all(0.0 <= a <= 1.0 for a in accs.values())
    unseen = [accs[str(l)] for l in range(n + 1, config.eval.max_length + 1)]
    assert member['score'] == pytest.approx(float(np.mean(unseen)))
  lines = io.read_jsonl(str(tmp_path / 'metrics.jsonl'))
  assert [r['step'] for r in lines] == list(range(5, 21, 5))
  assert all(len(r['loss']) == 2 and r['steps_per_s'] > 0 for r in lines)
  assert os.path.exists(tmp_path / 'config.json')


def test_compiled_programs_are_bounded_by_buckets(tmp_path):
  # 60 steps over lengths 1..8 in buckets of 4: one program per bucket, 2, not 8.
  config = tiny(
    **{
      'train.steps': 60,
      'train.log_every': 20,
      'checkpoint_every': 60,
      'train.programs': 'buckets',
      'eval.programs': 'buckets',
    }
  )
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  compiled = results['compiled_programs']
  assert len(compiled['train_buckets']) == 2
  assert compiled['train'] == 2 <= len(programs.data_widths(8, 4))
  assert compiled['eval'] <= len(programs.data_widths(12, 6))


@pytest.mark.parametrize('loop', [pytest.param('map', marks=pytest.mark.slow), 'vmap'])
def test_population_members_differ_and_share_nothing_but_data(tmp_path, loop):
  config = tiny(**{'learning_rates': [1e-3, 3e-3], 'train.population_loop': loop})
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  assert [(m['seed'], m['learning_rate']) for m in results['members']] == [
    (0, 1e-3),
    (0, 3e-3),
    (1, 1e-3),
    (1, 3e-3),
  ]
  params = final_params(str(tmp_path), config).params
  leaf = np.asarray(jax.tree.leaves(params)[0])
  assert len({leaf[i].tobytes() for i in range(4)}) == 4


def test_vmap_and_map_agree_to_float_rounding(tmp_path):
  # The same members either way; batching them changes XLA's kernels, so the rounding,
  # which Adam's normalised steps carry into the parameters (about 3e-4 after 20 steps at
  # learning rate 3e-3, as for a population on more devices: tests/test_scale.py).
  params, scores = [], []
  for loop in ('map', 'vmap'):
    config = tiny(**{'train.population_loop': loop, 'learning_rates': [1e-3, 3e-3]})
    workdir = str(tmp_path / loop)
    results = train.train_and_evaluate(setup.build(config), workdir)
    params.append(final_params(workdir, config).params)
    scores.append([m['score'] for m in results['members']])
  for a, b in zip(jax.tree.leaves(params[0]), jax.tree.leaves(params[1])):
    np.testing.assert_allclose(a, b, atol=1e-2)
  np.testing.assert_allclose(scores[0], scores[1], atol=0.05)


def _steps_of(config, steps=6):
  """The population's state after `steps` calls of the update of its largest bucket."""
  run = setup.build(config)
  state = state_lib.init_state(run)
  bucket = run.training.buckets(run)[-1]
  update_fn = update.make_update_fn(run, bucket)
  members = (run.population.learning_rates, run.population.train_keys)
  for _ in range(steps):
    state, metrics = update_fn(state, jax.numpy.int32(bucket), *members)
  return jax.device_get(state), jax.device_get(metrics)


def test_batched_optimizer_agrees_with_the_members_optimizer_to_float_rounding():
  # The same gradients, then Adam per member inside the population loop or batched over the
  # members after it: XLA rewrites the division by Adam's bias corrections (a scalar per
  # member, a vector batched) into different kernels, so the parameters agree to float
  # rounding (Adam's normalised steps carry it: up to 2e-5 after 6 steps at learning rate
  # 3e-3), not bit for bit.
  base = {'learning_rates': [1e-3, 3e-3], 'train.population_loop': 'map'}
  member, member_metrics = _steps_of(tiny(**base))
  batched, batched_metrics = _steps_of(tiny(**base, **{'train.optimizer_loop': 'batched'}))
  assert member.step == batched.step == 6
  for a, b in zip(jax.tree.leaves(member.params), jax.tree.leaves(batched.params)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(member_metrics['loss'], batched_metrics['loss'], rtol=1e-4)
  assert (member.diverged == batched.diverged).all()


def test_divergent_member_is_marked_and_others_go_on(tmp_path):
  config = tiny(**{'learning_rates': [1e-3, 1e35], 'seeds': [0]})
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  ok, bad = results['members']
  assert bad['diverged'] and bad['score'] is None
  assert not ok['diverged'] and ok['score'] is not None
  state = final_params(str(tmp_path), config)
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))


def _launch_cmd(workdir, *extra):
  return [
    sys.executable,
    '-m',
    'launch.train',
    '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_rotary,tiny',
    f'--workdir={workdir}',
    '--config.train.steps=80',
    '--config.checkpoint_every=10',
    '--config.train.log_every=5',
    *extra,
  ]


def _launch(workdir, *extra):
  return subprocess.Popen(
    _launch_cmd(workdir, *extra),
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def test_killed_run_resumes_bit_for_bit(tmp_path, kill_after_checkpoint):
  straight, killed = str(tmp_path / 'straight'), str(tmp_path / 'killed')
  assert _launch(straight).wait() == 0
  kill_after_checkpoint(_launch_cmd(killed), killed, 20)
  assert _launch(killed).wait() == 0
  config = rpe_table1.get_config('task=parity_check,encoding=randomized_rotary,tiny')
  config.train.steps, config.checkpoint_every, config.train.log_every = 80, 10, 5
  a, b = final_params(straight, config), final_params(killed, config)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  strip = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  assert strip(io.read_jsonl(os.path.join(straight, 'metrics.jsonl'))) == strip(
    io.read_jsonl(os.path.join(killed, 'metrics.jsonl'))
  )
  ra = io.read_json(os.path.join(straight, 'results.json'))
  rb = io.read_json(os.path.join(killed, 'results.json'))
  assert ra['members'] == rb['members']


def test_rerun_with_other_config_is_refused(tmp_path):
  train.train_and_evaluate(setup.build(tiny()), str(tmp_path))
  with pytest.raises(config_lib.ConfigError, match='train.steps'):
    train.train_and_evaluate(setup.build(tiny(**{'train.steps': 30})), str(tmp_path))


@pytest.mark.parametrize(
  'override, needle',
  [
    (
      '--config.task=reverse_strin',
      "unknown task 'reverse_strin' (did you mean 'reverse_string'?); valid tasks: even_pairs",
    ),
    (
      '--config.encoding=rope',
      "unknown encoding 'rope' (did you mean 'rotary'?); valid encodings: none",
    ),
    ('--config.model.num_heads=3', 'not divisible'),
    ('--config.train.steps=abc', 'train.steps'),
    ('--config.model.max_position=10', 'max_position'),
    ('--config.model.attention_block=-1', 'model.attention_block=-1 must be'),
    ('--config.cpu_devices=-1', 'cpu_devices=-1 must be an integer in 0..1024'),
    ('--config.train.population_loop=scan', "population_loop 'scan'; valid: auto, map, vmap"),
    ('--config.train.optimizer_loop=vmap', "optimizer_loop 'vmap'; valid: member, batched"),
    (
      '--config.encoding=abacus',
      "encoding 'abacus' reads digit tokens and task 'reverse_string' "
      'has none; tasks with digits: addition',
    ),
    ('--bogus_flag=1', 'bogus_flag'),
  ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, override, needle):
  workdir = tmp_path / 'run'
  proc = cli.run(
    ['launch.train', '--config=experiments/rpe_table1.py:tiny', f'--workdir={workdir}', override]
  )
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and needle in lines[0], proc.stderr
  assert not workdir.exists()


def test_eval_lengths_stride_subset():
  config = config_lib.base_config()
  config.eval.stride = 50
  lengths = config_lib.eval_lengths(config)
  assert lengths[:4] == [1, 40, 41, 51] and lengths[-1] == 500
  config.eval.lengths = [500, 41, 41]
  assert config_lib.eval_lengths(config) == [41, 500]


@pytest.mark.parametrize(
  'encoding', ['randomized_relative', pytest.param('geometric_directional', marks=pytest.mark.slow)]
)
def test_steps_per_dispatch_equals_single_steps_bit_for_bit(tmp_path, encoding):
  # 23 steps in calls of up to 4 (cut at the log interval of 5 and the checkpoint at 10).
  base = {'encoding': encoding, 'train.steps': 23, 'train.log_every': 5}
  one = train.train_and_evaluate(setup.build(tiny(**base)), str(tmp_path / 'one'))
  config = tiny(**base, **{'train.steps_per_dispatch': 4})
  many = train.train_and_evaluate(setup.build(config), str(tmp_path / 'many'))
  assert one['members'] == many['members']
  assert many['compiled_programs']['train'] == 1
  for a, b in zip(
    jax.tree.leaves(final_params(str(tmp_path / 'one'), tiny(**base))),
    jax.tree.leaves(final_params(str(tmp_path / 'many'), config)),
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  strip = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  assert strip(io.read_jsonl(str(tmp_path / 'one' / 'metrics.jsonl'))) == strip(
    io.read_jsonl(str(tmp_path / 'many' / 'metrics.jsonl'))
  )


@pytest.mark.slow
def test_bfloat16_tiny_run_learns(tmp_path):
  config = tiny(
    **{
      'encoding': 'randomized_rotary',
      'model.dtype': 'bfloat16',
      'train.steps': 60,
      'train.log_every': 20,
      'learning_rates': [3e-3],
      'seeds': [0],
      'task': 'reverse_string',
    }
  )
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  losses = [r['loss'][0] for r in io.read_jsonl(str(tmp_path / 'metrics.jsonl'))]
  assert losses[-1] < losses[0] - 0.02, losses
  assert results['members'][0]['score'] is not None


def _decoder_cmd(workdir):
  return [
    sys.executable,
    '-m',
    'launch.train',
    '--config=experiments/rpe_decoder.py:task=reverse_string,encoding=randomized_rotary,tiny',
    f'--workdir={workdir}',
    '--config.train.steps=40',
    '--config.checkpoint_every=10',
    '--config.train.log_every=5',
  ]


@pytest.mark.slow
def test_decoder_experiment_end_to_end_and_killed_run_resumes_bit_for_bit(
  tmp_path, kill_after_checkpoint
):
  straight, killed = str(tmp_path / 'straight'), str(tmp_path / 'killed')
  assert subprocess.run(_decoder_cmd(straight), cwd=ROOT, capture_output=True).returncode == 0
  kill_after_checkpoint(_decoder_cmd(killed), killed, 20)
  assert subprocess.run(_decoder_cmd(killed), cwd=ROOT, capture_output=True).returncode == 0
  a, b = (io.read_json(os.path.join(d, 'results.json')) for d in (straight, killed))
  assert a['family'] == 'decoder' and a['members'] == b['members']
  member = a['members'][0]
  assert set(member['exact_match_by_length']) == set(member['accuracy_by_length'])
  assert all(0 <= v <= 1 for v in member['exact_match_by_length'].values())
  assert member['exact_match_score'] is not None


@pytest.mark.slow  # the progressive window's gradient is tested in test_decoder.py
def test_looped_decoder_with_progressive_loss_trains(tmp_path):
  config = rpe_table1.get_config('task=reverse_string,encoding=rotary,tiny')
  config = config_lib.cell_config(
    config,
    {
      'model.family': 'decoder',
      'model.num_layers': 1,
      'model.recurrences': 3,
      'model.injection': 'layer',
      'model.eval_recurrences': 5,
      'model.norm': 'pre',
      'model.ffn': 'gelu_glu',
      'model.tie_embeddings': True,
      'train.progressive_alpha': 0.5,
      'train.scale_block_gradients': True,
      'train.steps': 10,
      'seeds': [0],
    },
  )
  results = train.train_and_evaluate(setup.build(config), str(tmp_path))
  assert results['members'][0]['score'] is not None
  params = final_params(str(tmp_path), config).params
  assert 'block' in params and 'layer_0' in params['block'] and 'head' not in params


def test_rerun_with_another_config_is_refused_naming_the_changed_fields(tmp_path):
  train.prepare_workdir(tiny(**{'train.steps': 10}), str(tmp_path))
  with pytest.raises(
    config_lib.ConfigError, match=r'holds a run with a different config \(train.steps 10 -> 12\)'
  ):
    train.prepare_workdir(tiny(**{'train.steps': 12}), str(tmp_path))
  # The resumable fields may change: the same run, now logging more often.
  train.prepare_workdir(tiny(**{'train.steps': 10, 'train.log_every': 1}), str(tmp_path))
  assert io.read_json(str(tmp_path / 'config.json'))['train']['log_every'] == 1
