"""Positional encodings as small pure functions of positions, and the registry of their names.

An encoding is one of four kinds (see `core`):

- an embedding added to the token embeddings (sin/cos, learned): `embeddings.sinusoid`,
  `embeddings.learned`;
- a rotation of q and k (RoPE; PoPE's polar form): `rotary.apply_rope`, `polar.apply_pope`;
- an additive logits bias, possibly content-dependent (ALiBi, Transformer-XL relative,
  FIRE, the distance families, CoPE, forgetting attention): `biases.alibi_bias`,
  `biases.relative_bias`, `families.distance_bias`, `contextual.cope_bias`,
  `forgetting.forgetting_bias`;
- a replacement of the softmax (NDR geometric attention, plain and directional;
  stick-breaking attention): `geometric.geometric_weights`,
  `stick_breaking.stick_breaking_weights`.

Each function takes explicit query and key positions, so the same call serves a whole
sequence and one decoding step. An encoding is an `Encoding` record: the built-ins that only
bind parameters and positions are made from their function by the helpers an outside
encoding uses (`define`: `bias`, `rotation`, `embedding`, `weights`, `param`, `option`), and
every randomized twin by `randomized_twin` (sorted random positions or distances, Ruoss et
al. 2023); the others are Linen modules in the same record. Each record declares its options
(`Option`: default, valid values, meaning).

`ENCODINGS` maps each name of `posenc.encoding_names.ALL` to its record, in that order;
`NAMES` is the randomized-encoding study's 13, `RECENT` the methods of 2024-2025. Encodings
causal by definition (`Encoding.causal_only`) run in the decoder only. A name may also
combine one input encoding and one attention encoding as `a+b`, e.g. `sin_cos+alibi`, or
name an encoding outside posenc (`outside`).
Adding an encoding = one pure function, one helper call, one `ENCODINGS` entry (its name in
`posenc.encoding_names`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from posenc import encoding_names
from posenc import suggest
from posenc.encodings import biases
from posenc.encodings import contextual
from posenc.encodings import core
from posenc.encodings import dape
from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import embeddings
from posenc.encodings import families
from posenc.encodings import forgetting
from posenc.encodings import geometric
from posenc.encodings import outside
from posenc.encodings import papers
from posenc.encodings import polar
from posenc.encodings import randomized
from posenc.encodings import rotary
from posenc.encodings import stick_breaking
from posenc.encodings.biases import alibi_bias, alibi_slopes, relative_bias
from posenc.encodings.core import AttentionEncoding, Encoding, HAIKU_LINEAR_INIT, Option, Paper
from posenc.encodings.declare import option, param
from posenc.encodings.define import bias, embedding, randomized_twin, rotation, weights
from posenc.encodings.embeddings import learned, sinusoid
from posenc.encodings.geometric import geometric_scores, geometric_weights
from posenc.encodings.randomized import (
  RELATIVE_MODES,
  random_distances,
  random_positions,
  relative_offset_positions,
)
from posenc.encodings.rotary import apply_rope

# Each encoding that is not a randomized twin, by name.
_RECORDS: dict[str, Encoding] = {
  'none': Encoding(
    core.CONTENT,
    about='No positional encoding: attention sees content only; a causal mask alone gives a '
    'decoder the order of the tokens.',
    papers=(papers.HAVIV2022,),
  ),
  'sin_cos': embeddings.SIN_COS,
  'relative': biases.RELATIVE,
  'alibi': biases.ALIBI,
  'rotary': rotary.ROTARY,
  'learned': embeddings.LEARNED,
  # The arithmetic study's (McLeish et al. 2024): a digit's position within its number,
  # and FIRE (Li et al. 2023).
  'abacus': embeddings.ABACUS,
  'fire': biases.FIRE,
  'geometric': geometric.GEOMETRIC,
  'geometric_directional': geometric.GEOMETRIC_DIRECTIONAL,
  # Methods of 2024-2025: position coupling (Cho et al. 2024) for the arithmetic tasks,
  # polar positions (PoPE), a base bias corrected from the scores (DAPE, DAPE-V2);
  # contextual positions (CoPE), forgetting attention (FoX) and stick-breaking attention,
  # each causal by definition.
  'position_coupling': embeddings.POSITION_COUPLING,
  'pope': polar.POPE,
  'dape': dape.DAPE,
  'dape_v2': dape.DAPE_V2,
  'cope': contextual.COPE,
  'forgetting': forgetting.FORGETTING,
  'stick_breaking': stick_breaking.STICK_BREAKING,
  # Bias families of the distance (Qin et al. 2023, KERPLE, Sandwich, T5).
  **{family: families.record(family) for family in encoding_names.FAMILIES},
}
# Every built-in in the order of `encoding_names.ALL`, each twin made from its encoding.
ENCODINGS: dict[str, Encoding] = {
  name: _RECORDS[name]
  if name in _RECORDS
  else randomized_twin(_RECORDS[name.removeprefix(encoding_names.RANDOMIZED)])
  for name in encoding_names.ALL
}
# The study's grid (Ruoss et al. 2023: Table 1's 11 and Table 5's two geometric variants).
NAMES: tuple[str, ...] = encoding_names.STUDY
# The methods of 2024-2025 (docs/encodings_2024.md).
RECENT: tuple[str, ...] = encoding_names.RECENT
# Names the literature gives some encodings, answered with the registry's name in the error
# of an unknown encoding ('rope' is not a typo of 'pope').
KNOWN_AS: dict[str, str] = {
  'rope': 'rotary',
  'nope': 'none',
  'sinusoidal': 'sin_cos',
  'transformer_xl': 'relative',
  'fox': 'forgetting',
}
# Every option an encoding of the registry takes (the others are typos).
OPTIONS: frozenset[str] = frozenset(n for e in ENCODINGS.values() for n, _ in e.options)


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
  # Each part keeps its options (marked with their part), and a twin-only one stays its twin's.
  return Encoding(
    att.kind,
    emb.embedding,
    att.attention,
    emb.options + att.options,
    emb.randomized or att.randomized,
    emb.reads_digits or att.reads_digits,
    emb.learned_table or att.learned_table,
    att.even_head_dim,
    att.causal_only,
    f'{emb.about} With: {att.about}',
    emb.papers + att.papers,
  )


def _unknown(name: str) -> str:
  installed = sorted(outside.entry_points())
  return (
    f'unknown encoding {name!r}{suggest.did_you_mean(name, [*ENCODINGS, *installed], KNOWN_AS)}; '
    f'valid encodings: {", ".join(ENCODINGS)}; an input '
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
  found = outside.load(name)
  if found is None:
    raise ValueError(_unknown(name))
  return found


def resolve_options(
  name: str, options: tuple[tuple[str, Any], ...] | dict = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
  """(attention kwargs, embedding kwargs) of `name` from (key, value) option pairs: each
  option it takes (`Encoding.options`) at its given value, checked, or its default; a
  test-time option only when given (a run trained without one records none).

  Options another encoding takes are ignored, so one config can serve the whole grid; keys
  neither `name` nor any encoding of the registry takes raise ValueError (typos), as does a
  value outside its option's valid ones (one line naming both).

  Example:
    >>> resolve_options('randomized_relative', (('relative_mode', 'reference'),))
    ({'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}, {})
  """
  return _resolve(get(name), dict(options))


def _resolve(spec: Encoding, given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
  """`resolve_options` for the record `spec`."""
  known = OPTIONS | {n for n, _ in spec.options}
  unknown = sorted(set(given) - known)
  if unknown:
    raise ValueError(
      f'unknown encoding option {unknown[0]!r}{suggest.did_you_mean(unknown[0], known)}'
      f'{"" if len(unknown) == 1 else f" (and {len(unknown) - 1} more: {unknown[1:]})"}; '
      f'valid: {sorted(known)}'
    )
  taken = spec.taken()
  values = {n: given.get(n, o.default) for n, o in taken.items()}
  for n, o in taken.items():
    if n in given:
      o.check(n, given[n], values)
  pick = lambda part: {
    n: values[n] for n, o in spec.options if o.part == part and not (o.test or o.twin)
  }
  test = {n: given[n] for n in spec.test_options if n in given}
  return {**pick('attention'), **test}, pick(core.EMBEDDING)


@dataclasses.dataclass(frozen=True)
class Parsed:
  """An encoding as a run uses it: its name, its record and its options resolved
  (`resolve_options`), what the model is built from and results.json records.

  Attributes:
    name: the encoding's name (a registry name, `input+attention` or an outside one).
    spec: its record (`get(name)`).
    given: the options it was parsed from, as (key, value) pairs.
    attention: its attention part's options, (key, value) pairs in the record's order.
    embedding: its input part's options, likewise.

  Example:
    >>> parse('randomized_relative', {'relative_mode': 'reference'}).options
    {'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}
  """

  name: str
  spec: Encoding
  given: tuple[tuple[str, Any], ...]
  attention: tuple[tuple[str, Any], ...]
  embedding: tuple[tuple[str, Any], ...]

  @property
  def options(self) -> dict[str, Any]:
    """Every option it takes with its value: the attention part's, then the input part's."""
    return {**dict(self.attention), **dict(self.embedding)}

  def with_options(self, **given: Any) -> Parsed:
    """The same encoding with `given` options set over those it was parsed from, resolved
    again (ValueError, one line, for a bad one)."""
    return _parsed(self.name, self.spec, {**dict(self.given), **given})


def parse(name: str, options: tuple[tuple[str, Any], ...] | dict = ()) -> Parsed:
  """`name`'s record and `options` resolved: ValueError (one line) for an unknown name, an
  unknown option or a value outside an option's valid ones.

  Example: parse('rotary').spec is ENCODINGS['rotary'].
  """
  return _parsed(name, get(name), dict(options))


def _parsed(name: str, spec: Encoding, given: dict[str, Any]) -> Parsed:
  attention, embedding = _resolve(spec, given)
  return Parsed(
    name, spec, tuple(given.items()), tuple(attention.items()), tuple(embedding.items())
  )
