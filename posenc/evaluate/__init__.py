"""Evaluation protocols, one module per kind of task, registered once.

  range       the study's accuracy per input length (`range`)
  grid        exact match over two-dimensional operand-length grids (`grid`)
  lengths     accuracy and edit distance per test distribution and length (`lengths`)
  perplexity  language models' perplexity per window length (`perplexity`)

A task names its protocol (`task.protocol`); `of(task)` is its `core.Protocol`, which the
run's builder (`posenc.setup`) looks up once: everything that differs by the kind of task (training
batches, the model's output sizes, the evaluation, the results it writes and its summary)
is the protocol's. Adding a protocol is one module with a `PROTOCOL` and one entry here.

Example:
  >>> protocol = of(tasks.get('addition'))
  >>> protocol.name
  'grid'
"""

from __future__ import annotations

from typing import Any

from posenc.evaluate import core  # pylint: disable=unused-import
from posenc.evaluate import frozen  # pylint: disable=unused-import
from posenc.evaluate import grid
from posenc.evaluate import lengths
from posenc.evaluate import perplexity
from posenc.evaluate import range as range_protocol

# Re-exported: the names a caller of the protocols uses.
from posenc.evaluate.core import EvalContext  # pylint: disable=unused-import
from posenc.evaluate.core import Protocol
from posenc.evaluate.core import eval_micro_batch  # pylint: disable=unused-import

PROTOCOLS: dict[str, Protocol] = {
  'range': range_protocol.PROTOCOL,
  'grid': grid.PROTOCOL,
  'lengths': lengths.PROTOCOL,
  'perplexity': perplexity.PROTOCOL,
}


def kinds() -> dict[str, type]:
  """{protocol name: its results record class}: what `posenc.results` reads results.json by."""
  return {name: protocol.results for name, protocol in PROTOCOLS.items()}


def of(task: Any) -> Protocol:
  """The protocol `task` names (`task.protocol`, 'range' by default)."""
  name = getattr(task, 'protocol', 'range')
  if name not in PROTOCOLS:
    raise ValueError(
      f'task {getattr(task, "name", task)!r} names an unknown protocol {name!r}; '
      f'valid: {", ".join(PROTOCOLS)}'
    )
  return PROTOCOLS[name]
