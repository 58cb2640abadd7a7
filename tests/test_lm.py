"""Language modelling on the Python standard library: the corpus, perplexity windows, the
experiment's tiny mode end to end with a resumed evaluation, the report."""

import json
import os
import subprocess
import sys
import zlib

import jax
import numpy as np

from posenc.storage import io
from posenc import config as config_lib
from posenc import setup
from posenc.kinds.perplexity import protocol as lm_eval
from tasks import corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_windows_non_overlapping_and_sliding():
  text = np.arange(7)
  wins, scored = lm_eval.windows(text, 3, 3)
  np.testing.assert_array_equal(wins, [[0, 1, 2, 3], [3, 4, 5, 6]])
  assert scored.sum() == 6  # every byte after the first, once
  wins, scored = lm_eval.windows(text, 3, 1)
  np.testing.assert_array_equal(wins[:, 0], [0, 1, 2, 3])
  np.testing.assert_array_equal(scored, [[1, 1, 1], [0, 0, 1], [0, 0, 1], [0, 0, 1]])


def test_corpus_split_by_file_is_deterministic_and_windows_come_from_the_training_text():
  task = corpus.StdlibCorpus(max_train_bytes=200_000, max_valid_bytes=50_000)
  info = task.split_info()
  assert info['train']['bytes'] == 200_000 and info['valid']['bytes'] == 50_000
  assert zlib.crc32(info['valid']['first_file'].encode()) % 100 < 10
  assert zlib.crc32(info['train']['first_file'].encode()) % 100 >= 10
  train, valid = task.texts()
  batch = jax.jit(lambda k: task.sample_train(k, 8, 32, 1, 32))(jax.random.key(0))
  assert batch['tokens'].shape == (8, 33) and (batch['length'] == 33).all()
  raw = bytes(train)
  for row in np.asarray(batch['tokens']):
    assert bytes(row.astype(np.uint8)) in raw


def _cmd(workdir):
  return [
    sys.executable,
    '-m',
    'launch.train',
    '--config=experiments/extrapolation_lm.py:tiny',
    f'--workdir={workdir}',
  ]


def test_tiny_mode_end_to_end_with_a_resumed_evaluation_and_the_report(tmp_path):
  run = tmp_path / 'run'
  proc = subprocess.run(_cmd(run), cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  assert 'best perplexity' in proc.stdout
  results = io.read_json(str(run / 'results.json'))
  assert results['evaluation'] == 'perplexity' and results['corpus']['valid']['files'] > 0
  member = results['members'][0]
  assert set(member['perplexity_by_length']) == set(lm_eval.MODES)
  assert all(1 < v < 256 for by in member['perplexity_by_length'].values() for v in by.values())
  # An evaluation stopped after its first length measures only the rest.
  lines = (run / 'perplexity.jsonl').read_text().splitlines()
  (run / 'perplexity.jsonl').write_text(lines[0] + '\n')
  os.remove(run / 'results.json')
  assert subprocess.run(_cmd(run), cwd=ROOT, capture_output=True).returncode == 0
  again = [json.loads(l) for l in (run / 'perplexity.jsonl').read_text().splitlines()]
  assert [r['length'] for r in again] == [16, 32]
  assert again[1]['nonoverlapping'] == json.loads(lines[1])['nonoverlapping']
  assert io.read_json(str(run / 'results.json'))['members'] == results['members']
  table = _perplexity_report(run, tmp_path / 'report')
  assert '| 32 |' in table and 'sliding windows' in table
  # The prefix-shuffle analysis of the same run.
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.analyze',
      'prefix_shuffle',
      f'--workdir={run}',
      '--length=16',
      '--examples=8',
      f'--out={tmp_path / "shuffle"}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr
  result = json.loads((tmp_path / 'shuffle' / 'prefix_shuffle.json').read_text())
  assert result['shuffled_loss'] - result['loss'] == result['increase'] and result['loss'] > 0


def _perplexity_report(run, out):
  """perplexity.md of `launch.report` on `run`, written to `out`."""
  proc = subprocess.run(
    [sys.executable, '-m', 'launch.report', str(run), f'--out={out}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr
  return (out / 'perplexity.md').read_text()


def test_every_cell_of_the_experiment_validates():
  from experiments import extrapolation_lm

  for arg in ('', 'cpu', 'tiny'):
    base = extrapolation_lm.get_config(arg)
    for cell in extrapolation_lm.grid(arg):
      setup.build(config_lib.cell_config(base, cell))


def test_held_out_windows_come_from_the_validation_text():
  task = corpus.StdlibCorpus(max_train_bytes=200_000, max_valid_bytes=50_000)
  _, valid = task.texts()
  batch = task.sample(jax.random.key(1), 4, 16, 16, 1, 16)
  assert batch['tokens'].shape == (4, 17)
  for row in np.asarray(batch['tokens']):
    assert bytes(row.astype(np.uint8)) in bytes(valid)


def test_masked_language_model_of_the_same_data(tmp_path):
  run = tmp_path / 'mlm'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.train',
      '--config=experiments/extrapolation_lm.py:tiny,family=encoder,encoding=none',
      f'--workdir={run}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr
  member = io.read_json(str(run / 'results.json'))['members'][0]
  assert set(member['perplexity_by_length']) == {lm_eval.MASKED}
  assert all(1 < v < 256 for v in member['perplexity_by_length']['masked'].values())
  table = _perplexity_report(run, tmp_path / 'report')
  assert 'masked language models' in table and 'none (encoder)' in table


def test_masks_cover_the_rate_and_at_least_one_position():
  from posenc.models import objectives

  mask = np.asarray(objectives.mask_positions(jax.random.key(0), (64, 200)))
  assert mask.any(axis=1).all()
  assert abs(mask.mean() - objectives.MASK_RATE) < 0.02


def test_the_split_is_disjoint_covers_every_file_and_is_the_same_in_another_process():
  import sysconfig

  root = sysconfig.get_paths()['stdlib']
  parts = corpus.split_files(root, 10)
  train, valid = set(parts['train']), set(parts['valid'])
  assert train and valid and not train & valid
  assert train | valid == set(corpus._files(root))
  assert 0.05 < len(valid) / (len(train) + len(valid)) < 0.15
  code = (
    'import json, sysconfig; from tasks import corpus; '
    'print(json.dumps(corpus.split_files(sysconfig.get_paths()["stdlib"], 10)))'
  )
  other = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
  assert json.loads(other.stdout) == parts
