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

import dataclasses
from typing import Any

import ml_collections

from posenc import config as config_lib
from posenc import encodings
from posenc import families
from posenc import multitask
from posenc import objectives
from posenc import population
from posenc import tensorboard
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
from posenc.models import checks as model_checks
import tasks

PROTOCOLS: dict[str, Protocol] = {
  'range': range_protocol.PROTOCOL,
  'grid': grid.PROTOCOL,
  'lengths': lengths.PROTOCOL,
  'perplexity': perplexity.PROTOCOL,
}


def kinds() -> dict[str, type]:
  """{protocol name: its results record class}: what `posenc.results` reads results.json by."""
  return {name: protocol.results for name, protocol in PROTOCOLS.items()}


def task_of(config: ml_collections.ConfigDict) -> Any:
  """The config's task with its `task_options` (ValueError on a bad name or option); a main
  task of the hinting study takes the options its hints leave it (`multitask`)."""
  if getattr(tasks.REGISTRY.get(config.task), 'level', None) == 'hinting':
    return multitask.tasks_of(config)[0]
  options = config.get('task_options')
  return tasks.get(config.task, options.to_dict() if options else None)


def of(task: Any) -> Protocol:
  """The protocol `task` names (`task.protocol`, 'range' by default)."""
  name = getattr(task, 'protocol', 'range')
  if name not in PROTOCOLS:
    raise ValueError(
      f'task {getattr(task, "name", task)!r} names an unknown protocol {name!r}; '
      f'valid: {", ".join(PROTOCOLS)}'
    )
  return PROTOCOLS[name]


@dataclasses.dataclass(frozen=True)
class Parsed:
  """What a valid config names: its task (with its options), the task's protocol, the
  encoding's entry and the model family's record."""

  task: Any
  protocol: Protocol
  encoding: encodings.Encoding
  family: families.Family


def validate(config: ml_collections.ConfigDict) -> Parsed:
  """The config's task, protocol, encoding and family, or `config.ConfigError` (one line) if
  it cannot be run: the general checks (`config.validate`), what the task and encoding ask
  of each other and of the family, the protocol's checks, that a bounded encoding covers
  the longest sequence (`Protocol.longest_tokens`), and a frozen evaluation set's files."""
  if config.task in tasks.REGISTRY and config.model.family in families.NAMES:
    allowed = of(tasks.REGISTRY[config.task]).families
    if config.model.family not in allowed:
      raise config_lib.ConfigError(
        f'task {config.task!r} is a token sequence for a decoder; set model.family={allowed[0]}'
        if allowed == ('decoder',)
        else f'task {config.task!r} runs on model.family {", ".join(allowed)}, not '
        f'{config.model.family!r}'
      )
  if config.task not in tasks.REGISTRY:
    raise config_lib.choices(config.task, 'task', list(tasks.REGISTRY))
  try:
    spec = encodings.get(config.encoding)
    encodings.resolve_options(config.encoding, config.encoding_options.to_dict())
  except ValueError as e:
    raise config_lib.ConfigError(str(e)) from None
  config_lib.validate(config)
  population.check(config)
  model_checks.check(config, spec)
  objectives.check(config)
  tensorboard.check(config)
  try:
    task = task_of(config)
  except ValueError as e:
    raise config_lib.ConfigError(str(e)) from None
  if config.get('hints') and not getattr(task, 'HINTS', ()):
    raise config_lib.ConfigError(
      f'hints {list(config.hints)} need a task of the hinting study; valid tasks: '
      + ', '.join(name for name, t in tasks.REGISTRY.items() if getattr(t, 'HINTS', ()))
    )
  protocol, family = of(task), families.of(config.model.family)
  if spec.causal_only and not family.causal:
    raise config_lib.ConfigError(
      f'encoding {config.encoding!r} is causal by definition and '
      f'needs model.family=decoder, got {config.model.family!r}'
    )
  if spec.reads_digits and getattr(task, 'digit_ids', None) is None:
    with_digits = [name for name, t in tasks.REGISTRY.items() if hasattr(t, 'digit_ids')]
    raise config_lib.ConfigError(
      f'encoding {config.encoding!r} reads digit tokens and task {config.task!r} has none; '
      f'tasks with digits: {", ".join(with_digits)}'
    )
  protocol.validate(config, task, spec)
  tokens, where = protocol.longest_tokens(config, task)
  if spec.bounded and tokens > config.model.max_position:
    raise config_lib.ConfigError(
      f'model.max_position={config.model.max_position} is smaller than the longest sequence '
      f'({tokens} tokens {where}); encoding {config.encoding!r} needs max_position >= '
      f'{tokens}'
    )
  if config.eval.get('from_files'):
    if protocol.examples is None:
      raise config_lib.ConfigError(
        f'eval.from_files: the {protocol.name!r} protocol of task '
        f'{config.task!r} has no frozen evaluation sets'
      )
    specs = protocol.example_specs(config, task) if protocol.example_specs else None
    frozen.check(
      config, protocol.name, protocol.example_fields, protocol.example_cells(config), specs
    )
  return Parsed(task, protocol, spec, family)
