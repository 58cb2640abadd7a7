"""A run's objects, built once from its config: `build(config) -> Run`, and `restore(workdir)`
for a saved run.

A config is parsed here and nowhere else ("parse, don't validate"): the general checks of
every field (each where the field is owned), then the task and its hint tasks, the task's
protocol, the encoding's entry and the model family; the model is made for the platform of
the devices, the population and its data keys are laid out, and last the protocol checks
what it asks of the run. Training, evaluation, the analyses, the interventions, the cost
model and the speed tools take the `Run` and never derive these again: every hook of a
protocol and of an objective takes the run.

Example:
  >>> from posenc import config as config_lib
  >>> config = config_lib.base_config()     # the study's cell: an encoder, 30 members
  >>> run = build(config)                   # ConfigError (one line) for a bad config
  >>> run.protocol.name, run.family.causal, run.population.size
  ('range', False, 30)
  >>> run, state, step = restore('runs/parity')  # the newest checkpoint  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections

from posenc import attention
from posenc import checkpoint
from posenc import config as config_lib
from posenc import encodings
from posenc import evaluate
from posenc import families
from posenc import io
from posenc import kinds
from posenc import models
from posenc import multitask
from posenc import objectives
from posenc import population as population_lib
from posenc import tensorboard
from posenc.evaluate import frozen
from posenc.models import checks as model_checks
import tasks

ConfigError = config_lib.ConfigError


class RunError(ValueError):
  """A saved run that cannot be restored (no config, no checkpoint that restores); one line."""


@dataclasses.dataclass(frozen=True)
class Run:
  """Everything a config names, built once.

  Attributes:
    config: the run's config.
    task: its (main) task, with its options.
    hint_tasks: the hint tasks trained beside it (the hinting study's `config.hints`, each
      with its own head), else ().
    protocol: the protocol of the task's kind of evaluation (`posenc.kinds`);
      `protocol.training` how it trains.
    encoding: the encoding's registry entry.
    family: the model family's record (`posenc.families`).
    model: the model, its attention backend resolved for `platform`.
    population: the members, their keys and the mesh over the devices.
    curriculum_key, batch_key, eval_key: the data keys (`population.data_keys`).
    platform: the platform the programs are built for ('cpu', 'gpu', 'tpu').
  """

  config: ml_collections.ConfigDict
  task: Any
  hint_tasks: tuple[Any, ...]
  protocol: evaluate.Protocol
  encoding: encodings.Encoding
  family: families.Family
  model: Any
  population: population_lib.Population
  curriculum_key: jax.Array
  batch_key: jax.Array
  eval_key: jax.Array
  platform: str

  @property
  def training(self) -> evaluate.core.Training:
    return self.protocol.training

  @property
  def tasks(self) -> tuple[Any, ...]:
    """The main task, then its hint tasks: one output head each."""
    return (self.task, *self.hint_tasks)

  def with_model(self, attention_impl: str | None = None, platform: str | None = None) -> Run:
    """The same run with its model rebuilt: another attention backend (the analyses read the
    readable `reference` one), or for another platform (programs exported for an
    accelerator)."""
    config = self.config
    if attention_impl is not None:
      config = ml_collections.ConfigDict(config.to_dict())
      config.model.attention_impl = attention_impl
    run = dataclasses.replace(self, config=config, platform=platform or self.platform)
    return dataclasses.replace(run, model=make_model(run))


def make_model(run: Run) -> Any:
  """The model of the run's family for its task, its attention backend resolved for the
  run's platform; its output sizes are the training's (`Training.model_sizes`)."""
  config, c = run.config, run.config.model
  options = config.encoding_options.to_dict()
  if hasattr(run.task, 'digit_ids'):  # Abacus reads which tokens are digits from the task
    options['digit_ids'] = tuple(run.task.digit_ids)
  common = dict(
    encoding=config.encoding,
    num_layers=c.num_layers,
    d_model=c.d_model,
    num_heads=c.num_heads,
    ffn_size=c.ffn_size,
    dropout=c.dropout,
    max_position=c.max_position,
    encoding_options=tuple(sorted(options.items())),
    norm=c.norm,
    ffn=c.ffn,
    recurrences=c.recurrences,
    injection=c.injection,
    loop=c.loop,
    attention_impl=attention.resolve(c.attention_impl, run.platform),
    attention_block=c.attention_block,
    fused_implementation=None if c.fused_implementation == 'xla' else c.fused_implementation,
    temperature=c.temperature,
    temperature_beta=c.temperature_beta,
    dtype=jnp.dtype(c.dtype),
    param_dtype=jnp.dtype(c.param_dtype),
  )
  sizes = run.training.model_sizes(run)
  if run.family.generates:
    return models.Decoder(tie_embeddings=c.tie_embeddings, **sizes, **common)
  return models.Encoder(**sizes, **common)


def protocol_of(task: Any) -> evaluate.Protocol:
  """The protocol of the kind of evaluation `task` names (`task.protocol`, 'range' by
  default: `posenc.kinds`); ValueError (one line) for a kind not registered."""
  name = getattr(task, 'protocol', 'range')
  if name not in kinds.KINDS:
    raise ValueError(
      f'task {getattr(task, "name", task)!r} names an unknown kind of evaluation {name!r}; '
      f'valid: {", ".join(kinds.KINDS)}'
    )
  return kinds.protocol(name)


def build(
  config: ml_collections.ConfigDict, devices: list[Any] | None = None, platform: str | None = None
) -> Run:
  """The run of `config` on `devices` (default: every local device), its programs built for
  `platform` (default: the devices').

  Raises:
    ConfigError: the config cannot run (one line naming the bad value).
  """
  task, hint_tasks, encoding, family = _parse(config)
  protocol = protocol_of(task)
  population = population_lib.Population(config, devices)
  curriculum_key, batch_key, eval_key = population_lib.data_keys(config)
  run = Run(
    config,
    task,
    hint_tasks,
    protocol,
    encoding,
    family,
    None,  # made below: the model's output sizes are the training's, which reads the run
    population,
    curriculum_key,
    batch_key,
    eval_key,
    platform or population.platform,
  )
  run = dataclasses.replace(run, model=make_model(run))
  _check_run(run)
  return run


def _parse(config: ml_collections.ConfigDict) -> tuple[Any, tuple[Any, ...], Any, Any]:
  """(task, hint tasks, encoding entry, family record) of `config`, after every general check
  (`config.validate` and the checks of the fields each module owns), or ConfigError."""
  if config.task in tasks.REGISTRY and config.model.family in families.NAMES:
    allowed = protocol_of(tasks.REGISTRY[config.task]).families
    if config.model.family not in allowed:
      raise ConfigError(
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
    raise ConfigError(str(e)) from None
  config_lib.validate(config)
  population_lib.check(config)
  model_checks.check(config, spec)
  objectives.check(config)
  tensorboard.check(config)
  if config.get('hints') and not getattr(tasks.REGISTRY[config.task], 'HINTS', ()):
    raise ConfigError(
      f'hints {list(config.hints)} need a task of the hinting study; valid tasks: '
      + ', '.join(name for name, t in tasks.REGISTRY.items() if getattr(t, 'HINTS', ()))
    )
  try:
    task, *hint_tasks = multitask.tasks_of(config)
  except ValueError as e:
    raise ConfigError(str(e)) from None
  family = families.of(config.model.family)
  if spec.causal_only and not family.causal:
    raise ConfigError(
      f'encoding {config.encoding!r} is causal by definition and '
      f'needs model.family=decoder, got {config.model.family!r}'
    )
  if spec.reads_digits and getattr(task, 'digit_ids', None) is None:
    with_digits = [name for name, t in tasks.REGISTRY.items() if hasattr(t, 'digit_ids')]
    raise ConfigError(
      f'encoding {config.encoding!r} reads digit tokens and task {config.task!r} has none; '
      f'tasks with digits: {", ".join(with_digits)}'
    )
  return task, tuple(hint_tasks), spec, family


def _check_run(run: Run) -> None:
  """What the protocol asks of the run (`Protocol.validate`), that a bounded encoding covers
  the longest sequence (`Protocol.longest_tokens`), and a frozen evaluation set's files."""
  config, protocol = run.config, run.protocol
  protocol.validate(run)
  tokens, where = protocol.longest_tokens(run)
  if run.encoding.bounded and tokens > config.model.max_position:
    raise ConfigError(
      f'model.max_position={config.model.max_position} is smaller than the longest sequence '
      f'({tokens} tokens {where}); encoding {config.encoding!r} needs max_position >= '
      f'{tokens}'
    )
  if config.eval.get('from_files'):
    if protocol.examples is None:
      raise ConfigError(
        f'eval.from_files: the {protocol.name!r} protocol of task '
        f'{config.task!r} has no frozen evaluation sets'
      )
    specs = protocol.example_specs(run) if protocol.example_specs else None
    frozen.check(config, protocol.name, protocol.example_fields, protocol.example_cells(run), specs)


def read_config(workdir: str) -> ml_collections.ConfigDict:
  """The config recorded in `workdir/config.json` (RunError if there is none)."""
  path = os.path.join(workdir, 'config.json')
  if not io.isfile(path):
    raise RunError(f'{workdir} holds no run (no config.json)')
  return ml_collections.ConfigDict(io.read_json(path))


def restore(
  workdir: str,
  devices: list[Any] | None = None,
  progress: Callable[[str], None] = lambda line: None,
) -> tuple[Run, Any, int]:
  """(the run, its state, the step) of `workdir` at its newest checkpoint that restores.

  A reader: a damaged checkpoint is named to `progress` and left where it is (training sets
  it aside), and a run without checkpoints is left without a checkpoint directory.

  Raises:
    RunError: no config.json, no checkpoint, or none that restores; ConfigError: the
      recorded config no longer runs.
  """
  run = build(read_config(workdir), devices)
  # Asked before the manager, which would create the checkpoint directory of a bare run.
  if not checkpoint.saved_steps(workdir):
    raise RunError(f'{workdir} has no checkpoint (train it first)')
  with contextlib.closing(checkpoint.checkpoint_manager(workdir)) as manager:
    step, state, _, damaged = checkpoint.restore_newest(
      manager,
      population_lib.init_state(run.config, run.model, run.population, abstract=True),
      run.population,
      lambda step: os.path.join(workdir, 'checkpoints', str(step)),
    )
  if step is None:
    raise RunError(f'no checkpoint of {workdir} restores: ' + '; '.join(damaged))
  if damaged:
    progress(f'damaged: {"; ".join(damaged)}; reading the checkpoint at step {step}')
  return run, state, step
