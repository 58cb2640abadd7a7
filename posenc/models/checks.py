"""The model fields of a config (`config.model`), checked where the model is defined.

Example:
  >>> from posenc import config as config_lib, encodings
  >>> config = config_lib.base_config()
  >>> check(config, encodings.get('rotary'))      # None: nothing wrong
  >>> config.model.norm = 'batch'
  >>> check(config, encodings.get('rotary'))
  Traceback (most recent call last):
  posenc.config.ConfigError: unknown model.norm 'batch'; valid: post, pre
"""

from __future__ import annotations

import math
from typing import Any

import ml_collections

from posenc import attention
from posenc import config as config_lib
from posenc.models import families
from posenc import suggest
from posenc.models import layers
from posenc.models import stack

FUSED_IMPLEMENTATIONS = ('xla', 'cudnn')
DTYPES = ('float32', 'bfloat16')
SIZES = ('num_layers', 'd_model', 'num_heads', 'ffn_size', 'max_position')


def looped(model: ml_collections.ConfigDict) -> bool:
  """A looped block: recurrences > 1, input injection or `loop`."""
  return model.loop or model.recurrences > 1 or model.injection != 'none'


def check(config: ml_collections.ConfigDict, spec: Any) -> None:
  """ConfigError (one line) for what is wrong with `config.model` for the encoding `spec`
  (and the looped model's training fields)."""
  m = config.model
  for key in SIZES:
    if not config_lib.is_int(m[key]) or m[key] < 1:
      raise config_lib.ConfigError(f'model.{key}={m[key]!r} must be a positive integer')
  if m.max_position > config_lib.MAX_LENGTH:
    raise config_lib.ConfigError(
      f'model.max_position={m.max_position} exceeds the limit of {config_lib.MAX_LENGTH:,} '
      '(posenc.config.MAX_LENGTH: past it a run cannot finish or fit)'
    )
  for key, valid in (
    ('family', families.NAMES),
    ('norm', layers.NORMS),
    ('ffn', layers.FFNS),
    ('injection', stack.INJECTIONS),
    ('temperature', layers.TEMPERATURES),
    ('attention_impl', attention.IMPLS),
    ('fused_implementation', FUSED_IMPLEMENTATIONS),
    ('dtype', DTYPES),
    ('param_dtype', DTYPES),
  ):
    if m[key] not in valid:
      raise config_lib.ConfigError(
        f'unknown model.{key} {m[key]!r}{suggest.did_you_mean(m[key], valid)}; valid: {", ".join(valid)}'
      )
  block = m.get('attention_block', 0)
  if not config_lib.is_int(block) or block < 0:
    raise config_lib.ConfigError(
      f'model.attention_block={block!r} must be a non-negative '
      'integer (0: never split attention into blocks)'
    )
  if not 0.0 <= m.dropout < 1.0:
    raise config_lib.ConfigError(f'model.dropout={m.dropout!r} must be in [0, 1)')
  if m.d_model % m.num_heads:
    raise config_lib.ConfigError(
      f'model.d_model={m.d_model} is not divisible by model.num_heads={m.num_heads}'
    )
  if spec.even_head_dim and (m.d_model // m.num_heads) % 2:
    raise config_lib.ConfigError(
      f'encoding {config.encoding!r} needs an even head size; '
      f'd_model/num_heads = {m.d_model // m.num_heads}'
    )
  beta = m.temperature_beta
  if not config_lib.is_number(beta) or not math.isfinite(beta):
    raise config_lib.ConfigError(f'model.temperature_beta={beta!r} must be a finite number')
  if m.temperature == 'fixed' and beta < 0:
    raise config_lib.ConfigError(
      f'model.temperature_beta={beta} is negative: a fixed '
      'attention temperature β ln(n) needs β >= 0'
    )
  if m.fused_implementation == 'cudnn' and m.dtype != 'bfloat16':
    raise config_lib.ConfigError(
      "model.fused_implementation='cudnn' needs "
      "model.dtype='bfloat16' (cuDNN flash attention has no "
      'float32 kernels)'
    )
  if not families.of(m.family).generates and m.tie_embeddings:
    raise config_lib.ConfigError(
      'model.tie_embeddings needs model.family=decoder (the encoder predicts classes, not tokens)'
    )
  r, r_eval = m.recurrences, m.eval_recurrences
  if not config_lib.is_int(r) or r < 1:
    raise config_lib.ConfigError(f'model.recurrences={r!r} must be an integer >= 1')
  if not config_lib.is_int(r_eval) or r_eval < 0:
    raise config_lib.ConfigError(
      f'model.eval_recurrences={r_eval!r} must be an integer >= 1 (or 0: the training recurrences)'
    )
  if r_eval and r_eval != r and not looped(m):
    raise config_lib.ConfigError(
      f'model.eval_recurrences={r_eval} needs a looped model '
      '(model.recurrences > 1, model.injection or model.loop)'
    )
  alpha = config.train.progressive_alpha
  if not config_lib.is_number(alpha) or not 0 <= alpha <= 1:
    raise config_lib.ConfigError(f'train.progressive_alpha={alpha!r} must be in [0, 1]')
  if alpha > 0 and not looped(m):
    raise config_lib.ConfigError(
      f'train.progressive_alpha={alpha} needs a looped model '
      '(model.recurrences > 1, model.injection or model.loop)'
    )
