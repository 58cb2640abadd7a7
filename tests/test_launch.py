"""The command-line surface: the README's examples run as written, every bad input is one
line with exit status 2 and nothing on disk, and the terminal shows posenc's lines only."""

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from launch import common
from launch import full_disk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = '--config=experiments/rpe_table1.py:task=parity_check,tiny'


def readme_commands() -> list[str]:
  """Every `python -m launch.*` command in the README's code blocks, continuations joined."""
  with open(os.path.join(ROOT, 'README.md')) as f:
    text = f.read().replace('\\\n', ' ')
  return [
    ' '.join(line.split())
    for line in text.splitlines()
    if line.strip().startswith('python -m launch.')
  ]


def _run(argv, **kwargs):
  return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, **kwargs)


def test_ci_runs_the_readmes_test_command_and_the_main_job_installs_only_what_it_needs():
  readme = open(os.path.join(ROOT, 'README.md')).read()
  ci = open(os.path.join(ROOT, '.ci', 'run')).read().splitlines()
  tests = [line.strip() for line in readme.splitlines() if 'python -m pytest -q' in line]
  assert tests and tests[0].startswith("pip install -e '.[test]' && "), tests
  assert tests[0] in ci, f'.ci/run does not run the README\'s test command {tests[0]!r}'
  # The main job's install takes the package alone: no test, docs or cloud extra.
  section = readme[readme.index('## Two commands') : readme.index('Run the tests')]
  installs = [line.strip() for line in section.splitlines() if 'pip install' in line]
  assert installs and all("'.[" not in line for line in installs), installs


def test_readme_override_examples_run_as_written(tmp_path):
  examples = [c for c in readme_commands() if '--config.' in c]
  assert examples, 'the README shows no override example'
  for k, command in enumerate(examples):
    argv = shlex.split(command)[1:]  # without `python`
    workdir = tmp_path / f'run{k}'
    argv = [f'--workdir={workdir}' if a.startswith('--workdir=') else a for a in argv]
    assert any(a.startswith('--config=') and 'tiny' in a for a in argv), (
      f'README example is not a tiny run, so this test cannot run it: {command}'
    )
    proc = _run(argv, timeout=600)
    assert proc.returncode == 0, (command, proc.stderr[-2000:])
    config = json.load(open(workdir / 'config.json'))
    for arg in argv:
      if arg.startswith('--config.'):
        path, value = arg[len('--config.') :].split('=', 1)
        node = config
        for part in path.split('.'):
          node = node[part]
        want = common.ListParser().parse(value) if isinstance(node, list) else value
        assert str(node) == str(want) or node == want, (path, node, value)


@pytest.mark.parametrize(
  'text, value',
  [
    ('[0,1]', [0, 1]),
    ('(0, 1)', [0, 1]),
    ('0,1', [0, 1]),
    ('7', [7]),
    ('[1e-3,3e-4]', [1e-3, 3e-4]),
    ('(-1.0,)', [-1.0]),
    ("['a']", ['a']),
    ('[]', []),
    ('[1,inf]', [1, float('inf')]),
  ],
)
def test_list_parser(text, value):
  assert common.ListParser().parse(text) == value


def _bad(tmp_path):
  """A directory of bad inputs: a file, broken experiment files, an empty directory, a run
  directory with a broken results.json, a run without checkpoints (`bare`) and a complete
  evaluation set (`set_done`)."""
  (tmp_path / 'file').write_text('x')
  (tmp_path / 'broken.py').write_text('def get_config(arg=None):\n  return (\n')
  (tmp_path / 'noconfig.py').write_text('x = 1\n')
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'bad').mkdir()
  (tmp_path / 'bad' / 'results.json').write_text('{not json')
  (tmp_path / 'bare').mkdir()
  (tmp_path / 'bare' / 'config.json').write_text(json.dumps(_tiny_config_json()))
  (tmp_path / 'set_done').mkdir()
  (tmp_path / 'set_done' / 'manifest.json').write_text('{}')
  return tmp_path


def _tiny_config_json():
  from experiments import rpe_table1
  from posenc import config as config_lib

  return config_lib.as_json(rpe_table1.get_config('task=parity_check,tiny'))


GRID_FILES = {
  'grid_raises.py': 'def grid(arg=None):\n  raise RuntimeError("no grid today")\n',
  'grid_unknown.py': (
    'def grid(arg=None):\n  return [{"task": "parity_check", '
    '"encoding": "none", "train.stepz": 5}]\n'
  ),
  'grid_empty.py': 'def grid(arg=None):\n  return []\n',
}


