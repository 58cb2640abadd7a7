"""A run's objects, built once from its config: `build(config) -> Run`, and `restore(workdir)`
for a saved run.

A config is parsed once (`posenc.evaluate.validate`: every check, returning the task, its
protocol, the encoding's entry and the model family), then the model is made for the
platform of the devices, and the population and its data keys are laid out. Training,
evaluation, the analyses, the interventions and the cost model take the `Run` and never
derive these again.

Example:
  >>> run = build(config)                       # ConfigError (one line) for a bad config
  >>> run.protocol.name, run.family.causal, run.population.size
  ('range', False, 30)
  >>> run, state, step = restore('runs/parity')  # the newest checkpoint that restores
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections

from posenc import attention
from posenc import checkpoint
from posenc import encodings
from posenc import evaluate
from posenc import families
from posenc import io
from posenc import models
from posenc import population as population_lib


class RunError(ValueError):
  """A saved run that cannot be restored (no config, no checkpoint that restores); one line."""


def make_model(
  config: ml_collections.ConfigDict,
  task: Any,
  family: families.Family,
  training: evaluate.core.Training,
  platform: str,
) -> Any:
  """The model of `family` for `task`, its attention backend resolved for `platform`."""
  c = config.model
  options = config.encoding_options.to_dict()
  if hasattr(task, 'digit_ids'):  # Abacus reads which tokens are digits from the task
    options['digit_ids'] = tuple(task.digit_ids)
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
    attention_impl=attention.resolve(c.attention_impl, platform),
    attention_block=c.attention_block,
    fused_implementation=None if c.fused_implementation == 'xla' else c.fused_implementation,
    temperature=c.temperature,
    temperature_beta=c.temperature_beta,
    dtype=jnp.dtype(c.dtype),
    param_dtype=jnp.dtype(c.param_dtype),
  )
  sizes = training.model_sizes(config, task)
  if family.generates:
    return models.Decoder(tie_embeddings=c.tie_embeddings, **sizes, **common)
  return models.Encoder(**sizes, **common)


@dataclasses.dataclass(frozen=True)
class Run:
  """Everything a config names, built once.

  Attributes:
    config: the run's config.
    task: its task, with its options.
    protocol: the task's protocol (`posenc.evaluate`); `protocol.training` how it trains.
    encoding: the encoding's registry entry.
    family: the model family's record (`posenc.families`).
    model: the model, its attention backend resolved for `platform`.
    population: the members, their keys and the mesh over the devices.
    curriculum_key, batch_key, eval_key: the data keys (`population.data_keys`).
    platform: the platform the programs are built for ('cpu', 'gpu', 'tpu').
  """

  config: ml_collections.ConfigDict
  task: Any
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

  def with_model(self, attention_impl: str | None = None, platform: str | None = None) -> Run:
    """The same run with its model rebuilt: another attention backend (the analyses read the
    readable `reference` one), or for another platform (programs exported for an
    accelerator)."""
    config = self.config
    if attention_impl is not None:
      config = ml_collections.ConfigDict(config.to_dict())
      config.model.attention_impl = attention_impl
    platform = platform or self.platform
    return dataclasses.replace(
      self,
      config=config,
      platform=platform,
      model=make_model(config, self.task, self.family, self.training, platform),
    )


def build(
  config: ml_collections.ConfigDict, devices: list[Any] | None = None, platform: str | None = None
) -> Run:
  """The run of `config` on `devices` (default: every local device), its programs built for
  `platform` (default: the devices').

  Raises:
    ConfigError: the config cannot run (one line naming the bad value).
  """
  parsed = evaluate.validate(config)
  population = population_lib.Population(config, devices)
  platform = platform or population.platform
  model = make_model(config, parsed.task, parsed.family, parsed.protocol.training, platform)
  curriculum_key, batch_key, eval_key = population_lib.data_keys(config)
  return Run(
    config,
    parsed.task,
    parsed.protocol,
    parsed.encoding,
    parsed.family,
    model,
    population,
    curriculum_key,
    batch_key,
    eval_key,
    platform,
  )


def read_config(workdir: str) -> ml_collections.ConfigDict:
  """The config recorded in `workdir/config.json` (RunError if there is none)."""
  path = os.path.join(workdir, 'config.json')
  if not os.path.isfile(path):
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
  manager = checkpoint.checkpoint_manager(workdir)
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
