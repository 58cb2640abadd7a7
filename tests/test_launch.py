"""The command-line surface: the README's examples run as written, every bad input is one
line with exit status 2 and nothing on disk, and the terminal shows posenc's lines only."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from launch import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = '--config=experiments/rpe_table1.py:task=parity_check,tiny'


def readme_commands() -> list[str]:
  """Every `python -m launch.*` command in the README's code blocks, continuations joined."""
  with open(os.path.join(ROOT, 'README.md')) as f:
    text = f.read().replace('\\\n', ' ')
  return [' '.join(line.split()) for line in text.splitlines()
          if line.strip().startswith('python -m launch.')]


def _run(argv, **kwargs):
  return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                        **kwargs)


def test_readme_override_examples_run_as_written(tmp_path):
  examples = [c for c in readme_commands() if '--config.' in c]
  assert examples, 'the README shows no override example'
  for k, command in enumerate(examples):
    argv = shlex.split(command)[1:]  # without `python`
    workdir = tmp_path / f'run{k}'
    argv = [f'--workdir={workdir}' if a.startswith('--workdir=') else a for a in argv]
    assert any(a.startswith('--config=') and 'tiny' in a for a in argv), (
        f'README example is not a tiny run, so this test cannot run it: {command}')
    proc = _run(argv, timeout=600)
    assert proc.returncode == 0, (command, proc.stderr[-2000:])
    config = json.load(open(workdir / 'config.json'))
    for arg in argv:
      if arg.startswith('--config.'):
        path, value = arg[len('--config.'):].split('=', 1)
        node = config
        for part in path.split('.'):
          node = node[part]
        want = common.ListParser().parse(value) if isinstance(node, list) else value
        assert str(node) == str(want) or node == want, (path, node, value)


@pytest.mark.parametrize('text, value', [
    ('[0,1]', [0, 1]), ('(0, 1)', [0, 1]), ('0,1', [0, 1]), ('7', [7]),
    ('[1e-3,3e-4]', [1e-3, 3e-4]), ('(-1.0,)', [-1.0]), ("['a']", ['a']), ('[]', []),
    ('[1,inf]', [1, float('inf')])])
def test_list_parser(text, value):
  assert common.ListParser().parse(text) == value


