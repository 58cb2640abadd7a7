"""A run: everything its config names, built once for its kind of evaluation's protocol
(`build(config, protocol) -> Run`).

A config is parsed here and nowhere else ("parse, don't validate"): the general checks of
every field (each where the field is owned), then the task and its hint tasks, the
encoding's entry and the model family; the model is made for the platform of the devices,
the population and its data keys are laid out, and last the protocol checks what it asks
of the run. Training, evaluation, the analyses, the interventions, the cost model and the
speed tools take the `Run` and never derive these again: every hook of a protocol and of
an objective takes the run.

The protocol comes from the caller: `posenc.setup.build(config)` finds it by the kind the
config's task names (`posenc.kinds`), and a kind's own modules build runs of their kind
with it (`posenc.kinds.range.cost`), so that nothing below the kinds looks a kind up.

Example:
  >>> from posenc import config as config_lib
  >>> from posenc.kinds.range import protocol
  >>> config = config_lib.base_config()     # the study's cell: an encoder, 30 members
  >>> run = build(config, protocol.PROTOCOL)  # ConfigError (one line) for a bad config
  >>> run.protocol.name, run.family.causal, run.population.size
  ('range', False, 30)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections

from posenc import attention
from posenc import config as config_lib
from posenc import encodings
from posenc.training import protocol as protocol_lib
from posenc.models import families
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib
from posenc.training import multitask
from posenc.models import objectives
from posenc.training import population as population_lib
from posenc import programs
from posenc.training import settings
from posenc.training import state as state_lib
from posenc.training import log as log_lib
from posenc.training import frozen
from posenc.models import checks as model_checks
import tasks
from tasks import base as task_base

ConfigError = config_lib.ConfigError


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
    parsed: the encoding parsed (`encodings.Parsed`): its name, its record and its options
      resolved, as results.json records them; the model's adds the task's digits to an
      encoding that reads them (`make_model`).
    family: the model family's record (`posenc.models.families`).
    model: the model, its attention backend resolved for `platform`.
    population: the members, their keys and the mesh over the devices.
    curriculum_key, batch_key, eval_key: the data keys (`population.data_keys`).
    platform: the platform the programs are built for ('cpu', 'gpu', 'tpu').
    train_settings, eval_settings, model_settings: how it trains, how it is evaluated and
      what its model is (`posenc.training.settings`), the platform's choices resolved: what
      the modules below the run read instead of the config's `train`, `eval` and `model`.
  """

  config: ml_collections.ConfigDict
  task: Any
  hint_tasks: tuple[Any, ...]
  protocol: protocol_lib.Protocol
  parsed: encodings.Parsed
  family: families.Family
  model: Any
  population: population_lib.Population
  curriculum_key: jax.Array
  batch_key: jax.Array
  eval_key: jax.Array
  platform: str
  train_settings: settings.TrainSettings
  eval_settings: settings.EvalSettings
  model_settings: settings.ModelSettings

  @property
  def encoding(self) -> encodings.Encoding:
    """The encoding's record (`parsed.spec`)."""
    return self.parsed.spec

  @property
  def training(self) -> protocol_lib.Training:
    return self.protocol.training

  @property
  def tasks(self) -> tuple[Any, ...]:
    """The main task, then its hint tasks: one output head each."""
    return (self.task, *self.hint_tasks)

  @functools.cached_property
  def abstract_state(self) -> Any:
    """The population's training state as `jax.ShapeDtypeStruct`s placed on its mesh (a
    traced model initialisation, made once per run): what programs are lowered for and
    checkpoints restored into."""
    return state_lib.init_state(self, abstract=True)

  def with_model(self, attention_impl: str | None = None, platform: str | None = None) -> Run:
    """The same run with its model rebuilt: another attention backend (the analyses read the
    readable `reference` one), or for another platform (programs exported for an
    accelerator)."""
    config = self.config
    if attention_impl is not None:
      config = ml_collections.ConfigDict(config.to_dict())
      config.model.attention_impl = attention_impl
    platform = platform or self.platform
    run = dataclasses.replace(
      self,
      config=config,
      platform=platform,
      train_settings=settings.TrainSettings.of(config, platform),
      model_settings=settings.ModelSettings.of(config),
    )
    return dataclasses.replace(run, model=make_model(run))


