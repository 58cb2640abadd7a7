"""The speed tools (`launch.speed`, `posenc.speed`): bad input is one `error:` line, exit
status 2, nothing written; the floors and the profile's attribution."""

import json
import os
import subprocess
import sys

import pytest

from experiments import sweep_tiny
from posenc import setup
from posenc.speed import floor
from posenc.speed import machine
from posenc.speed import population as speed_population
from posenc.speed import profile
from posenc.training import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
  'args, needle',
  [
    (
      ['nope'],
      "unknown measurement 'nope'; valid: eval, forward, generate, gpu_check, plan, population",
    ),
    (['samplers', '--tasks=nope'], "unknown task 'nope'; valid tasks: even_pairs"),
    (['samplers', '--lengths=x'], "--lengths='x' must be comma-separated positive integers"),
    (['samplers', '--bogus'], "Unknown command line flag 'bogus'"),
    (['samplers', 'extra'], "unexpected arguments ['extra']; give flags only"),
    (
      ['forward', '--encodings=nope'],
      "unknown encoding 'nope' (did you mean 'none'?); valid encodings: none",
    ),
    (['forward', '--batch=100'], '--batch=100 must be a multiple of --sub_batch=64'),
    (['train', '--compile_threads=-1'], '--compile_threads=-1 must be an integer >= 0'),
    (['population', '--suite=nope'], "unknown suite 'nope'; valid suites: cpu-v2, cpu-v1, tiny"),
    (['population', '--task=reverse_string'], '--task=reverse_string is not a task of cpu-v1'),
    (['population', '--settings=loops=vmap'], "unknown key 'loops'; valid: default, or KEY"),
    (['population', '--settings=loop=scan'], "loop='scan'; valid: auto, map, vmap"),
    (['population', '--settings=devices=0'], "devices='0' must be a positive integer"),
    (['population', '--populations=0'], '--populations=0 must be comma-separated positive'),
    (
      ['population', '--encoding=rope'],
      "unknown encoding 'rope' (did you mean 'rotary'?); valid encodings: none",
    ),
  ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, args, needle):
  out = tmp_path / 'out.json'
  extra = [f'--out={out}'] if args[0] in ('samplers', 'forward', 'population', 'train') else []
  proc = cli.run(['launch.speed', *args, *extra])
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert not out.exists()


