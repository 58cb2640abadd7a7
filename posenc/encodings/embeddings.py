"""Encodings added to the token embeddings: sin/cos and learned (plain or randomized), Abacus
and position coupling.

Each is a function of explicit positions [T] (0..T-1, or a sorted random draw), so one
decoding step at position t is the same call with positions [t]. sin/cos and learned are
made with the helpers of `define`; Abacus and position coupling are Linen modules, since they
read the tokens and draw their offsets in training only.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import define
from posenc.encodings import papers

Array = jax.Array


def sinusoid(positions: Array, width: int, *, max_time: float = 10_000.0) -> Array:
  """Sinusoid encodings S(p) of (possibly negative or randomized) positions.

  S(p) = [sin(p w_0), ..., sin(p w_{D/2-1}), cos(p w_0), ..., cos(p w_{D/2-1})] with
  w_i = max_time^(-2i/D): concatenated halves, not interleaved (as the released code of
  Ruoss et al.).

  Args:
    positions: integer or float array of any shape [...].
    width: D, even.
    max_time: the base of the geometric frequency progression.

  Returns:
    float32 [..., D].

  Example:
    >>> sinusoid(jnp.array([0, 1]), 4).round(3)   # w = [1, 0.01]: [sin pw, cos pw] per p
    Array([[0.   , 0.   , 1.   , 1.   ],
           [0.841, 0.01 , 0.54 , 1.   ]], dtype=float32)
  """
  if width % 2:
    raise ValueError(f'sinusoid width must be even, got {width}')
  freqs = max_time ** (-2.0 * np.arange(width // 2) / width)
  angles = jnp.asarray(positions, jnp.float32)[..., None] * jnp.asarray(freqs, jnp.float32)
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def learned(positions: Array, table: Array) -> Array:
  """Rows of a learned table: table[min(p, L - 1)] (the reference's gather clamps).

  Args:
    positions: int [...].
    table: [L, D].

  Returns:
    [..., D].

  Example: learned(jnp.array([0, 5]), jnp.eye(3)) -> [[1, 0, 0], [0, 0, 1]].
  """
  return jnp.take(table, jnp.minimum(positions, table.shape[0] - 1), axis=0)


def abacus_positions(tokens: Array, is_digit: Array) -> Array:
  """Each digit's index within its number: 1, 2, 3, ... from the number's first token; 0 for
  every other token (McLeish et al. 2024). A number is a maximal run of digit tokens.

  Args:
    tokens: int [..., T] (only for the shape).
    is_digit: bool [..., T].

  Returns:
    int32 [..., T].

  Example: `98+385=` with digits d -> [1, 2, 0, 1, 2, 3, 0].
  """
  t = jnp.arange(tokens.shape[-1])
  previous = jnp.pad(is_digit, [(0, 0)] * (is_digit.ndim - 1) + [(1, 0)])[..., :-1]
  start = jnp.where(is_digit & ~previous, t, 0)
  run_start = jax.lax.cummax(start, axis=start.ndim - 1)
  return jnp.where(is_digit, t - run_start + 1, 0).astype(jnp.int32)


def learned_embedding(positions: Array, width: int, embedding: Array) -> Array:
  """`learned` rows of the record's table `embedding` [L, width] (its parameter's name).

  Example: learned_embedding(jnp.array([0, 5]), 3, jnp.eye(3)) -> [[1, 0, 0], [0, 0, 1]].
  """
  del width  # the table's
  return learned(positions, embedding)


# S(0..T-1), or S(sorted random positions) for the randomized twin: [T, D] ([B, T, D] for
# draws per sequence).
SIN_COS = define.embedding(
  sinusoid,
  options={'max_time': declare.MAX_TIME},
  about='Fixed sinusoids of the absolute position at geometrically spaced frequencies, added '
  'to the token embeddings.',
  papers=(papers.VASWANI2017,),
)
# E[0..T-1] (Embed(L, D), TruncNormal(1) init as hk.Embed), or E[sorted random positions]
# for the twin: the "label-based" encoding.
LEARNED = define.embedding(
  learned_embedding,
  learned_table=True,
  embedding=declare.param(('max_position', 'width'), nn.initializers.truncated_normal(1.0)),
  about='A learned vector per absolute position, added to the token embeddings; the rows past '
  'the longest training length are never trained.',
  papers=(papers.GEHRING2017,),
)


def _token_ids(value: object, options: object) -> bool:
  del options
  return isinstance(value, (tuple, list)) and all(
    isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in value
  )


DIGIT_IDS = declare.option(
  tuple(range(10)),
  'the token ids that are digits (set from the task)',
  valid=_token_ids,
  must_be='a list of token ids',
)


class AbacusEmbedding(nn.Module):
  """Abacus (McLeish et al. 2024): E[each digit's index within its number] from a learned
  table of `max_position` rows; non-digits read row 0. In training one offset k ~ U{0..K}
  per batch (from the 'noise' stream) is added to every digit's index, so the model sees
  indices up to K + the longest number; at evaluation k = 0. [B, T, D] for tokens [B, T]."""

  width: int
  max_position: int = 2048
  digit_ids: tuple[int, ...] = tuple(range(10))
  abacus_offset: int = 99

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, tokens: Array | None = None, deterministic: bool = True
  ) -> Array:
    del num_positions, length
    table = self.param(
      'embedding', nn.initializers.truncated_normal(1.0), (self.max_position, self.width)
    )
    positions = abacus_positions(tokens, jnp.isin(tokens, jnp.asarray(self.digit_ids)))
    if not deterministic:
      k = jax.random.randint(self.make_rng('noise'), (), 0, self.abacus_offset + 1)
      positions = jnp.where(positions > 0, positions + k, 0)
    return learned(positions, table)


def coupled_positions(tokens: Array, is_digit: Array, start: Array, real: Array) -> Array:
  """Position coupling (Cho et al. 2024): digits of equal significance share one position.

  In the arithmetic tasks every number is written least-significant digit first, so a
  digit's index within its number (`abacus_positions`, 1-based) is its significance + 1:
  digit k of each operand and of the answer gets start + k + 1, every other real token (the
  operators, '=') start, and every token that is not real (padding, and the end-of-sequence
  token, which a sequence is never fed as a real token) 0, as in the authors' code, which
  fills position ids for the operands, '=' and the answer only. (They zero-pad the operands
  to one length and the answer to one digit more; here the numbers keep their lengths and
  still share ids by significance.)

  Args:
    tokens: int [B, T] (only for the shape).
    is_digit: bool [B, T].
    start: int [B] (or a scalar): the offset s >= 1 of each sequence.
    real: bool [B, T]: the tokens that get an id (`real_tokens`).

  Returns:
    int32 [B, T].

  Example (s = 1): `98+385=27` then `$` (EOS) and a padding 0, real length 9 ->
    [2, 3, 1, 2, 3, 4, 1, 2, 3, 0, 0].
  """
  start = jnp.reshape(jnp.asarray(start, jnp.int32), (-1, 1))
  return jnp.where(real, start + abacus_positions(tokens, is_digit & real), 0).astype(jnp.int32)


def real_tokens(tokens: Array, length: Array) -> Array:
  """The tokens before each sequence's real length: bool [B, T] for tokens [B, T] and
  length [B] (or a scalar).

  Example: tokens `5+5=01$000`, length 6 -> [1, 1, 1, 1, 1, 1, 0, 0, 0, 0].
  """
  length = jnp.reshape(jnp.asarray(length, jnp.int32), (-1, 1))
  return jnp.broadcast_to(jnp.arange(tokens.shape[-1]) < length, tokens.shape)


def coupling_offset_bound(
  tokens: Array, is_digit: Array, real: Array, max_id: int, padded_answer: bool = False
) -> Array:
  """The largest training offset of each sequence: s ~ U{1..P - l}, l the digits of its
  longest number among its real tokens, so its largest id s + l is at most P and reaches
  it at the top draw, as the authors' `randint(1, max_pos - len(answer) + 1)`.

  Padding (token 0, the digit 0) would otherwise read as a run of zeros, often the longest
  number of the row. The authors' answer, zero-padded to one digit more than the longer
  operand, is always their longest number; here it is written without leading zeros and l
  is its own length, one less than theirs for an addition without carry out.
  `padded_answer` counts it as theirs: l is at least the longest operand's digits + 1 (the
  operands being every number before the last, the answer). A number of P digits or more
  leaves s = 1.

  Args:
    tokens: int [B, T]; is_digit, real: bool [B, T].
    max_id: P, the largest id in training (the authors' max_pos).
    padded_answer: l as for the authors' zero-padded answer.

  Returns:
    int32 [B], at least 1.

  Example (P = 26): `5+5=01` -> 24 (its ids reach 24 + 2 = 26), whatever padding follows;
    `98282+3859172=2787472` -> 19 (7 digits; 18 with `padded_answer`: the authors' answer
    `27478720` has 8).
  """
  index = abacus_positions(tokens, is_digit & real)
  longest = jnp.max(index, axis=-1)
  if padded_answer:
    t = jnp.arange(tokens.shape[-1])
    last = jnp.argmax(jnp.where(index > 0, t, -1), axis=-1)  # the answer's last digit
    answer_start = last - jnp.take_along_axis(index, last[:, None], axis=-1)[:, 0] + 1
    operand = jnp.max(jnp.where(t < answer_start[:, None], index, 0), axis=-1)
    longest = jnp.maximum(longest, operand + 1)
  return jnp.maximum(max_id - longest, 1).astype(jnp.int32)


class CouplingEmbedding(nn.Module):
  """Position coupling: E[coupled position] from a learned table of `max_position` rows
  (N(0, 1) init, as the authors' code).

  In training each sequence draws its own offset s ~ U{1..P - l} (from the 'noise' stream;
  `coupling_offset_bound`), l the digits of its longest number, P =
  `coupling_max_position` (the authors' max_pos, the largest id in training; 0: the table's
  last row, max_position - 1), so its ids lie in [1, P] and reach P at the top draw; at
  evaluation s = 1. Tokens at or past each sequence's real length (`length`: the decoder's
  lengths, which leave out the end-of-sequence token, fed only as a label) get id 0, as
  padding and EOS in the authors' code, and count as no number. A row's ids and draw depend
  on its real tokens only: padding it wider changes neither. `coupling_padded_answer` draws s
  as for the authors' zero-padded answer, one digit longer than the longest operand. Ids
  past max_position - 1 (numbers of max_position - 1 digits or more at evaluation) read the
  table's last row. [B, T, D] for tokens [B, T].

  Example (P = 26, training): `5+5=01` (real length 6) then `$` and padding zeros draws s
  in 1..24: '+' and '=' get s, the digits s + 1 (the answer's second s + 2), the rest 0.
  """

  width: int
  max_position: int = 2048
  digit_ids: tuple[int, ...] = tuple(range(10))
  coupling_max_position: int = 0
  coupling_padded_answer: bool = False

  @property
  def max_id(self) -> int:
    """P: `coupling_max_position`, or the table's last row when 0."""
    if not 0 <= self.coupling_max_position < self.max_position:
      raise ValueError(
        f'coupling_max_position={self.coupling_max_position} must be in '
        f'0..{self.max_position - 1} (ids index a table of max_position='
        f'{self.max_position} rows; 0: {self.max_position - 1})'
      )
    return self.coupling_max_position or self.max_position - 1

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, tokens: Array | None = None, deterministic: bool = True
  ) -> Array:
    del num_positions
    table = self.param('embedding', nn.initializers.normal(1.0), (self.max_position, self.width))
    is_digit = jnp.isin(tokens, jnp.asarray(self.digit_ids))
    real = real_tokens(tokens, length)
    start = jnp.ones(tokens.shape[:1], jnp.int32)
    max_id = self.max_id
    if not deterministic:
      top = coupling_offset_bound(tokens, is_digit, real, max_id, self.coupling_padded_answer)
      # One draw per row from its own bound: a row's offset is the same whatever the others
      # or its padding.
      start = jax.random.randint(self.make_rng('noise'), tokens.shape[:1], 1, top + 1)
    return learned(coupled_positions(tokens, is_digit, start, real), table)


# Linen modules, not the helpers': both read the tokens and draw an offset in training only.
ABACUS = core.Encoding(
  core.EMBEDDING,
  AbacusEmbedding,
  options={
    'abacus_offset': declare.option(
      99,
      'K: in training every digit index is shifted by one k ~ U{0..K} per batch',
      valid=declare.integer(0),
      must_be='an integer >= 0',
    ),
    'digit_ids': DIGIT_IDS,
  },
  reads_digits=True,
  about='Abacus: each digit gets a learned embedding of its index within its number (its '
  'significance), shifted by one random offset per batch in training so that longer numbers '
  'use trained rows.',
  papers=(papers.MCLEISH2024,),
)
POSITION_COUPLING = core.Encoding(
  core.EMBEDDING,
  CouplingEmbedding,
  options={
    'digit_ids': DIGIT_IDS,
    'coupling_max_position': declare.option(
      0,
      "P, the largest id in training (the authors' max_pos); 0: the table's last row",
      valid=declare.integer(0),
      must_be='an integer >= 0 (and below model.max_position)',
    ),
    'coupling_padded_answer': declare.option(
      False,
      "draw the offsets as for the authors' answer, zero-padded to the longest operand + 1",
      valid=declare.boolean,
      must_be='True or False',
    ),
  },
  reads_digits=True,
  about='Position coupling: the digits of equal significance in the operands and the answer '
  'share one position id (from a random offset in training), so that a sum lines its digits '
  'up by place value.',
  papers=(papers.CHO2024,),
)