def _bad(tmp_path):
  """A directory of bad inputs: a file, broken experiment files, an empty directory and a
  run directory with a broken results.json."""
  (tmp_path / 'file').write_text('x')
  (tmp_path / 'broken.py').write_text('def get_config(arg=None):\n  return (\n')
  (tmp_path / 'noconfig.py').write_text('x = 1\n')
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'bad').mkdir()
  (tmp_path / 'bad' / 'results.json').write_text('{not json')
  return tmp_path


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
    ([TINY, '--config.train.foo=1'], "unknown config field 'train.foo'; valid fields of "
     'train: batch_size'),
    (['--config=experiments/rpe_table1.py:foo=bar'],
     "unknown config arg 'foo'; valid args: encoding, relative_mode, task, tiny"),
    (['--config=experiments/nope.py'], "config file 'experiments/nope.py' does not exist; "
     'experiment files: experiments/abacus_arithmetic.py'),
    (['--config={tmp}/broken.py'], 'does not import: SyntaxError'),
    (['--config={tmp}/noconfig.py'], 'has no get_config(arg)'),
    ([TINY, '--config.model.family=lstm'], "unknown model.family 'lstm'; valid: encoder, decoder"),
    ([TINY, '--config.model.recurrences=0'], 'model.recurrences=0 must be an integer >= 1'),
    ([TINY, '--config.model.injection=every'], "unknown model.injection 'every'; valid: none"),
    ([TINY, '--config.train.progressive_alpha=0.5'], 'progressive_alpha=0.5 needs a looped'),
    ([TINY, '--config.model.tie_embeddings=True'], 'tie_embeddings needs model.family=decoder'),
    (['--config=experiments/rpe_decoder.py:encoding=learned,tiny',
      '--config.model.max_position=16'],
     'model.max_position=16 is smaller than the longest sequence (25 tokens at length 12 of '
     'reverse_string for the decoder)'),
    ([ARITH, '--config.model.max_position=16'], 'model.max_position=16 is smaller than the '
     'Abacus table needs (18: numbers of up to 8 digits plus offsets up to 9)'),
    ([ARITH.replace('tiny', 'tiny,encoding=learned'), '--config.model.max_position=20'],
     'model.max_position=20 is smaller than the longest sequence (24 tokens at 7 x 7 of '
     'addition)'),
    ([ARITH.replace('tiny', 'tiny,task=sorting'), '--config.task_options.num_index_symbols=4'],
     'sorting: 7 numbers need more than num_index_symbols=4 index symbols'),
    ([ARITH, '--config.task_options.pad_probability=2.0'], 'pad_probability must be in [0, 1]'),
    ([ARITH, '--config.task_options.width=3'], "unknown config field 'task_options.width'"),
    ([ARITH.replace('tiny', 'tiny,task=division')], "unknown task 'division' for this study; "
     'valid: addition, addition_subtraction, multiplication, sorting, bitwise_or'),
    ([ARITH.replace('tiny', 'tiny,architecture=deep')], "unknown architecture 'deep'; valid: "
     'standard, standard_ii, looped'),
    ([ARITH.replace('tiny', 'tiny,looped=8by2')], "bad looped='8by2'"),
    ([ARITH, '--config.eval.grid_max=0'], 'eval.grid_max=0 must be a positive integer'),
    ([ARITH, '--config.train.max_length=0'], 'train.max_length=0'),
    ([ARITH, '--config.eval.beyond=[3]'], 'eval.beyond [3] must be integers past '
     'eval.grid_max=5'),
    ([ARITH, '--config.model.family=encoder'], "task 'addition' is a token sequence for a "
     'decoder'),
    (['--config=experiments/extrapolation_lm.py:tiny', '--config.task_options.valid_percent=0'],
     'valid_percent=0 must be in 1..99'),
    (['--config=experiments/extrapolation_lm.py:tiny', '--config.eval.lengths=[16,4096]',
      '--config.eval.max_length=4096'], 'holds no window of 4096'),
    (['--config=experiments/extrapolation_lm.py:tiny', '--config.encoding_options.bias_r=-1.0'],
     'bias_r=-1.0 must be > 0'),
    (['--config=experiments/extrapolation_lm.py:tiny,family=lstm'], "unknown family 'lstm'; "
     'valid: decoder'),
    (['--config=experiments/extrapolation_lm.py:tiny', '--config.train.loss_on=answer'],
     'trains on every token: set train.loss_on=all'),
    (['--config=experiments/extrapolation_lm.py:tiny', '--config.encoding_options.bias_window=0'],
     'bias_window=0 must be an integer >= 1'),
    ([TINY, '--workdir=/proc/nonexistent/x'], 'cannot be created or written'),
    ([TINY, '--workdir={tmp}/file'], 'is a file, not a directory'),
    ([TINY, '--workdir={tmp}/file/below'], 'cannot be created or written'),
]


SWEEP_CASES = [
    (['--config=experiments/nope.py'], "config file 'experiments/nope.py' does not exist"),
    (['--config=experiments/quickstart.py:foo'], "unknown config arg 'foo'"),
    (['--config=experiments/sweep_tiny.py:x=1'], 'none (this file takes no args)'),
    (['--config=experiments/sweep_tiny.py', '--tasks=nope'], "unknown task 'nope' in the "
     'sweep filter; valid tasks: parity_check, reverse_string'),
    (['--config=experiments/sweep_tiny.py', '--shard=3/2'], "bad shard '3/2'"),
    (['--config=experiments/sweep_tiny.py', '--config.seeds=0,0'], 'has duplicates'),
    (['--config=experiments/sweep_tiny.py', '--workdir={tmp}/file'], 'is a file'),
    (['--config=experiments/sweep_tiny.py', '--workdir=/proc/x/y'], 'cannot be created'),
    (['--config=experiments/sweep_tiny.py', '--cost', '--device=B200'],
     "unknown --device 'B200'; valid devices: H100, A100, v4, v5e"),
    (['--config=experiments/sweep_tiny.py', '--device=H100'], '--device needs --cost'),
    (['--config=experiments/sweep_tiny.py', '--cost', '--device=H100', '--chips=0'],
     '--chips=0 must be a positive integer'),
    (['--config=experiments/rpe_decoder.py:cpu,tiny', '--cost', '--device=H100'],
     "--device estimates cover model.family=encoder only, not 'decoder'"),
    (['--config=experiments/sweep_tiny.py', '--config.model.attention_impl=fast'],
     "unknown model.attention_impl 'fast'; valid: auto, reference, xla_fused, cpu_blocked"),
    (['--config=experiments/sweep_tiny.py', '--config.train.steps_per_dispatch=0'],
     'train.steps_per_dispatch=0 must be a positive integer'),
    (['--config=experiments/sweep_tiny.py', '--config.model.dtype=float16'],
     "unknown model.dtype 'float16'; valid: float32, bfloat16"),
]


