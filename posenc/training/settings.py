"""How a run trains, how it is evaluated and what its model is, typed: the config read once
when the run is built (`posenc.training.run.build`) and carried on it as `run.train_settings`,
`run.eval_settings` and `run.model_settings`, the choices made by platform resolved there
(steps per dispatch, the population loop, the compile threads) and the plans parsed.

The config stays the parse (`posenc.config`: defaults, overrides, checks); below the run the
loop, the update, the log, the optimizer, the model, the cost model and the evaluations read
these records, not the config. A field a recorded config lacks (written before it existed)
reads as the value that reproduces that run (`config.ADDED_FIELDS`), else None.

Example:
  >>> from posenc import config as config_lib
  >>> config = config_lib.base_config()
  >>> train = TrainSettings.of(config, 'cpu')
  >>> train.steps, train.max_length, train.steps_per_dispatch, train.population_loop
  (2000000, 40, 1, 'map')
  >>> TrainSettings.of(config, 'gpu').steps_per_dispatch, TrainSettings.of(config, 'gpu').programs
  (8, 'auto')
  >>> model = ModelSettings.of(config)
  >>> model.architecture, model.flops(10) == 5 * 2.0 * (10 * (4 * 64**2 + 2 * 64 * 256) + 2 * 100 * 64)
  ('standard', True)
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections

from posenc import config as config_lib
from posenc import programs
from posenc import suggest
from posenc.programs import devices

ConfigError = config_lib.ConfigError

POPULATION_LOOPS = ('auto', 'map', 'vmap')
OPTIMIZER_LOOPS = ('member', 'batched')


def check(config: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for a field resolved here that cannot be: a loop not in its
  choices, a plan field that is not a plan, `steps_per_dispatch` or `compile_threads` not an
  integer >= 0."""
  for key, valid in (
    ('train.population_loop', POPULATION_LOOPS),
    ('train.optimizer_loop', OPTIMIZER_LOOPS),
  ):
    value = config_lib.setting(config, key)
    if value not in valid:
      raise ConfigError(
        f'unknown {key} {value!r}{suggest.did_you_mean(value, valid)}; valid: {", ".join(valid)}'
      )
  for key in ('train.programs', 'eval.programs'):
    programs.parse(config_lib.setting(config, key), key)
  for key in ('train.steps_per_dispatch', 'compile_threads'):
    value = config_lib.setting(config, key)
    if not config_lib.is_int(value) or value < 0:
      raise ConfigError(f'{key}={value!r} must be an integer >= 0 (0: chosen by platform)')


