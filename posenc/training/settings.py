"""How a run trains and is evaluated, typed: the config's `train` and `eval` fields that every
kind of evaluation shares, read once when the run is built (`posenc.training.run.build`) and carried
on it as `run.train` and `run.eval`.

The config stays the parse (`posenc.config`: defaults, overrides, checks); below the run
the loop, the update, the log, the optimizer and the evaluations read these records, not
the config.

Example:
  >>> from posenc import config as config_lib
  >>> train = TrainSettings.of(config_lib.base_config())
  >>> train.steps, train.max_length, train.schedule
  (2000000, 40, 'constant')
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections


def _read(section: ml_collections.ConfigDict, cls: type) -> dict[str, Any]:
  """The fields of `cls` from a config section; a field a recorded config lacks (written
  before it existed) is None."""
  return {f.name: section.get(f.name) for f in dataclasses.fields(cls)}


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """`config.train` (posenc/config.py says what each field means) and `checkpoint_every`.

  Example: TrainSettings.of(config).max_length is N, training lengths ~ U{1..N}.
  """

  steps: int
  batch_size: int
  max_length: int
  log_every: int
  bucket_size: int
  masked_loss: bool
  max_grad_norm: float
  optimizer: str
  weight_decay: float
  schedule: str
  warmup: float
  cooldown: float
  population_loop: str
  optimizer_loop: str | None
  steps_per_dispatch: int
  programs: Any
  progressive_alpha: float
  scale_block_gradients: bool
  loss_on: str | None
  hint_schedule: str | None
  dataset_size: int | None
  checkpoint_every: int

  @classmethod
  def of(cls, config: ml_collections.ConfigDict) -> TrainSettings:
    fields = _read(config.train, cls)
    fields['checkpoint_every'] = config.checkpoint_every
    return cls(**fields)


@dataclasses.dataclass(frozen=True)
class EvalSettings:
  """`config.eval` (posenc/config.py says what each field means): those every kind of
  evaluation shares, then the grid's, the language models' and the hinting study's.

  Example: EvalSettings.of(config).max_length is M, the longest length evaluated.
  """

  max_length: int
  examples_per_length: int
  batch_size: int
  lengths: list[int]
  stride: int
  bucket_size: int
  programs: Any
  eval_dropout: bool | None
  seed: int
  from_files: str | None
  grid_max: int | None
  grid_stride: int | None
  samples_per_cell: int | None
  beyond: list[int] | None
  lm_tokens: int | None
  sliding_stride: int | None
  distributions: list[str] | None

  @classmethod
  def of(cls, config: ml_collections.ConfigDict) -> EvalSettings:
    return cls(**_read(config.eval, cls))
