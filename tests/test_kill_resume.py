"""Each study's experiment end to end in its tiny mode: a straight run; a run killed right
after its first checkpoint and started again ends with the same results; an evaluation
stopped half-way measures only the cells it has not measured; the report builds."""

import dataclasses
import json
import os
import subprocess
import sys
from typing import Callable

import pytest

from experiments import abacus_arithmetic
from experiments import sorting_hints
from posenc import setup
from posenc.storage import io
from posenc.kinds.grid import protocol as grid
from posenc.kinds.lengths import protocol as lengths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Study:
  experiment: str  # experiments/NAME.py
  arg: str  # its tiny mode
  evaluation: str  # results.json's protocol
  rows: str  # the protocol's file of measured cells
  cells: Callable[[dict], list]  # row -> cell, compared with `expected_cells`
  expected_cells: Callable[[], list]
  summary: str  # in the closing line
  report: tuple[str, ...]  # the report's text file and what it holds
  check: Callable[[dict], None]  # the protocol's results


def _check_grid(results: dict) -> None:
  member = results['members'][0]
  assert set(member['regions']) == set(grid.REGIONS)
  assert all(0 <= v <= 1 for v in member['regions'].values())


def _check_lengths(results: dict) -> None:
  config = sorting_hints.get_config('tiny,hint=successor')
  assert results['hints'] == ['successor']
  member = results['members'][0]
  for metric in lengths.METRICS:
    assert set(member[f'{metric}_by_length']) == set(config.eval.distributions)
  assert all(0 <= v <= 1 for d in member['exact_match_by_length'].values() for v in d.values())
  # Evaluation compiles one program per test length, whatever the distributions.
  assert results['compiled_programs']['eval'] == len(config.eval.lengths)


STUDIES = {
  'arithmetic': Study(
    'abacus_arithmetic',
    'tiny',
    'grid',
    'grid.jsonl',
    lambda r: tuple(r['cell']),
    lambda: grid.cells(setup.build(abacus_arithmetic.get_config('tiny'))),
    'out-of-distribution cells (exact match) up to 5',
    ('arithmetic.md', 'OOD', 'looped', 'abacus'),
    lambda results: _check_grid(results),
  ),
  'hints': Study(
    'sorting_hints',
    'tiny,hint=successor',
    'lengths',
    'lengths.jsonl',
    lambda r: (r['distribution'], r['length']),
    lambda: lengths.cells(setup.build(sorting_hints.get_config('tiny,hint=successor'))),
    'full-sequence accuracy, successor',
    (
      'hints.md',
      'full-sequence accuracy (%), uniform inputs',
      'mean edit distance, rep2 inputs',
      'successor · fire',
      '| 8* |',
    ),
    lambda results: _check_lengths(results),
  ),
}


def _cmd(study: Study, workdir: str) -> list[str]:
  return [
    sys.executable,
    '-m',
    'launch.train',
    f'--config=experiments/{study.experiment}.py:{study.arg}',
    f'--workdir={workdir}',
  ]


# Each study's protocol resumes through the same loop: the default suite kills and resumes
# one study (the range protocol's is test_train's), `-m slow` all of them.
@pytest.mark.parametrize(
  'name', [n if n == 'hints' else pytest.param(n, marks=pytest.mark.slow) for n in STUDIES]
)
def test_tiny_mode_end_to_end_killed_run_and_killed_evaluation_resume(
  name, tmp_path, kill_after_checkpoint
):
  study = STUDIES[name]
  straight, killed = str(tmp_path / 'straight'), str(tmp_path / 'killed')
  done = subprocess.run(_cmd(study, straight), cwd=ROOT, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  assert study.summary in done.stdout
  kill_after_checkpoint(_cmd(study, killed), killed, 10)
  assert subprocess.run(_cmd(study, killed), cwd=ROOT, capture_output=True).returncode == 0
  a, b = (io.read_json(os.path.join(d, 'results.json')) for d in (straight, killed))
  assert a['evaluation'] == study.evaluation and a['members'] == b['members']
  study.check(a)
  rows = io.read_jsonl(os.path.join(killed, study.rows))
  assert [study.cells(r) for r in rows] == study.expected_cells()
  # An evaluation stopped half-way measures only the cells it has not measured.
  with open(os.path.join(killed, study.rows), 'w') as f:
    f.writelines(json.dumps(r) + '\n' for r in rows[: len(rows) // 2])
  os.remove(os.path.join(killed, 'results.json'))
  assert subprocess.run(_cmd(study, killed), cwd=ROOT, capture_output=True).returncode == 0
  assert io.read_jsonl(os.path.join(killed, study.rows)) == rows
  assert io.read_json(os.path.join(killed, 'results.json'))['members'] == a['members']
  out = str(tmp_path / 'report')
  proc = subprocess.run(
    [sys.executable, '-m', 'launch.report', straight, f'--out={out}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 0, proc.stderr
  text = open(os.path.join(out, study.report[0])).read()
  for needle in study.report[1:]:
    assert needle in text, needle
  assert any(f.endswith('.png') for f in os.listdir(out))