def _read(config: ml_collections.ConfigDict, section: str, cls: type) -> dict[str, Any]:
  """The fields of `cls` from `config.<section>` (`config.setting`: a field added since a
  run was recorded reads as its `ADDED_FIELDS` value; one without it is None)."""
  out = {}
  for f in dataclasses.fields(cls):
    try:
      out[f.name] = config_lib.setting(config, f'{section}.{f.name}')
    except (KeyError, AttributeError):
      out[f.name] = None
  return out


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """`config.train` (posenc/config.py says what each field means), `checkpoint_every` and
  `compile_threads`, with the platform's choices resolved: `steps_per_dispatch` is K >= 1,
  `population_loop` 'map' or 'vmap', `compile_threads` a count, `programs` a plan mode or
  program widths (`programs.parse`).

  Example: TrainSettings.of(config, 'cpu').max_length is N, training lengths ~ U{1..N}.
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
  optimizer_loop: str
  steps_per_dispatch: int
  programs: str | tuple[int, ...]
  progressive_alpha: float
  scale_block_gradients: bool
  loss_on: str | None
  hint_schedule: str | None
  dataset_size: int | None
  checkpoint_every: int
  compile_threads: int

  @classmethod
  def of(cls, config: ml_collections.ConfigDict, platform: str) -> TrainSettings:
    """The settings of `config` on `platform` ('cpu', 'gpu', 'tpu').

    'auto' loops are 'map' on CPU: XLA's CPU backend runs one program's operations one
    after another on one core, and a member's [B, T, d] activations stay in cache, while
    `vmap`'s [P, B, T, d] ones stream through memory (docs/speed.md: vmap costs 1.4x map's
    CPU time per member); a CPU's other cores are reached by more devices (`cpu_devices`).
    Steps per dispatch 0 are the platform's (`devices.platform`); compile threads 0 one per
    core of this host.
    """
    fields = _read(config, 'train', cls)
    loop = fields['population_loop']
    fields['population_loop'] = ('map' if platform == 'cpu' else 'vmap') if loop == 'auto' else loop
    k = fields['steps_per_dispatch']
    fields['steps_per_dispatch'] = k or devices.platform(platform).steps_per_dispatch
    fields['programs'] = programs.parse(fields['programs'], 'train.programs')
    fields['checkpoint_every'] = config.checkpoint_every
    threads = config_lib.setting(config, 'compile_threads')
    fields['compile_threads'] = threads or max(os.cpu_count() or 1, 1)
    return cls(**fields)


@dataclasses.dataclass(frozen=True)
class EvalSettings:
  """`config.eval` (posenc/config.py says what each field means): those every kind of
  evaluation shares, then the grid's, the language models' and the hinting study's;
  `programs` parsed (`programs.parse`).

  Example: EvalSettings.of(config).max_length is M, the longest length evaluated.
  """

  max_length: int
  examples_per_length: int
  batch_size: int
  lengths: list[int]
  stride: int
  bucket_size: int
  programs: str | tuple[int, ...]
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
    fields = _read(config, 'eval', cls)
    fields['programs'] = programs.parse(fields['programs'], 'eval.programs')
    return cls(**fields)


@dataclasses.dataclass(frozen=True)
class ModelSettings:
  """`config.model` (posenc/config.py says what each field means), read once: the model
  builder, the FLOPs, the floors and the kinds read it (as flax's examples build a frozen
  `TransformerConfig` once and hand it to the model).

  Example: ModelSettings.of(config).architecture is 'looped 8x2' for 8 layers applied twice.
  """

  family: str
  num_layers: int
  d_model: int
  num_heads: int
  ffn_size: int
  dropout: float
  max_position: int
  attention_impl: str
  attention_block: int
  fused_implementation: str
  dtype: str
  param_dtype: str
  norm: str
  ffn: str
  recurrences: int
  injection: str
  loop: bool
  eval_recurrences: int
  tie_embeddings: bool
  temperature: str
  temperature_beta: float

  @classmethod
  def of(cls, config: ml_collections.ConfigDict) -> ModelSettings:
    return cls(**_read(config, 'model', cls))

  @property
  def architecture(self) -> str:
    """'standard', 'standard_ii' (with input injection) or 'looped LxR' (McLeish et al.).

    Example: 8 layers, 2 recurrences -> 'looped 8x2'.
    """
    if self.recurrences > 1 or self.loop:
      return f'looped {self.num_layers}x{self.recurrences}'
    return 'standard' if self.injection == 'none' else 'standard_ii'

  def flops(self, tokens: int, vocab: int = 0, depth: int | None = None) -> float:
    """FLOPs of one forward pass of one sequence of `tokens` tokens (matmuls only): per layer
    the projections (4 d^2), the feed-forward (2 d F, 3 d F for GELU-GLU's third matrix) and
    attention's two products (2 T^2 d), over the effective depth (layers x recurrences, or
    `depth`), plus an output layer of `vocab` classes.

      flops(T) = 2 * (depth * (T * (4 d^2 + ffn d F) + 2 T^2 d) + T d vocab)

    Example: d 4, F 8, one layer: flops(10, depth=1) == 2 * (10 * (4 * 16 + 2 * 32) + 2 * 100
    * 4) == 4160.
    """
    d, f = self.d_model, self.ffn_size
    ffn = 3 if self.ffn == 'gelu_glu' else 2
    depth = self.num_layers * self.recurrences if depth is None else depth
    return 2.0 * (
      depth * (tokens * (4 * d * d + ffn * d * f) + 2 * tokens**2 * d) + tokens * d * vocab
    )
