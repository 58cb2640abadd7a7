"""Positional encodings as small pure functions of positions, and the registry of their names.

An encoding is one of four kinds (see `core`):
- an embedding added to the token embeddings (sin/cos, learned): `embeddings.sinusoid`,
  `embeddings.learned`;
- a rotation of q and k (RoPE; PoPE's polar form): `rotary.apply_rope`, `polar.apply_pope`;
- an additive logits bias, possibly content-dependent (ALiBi, Transformer-XL relative,
  CoPE, forgetting attention): `biases.alibi_bias`, `biases.relative_bias`,
  `contextual.cope_bias`, `forgetting.forgetting_bias`;
- a replacement of the softmax (NDR geometric attention, plain and directional;
  stick-breaking attention): `geometric.geometric_weights`,
  `stick_breaking.stick_breaking_weights`.
Each function takes explicit query and key positions, so the same call serves a whole
sequence and one decoding step. Randomized variants draw sorted positions (or distances)
from {0..L-1} per batch and pass them to the same function (`randomized`). A small Linen
module per encoding owns its parameters and draws and binds them into the functions (an
`AttentionEncoding` for attention encodings); `posenc.attention` runs them on a backend.

`ENCODINGS` maps a name to its `Encoding`, in the order of `posenc.encoding_names.ALL` (the
one module of the names); `NAMES` lists the randomized-encoding study's
13 (the others: the arithmetic study's `abacus`, `fire`, `randomized_fire`; the bias
families of `families`, e.g. `kerple_log`, `type1`, `t5`, each also `randomized_`; the
methods of 2024-2025, `RECENT`). Encodings causal by definition (`Encoding.causal_only`)
run in the decoder only. A name may also
combine one input encoding and one attention encoding as `a+b`, e.g. `sin_cos+alibi`.
Adding an encoding = one function, one module, one `ENCODINGS` entry.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from posenc import encoding_names
from posenc.encodings import biases
from posenc.encodings import contextual
from posenc.encodings import core
from posenc.encodings import dape
from posenc.encodings import define
from posenc.encodings import embeddings
from posenc.encodings import families
from posenc.encodings import forgetting
from posenc.encodings import geometric
from posenc.encodings import outside
from posenc.encodings import polar
from posenc.encodings import randomized
from posenc.encodings import rotary
from posenc.encodings import stick_breaking
from posenc.encodings.biases import alibi_bias, alibi_slopes, relative_bias
from posenc.encodings.core import AttentionEncoding, Encoding, HAIKU_LINEAR_INIT
from posenc.encodings.define import bias, embedding, param, randomized_twin, rotation, weights
from posenc.encodings.embeddings import learned, sinusoid
from posenc.encodings.geometric import geometric_scores, geometric_weights
from posenc.encodings.randomized import (
  RELATIVE_MODES,
  random_distances,
  random_positions,
  relative_offset_positions,
)
from posenc.encodings.rotary import apply_rope


# Test-time options (`Encoding.test_options`) and their neutral values.
TEST_OPTION_DEFAULTS: dict[str, Any] = {
  'rope_scaling': 'none',  # rotary.ROPE_SCALINGS
  'rope_factor': 1.0,
  'rope_original_length': 0,  # YaRN's L; 0 only with another scaling
  'slope_scale': 1.0,  # ALiBi's slopes, a bias family's bias
}
_ROPE_TEST = ('rope_scaling', 'rope_factor', 'rope_original_length')
_SLOPE_TEST = ('slope_scale',)

# Every encoding option and its default; an encoding ignores options it does not take.
OPTION_DEFAULTS: dict[str, Any] = {
  'max_time': 10_000.0,
  'relative_mode': 'symmetric',
  'randomize_both_sides': False,
  # ALiBi under a causal mask: False, Press et al.'s -s (i - j); True, the reference
  # encoder's bidirectional form (+s/2 left of the query) as its causal_masking ran it.
  'alibi_reference_form': False,
  'geometric_normalize': False,
  'abacus_offset': 99,  # K: training offsets k ~ U{0..K}
  'digit_ids': tuple(range(10)),  # Abacus: the token ids that are digits (from the task)
  'fire_variant': 'aba',
  # The distance-bias families (`families`).
  'bias_two_sided': False,
  'bias_r': None,  # fixed KERPLE r (None: learned per head)
  'bias_k': None,  # fixed KERPLE k (None: learned per head)
  'kerple_r_min': families.KERPLE_MIN,
  'bias_window': 128,
  'sandwich_dim': 0,  # 0: the head width
  't5_buckets': 32,
  't5_max_distance': 128,
  'cope_positions': 64,  # CoPE's table rows (npos_max)
  'forget_bias_init': 0.0,  # the Forgetting Transformer's gate bias at init
  'stick_attend_self': False,  # stick-breaking: the query may attend to itself
  'stick_remainder': 'self',  # stick-breaking: where a row's remainder goes
  # Position coupling's P, the largest id in training (the authors' max_pos: s ~ U{1..P - l}
  # for a longest number of l digits); 0: the table's last row, max_position - 1.
  'coupling_max_position': 0,
  # Position coupling: draw s as for the authors' zero-padded answer (l at least the
  # longest operand's digits + 1).
  'coupling_padded_answer': False,
  'dape_base': 'alibi',  # DAPE's base bias (dape.DAPE_BASES)
  'dape_hidden': 32,  # the width of DAPE's network
}
_FAMILY_OPTIONS = (
  'bias_two_sided',
  'bias_r',
  'bias_k',
  'kerple_r_min',
  'bias_window',
  'sandwich_dim',
  'max_time',
  't5_buckets',
  't5_max_distance',
)

_p = functools.partial
_RELATIVE = ('max_time', 'relative_mode', 'randomize_both_sides')
ENCODINGS: dict[str, Encoding] = {
  'none': Encoding(core.CONTENT),
  'sin_cos': Encoding(core.EMBEDDING, embeddings.SinCosEmbedding, embedding_options=('max_time',)),
  'relative': Encoding(
    core.BIAS, attention=biases.RelativeEncoding, attention_options=('max_time',)
  ),
  'alibi': Encoding(
    core.BIAS,
    attention=biases.AlibiEncoding,
    attention_options=('alibi_reference_form',),
    test_options=_SLOPE_TEST,
  ),
  'rotary': Encoding(
    core.ROTATION,
    attention=rotary.RotaryEncoding,
    attention_options=('max_time',),
    even_head_dim=True,
    test_options=_ROPE_TEST,
  ),
  'learned': Encoding(core.EMBEDDING, embeddings.LearnedEmbedding, learned_table=True),
  'randomized_sin_cos': Encoding(
    core.EMBEDDING,
    _p(embeddings.SinCosEmbedding, randomized=True),
    embedding_options=('max_time',),
    randomized=True,
  ),
  'randomized_relative': Encoding(
    core.BIAS,
    attention=_p(biases.RelativeEncoding, randomized=True),
    attention_options=_RELATIVE,
    randomized=True,
  ),
  'randomized_alibi': Encoding(
    core.BIAS,
    attention=_p(biases.AlibiEncoding, randomized=True),
    attention_options=('randomize_both_sides', 'alibi_reference_form'),
    randomized=True,
    test_options=_SLOPE_TEST,
  ),
  'randomized_rotary': Encoding(
    core.ROTATION,
    attention=_p(rotary.RotaryEncoding, randomized=True),
    attention_options=('max_time',),
    randomized=True,
    even_head_dim=True,
    test_options=_ROPE_TEST,
  ),
  'randomized_learned': Encoding(
    core.EMBEDDING,
    _p(embeddings.LearnedEmbedding, randomized=True),
    randomized=True,
    learned_table=True,
  ),
  # The arithmetic study's (McLeish et al. 2024): a digit's position within its number,
  # and FIRE (Li et al. 2023), plain or on randomized positions (Zhou et al. 2024).
  'abacus': Encoding(
    core.EMBEDDING,
    embeddings.AbacusEmbedding,
    embedding_options=('abacus_offset', 'digit_ids'),
    reads_digits=True,
  ),
  'fire': Encoding(core.BIAS, attention=biases.FireEncoding, attention_options=('fire_variant',)),
  'randomized_fire': Encoding(
    core.BIAS,
    attention=_p(biases.FireEncoding, randomized=True),
    attention_options=('fire_variant',),
    randomized=True,
  ),
  'geometric': Encoding(
    core.GEOMETRIC,
    attention=geometric.GeometricEncoding,
    attention_options=('geometric_normalize',),
  ),
  'geometric_directional': Encoding(
    core.GEOMETRIC,
    attention=_p(geometric.GeometricEncoding, directional=True),
    attention_options=('geometric_normalize',),
  ),
}
# Methods of 2024-2025: a base bias corrected from the scores (DAPE, DAPE-V2); contextual
# positions (CoPE), forgetting attention (FoX) and stick-breaking attention, each causal by
# definition.
ENCODINGS.update(
  {
    # Position coupling (Cho et al. 2024) for the arithmetic tasks.
    'position_coupling': Encoding(
      core.EMBEDDING,
      embeddings.CouplingEmbedding,
      embedding_options=('digit_ids', 'coupling_max_position', 'coupling_padded_answer'),
      reads_digits=True,
    ),
    # Polar positions (PoPE): content magnitudes, positional phases.
    'pope': Encoding(core.ROTATION, attention=polar.PolarEncoding, attention_options=('max_time',)),
    'dape': Encoding(
      core.BIAS, attention=dape.DapeEncoding, attention_options=('dape_base', 'dape_hidden')
    ),
    'dape_v2': Encoding(
      core.BIAS,
      attention=_p(dape.DapeEncoding, convolution=True),
      attention_options=('dape_base', 'dape_hidden'),
    ),
    'cope': Encoding(
      core.BIAS,
      attention=contextual.ContextualEncoding,
      attention_options=('cope_positions',),
      causal_only=True,
    ),
    'forgetting': Encoding(
      core.BIAS,
      attention=forgetting.ForgettingEncoding,
      attention_options=('forget_bias_init',),
      causal_only=True,
    ),
    'stick_breaking': Encoding(
      core.GEOMETRIC,
      attention=stick_breaking.StickBreakingEncoding,
      attention_options=('stick_attend_self', 'stick_remainder'),
      causal_only=True,
    ),
  }
)
# Bias families of the distance (Qin et al. 2023, KERPLE, Sandwich, T5), plain and on
# randomized positions.
for _family in families.FAMILIES:
  ENCODINGS[_family] = Encoding(
    core.BIAS,
    attention=_p(families.DistanceBiasEncoding, family=_family),
    attention_options=_FAMILY_OPTIONS,
    test_options=_SLOPE_TEST,
  )
  ENCODINGS[f'randomized_{_family}'] = Encoding(
    core.BIAS,
    attention=_p(families.DistanceBiasEncoding, family=_family, randomized=True),
    attention_options=_FAMILY_OPTIONS,
    randomized=True,
    test_options=_SLOPE_TEST,
  )
# The methods of 2024-2025 (docs/encodings_2024.md).
RECENT: tuple[str, ...] = encoding_names.RECENT
# The study's grid (Ruoss et al. 2023: Table 1's 11 and Table 5's two geometric variants).
NAMES: tuple[str, ...] = encoding_names.STUDY


def _combine(name: str) -> Encoding:
  parts = name.split('+')
  if len(parts) != 2 or parts[0] == parts[1]:
    raise ValueError(_unknown(name))
  try:
    specs = [get(p) for p in parts]
  except ValueError as e:
    raise ValueError(f'encoding {name!r}: {e}') from None
  inputs = [e for e in specs if e.embedding is not None]
  attention = [e for e in specs if e.embedding is None]
  if len(inputs) != 1 or len(attention) != 1:
    raise ValueError(
      f'encoding {name!r} must join one input encoding (one of '
      f'{", ".join(n for n, e in ENCODINGS.items() if e.embedding)}) and one '
      'attention encoding (any other)'
    )
  (emb,), (att,) = inputs, attention
  return Encoding(
    att.kind,
    emb.embedding,
    att.attention,
    emb.embedding_options,
    att.attention_options,
    emb.randomized or att.randomized,
    emb.reads_digits or att.reads_digits,
    emb.learned_table or att.learned_table,
    att.even_head_dim,
    att.test_options,
    att.causal_only,
  )


def _unknown(name: str) -> str:
  installed = sorted(outside.entry_points())
  return (
    f'unknown encoding {name!r}; valid encodings: {", ".join(ENCODINGS)}; an input '
    'encoding and an attention encoding joined by +, e.g. sin_cos+alibi; an import path '
    'module:ENCODING; or an installed package\'s (entry point group posenc.encodings: '
    f'{", ".join(installed) or "none installed"})'
  )


def get(name: str) -> Encoding:
  """The entry of `name`: a registry name, `input+attention`, an outside encoding (an import
  path `module:attribute`, an installed package's entry point, either with `randomized_` for
  its twin: `outside`); ValueError (one line) naming what is wrong otherwise.

  Example: get('sin_cos+alibi').kind == 'bias'.
  """
  if name in ENCODINGS:
    return ENCODINGS[name]
  if not isinstance(name, str) or not name:
    raise ValueError(_unknown(name))
  if '+' in name:
    return _combine(name)
  found = outside.load(name, frozenset(OPTION_DEFAULTS), frozenset(TEST_OPTION_DEFAULTS))
  if found is None:
    raise ValueError(_unknown(name))
  return found


def resolve_options(
  name: str, options: tuple[tuple[str, Any], ...] | dict = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
  """(attention kwargs, embedding kwargs) of `name` from (key, value) option pairs.

  Options an encoding does not take are ignored, so one config can serve the whole grid;
  keys no encoding knows raise ValueError (typos).

  Example:
    >>> resolve_options('randomized_relative', (('relative_mode', 'reference'),))
    ({'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}, {})
  """
  given = dict(options)
  unknown = sorted(set(given) - set(OPTION_DEFAULTS) - set(TEST_OPTION_DEFAULTS))
  if unknown:
    raise ValueError(
      f'unknown encoding options {unknown}; valid: '
      f'{sorted({**OPTION_DEFAULTS, **TEST_OPTION_DEFAULTS})}'
    )
  if given.get('relative_mode', 'symmetric') not in RELATIVE_MODES:
    raise ValueError(
      f'relative_mode must be one of {RELATIVE_MODES}, got {given["relative_mode"]!r}'
    )
  spec = get(name)
  families.check_options(name, given)
  pick = lambda keys: {key: given.get(key, OPTION_DEFAULTS[key]) for key in keys}
  # Test-time options only when given: a run trained without them records none.
  test = {key: given[key] for key in spec.test_options if key in given}
  if test.get('rope_scaling', 'none') not in rotary.ROPE_SCALINGS:
    raise ValueError(
      f'rope_scaling must be one of {rotary.ROPE_SCALINGS}, got {test["rope_scaling"]!r}'
    )
  return {**pick(spec.attention_options), **test}, pick(spec.embedding_options)