def make_model(run: Run) -> Any:
  """The model of the run's family for its task, its attention backend resolved for the
  run's platform; its output sizes are the training's (`Training.model_sizes`)."""
  m = run.model_settings
  encoding = run.parsed
  if encoding.spec.reads_digits:  # which tokens are digits is the task's (checked in _parse)
    encoding = encoding.with_options(digit_ids=tuple(run.task.digit_ids))
  common = dict(
    encoding=encoding,
    num_layers=m.num_layers,
    d_model=m.d_model,
    num_heads=m.num_heads,
    ffn_size=m.ffn_size,
    dropout=m.dropout,
    max_position=m.max_position,
    norm=m.norm,
    ffn=m.ffn,
    recurrences=m.recurrences,
    injection=m.injection,
    loop=m.loop,
    attention_impl=attention.resolve(m.attention_impl, run.platform),
    attention_block=m.attention_block,
    fused_implementation=None if m.fused_implementation == 'xla' else m.fused_implementation,
    temperature=m.temperature,
    temperature_beta=m.temperature_beta,
    dtype=jnp.dtype(m.dtype),
    param_dtype=jnp.dtype(m.param_dtype),
  )
  sizes = run.training.model_sizes(run)
  if run.family.generates:
    return decoder_lib.Decoder(tie_embeddings=m.tie_embeddings, **sizes, **common)
  return encoder_lib.Encoder(**sizes, **common)


def build(
  config: ml_collections.ConfigDict,
  protocol: protocol_lib.Protocol,
  devices: list[Any] | None = None,
  platform: str | None = None,
) -> Run:
  """The run of `config` judged by `protocol` (its task's kind's), on `devices` (default:
  every local device), its programs built for `platform` (default: the devices').

  Raises:
    ConfigError: the config cannot run (one line naming the bad value).
  """
  task, hint_tasks, parsed, family = _parse(config, protocol)
  population = population_lib.Population(config, devices)
  curriculum_key, batch_key, eval_key = population_lib.data_keys(config)
  platform = platform or population.platform
  run = Run(
    config=config,
    task=task,
    hint_tasks=hint_tasks,
    protocol=protocol,
    parsed=parsed,
    family=family,
    model=None,  # made below: the model's output sizes are the training's, which reads the run
    population=population,
    curriculum_key=curriculum_key,
    batch_key=batch_key,
    eval_key=eval_key,
    platform=platform,
    train_settings=settings.TrainSettings.of(config, platform),
    eval_settings=settings.EvalSettings.of(config),
    model_settings=settings.ModelSettings.of(config),
  )
  run = dataclasses.replace(run, model=make_model(run))
  _check_run(run)
  return run


def _parse(
  config: ml_collections.ConfigDict, protocol: protocol_lib.Protocol
) -> tuple[Any, tuple[Any, ...], encodings.Parsed, families.Family]:
  """(task, hint tasks, the encoding parsed, family record) of `config`, after every general check
  (`config.validate` and the checks of the fields each module owns), or ConfigError."""
  if config.task in tasks.REGISTRY and config.model.family in families.NAMES:
    allowed = protocol.families
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
    parsed = encodings.parse(config.encoding, config.encoding_options.to_dict())
  except ValueError as e:
    raise ConfigError(str(e)) from None
  spec = parsed.spec
  config_lib.validate(config)
  settings.check(config)
  population_lib.check(config)
  state_lib.check(config)
  model_checks.check(config, spec)
  objectives.check(config)
  log_lib.check(config)
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
  if spec.reads_digits and not isinstance(task, task_base.DigitTask):
    with_digits = [name for name, t in tasks.REGISTRY.items() if isinstance(t, task_base.DigitTask)]
    raise ConfigError(
      f'encoding {config.encoding!r} reads digit tokens and task {config.task!r} has none; '
      f'tasks with digits: {", ".join(with_digits)}'
    )
  return task, tuple(hint_tasks), parsed, family


def _check_run(run: Run) -> None:
  """What the protocol asks of the run (`Protocol.validate`), that a bounded encoding covers
  the longest sequence (`Protocol.longest_tokens`), and a frozen evaluation set's files."""
  config, protocol = run.config, run.protocol
  protocol.validate(run)
  programs.check_holds('train.programs', run.train_settings.programs, run.training.buckets(run))
  if protocol.programs is not None:
    stage = protocol.programs(run)
    programs.check_holds('eval.programs', stage.choice, stage.data)
  tokens, where = protocol.longest_tokens(run)
  max_position = run.model_settings.max_position
  if run.encoding.bounded and tokens > max_position:
    raise ConfigError(
      f'model.max_position={max_position} is smaller than the longest sequence '
      f'({tokens} tokens {where}); encoding {config.encoding!r} needs max_position >= '
      f'{tokens}'
    )
  if run.eval_settings.from_files:
    if protocol.examples is None:
      raise ConfigError(
        f'eval.from_files: the {protocol.name!r} protocol of task '
        f'{config.task!r} has no frozen evaluation sets'
      )
    specs = protocol.example_specs(run) if protocol.example_specs else None
    frozen.check(config, protocol.name, protocol.example_fields, protocol.example_cells(run), specs)
