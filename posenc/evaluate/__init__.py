"""Evaluation protocols, one module per kind of task, registered once.

  range       the study's accuracy per input length (`range`)
  grid        exact match over two-dimensional operand-length grids (`grid`)
  lengths     accuracy and edit distance per test distribution and length (`lengths`)
  perplexity  language models' perplexity per window length (`perplexity`)

A task names its protocol (`task.protocol`); `of(task)` is its `core.Protocol`, which the
training loop looks up once: everything that differs by the kind of task (training
batches, the model's output sizes, the evaluation, the results it writes and its summary)
is the protocol's. Adding a protocol is one module with a `PROTOCOL` and one entry here.

Example:
  >>> protocol = of(tasks.get('addition'))
  >>> protocol.name
  'grid'
"""
from __future__ import annotations

from typing import Any

import ml_collections

from posenc import config as config_lib
from posenc import encodings
from posenc.evaluate import core  # pylint: disable=unused-import
from posenc.evaluate import frozen
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
    raise ValueError(f'task {getattr(task, "name", task)!r} names an unknown protocol {name!r}; '
                     f'valid: {", ".join(PROTOCOLS)}')
  return PROTOCOLS[name]


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises `config.ConfigError` (one line) if `config` cannot be run: the general checks
  (`config.validate`), then those of its task's protocol."""
  import tasks  # pylint: disable=g-import-not-at-top
  if config.task in tasks.REGISTRY:
    task = tasks.REGISTRY[config.task]
    families = of(task).families
    if config.model.family in config_lib.FAMILIES and config.model.family not in families:
      raise config_lib.ConfigError(
          f'task {config.task!r} is a token sequence for a decoder; set model.family='
          f'{families[0]}' if families == ('decoder',) else
          f'task {config.task!r} runs on model.family {", ".join(families)}, not '
          f'{config.model.family!r}')
  config_lib.validate(config)
  task = config_lib.task_of(config)
  protocol = of(task)
  protocol.validate(config, task, encodings.get(config.encoding))
  if config.eval.get('from_files'):
    if protocol.examples is None:
      raise config_lib.ConfigError(f'eval.from_files: the {protocol.name!r} protocol of task '
                                   f'{config.task!r} has no frozen evaluation sets')
    specs = protocol.example_specs(config, task) if protocol.example_specs else None
    frozen.check(config, protocol.name, protocol.example_fields, protocol.example_cells(config),
                 specs)
