"""Adding a kind of task is one protocol module and one registry entry: a toy task with its
own protocol, both registered inside this test, trains and is evaluated end to end through
the one loop, with no other file touched."""

import dataclasses
import os
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rpe_table1
from posenc import evaluate
from posenc import io
from posenc import results as results_lib
from posenc import setup
from posenc import train
from posenc import config as config_lib
from posenc.evaluate import core
from posenc.evaluate import range as range_protocol
import tasks
from tasks import regular


@dataclasses.dataclass(frozen=True)
class ToyParity(regular.ParityCheck):
  """Parity, judged by the toy protocol."""

  name: str = 'toy_parity'
  protocol: ClassVar[str] = 'toy'


TOY_LENGTHS = (3, 5)


def toy_evaluate(run, state, ctx: core.EvalContext) -> 'ToyResults':
  """Accuracy at two lengths, kept in toy.jsonl; the score is the worse of the two."""
  fn = range_protocol.make_eval_fn(run, max(TOY_LENGTHS), ctx.traces)
  population, diverged = run.population, core.diverged(run, state)

  def measure(length):
    metrics = fn(state['params'], jnp.int32(length), population.eval_keys)
    return {'accuracy': core.member_values(metrics['accuracy'], population.size)}

  by = core.run_cells(
    run,
    ctx,
    'toy.jsonl',
    list(TOY_LENGTHS),
    lambda n: {'length': n},
    measure,
    lambda n: f'length {n}',
  )
  members = tuple(
    results_lib.Member(
      **m, diverged=bool(diverged[i]), score=min(by[n]['accuracy'][i] for n in TOY_LENGTHS)
    )
    for i, m in enumerate(population.members)
  )
  return ToyResults(TOY_LENGTHS, members)


@dataclasses.dataclass(frozen=True)
class ToyResults:
  """The toy protocol's record in results.json."""

  evaluation: ClassVar[str] = 'toy'
  default_family: ClassVar[str] = 'encoder'
  toy_lengths: tuple[int, ...]
  members: tuple[results_lib.Member, ...]

  def to_json(self):
    return {
      'evaluation': self.evaluation,
      'toy_lengths': list(self.toy_lengths),
      'members': [m._head() for m in self.members],
    }

  @classmethod
  def from_json(cls, data, where):
    members = tuple(
      results_lib.Member(**{k: m[k] for k in ('seed', 'learning_rate', 'diverged', 'score')})
      for m in results_lib.require(data, 'members', list, where)
    )
    return cls(tuple(results_lib.require(data, 'toy_lengths', list, where)), members)


TOY = dataclasses.replace(
  range_protocol.PROTOCOL,
  name='toy',
  validate=lambda run: None,
  evaluate=toy_evaluate,
  results=ToyResults,
  summary=lambda record: f'toy score {record.members[0].score}',
)


@pytest.fixture
def toy_task(monkeypatch):
  monkeypatch.setitem(evaluate.PROTOCOLS, 'toy', TOY)
  monkeypatch.setitem(tasks.REGISTRY, 'toy_parity', ToyParity())
  return 'toy_parity'


def test_a_task_with_its_own_protocol_trains_and_is_evaluated(toy_task, tmp_path):
  config = config_lib.cell_config(
    rpe_table1.get_config('task=parity_check,tiny'),
    {'task': toy_task, 'train.steps': 4, 'seeds': [0, 1]},
  )
  setup.build(config)
  assert evaluate.of(tasks.get(toy_task)) is TOY
  lines = []
  results = train.train_and_evaluate(setup.build(config), str(tmp_path), progress=lines.append)
  assert results['evaluation'] == 'toy' and results['toy_lengths'] == list(TOY_LENGTHS)
  rows = io.read_jsonl(os.path.join(tmp_path, 'toy.jsonl'))
  assert [r['length'] for r in rows] == list(TOY_LENGTHS)
  for i, member in enumerate(results['members']):
    assert member['score'] == min(r['accuracy'][i] for r in rows)
    assert 0 <= member['score'] <= 1 and np.isfinite(member['score'])
  assert any(line.startswith('eval length 5 (2/2)') for line in lines)
  # Its record reads back through the schema, with the protocols' kinds.
  record = results_lib.Results.from_json(results, evaluate.kinds())
  assert record.evaluation == ToyResults(TOY_LENGTHS, record.members)
  assert record.to_json() == results
  assert evaluate.PROTOCOLS['toy'].summary(record).startswith('toy score ')
