"""Adding a kind of evaluation is one folder and one line: the toy kind (tests/toy_kind/: its
record, protocol and report section) registered with one `posenc.kinds.KINDS` entry inside
this test, and a task that names it, train, are evaluated, read back and reported end to end
through the one loop, with no file of posenc touched. What a kind reads off a task is
written (its protocol's `task_type`): every task has it, and a task that lacks part of it is
refused in one line when its run is built."""

import dataclasses
import os
from typing import ClassVar

import numpy as np
import pytest

from experiments import rpe_table1
from posenc import config as config_lib
from posenc.sweep import cost
from posenc.training import protocol as protocol_lib
from posenc.storage import io
from posenc import kinds
from posenc import report
from posenc import setup
from posenc.training import train
import tasks
from tasks import regular
from toy_kind import protocol as toy_protocol
from toy_kind import record as toy_record


@dataclasses.dataclass(frozen=True)
class ToyParity(regular.ParityCheck):
  """Parity, judged by the toy kind."""

  name: str = 'toy_parity'
  protocol: ClassVar[str] = 'toy'


@pytest.fixture
def toy_task(monkeypatch):
  monkeypatch.setitem(kinds.KINDS, 'toy', 'toy_kind')  # The one line that adds the kind.
  monkeypatch.setitem(tasks.REGISTRY, 'toy_parity', ToyParity())
  return 'toy_parity'


def test_a_kind_in_its_own_folder_trains_is_evaluated_read_and_reported(toy_task, tmp_path):
  config = config_lib.cell_config(
    rpe_table1.get_config('task=parity_check,tiny'),
    {'task': toy_task, 'train.steps': 4, 'seeds': [0, 1]},
  )
  run = setup.build(config)
  assert run.protocol is toy_protocol.PROTOCOL
  lines = []
  workdir = tmp_path / 'run'
  results = train.train_and_evaluate(run, str(workdir), progress=lines.append)
  assert results['evaluation'] == 'toy' and results['toy_lengths'] == list(toy_protocol.LENGTHS)
  rows = io.read_jsonl(os.path.join(workdir, 'toy.jsonl'))
  assert [r['length'] for r in rows] == list(toy_protocol.LENGTHS)
  for i, member in enumerate(results['members']):
    assert member['score'] == min(r['accuracy'][i] for r in rows)
    assert 0 <= member['score'] <= 1 and np.isfinite(member['score'])
  assert any(line.startswith('eval length 5 (2/2)') for line in lines)
  # Its record reads back through the schema, found by the registry.
  record = kinds.read(workdir / 'results.json')
  assert record.evaluation == toy_record.ToyResults(toy_protocol.LENGTHS, record.members)
  assert record.to_json() == results
  assert run.protocol.summary(record).startswith('toy score ')
  # Its section of a report, found by results.json's `evaluation`.
  built = report.build_report([str(workdir)], figures=False)
  assert 'toy.md' in built.files and built.tables == ('toy.md',)
  assert built.texts['toy'].startswith('# Toy\n\n- toy_parity / randomized_relative: worst member ')
  # A kind without a cost module has no cost estimate: one line naming the kinds that do.
  with pytest.raises(config_lib.ConfigError, match="'toy' evaluation has no cost model"):
    cost.estimate(config, [{}], steps=1)


def test_every_task_has_what_its_kind_reads():
  """Each kind writes what it reads off a task as a `typing.Protocol` (its protocol's
  `task_type`), and every registered task satisfies its kind's."""
  assert protocol_lib.members(kinds.protocol('lengths').task_type)[:3] == (
    'name',
    'vocab_size',
    'min_length',
  )
  for name, task in tasks.REGISTRY.items():
    task_type = kinds.protocol(task.protocol).task_type
    assert isinstance(task, task_type), (name, task_type)
    assert all(hasattr(task, m) for m in protocol_lib.members(task_type)), name


@dataclasses.dataclass(frozen=True)
class Lacking:
  """A range task with its sizes and one sampler only."""

  name: str = 'lacking'
  protocol: ClassVar[str] = 'range'
  vocab_size: int = 2
  num_classes: int = 2

  def sample(self, key, batch_size, length):
    raise NotImplementedError


NEEDS = 'a range task needs: vocab_size, num_classes, output_length, sample, sample_padded'


def test_a_task_that_lacks_what_its_kind_reads_is_one_line(monkeypatch):
  config = rpe_table1.get_config('task=parity_check,tiny')
  monkeypatch.setitem(tasks.REGISTRY, 'lacking', Lacking())
  config.task = 'lacking'
  with pytest.raises(config_lib.ConfigError) as e:
    setup.build(config)
  assert str(e.value) == (
    f"task 'lacking' (kind 'range') lacks output_length, sample_padded; {NEEDS} "
    '(posenc.kinds.range.protocol.RangeTask)'
  )
  monkeypatch.setattr(Lacking, 'protocol', 'lattice')
  with pytest.raises(config_lib.ConfigError, match="kind of evaluation 'lattice'; valid: range,"):
    setup.build(config)


LACKING_CONFIG = '''
import sys

sys.path.insert(0, {tests!r})
import tasks
from experiments import rpe_table1
import test_toy_protocol


def get_config(arg=None):
  del arg
  tasks.REGISTRY['lacking'] = test_toy_protocol.Lacking()
  config = rpe_table1.get_config('task=parity_check,tiny')
  config.task = 'lacking'
  return config
'''


def test_the_launchers_refuse_a_task_that_lacks_what_its_kind_reads(cli, tmp_path):
  """The task registered by a config file, as an outside task would be: exit status 2, one
  line, no work directory."""
  path = tmp_path / 'lacking.py'
  path.write_text(LACKING_CONFIG.format(tests=os.path.dirname(__file__)))
  proc = cli.run(['launch.train', f'--config={path}', f'--workdir={tmp_path}/run'])
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.startswith("error: task 'lacking' (kind 'range') lacks output_length, ")
  assert len(proc.stderr.strip().splitlines()) == 1 and NEEDS in proc.stderr
  assert not (tmp_path / 'run').exists()
