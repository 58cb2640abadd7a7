"""The toy kind's protocol: the study's training, its own evaluation."""

import dataclasses

import jax.numpy as jnp

from posenc import results
from posenc.training import protocol as protocol_lib
from posenc.kinds.range import protocol as range_protocol
from toy_kind import record

LENGTHS = (3, 5)


def evaluate(run, state, ctx: protocol_lib.EvalContext) -> record.ToyResults:
  """Accuracy at two lengths, kept in toy.jsonl; the score is the worse of the two."""
  fn = range_protocol.make_eval_fn(run, max(LENGTHS), ctx.traces)
  population, diverged = run.population, protocol_lib.diverged(run, state)

  def measure(length):
    metrics = fn(state.params, jnp.int32(length), population.eval_keys)
    return {'accuracy': protocol_lib.member_values(metrics['accuracy'], population.size)}

  by = protocol_lib.run_cells(
    run, ctx, 'toy.jsonl', list(LENGTHS), lambda n: {'length': n}, measure, lambda n: f'length {n}'
  )
  members = tuple(
    results.Member(
      **m, diverged=bool(diverged[i]), score=min(by[n]['accuracy'][i] for n in LENGTHS)
    )
    for i, m in enumerate(population.members)
  )
  return record.ToyResults(LENGTHS, members)


PROTOCOL = dataclasses.replace(
  range_protocol.PROTOCOL,
  name='toy',
  validate=lambda run: None,
  evaluate=evaluate,
  results=record.ToyResults,
  summary=lambda results: f'toy score {results.members[0].score}',
)