@pytest.fixture(scope='module')
def fixtures(tmp_path_factory):
  """Shared, read-only inputs: experiment files whose grid() is broken, and evaluation sets
  of TINY whose manifest or files are malformed (each fails at its first cell)."""
  import numpy as np
  from experiments import rpe_table1
  from posenc import setup
  from posenc.training import frozen
  from posenc.kinds.range import protocol as range_protocol

  root = tmp_path_factory.mktemp('fixtures')
  for name, text in GRID_FILES.items():
    (root / name).write_text(
      'from experiments import sweep_tiny\nget_config = sweep_tiny.get_config\n' + text
    )
  config = rpe_table1.get_config('task=parity_check,tiny')
  spec = range_protocol.example_specs(setup.build(config))['length_1']

  def npz(arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()

  right = {k: np.zeros(shape, dtype) for k, (shape, dtype) in spec.items()}
  files = {
    'good': npz(right),
    'replaced': b'not an npz archive',
    'renamed': npz({('x' + k if k == 'inputs' else k): v for k, v in right.items()}),
    'wider': npz({**right, 'inputs': np.zeros((2, 8, 12), np.int32)}),
  }

  def write(name, manifest, data=files['good']):
    directory = root / 'sets' / name
    directory.mkdir(parents=True)
    (directory / 'length_1.npz').write_bytes(data)
    (directory / frozen.MANIFEST).write_text(json.dumps(manifest))

  def manifest(data=files['good'], **cell):
    entry = {
      'cell': 'length_1',
      'file': 'length_1.npz',
      'sha256': hashlib.sha256(data).hexdigest(),
      **cell,
    }
    return {
      'schema_version': frozen.SCHEMA_VERSION,
      'protocol': 'range',
      'fields': frozen.manifest_fields(config, range_protocol.EXAMPLE_FIELDS),
      'cells': [{k: v for k, v in entry.items() if v is not None}],
    }

  write('list', [])
  write('null', None)
  write('fields_list', {**manifest(), 'fields': ['task']})
  write('cells_5', {**manifest(), 'cells': 5})
  write('no_sha256', manifest(sha256=None))
  write('points_elsewhere', manifest(file='length_12.npz'))
  for name in ('replaced', 'renamed', 'wider'):
    write(name, manifest(files[name]), files[name])
  return root


ARITH = '--config=experiments/abacus_arithmetic.py:tiny'

TRAIN_CASES = [
  ([TINY, '--config.seeds=[0,0]'], 'seeds [0, 0] has duplicates'),
  ([TINY, '--config.learning_rates=(-1.0,)'], 'learning_rates [-1.0]: -1.0 is not a positive'),
  ([TINY, '--config.learning_rates=[0]'], 'learning_rates [0]: 0 is not a positive finite'),
  ([TINY, '--config.learning_rates=[nan]'], 'learning_rates [nan]: nan is not a positive'),
  ([TINY, '--config.seeds=[a]'], "element 'a' of '[a]' is not a number or a quoted string"),
  ([TINY, '--config.seeds=[0.5]'], 'seeds [0.5]: 0.5 is not an integer in 0..2^32-1'),
  ([TINY, '--config.seeds=[0,'], "'[0,' is not a list"),
  ([TINY, '--config.foo=1'], "unknown config field 'foo'; valid fields of config: "),
  (
    [TINY, '--config.train.foo=1'],
    "unknown config field 'train.foo'; valid fields of train: batch_size",
  ),
  # A typo is answered with the nearest valid name.
  (
    [TINY, '--config.train.stepz=1'],
    "unknown config field 'train.stepz' (did you mean 'train.steps'?); valid fields of train:",
  ),
  (
    ['--config=experiments/rpe_table1.py:task=parity_chek,tiny'],
    "unknown task 'parity_chek' (did you mean 'parity_check'?); valid tasks: even_pairs",
  ),
  # Any encoding's option may be given; one no encoding takes is a typo.
  (
    [TINY, '--config.encoding_options.relativ_mode=x'],
    "unknown encoding option 'relativ_mode' (did you mean 'relative_mode'?)",
  ),
  ([TINY, '--config.encoding_options.max_time=0.0'], 'encoding_options.max_time=0.0 must be a'),
  (
    [TINY, '--config.encoding_options.a.b=1'],
    "unknown config field 'encoding_options.a.b'; valid fields of encoding_options:",
  ),
  (
    ['--config=experiments/rpe_table1.py:foo=bar'],
    "unknown config arg 'foo'; valid args: encoding, relative_mode, task, tiny",
  ),
  (
    ['--config=experiments/nope.py'],
    "config file 'experiments/nope.py' does not exist; "
    'experiment files: experiments/abacus_arithmetic.py',
  ),
  (['--config={tmp}/broken.py'], 'does not import: SyntaxError'),
  (['--config={tmp}/noconfig.py'], 'has no get_config(arg)'),
  ([TINY, '--config.model.family=lstm'], "unknown model.family 'lstm'; valid: encoder, decoder"),
  ([TINY, '--config.model.recurrences=0'], 'model.recurrences=0 must be an integer >= 1'),
  ([TINY, '--config.model.injection=every'], "unknown model.injection 'every'; valid: none"),
  ([TINY, '--config.train.progressive_alpha=0.5'], 'progressive_alpha=0.5 needs a looped'),
  ([TINY, '--config.model.tie_embeddings=True'], 'tie_embeddings needs model.family=decoder'),
  (
    ['--config=experiments/rpe_decoder.py:encoding=learned,tiny', '--config.model.max_position=16'],
    'model.max_position=16 is smaller than the longest sequence (25 tokens at length 12 of '
    'reverse_string for the decoder)',
  ),
  (
    [ARITH, '--config.model.max_position=16'],
    'model.max_position=16 is smaller than the '
    'Abacus table needs (18: numbers of up to 8 digits plus offsets up to 9)',
  ),
  (
    [ARITH.replace('tiny', 'tiny,encoding=learned'), '--config.model.max_position=20'],
    'model.max_position=20 is smaller than the longest sequence (24 tokens at 7 x 7 of addition)',
  ),
  (
    [ARITH.replace('tiny', 'tiny,task=sorting'), '--config.task_options.num_index_symbols=4'],
    'sorting: 7 numbers need more than num_index_symbols=4 index symbols',
  ),
  ([ARITH, '--config.task_options.pad_probability=2.0'], 'pad_probability must be in [0, 1]'),
  ([ARITH, '--config.task_options.width=3'], "unknown config field 'task_options.width'"),
  (
    [ARITH.replace('tiny', 'tiny,task=division')],
    "unknown task 'division' for this study; "
    'valid: addition, addition_subtraction, multiplication, sorting, bitwise_or',
  ),
  (
    [ARITH.replace('tiny', 'tiny,architecture=deep')],
    "unknown architecture 'deep'; valid: standard, standard_ii, looped",
  ),
  ([ARITH.replace('tiny', 'tiny,looped=8by2')], "bad looped='8by2'"),
  ([ARITH, '--config.eval.grid_max=0'], 'eval.grid_max=0 must be a positive integer'),
  ([ARITH, '--config.train.max_length=0'], 'train.max_length=0'),
  ([ARITH, '--config.eval.beyond=[3]'], 'eval.beyond [3] must be integers past eval.grid_max=5'),
  ([ARITH, '--config.model.family=encoder'], "task 'addition' is a token sequence for a decoder"),
  (
    ['--config=experiments/extrapolation_lm.py:tiny', '--config.task_options.valid_percent=0'],
    'valid_percent=0 must be in 1..99',
  ),
  (
    [
      '--config=experiments/extrapolation_lm.py:tiny',
      '--config.eval.lengths=[16,4096]',
      '--config.eval.max_length=4096',
    ],
    'holds no window of 4096',
  ),
  (
    ['--config=experiments/extrapolation_lm.py:tiny', '--config.encoding_options.bias_r=-1.0'],
    'bias_r=-1.0 must be > 0',
  ),
  (
    ['--config=experiments/extrapolation_lm.py:tiny,family=lstm'],
    "unknown family 'lstm'; valid: decoder",
  ),
  (
    ['--config=experiments/extrapolation_lm.py:tiny', '--config.train.loss_on=answer'],
    'trains on every token: set train.loss_on=all',
  ),
  (
    ['--config=experiments/extrapolation_lm.py:tiny', '--config.encoding_options.bias_window=0'],
    'bias_window=0 must be an integer >= 1',
  ),
  ([TINY, '--workdir=/proc/nonexistent/x'], 'cannot be created or written'),
  ([TINY, '--workdir={tmp}/file'], 'is a file, not a directory'),
  ([TINY, '--workdir={tmp}/file/below'], 'cannot be created or written'),
  (['--config='], '--config= names no experiment file, e.g. --config=experiments/'),
  ([TINY, '--config.seeds='], 'seeds is empty; give at least one seed'),
  (
    [TINY, '--config.model.max_position=100000000000'],
    'model.max_position=100000000000 exceeds the limit of 1,048,576 (posenc.config.MAX_LENGTH',
  ),
  (
    [TINY, '--config.train.steps=100000000000000000000'],
    'train.steps=100000000000000000000 exceeds the limit of 1,000,000,000 (posenc.config.MAX_STEPS',
  ),
  ([TINY, '--config.eval.max_length=2000000'], 'eval.max_length=2000000 exceeds the limit'),
  ([TINY, '--config.train.weight_decay=nan'], 'train.weight_decay=nan must be a finite number'),
  (
    [TINY, '--config.train.max_grad_norm=-1'],
    'train.max_grad_norm=-1.0 must be a positive finite number',
  ),
  ([TINY, '--config.train.max_grad_norm=nan'], 'train.max_grad_norm=nan must be a positive'),
  (
    [TINY, '--config.model.temperature_beta=nan'],
    'model.temperature_beta=nan must be a finite number',
  ),
  ([TINY, '--config.eval.stride=-3'], 'eval.stride=-3 must be a positive integer'),
  ([TINY, '--config.data_seed=-1'], 'data_seed=-1 must be an integer in 0..2^32-1'),
  ([TINY, '--config.eval.seed=-1'], 'eval.seed=-1 must be an integer in 0..2^32-1'),
  (
    [TINY, '--config.eval.lengths=[2,4]'],
    'the evaluation lengths (eval.lengths [2, 4]) are all within train.max_length=8',
  ),
  (
    [TINY, '--config.eval.max_length=8'],
    'the evaluation lengths (1..eval.max_length=8) are all within train.max_length=8',
  ),
  (
    ['--config=experiments/sorting_hints.py:tiny', '--config.eval.lengths=[4,6]'],
    'eval.lengths [4, 6] are all within train.max_length=6',
  ),
]

# Evaluation sets (eval.from_files) whose manifest or files are malformed: see `fixtures`.
FROM_FILES_CASES = [
  ('list', 'manifest.json: holds [], not a JSON object'),
  ('null', 'manifest.json: holds null, not a JSON object'),
  ('fields_list', 'manifest.json: fields is ["task"], not a JSON object'),
  ('cells_5', 'manifest.json: cells is 5, not a JSON list'),
  ('no_sha256', 'manifest.json: cell length_1 has no sha256'),
  ('points_elsewhere', "cell length_1 names the file 'length_12.npz', not its own length_1.npz"),
  ('replaced', 'replaced/length_1.npz is not an .npz archive of arrays'),
  (
    'renamed',
    'renamed/length_1.npz holds the arrays length, mask, output_length, '
    'output_valid, targets, xinputs, not those of cell length_1',
  ),
  (
    'wider',
    'wider/length_1.npz: array inputs is int32 [2, 8, 12], not the int32 [2, 8, 6] '
    'of cell length_1',
  ),
]
TRAIN_CASES += [
  ([TINY, f'--config.eval.from_files={{fixtures}}/sets/{name}'], needle)
  for name, needle in FROM_FILES_CASES
]


SWEEP_CASES = [
  (['--config=experiments/nope.py'], "config file 'experiments/nope.py' does not exist"),
  (['--config=experiments/quickstart.py:foo'], "unknown config arg 'foo'"),
  (['--config=experiments/sweep_tiny.py:x=1'], 'none (this file takes no args)'),
  (
    ['--config=experiments/sweep_tiny.py', '--tasks=nope'],
    "unknown task 'nope' in the sweep filter; valid tasks: parity_check, reverse_string",
  ),
  (['--config=experiments/sweep_tiny.py', '--shard=3/2'], "bad shard '3/2'"),
  (['--config=experiments/sweep_tiny.py', '--config.seeds=0,0'], 'has duplicates'),
  (['--config=experiments/sweep_tiny.py', '--workdir={tmp}/file'], 'is a file'),
  (['--config=experiments/sweep_tiny.py', '--workdir=/proc/x/y'], 'cannot be created'),
  (
    ['--config=experiments/sweep_tiny.py', '--cost', '--device=B200'],
    "unknown --device 'B200'; valid devices: H100, A100, v4, v5e",
  ),
  (['--config=experiments/sweep_tiny.py', '--device=H100'], '--device needs --cost'),
  (
    ['--config=experiments/sweep_tiny.py', '--cost', '--device=H100', '--chips=0'],
    '--chips=0 must be a positive integer',
  ),
  (
    ['--config=experiments/rpe_decoder.py:cpu,tiny', '--cost', '--device=H100'],
    "--device estimates cover model.family=encoder only, not 'decoder'",
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.model.attention_impl=fast'],
    "unknown model.attention_impl 'fast'; valid: auto, reference, xla_fused, cpu_blocked",
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.train.steps_per_dispatch=-1'],
    'train.steps_per_dispatch=-1 must be an integer >= 0 (0: chosen by platform)',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.train.programs=fast'],
    "train.programs='fast' is not a plan; valid: auto, buckets, one, or program widths",
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.eval.programs=4,6'],
    'eval.programs=4,6 cannot hold the widest data width 12',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.model.dtype=float16'],
    "unknown model.dtype 'float16' (did you mean 'bfloat16'?); valid: float32, bfloat16",
  ),
  (
    ['--config={fixtures}/grid_raises.py'],
    'grid_raises.py: grid() failed: RuntimeError: no grid today',
  ),
  (
    ['--config={fixtures}/grid_unknown.py'],
    "grid cell parity_check__none__5 sets unknown "
    "config field 'train.stepz'; valid fields of train: batch_size",
  ),
  (['--config={fixtures}/grid_empty.py'], "grid() returned '[]', not a non-empty list"),
  (
    ['--config=experiments/sweep_tiny.py', '--cost', '--cost_steps=0'],
    '--cost_steps=0 must be a positive integer',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--cost', '--device=H100'],
    "beyond model.max_position=64 of encoding 'randomized_relative' (cell "
    'parity_check__randomized_relative); raise --config.model.max_position to 1024',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--distributed', '--num_processes=0'],
    '--num_processes=0 must be a positive integer',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--distributed', '--num_processes=1', '--process_id=5'],
    '--process_id=5 is not a process of --num_processes=1 (0..0)',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--status', '--workdir={tmp}/file'],
    '--workdir={tmp}/file is a file, not a sweep directory',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.train.steps=100000000000000000000'],
    'exceeds the limit of 1,000,000,000',
  ),
  (
    ['--config=experiments/sweep_tiny.py', '--config.eval.lengths=[1]'],
    'are all within train.max_length=8',
  ),
  # A count in an experiment file's arg string is a positive integer in every mode.
  (
    ['--config=experiments/robustness.py:tiny,seeds=-1'],
    'robustness.py:tiny,seeds=-1: config arg seeds=-1 must be an integer >= 1',
  ),
  (
    ['--config=experiments/robustness.py:tiny,data_seeds=0'],
    'data_seeds=0 must be an integer >= 1',
  ),
  (['--config=experiments/robustness.py:cpu,seeds=-2'], 'seeds=-2 must be an integer >= 1'),
  (['--config=experiments/encodings_2024.py:tiny,seeds=0'], 'seeds=0 must be an integer >= 1'),
  (['--config=experiments/sorting_hints.py:tiny,dataset=-5'], 'dataset=-5 must be an integer >= 0'),
]


# Run in {tmp}: an --out that named the working directory would write there.
RANGE_RUNS = '{root}/tests/data/results_v1/range'
REPORT_CASES = [
  (['{tmp}/nowhere'], 'no such file or directory'),
  (['{tmp}/empty'], 'no results.json'),
  (['{tmp}/bad'], 'no well-formed run'),
  (['{tmp}/bad', '--out={tmp}/file'], 'is a file, not a directory'),
  (['{tmp}/bad', '--bogus'], "Unknown command line flag 'bogus'"),
  ([RANGE_RUNS, '--out='], '--out is empty; give a directory'),
  (
    [RANGE_RUNS, '--out={tmp}/file/below'],
    '--out={tmp}/file/below cannot be created: {tmp}/file is a file, not a directory',
  ),
  ([RANGE_RUNS, '--success_threshold=0.5'], '--success_threshold=0.5 needs --scorecard'),
  ([RANGE_RUNS, '--perplexity_tolerance=0.2'], '--perplexity_tolerance=0.2 needs --scorecard'),
  ([RANGE_RUNS, '--scorecard', '--length_threshold=2'], '--length_threshold=2.0 must be in (0, 1]'),
  (
    [RANGE_RUNS, '--scorecard', '--perplexity_tolerance=nan'],
    '--perplexity_tolerance=nan must be a finite number >= 0',
  ),
]


SPEED_CASES = [
  (['eval', '--cell=task=x'], "--cell=task=x: unknown task 'x'; valid tasks: even_pairs"),
  (['eval', '--lengths=0'], '--lengths=0 must be comma-separated positive integers'),
  (['train', '--cell=foo'], "unknown config arg 'foo'"),
  (['train', '--populations=a'], '--populations=a must be'),
  (['train', '--out={tmp}/nowhere/x.json'], 'does not exist'),
  (['eval', '--out={tmp}'], 'is a directory, not a file'),
  (['scale', '--out=/proc/nonexistent/x.json'], 'does not exist'),
  (['forward', '--out={tmp}/file/x.json'], 'does not exist'),
  (['generate', '--answer_lengths=0'], '--answer_lengths=0 must be comma-separated'),
  (['generate', '--batch=0'], '--batch=0 must be a positive integer'),
  (['generate', '--encoding=nope'], "unknown encoding 'nope'"),
  (['forward', '--sub_batch=0', '--out={tmp}/x.json'], '--sub_batch=0 must be an integer >= 1'),
  (['forward', '--batch=-1', '--out={tmp}/x.json'], '--batch=-1 must be an integer >= 1'),
  (['forward', '--length=0', '--out={tmp}/x.json'], '--length=0 must be an integer >= 1'),
  (['samplers', '--batch_size=0', '--out={tmp}/x.json'], '--batch_size=0 must be an integer'),
  (['samplers', '--repeats=0', '--out={tmp}/x.json'], '--repeats=0 must be an integer >= 1'),
  (['samplers', '--calls=-2', '--out={tmp}/x.json'], '--calls=-2 must be an integer >= 1'),
  (
    ['generate', '--train_steps=-1', '--out={tmp}/x.json'],
    '--train_steps=-1 must be an integer >= 0',
  ),
  (['train', '--steps=0', '--out={tmp}/x.json'], '--steps=0 must be an integer >= 1'),
  (
    ['train', '--dtype=float16'],
    "unknown model.dtype 'float16' (did you mean 'bfloat16'?); valid: float32, bfloat16",
  ),
  (['train', '--fused_implementation=cudnn'], "model.fused_implementation='cudnn' needs"),
  (['scale', '--steps=-1', '--out={tmp}/x.json'], '--steps=-1 must be an integer >= 1'),
  (['scale', '--cost_steps=0', '--out={tmp}/x.json'], '--cost_steps=0 must be an integer'),
]


ANALYZE_CASES = [
  (['nope'], "unknown analysis 'nope'; valid: trf"),
  (['trf', '--encodings=', '--out={tmp}/o'], "--encodings='' names no encoding"),
  (
    ['trf', '--horizons=2,100000000000', '--out={tmp}/o'],
    '--horizons=2,100000000000: 100,000,000,000 exceeds the limit of 100,000,000',
  ),
  (
    ['trf', '--num_heads=100000', '--out={tmp}/o'],
    '--num_heads=100000 at horizon 10,000,000 needs 7450.6 GiB',
  ),
  (['trf', '--out={tmp}/file'], '--out={tmp}/file is a file, not a directory'),
  (
    ['trf', '--out={tmp}/file/below'],
    '--out={tmp}/file/below cannot be created: {tmp}/file is a file',
  ),
  (
    ['erf', '--workdir={tmp}/bare', '--out={tmp}/o'],
    '{tmp}/bare has no checkpoint (train it first)',
  ),
  (['erf', '--workdir={tmp}/nowhere', '--out={tmp}/o'], 'holds no run (no config.json)'),
  (['erf', '--workdir={tmp}/bare', '--out={tmp}/file/below'], 'cannot be created'),
  (['erf', '--workdir={tmp}/bare', '--eps=2', '--out={tmp}/o'], 'every ε must lie in (0, 1)'),
  (
    ['attention_maps', '--workdir={tmp}/bare', '--lengths=0', '--out={tmp}/o'],
    '--lengths=0 must be comma-separated positive integers',
  ),
  (['attention_maps', '--workdir={tmp}/bare', '--out={tmp}/file/below'], 'cannot be created'),
  (['activation_pca', '--workdir={tmp}/bare', '--out={tmp}/file/below'], 'cannot be created'),
  (
    ['position_probe', '--workdir={tmp}/bare', '--steps=0', '--out={tmp}/o'],
    '--steps=0 must be a positive integer',
  ),
  (
    ['prefix_shuffle', '--workdir={tmp}/bare', '--length=1', '--out={tmp}/o'],
    '--length=1 must be an integer >= 2',
  ),
  (
    ['intervene', '{tmp}/bare', '--intervention=yarn', '--out={tmp}/o'],
    '{tmp}/bare has no checkpoint (train it first)',
  ),
  (
    ['intervene', '{tmp}/bare', '--intervention=yarn', '--out={tmp}/file/below'],
    'cannot be created',
  ),
]


EXPORT_CASES = [
  ([TINY], '--out is required'),
  (['--config=', '--out={tmp}/set'], '--config= names no experiment file'),
  ([TINY, '--out={tmp}/file'], '--out={tmp}/file is a file, not a directory'),
  ([TINY, '--out={tmp}/file/set'], '--out={tmp}/file/set cannot be created: {tmp}/file is a file'),
  ([TINY, '--out={tmp}/set_done'], '--out={tmp}/set_done already holds an evaluation set'),
  (
    [TINY, '--out={tmp}/set', '--config.eval.from_files={tmp}/set_done'],
    'exporting draws the examples; leave it empty',
  ),
  ([TINY, '--out={tmp}/set', '--config.eval.lengths=[2,4]'], 'are all within train.max_length=8'),
  ([TINY, '--out={tmp}/set', '--config.eval.seed=-1'], 'eval.seed=-1 must be an integer'),
  (
    [TINY, '--out={tmp}/set', '--config.eval.bucket_size=0'],
    'eval.bucket_size=0 must be a positive integer',
  ),
]


@pytest.mark.slow
def test_main_job_prints_no_library_log_lines(tmp_path):
  proc = _run(
    ['-m', 'launch.sweep', '--config=experiments/quickstart.py:tiny', f'--workdir={tmp_path}'],
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  log_line = re.compile(r'^[IWEF]\d{4} |orbax|libtpu|CheckpointManager')
  noisy = [l for l in proc.stdout.splitlines() + proc.stderr.splitlines() if log_line.search(l)]
  assert not noisy, noisy[:5]
  assert 'Table 1' in proc.stdout and 'report written to' in proc.stdout
  # --verbosity brings the libraries' INFO lines back.
  again = _run(
    [
      '-m',
      'launch.train',
      '--config=experiments/quickstart.py:tiny',
      f'--workdir={tmp_path}/verbose',
      '--config.train.steps=5',
      '--verbosity=0',
    ],
    timeout=600,
  )
  assert again.returncode == 0 and 'orbax' in again.stderr + again.stdout


# Each entry point with the arguments it always gets.
ENTRY_POINTS = {
  'train': ['launch.train', '--workdir={tmp}/run'],
  'sweep': ['launch.sweep', '--workdir={tmp}/sweep'],
  'report': ['launch.report'],
  'speed': ['launch.speed'],
  'analyze': ['launch.analyze'],
  'export': ['launch.export_eval_set'],
}
CASES = [
  (entry, args, needle)
  for entry, cases in (
    ('train', TRAIN_CASES),
    ('sweep', SWEEP_CASES),
    ('report', REPORT_CASES),
    ('speed', SPEED_CASES),
    ('analyze', ANALYZE_CASES),
    ('export', EXPORT_CASES),
  )
  for args, needle in cases
]


def _help_commands() -> list[list[str]]:
  from launch import analyze
  from launch import speed

  return (
    [
      ['launch.train'],
      ['launch.sweep'],
      ['launch.report'],
      ['launch.analyze'],
      ['launch.speed'],
      ['launch.export_eval_set'],
      ['launch.check_encoding'],
      ['launch.check_card'],
      ['launch.benchmark'],
    ]
    + [['launch.analyze', name] for name in analyze.ANALYSES]
    + [['launch.speed', name] for name in speed.NAMES]
  )


@pytest.mark.parametrize('command', _help_commands(), ids=' '.join)
def test_help_prints_usage_and_exits_0(cli, command):
  proc = cli.run([*command, '--help'])
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() and not proc.stderr.strip(), proc.stderr
  # Every entry point shows its own usage: the module name or the subcommand appears.
  assert command[-1].split('.')[-1] in proc.stdout


def test_the_usage_lines_show_the_real_defaults(cli):
  # `[--suite=cpu-v2]` in a launcher's usage is the default its flag has: what --help
  # lists as `(default: '...')` for the same flag.
  shown = 0
  for command in (['launch.benchmark'], ['launch.check_card'], ['launch.report']):
    text = cli.run([*command, '--help']).stdout
    # A flag's own lines: up to the next flag's.
    defaults = dict(
      re.findall(r"\n\s+--(\w+):(?:(?!\n\s+--).)*?\(default: '([^']*)'\)", text, flags=re.S)
    )
    for name, value in re.findall(r'\[--(\w+)=([a-z0-9.-]+)\]', text):
      if name in defaults:
        shown += 1
        assert value == defaults[name], (command, name, value, defaults[name])
  assert shown >= 2


# --flagfile: the flags from a file, one a line, as every absl entry point takes them.
FLAGFILE_CASES = [
  (['launch.report', RANGE_RUNS], ['--out={tmp}/out', '--full_grid'], 'table1.md'),
  (
    ['launch.analyze', 'trf'],
    ['--encodings=type2', '--horizons=64,512', '--out={tmp}/out'],
    'trf.json',
  ),
  (
    ['launch.speed', 'samplers'],
    ['--tasks=parity_check', '--lengths=4', '--batch_size=8', '--repeats=1', '--calls=1'],
    None,
  ),
]


@pytest.mark.parametrize('command, lines, written', FLAGFILE_CASES, ids=lambda x: str(x)[:30])
def test_flagfile_gives_the_flags_from_a_file(cli, tmp_path, command, lines, written):
  names = {'tmp': tmp_path, 'root': ROOT}
  flagfile = tmp_path / 'flags.txt'
  if written is None:  # a measurement writes its JSON to --out
    lines, written = lines + ['--out={tmp}/out/speed.json'], 'speed.json'
    (tmp_path / 'out').mkdir()
  flagfile.write_text(''.join(line.format(**names) + '\n' for line in lines))
  proc = cli.run([a.format(**names) for a in command] + [f'--flagfile={flagfile}'])
  assert proc.returncode == 0, proc.stderr
  assert (tmp_path / 'out' / written).is_file()
  # A bad flag in the file is one line too.
  flagfile.write_text('--bogus=1\n')
  proc = cli.run([a.format(**names) for a in command] + [f'--flagfile={flagfile}'])
  assert proc.returncode == 2 and proc.stderr == "error: Unknown command line flag 'bogus'\n"


def _files(directory):
  return sorted(p.relative_to(directory) for p in directory.rglob('*'))


@pytest.mark.parametrize('entry, args, needle', CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
  cli, tmp_path, fixtures, entry, args, needle
):
  tmp = _bad(tmp_path)
  names = {'tmp': tmp, 'fixtures': fixtures, 'root': ROOT}
  before, shared = _files(tmp), _files(fixtures)
  # The report runs in {tmp}: an --out that named the working directory would write there.
  proc = cli.run(
    [a.format(**names) for a in ENTRY_POINTS[entry] + args], cwd=tmp if entry == 'report' else ROOT
  )
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  needle = needle.format(**names)
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert _files(tmp) == before and _files(fixtures) == shared


# A full disk at a chosen file (launch.full_disk.NO_SPACE_AT): one line naming the file and what
# is kept, exit status 2, no temporary file left. Each fails before anything is compiled
# but the export, which draws its first cells.
NO_SPACE_CASES = [
  (
    ['launch.train', TINY, '--workdir={tmp}/run'],
    'config.json',
    'writing {tmp}/run/config.json: no checkpoint was written yet (the rerun starts from step '
    '0); free space and rerun the same command',
  ),
  (
    ['launch.sweep', '--config=experiments/sweep_tiny.py', '--workdir={tmp}/sweep'],
    'shard-*.json',
    'writing {tmp}/sweep/index/shard-0-of-1.json: the complete cells are kept',
  ),
  (
    ['launch.report', RANGE_RUNS, '--out={tmp}/report'],
    'table1.md',
    'writing {tmp}/report/table1.md: the files written before it are whole',
  ),
  (
    ['launch.analyze', 'trf', '--encodings=type2', '--horizons=64,512', '--out={tmp}/trf'],
    'trf.json',
    'writing {tmp}/trf/trf.json: the files written before it are whole',
  ),
  (
    ['launch.export_eval_set', TINY, '--out={tmp}/set'],
    'length_2.npz',
    'writing {tmp}/set/length_2.npz: the cells written so far are kept; manifest.json, '
    'written last, marks the set complete',
  ),
]


def test_a_bad_kill_step_is_refused_before_the_workdir_is_made(cli, tmp_path):
  proc = cli.run(
    ['launch.train', TINY, f'--workdir={tmp_path}/run'], env={common.KILL_AFTER_CHECKPOINT: 'abc'}
  )
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip() == "error: POSENC_KILL_AFTER_CHECKPOINT='abc' must be a step number"
  assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('argv, at, needle', NO_SPACE_CASES, ids=lambda x: str(x)[:24])
def test_a_full_disk_is_one_line_naming_the_file(cli, tmp_path, argv, at, needle):
  names = {'tmp': tmp_path, 'root': ROOT}
  proc = cli.run([a.format(**names) for a in argv], env={full_disk.NO_SPACE_AT: at})
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1, lines
  assert lines[0].startswith('error: no space left on device ' + needle.format(**names)), lines
  assert not [p for p in tmp_path.rglob('*.tmp')], 'a temporary file was left behind'


def test_a_full_disk_silences_what_the_libraries_report_and_drops_the_unfinished_step(
  tmp_path, capsys
):
  import errno  # pylint: disable=g-import-not-at-top
  import logging  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top

  checkpoints = tmp_path / 'run' / 'checkpoints'
  for name in ('10', '20', '30.orbax-checkpoint-tmp-1764311000'):
    (checkpoints / name / 'state').mkdir(parents=True)
  full = OSError(errno.ENOSPC, 'No space left on device')

  def worker():  # as orbax's save threads and tensorstore's callbacks report it
    logging.getLogger('orbax').error('_SignalingThread.run() raised an exception', exc_info=full)
    raise RuntimeError('Event loop is closed')

  terminal = logging.StreamHandler(sys.stderr)  # What reaches the terminal in a run.
  logging.getLogger().addHandler(terminal)
  try:
    with pytest.raises(SystemExit) as exited:
      kept = lambda: 'the last checkpoint (step 20) is kept'
      with full_disk.on_full_disk(kept, str(tmp_path / 'run')):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        raise ValueError('Error writing "layer0.b/0": No space left on device')
    assert exited.value.code == 2
    captured = capsys.readouterr()
    # Once the process goes on (a test), what is not a full disk is reported again.
    logging.getLogger('orbax').error('unrelated')
    assert capsys.readouterr().err == 'unrelated\n'
  finally:
    logging.getLogger().removeHandler(terminal)
  assert captured.err == (
    f'error: no space left on device writing {tmp_path / "run"}: the last checkpoint (step 20) '
    'is kept; free space and rerun the same command\n'
  )
  assert sorted(p.name for p in checkpoints.iterdir()) == ['10', '20']


@pytest.mark.slow
@pytest.mark.skipif(
  os.geteuid() != 0 or not shutil.which('unshare'), reason='mounts a small file system (root)'
)
def test_a_disk_that_fills_during_checkpoints_is_one_line_and_no_unfinished_step(tmp_path):
  # A 600 KiB file system, private to the command (`unshare -m`), fills while orbax writes a
  # checkpoint of four members; the listing is made before the mount goes away.
  disk = tmp_path / 'disk'
  disk.mkdir()
  script = (
    f'mount -t tmpfs -o size=600k tmpfs {disk} && "$0" "$@"; status=$?; '
    f'echo kept: $(ls -A {disk}/run/checkpoints); exit $status'
  )
  proc = subprocess.run(
    ['unshare', '-m', 'sh', '-c', script, sys.executable, '-m', 'launch.train', TINY]
    + ['--config.train.steps=80', '--config.seeds=[0,1,2,3]', f'--workdir={disk}/run'],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 2, proc.stderr[-3000:]
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, lines[:40]
  assert re.fullmatch(
    f'error: no space left on device writing {disk}/run[^:]*: the last checkpoint \\(step '
    '(\\d+)\\) is kept and the rerun resumes from it; free space and rerun the same command',
    lines[0],
  ), lines[0]
  kept = proc.stdout.splitlines()[-1].split()
  assert kept[0] == 'kept:' and kept[1:], kept
  assert all(name.isdigit() for name in kept[1:]), kept  # no orbax temporary directory


@pytest.mark.slow
def test_a_run_stopped_by_a_full_disk_resumes_and_ends_equal(cli, tmp_path):
  args = [TINY, '--config.seeds=[0]', '--config.eval.lengths=[4,10]']
  proc = cli.run(
    ['launch.train', *args, f'--workdir={tmp_path / "run"}'],
    env={full_disk.NO_SPACE_AT: 'eval.jsonl'},
  )
  assert proc.returncode == 2 and proc.stderr.strip() == (
    f'error: no space left on device writing {tmp_path / "run" / "eval.jsonl"}: the last '
    'checkpoint (step 20) is kept and the rerun resumes from it; free space and rerun the '
    'same command'
  ), proc.stderr
  for workdir in ('run', 'whole'):
    proc = cli.run(['launch.train', *args, f'--workdir={tmp_path / workdir}'])
    assert proc.returncode == 0, proc.stderr
  members = lambda d: json.loads((tmp_path / d / 'results.json').read_text())['members']
  assert members('run') == members('whole')


# A store URL written with one slash (or none, or in capitals) names no local directory: it is
# refused in one line showing the URL meant, before anything is written where it runs.
ONE_SLASH_CASES = [
  ('launch.train', TINY, 's3:/posenc-test/run', 's3://posenc-test/run'),
  ('launch.train', TINY, 'S3:posenc-test/run', 's3://posenc-test/run'),
  ('launch.sweep', '--config=experiments/sweep_tiny.py', 'gs:/bucket/sweep', 'gs://bucket/sweep'),
]


@pytest.mark.parametrize('entry, config, workdir, meant', ONE_SLASH_CASES)
def test_a_store_url_with_one_slash_is_refused_not_trained_locally(
  cli, tmp_path, entry, config, workdir, meant
):
  config = config.replace('=experiments/', f'={ROOT}/experiments/')
  proc = cli.run([entry, config, f'--workdir={workdir}'], cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr == (
    f'error: --workdir={workdir} is not a store URL (did you mean {meant}?); a store URL is '
    'gs://BUCKET/PATH or s3://BUCKET/PATH, anything else a local path\n'
  )
  assert list(tmp_path.iterdir()) == []  # no local folder 's3:' or 'S3:posenc-test'


# The lease's length and the wait for a held directory are finite, the lease long enough to
# be held (lease.MIN_LEASE_S): anything else is one line, exit 2, before anything is written.
LEASE_CASES = [
  ({'POSENC_LEASE_S': 'inf'}, [], "POSENC_LEASE_S='inf' must be a finite number of seconds >= 2"),
  ({'POSENC_LEASE_S': 'nan'}, [], "POSENC_LEASE_S='nan' must be a finite number of seconds >= 2"),
  ({'POSENC_LEASE_S': '0.001'}, [], "POSENC_LEASE_S='0.001' must be a finite number"),
  ({}, ['--lease_wait=nan'], '--lease_wait=nan must be a finite number of seconds >= 0'),
  ({}, ['--lease_wait=inf'], '--lease_wait=inf must be a finite number of seconds >= 0'),
]


@pytest.mark.parametrize('env, args, needle', LEASE_CASES)
def test_lease_lengths_and_waits_are_finite(cli, tmp_path, env, args, needle):
  for entry in (['launch.train', TINY], ['launch.sweep', '--config=experiments/sweep_tiny.py']):
    proc = cli.run([*entry, f'--workdir={tmp_path}/w', *args], env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'error: {needle}'), lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('signum, status', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_wait_for_a_held_workdir_ends_at_once_on_sigterm_or_ctrl_c(tmp_path, signum, status):
  """SIGTERM (a preemption) or Ctrl-C while waiting for a work directory another process
  holds: the waiter leaves at once with one line, having taken nothing over or written."""
  from posenc.storage import lease  # pylint: disable=g-import-not-at-top

  workdir = tmp_path / 'run'
  workdir.mkdir()
  with lease.DirectoryLock(str(workdir)):
    proc = subprocess.Popen(
      [sys.executable, '-m', 'launch.train', TINY, f'--workdir={workdir}', '--lease_wait=600'],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    waiting = proc.stdout.readline()
    while waiting and not waiting.startswith('waiting at most'):
      waiting = proc.stdout.readline()
    assert waiting.startswith('waiting at most 600 s: '), waiting
    start = time.time()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert time.time() - start < 5  # at once, not when the wait ends
  assert proc.returncode == status, err
  said = (out + err).strip().splitlines()
  assert len(said) == 1 and 'rerun' in said[0] and 'Traceback' not in err, said
  if signum == signal.SIGTERM:
    assert said[0] == (
      f'stopped while waiting for {workdir}: nothing taken over or written; rerun the same '
      'command to resume'
    )
  assert sorted(os.listdir(workdir)) == []  # no config.json, plan or lock of its own


def test_rerunning_a_finished_run_keeps_its_results(tmp_path):
  """A complete run rerun writes nothing: its results.json (its timing too) stays as written."""
  cmd = [sys.executable, '-m', 'launch.train', TINY, f'--workdir={tmp_path}/run']
  cmd += ['--config.train.steps=4', '--config.eval.lengths=[9]']
  first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stderr
  results = tmp_path / 'run' / 'results.json'
  written, mtime = results.read_bytes(), results.stat().st_mtime_ns
  again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr
  assert results.read_bytes() == written and results.stat().st_mtime_ns == mtime
  assert 'is complete: its results.json is kept as it was written' in again.stdout
  assert f'results in {results}' in again.stdout  # where it really is: an absolute path