REPORT_CASES = [
    (['{tmp}/nowhere'], 'no such file or directory'),
    (['{tmp}/empty'], 'no results.json'),
    (['{tmp}/bad'], 'no well-formed run'),
    (['{tmp}/bad', '--out={tmp}/file'], 'is a file, not a directory'),
    (['{tmp}/bad', '--bogus'], 'unrecognized arguments: --bogus'),
]


BENCH_CASES = [
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
]


def test_main_job_prints_no_library_log_lines(tmp_path):
  proc = _run(['-m', 'launch.sweep', '--config=experiments/quickstart.py:tiny',
               f'--workdir={tmp_path}'], timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  log_line = re.compile(r'^[IWEF]\d{4} |orbax|libtpu|CheckpointManager')
  noisy = [l for l in proc.stdout.splitlines() + proc.stderr.splitlines() if log_line.search(l)]
  assert not noisy, noisy[:5]
  assert 'Table 1' in proc.stdout and 'report written to' in proc.stdout
  # --verbosity brings the libraries' INFO lines back.
  again = _run(['-m', 'launch.train', '--config=experiments/quickstart.py:tiny',
                f'--workdir={tmp_path}/verbose', '--config.train.steps=5', '--verbosity=0'],
               timeout=600)
  assert again.returncode == 0 and 'orbax' in again.stderr + again.stdout


# Each entry point with the arguments it always gets.
ENTRY_POINTS = {'train': ['launch.train', '--workdir={tmp}/run'],
                'sweep': ['launch.sweep', '--workdir={tmp}/sweep'],
                'report': ['launch.report'], 'bench': ['launch.bench']}
CASES = [(entry, args, needle) for entry, cases in (
    ('train', TRAIN_CASES), ('sweep', SWEEP_CASES), ('report', REPORT_CASES),
    ('bench', BENCH_CASES)) for args, needle in cases]


def _help_commands() -> list[list[str]]:
  from launch import analyze
  from launch import bench
  return ([['launch.train'], ['launch.sweep'], ['launch.report'], ['launch.analyze'],
           ['launch.bench'], ['launch.export_eval_set']] + [['launch.analyze', name] for name in analyze.ANALYSES]
          + [['launch.bench', name] for name in bench.available()])


@pytest.mark.parametrize('command', _help_commands(), ids=' '.join)
def test_help_prints_usage_and_exits_0(cli, command):
  proc = cli.run([*command, '--help'])
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() and not proc.stderr.strip(), proc.stderr
  # Every entry point shows its own usage: the module name or the subcommand appears.
  assert command[-1].split('.')[-1] in proc.stdout


@pytest.mark.parametrize('entry, args, needle', CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, entry, args, needle):
  tmp = _bad(tmp_path)
  before = sorted(p.relative_to(tmp) for p in tmp.rglob('*'))
  proc = cli.run([a.format(tmp=tmp) for a in ENTRY_POINTS[entry] + args])
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and needle in lines[0], lines
  assert sorted(p.relative_to(tmp) for p in tmp.rglob('*')) == before
