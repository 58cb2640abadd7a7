"""The arithmetic study end to end: the experiment's tiny mode trained, killed, resumed; the
grid evaluation resumed cell by cell; the report's region table and heatmaps."""
import json
import os
import subprocess
import sys

from experiments import abacus_arithmetic
from posenc import config as config_lib
from posenc import evaluate
from posenc.evaluate import grid as grid_eval
from posenc import io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cmd(workdir, arg='tiny'):
  return [sys.executable, '-m', 'launch.train',
          f'--config=experiments/abacus_arithmetic.py:{arg}', f'--workdir={workdir}']


def _grid_rows(workdir):
  return io.read_jsonl(os.path.join(workdir, 'grid.jsonl'))


def test_tiny_mode_end_to_end_killed_run_and_killed_evaluation_resume(tmp_path,
                                                                     kill_after_checkpoint):
  straight, killed = str(tmp_path / 'straight'), str(tmp_path / 'killed')
  done = subprocess.run(_cmd(straight), cwd=ROOT, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  assert 'out-of-distribution cells (exact match) up to 5' in done.stdout
  # Killed after its first checkpoint, then started again: the same results.
  kill_after_checkpoint(_cmd(killed), killed, 10)
  assert subprocess.run(_cmd(killed), cwd=ROOT, capture_output=True).returncode == 0
  a, b = (io.read_json(os.path.join(d, 'results.json')) for d in (straight, killed))
  assert a['evaluation'] == 'grid' and a['members'] == b['members']
  config = abacus_arithmetic.get_config('tiny')
  cells = grid_eval.cells(config)
  assert [tuple(r['cell']) for r in _grid_rows(straight)] == cells
  member = a['members'][0]
  assert set(member['regions']) == set(grid_eval.REGIONS)
  assert all(0 <= v <= 1 for v in member['regions'].values())
  # An evaluation stopped half-way measures only the cells it has not measured.
  rows = _grid_rows(killed)
  with open(os.path.join(killed, 'grid.jsonl'), 'w') as f:
    f.writelines(json.dumps(r) + '\n' for r in rows[:len(rows) // 2])
  os.remove(os.path.join(killed, 'results.json'))
  assert subprocess.run(_cmd(killed), cwd=ROOT, capture_output=True).returncode == 0
  assert _grid_rows(killed) == rows
  assert io.read_json(os.path.join(killed, 'results.json'))['members'] == a['members']
  # The report: the region table and one heatmap per member.
  out = str(tmp_path / 'report')
  proc = subprocess.run([sys.executable, '-m', 'launch.report', straight, f'--out={out}'],
                        cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  table = open(os.path.join(out, 'arithmetic.md')).read()
  assert 'OOD' in table and 'abacus' in table and 'looped' in table
  assert sum(name.endswith('.png') for name in os.listdir(out)) >= len(config.seeds)


def test_grid_lists_the_papers_figures():
  cells = abacus_arithmetic.grid()
  # Figure 3: standard and standard_ii at depth 16; Figure 4: L x R at effective depth 16.
  shapes = {(c['model.num_layers'], c['model.recurrences'], c['model.injection'])
            for c in cells}
  assert shapes == {(16, 1, 'none'), (16, 1, 'layer'), (8, 2, 'layer'), (4, 4, 'layer'),
                    (2, 8, 'layer'), (1, 16, 'layer')}
  assert {c['encoding'] for c in cells} == set(abacus_arithmetic.ENCODINGS)
  assert {(c['model.num_layers'], c['model.recurrences'])
          for c in abacus_arithmetic.grid('task=sorting')} >= {(8, 1), (4, 2), (2, 4), (1, 8)}
  for arg in ('', 'cpu', 'tiny', 'task=sorting', 'task=multiplication,encoding=fire'):
    evaluate.validate(abacus_arithmetic.get_config(arg))
  assert abacus_arithmetic.get_config('task=multiplication,encoding=fire').learning_rates == [
      6e-5]
  assert abacus_arithmetic.get_config('task=multiplication').model.recurrences == 4


def test_ablations_train_and_evaluate(tmp_path):
  # Random padding in the training data (Fig. 20) and the loss on every token (Fig. 16).
  from posenc import sweep as sweep_lib
  from posenc import train
  config = sweep_lib.cell_config(abacus_arithmetic.get_config('tiny,architecture=standard'), {
      'task_options.pad_probability': 0.3, 'train.loss_on': 'all', 'train.steps': 4,
      'seeds': [0], 'eval.beyond': []})
  results = train.train_and_evaluate(config, str(tmp_path))
  member = results['members'][0]
  assert member['regions']['beyond'] is None and 0 <= member['regions']['ood'] <= 1
  # Evaluation prompts are not padded: one program per unpadded width of the cells.
  plain = abacus_arithmetic.get_config('tiny')
  task = config_lib.task_of(plain)
  shapes = {grid_eval.widths(task, a, b, plain.eval.bucket_size)
            for a, b in grid_eval.cells(config)}
  assert config_lib.task_of(config).max_prompt(5, 5) == 3 * task.max_prompt(5, 5)
  assert results['compiled_programs']['eval'] == len(shapes)