@pytest.mark.parametrize('arg', ['--help', 'nope'])
def test_the_dispatcher_answers_help_and_an_unknown_name_without_jax(arg):
  code = (
    'import runpy, sys\n'
    f'sys.argv = ["speed", {arg!r}]\n'
    'try:\n'
    '  runpy.run_module("launch.speed", run_name="__main__", alter_sys=True)\n'
    'except SystemExit as e:\n'
    '  print("exit", e.code, "jax" in sys.modules)\n'
  )
  proc = subprocess.run(
    [sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=True
  )
  assert proc.stdout.splitlines()[-1] == f'exit {0 if arg == "--help" else 2} False'


def test_keep_freed_memory_is_opt_in(monkeypatch):
  monkeypatch.delenv('POSENC_KEEP_FREED_MEMORY', raising=False)
  assert machine.keep_freed_memory() is False
  if sys.platform.startswith('linux'):  # applied in a child process: it is process-wide
    env = dict(os.environ, POSENC_KEEP_FREED_MEMORY='1')
    out = subprocess.run(
      [
        sys.executable,
        '-c',
        'from posenc.speed import machine; print(machine.keep_freed_memory())',
      ],
      cwd=ROOT,
      env=env,
      capture_output=True,
      text=True,
      check=True,
    ).stdout
    assert out.strip() == 'True'


def test_dense_products_are_three_per_weight_with_the_model_shapes():
  model = settings.ModelSettings.of(sweep_tiny.get_config())
  d, f = model.d_model, model.ffn_size
  products = floor.dense_products(7, model)
  assert len(products) == 3 * 6
  # The forward products' FLOPs are the token-linear part of the forward FLOP model.
  forward = sum(2 * m * k * n for m, k, n in products[0::3])
  assert forward == 2 * 7 * (4 * d * d + 2 * d * f)
  assert products[12:15] == [(7, d, f), (7, f, d), (d, 7, f)]


def test_dense_product_floor_averages_buckets_over_the_curriculum():
  config = sweep_tiny.get_config()
  config.train.max_length, config.train.bucket_size = 8, 3
  got = floor.training_floor(setup.build(config), repeats=2)
  # Lengths 1-3 -> bucket 3, 4-6 -> 6, 7-8 -> 8 (capped at N).
  assert sorted(got['bucket_ms']) == [3, 6, 8]
  ms = got['bucket_ms']
  mean = (3 * ms[3] + 3 * ms[6] + 2 * ms[8]) / 8
  assert abs(got['mean_step_ms'] - mean) < 1e-6 * mean
  assert got['max_updates_per_s'] == pytest.approx(1e3 / got['mean_step_ms'])
  assert got['gflops_per_s'] > 0


def test_evaluation_floor_times_forward_products_per_micro_batch():
  config = sweep_tiny.get_config()
  config.eval.examples_per_length, config.eval.batch_size = 8, 4
  model = settings.ModelSettings.of(config)
  d, f = model.d_model, model.ffn_size
  assert floor.dense_products(3, model, backward=False) == [(3, d, d)] * 4 + [
    (3, d, f),
    (3, f, d),
  ]
  timer = floor.ProductTimer(repeats=2)
  got = floor.evaluation_floor(setup.build(config), 5, timer=timer)
  tokens, micro = got['tokens'], got['micro_batch']
  seconds, _ = floor.products_cost(floor.dense_products(micro * tokens, model, False), timer)
  calls = 8 // micro * config.model.num_layers
  assert got['floor_s'] == pytest.approx(calls * seconds)
  assert got['flops'] == pytest.approx(
    8 * 2.0 * config.model.num_layers * (tokens * (4 * d * d + 2 * d * f) + 2 * tokens**2 * d)
  )
  assert got['dense_gflops_per_s'] > 0


def test_geometric_floor_scales_with_weights():
  got = floor.geometric_floor(1e6, block=(4, 64), num_blocks=2, repeats=2)
  assert got['chain_ns_per_weight'] > 0 and got['cumsum_ns_per_weight'] > 0
  per_weight = got['chain_ns_per_weight'] + got['cumsum_ns_per_weight']
  assert got['floor_s'] == pytest.approx(per_weight * 1e-9 * 1e6)


def test_profile_attributes_trace_events_to_parts_of_the_model():
  hlo = '\n'.join(
    [
      '  %dot.3 = f32[2]{0} dot(%a, %b), metadata={op_name="jit(f)/jvp(Encoder)/layer_1/'
      'Dense_0/dot_general" stack_frame_id=4}',
      '  ROOT %fusion.7 = f32[2]{0} fusion(%c), kind=kLoop, metadata={op_name="jit(f)/'
      'transpose(jvp(Encoder))/layer_0/attention/attention_cpu_blocked/jit(_pad)/pad"}',
      '  %adam.1 = f32[2]{0} multiply(%d, %e), metadata={op_name="jit(f)/while/body/adam/mul"}',
      '  %param.0 = f32[2]{0} parameter(0)',
    ]
  )
  names = profile.op_names(hlo)
  assert names == {
    'dot.3': 'jvp(Encoder)/layer_N/Dense_0/dot_general',
    'fusion.7': 'transpose(jvp(Encoder))/layer_N/attention/attention_cpu_blocked/jit(_pad)/pad',
    'adam.1': 'adam/mul',
  }
  seconds = {'dot.3': 0.004, 'fusion.7': 0.010, 'adam.1': 0.002, 'ThunkExecutor::Execute': 9.0}
  got = profile.attribute(seconds, names, steps=2)
  assert got['attributed_ms'] == pytest.approx(8.0)  # the executor's own event is not an op
  assert got['parts'] == pytest.approx(
    {
      'attention: relative position term': 5.0,
      'dense products': 2.0,
      'optimizer, loss, curriculum': 1.0,
    }
  )
  assert got['ops'][0] == (names['fusion.7'], pytest.approx(5.0))


def test_profile_rejects_a_bucket_that_training_does_not_compile(cli, tmp_path):
  out = tmp_path / 'out.json'
  proc = cli.run(['launch.speed', 'profile', '--buckets=41', f'--out={out}'])
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and '--buckets [41] are not training buckets; valid: 5,10' in lines[0]
  assert not out.exists()


def test_a_setting_is_config_fields_on_one_device_unless_it_names_more():
  assert speed_population.parse_setting('default') == {'cpu_devices': 1}
  assert speed_population.parse_setting('loop=vmap+devices=2+dispatch=8') == {
    'train.population_loop': 'vmap',
    'cpu_devices': 2,
    'train.steps_per_dispatch': 8,
  }
  assert speed_population.parse_setting('optimizer=batched') == {
    'cpu_devices': 1,
    'train.optimizer_loop': 'batched',
  }
  with pytest.raises(ValueError, match="optimizer='vmap'; valid: member, batched"):
    speed_population.parse_setting('optimizer=vmap')
  config = speed_population.setting_config(
    sweep_tiny.get_config(), {'model.attention_impl': 'reference'}, 5
  )
  assert config.seeds == [0, 1, 2, 3, 4] and len(config.learning_rates) == 1
  assert config.model.attention_impl == 'reference'


def test_population_times_every_setting_and_compiles_one_program_per_bucket(cli, tmp_path):
  out = tmp_path / 'population.json'
  proc = cli.run(
    [
      'launch.speed',
      'population',
      '--suite=tiny',
      '--task=even_pairs',
      '--populations=3',
      '--settings=default,devices=2,dispatch=4',
      '--steps=4',
      '--rounds=2',
      '--nofloor',
      '--eval',
      f'--out={out}',
    ]
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = json.loads(out.read_text())['rows']
  assert [(r['setting'], r['devices']) for r in rows] == [
    ('default', 1),
    ('devices=2', 2),
    ('dispatch=4', 1),
  ]
  # Two length buckets (lengths 1..8 in buckets of 4), or one program of K steps; two
  # evaluation buckets (lengths 1..12 in buckets of 6). Timing recompiled nothing.
  assert [r['compiled_programs'] for r in rows] == [2, 2, 1]
  assert {r['eval_programs'] for r in rows} == {2}
  assert all(len(r['rates']) == 2 and r['model_updates_per_s'] > 0 for r in rows)
  assert 'model-updates/s (median over rounds)' in proc.stdout


def test_the_gpu_check_runs_each_step_under_its_limit_and_reports_a_timeout(tmp_path):
  # The CPU path at the tiny size: the smoke (one encoding) finishes, speed train is killed
  # at its limit; both files say which, and the skipped steps say why.
  # Its absl flags are read in a process of its own (another launcher's may be defined here).
  budget = subprocess.run(
    [
      sys.executable,
      '-c',
      'from launch.speed import gpu_check as g; '
      'print(sum(s["limit_s"] for s in g.STEPS.values()), g.BUDGET_S)',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  )
  limits, whole = map(int, budget.stdout.split())
  assert limits <= whole <= 420
  out = tmp_path / 'check'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.speed',
      'gpu_check',
      '--size=tiny',
      f'--out={out}',
      '--steps=smoke,train_float32,eval',
      '--limits=train_float32=0.5',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(out / 'gpu_check.json') as f:
    report = json.load(f)
  steps = {s['name']: s for s in report['steps']}
  assert list(steps) == ['smoke', 'train_float32', 'eval']
  assert steps['smoke']['status'] == 'ok', steps['smoke']['output_tail']
  assert list(steps['smoke']['cells']) == ['parity_check__none']
  assert steps['train_float32']['status'] == 'timed out'
  assert steps['train_float32']['seconds'] < 30 and 'figures' not in steps['train_float32']
  assert steps['eval'] == {**steps['eval'], 'status': 'skipped', 'reason': 'no tiny size'}
  assert report['machine']['versions']['jax'] and not os.path.exists(out / 'jax_cache')
  page = (out / 'gpu_check.md').read_text()
  assert '| train_float32 | 0.5 | timed out |' in page and 'smoke ok' not in page
  assert '2 steps ran' in page and 'train_float32 timed out' in page
  assert '| parity_check__none |' in page
  assert (out / 'logs' / 'smoke.log').exists()


def test_the_gpu_check_refuses_an_unknown_step_or_limit(cli, tmp_path):
  for args, needle in (
    (['--steps=nope'], "--steps: unknown step 'nope'; valid: smoke, train_float32"),
    (['--limits=eval=-1'], '--limits=eval=-1: give NAME=SECONDS with SECONDS > 0'),
    (['--limits=nope=3'], "--limits=nope=3: unknown step 'nope'"),
  ):
    proc = cli.run(['launch.speed', 'gpu_check', f'--out={tmp_path}/check', *args])
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert not (tmp_path / 'check').exists()
