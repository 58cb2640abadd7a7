"""The arithmetic tasks' vocabulary, text form and the assembly of their sequences.

Shared by every task of `tasks.arithmetic` (which re-exports the names below): the token
ids, `decode` / `encode` between ids and text, and the pieces a task's `_rows` builds its
examples from (`binary_prompt`, `number_answer`, `pad_prompt`, `assemble`,
`with_index_hints`). See `tasks.arithmetic` for the format.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from tasks import base
from tasks import digits as digits_lib

Array = jax.Array
Batch = dict[str, Array]

DIGITS: tuple[int, ...] = tuple(range(10))
PLUS, MINUS, TIMES, EQUALS, COMMA, COLON, OR, SPACE, EOS = range(10, 19)
FIRST_INDEX_SYMBOL = 19  # sorting's index symbol k has id FIRST_INDEX_SYMBOL + k
NUM_BASE_TOKENS = 19  # every id below FIRST_INDEX_SYMBOL

_SHOWN = '0123456789+-*=,:| $'
_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
# At most two spaces before each character: a padded prompt is at most 3x its length.
MAX_PAD_FACTOR = 3
_SECOND_SPACE = 0.1  # P(second space | first space) = 0.1 p


# ========================================================================= text
def decode(ids: Sequence[int] | Array) -> str:
  """The text of a sequence of token ids (see the module docstring for the rendering).

  Example: decode([9, 8, 10, 3, 13, 2, 7, 18]) == '98+3=27$'.
  """
  out = []
  for i in np.asarray(ids).reshape(-1).tolist():
    if 0 <= i < NUM_BASE_TOKENS:
      out.append(_SHOWN[i])
    elif i >= FIRST_INDEX_SYMBOL:
      k = i - FIRST_INDEX_SYMBOL
      out.append(_LETTERS[k] if k < len(_LETTERS) else f'<i{k}>')
    else:
      raise ValueError(f'token id {i} is not in the vocabulary')
  return ''.join(out)


def encode(text: str) -> list[int]:
  """The ids of `text`, the inverse of `decode`.

  Example: encode('a:7,b:1=') == [19, 15, 7, 14, 20, 15, 1, 13].
  """
  ids = []
  for piece in re.findall(r'<i\d+>|.', text, flags=re.S):
    if piece in _SHOWN:
      ids.append(_SHOWN.index(piece))
    elif piece in _LETTERS:
      ids.append(FIRST_INDEX_SYMBOL + _LETTERS.index(piece))
    elif piece.startswith('<i'):
      ids.append(FIRST_INDEX_SYMBOL + int(piece[2:-1]))
    else:
      raise ValueError(f'{piece!r} is not in the vocabulary')
  return ids


# ========================================================================= assembly
def binary_prompt(
  x: Array, len_x: Array, op: Any, y: Array, len_y: Array, width: int
) -> tuple[Array, Array]:
  """`x op y =` as tokens [B, width] (zeros after) and its length [B].

  x, y: int32 [B, W] token strings with len_x, len_y [B] valid entries; op: an id or [B, 1].
  """
  pos = base.positions(width)
  lx, ly = len_x[:, None], len_y[:, None]
  y_at = jnp.take_along_axis(digits_lib.fit(y, width), jnp.clip(pos - lx - 1, 0, width - 1), axis=1)
  tokens = jnp.where(
    pos < lx,
    digits_lib.fit(x, width),
    jnp.where(
      pos == lx, op, jnp.where(pos <= lx + ly, y_at, jnp.where(pos == lx + ly + 1, EQUALS, 0))
    ),
  )
  return tokens, len_x + len_y + 2


def number_answer(digits: Array, negative: Array | None, width: int) -> tuple[Array, Array]:
  """The reversed written form of a number, then EOS: tokens [B, width] and length [B].

  Reversing the usual form puts a minus sign last: -333 is written `333-`.
  """
  size = digits_lib.num_digits(digits)[:, None]
  pos = base.positions(width)
  tokens = jnp.where(pos < size, digits_lib.fit(digits, width), 0)
  end = size
  if negative is not None:
    neg = negative[:, None]
    tokens = jnp.where(neg & (pos == size), MINUS, tokens)
    end = size + neg.astype(jnp.int32)
  tokens = jnp.where(pos == end, EOS, tokens)
  return tokens, end[:, 0] + 1


def pad_prompt(
  key: Array, prompt: Array, length: Array, probability: float, width: int
) -> tuple[Array, Array]:
  """Random spaces before each of the first `length` [B] tokens of prompt [B, N].

  Returns the padded prompt [B, width] (zeros after it) and its length [B].
  """
  batch, n = prompt.shape
  u = jax.random.uniform(key, (batch, n))
  spaces = (u < probability).astype(jnp.int32) + (
    u < _SECOND_SPACE * probability * probability
  ).astype(jnp.int32)
  inside = base.positions(n) < length[:, None]
  spaces = jnp.where(inside, spaces, 0)
  # A token moves up by the spaces inserted before it and before every earlier token.
  dest = base.positions(n) + base.cumulative(jnp.add, spaces, 0)
  new_length = length + jnp.sum(spaces, axis=1)
  out = jnp.where(base.positions(width) < new_length[:, None], SPACE, 0)
  dest = jnp.where(inside, dest, width)  # out of range: dropped
  rows = jnp.arange(batch)[:, None]
  return out.at[rows, dest].set(prompt, mode='drop'), new_length


def assemble(
  prompt: Array,
  prompt_length: Array,
  answer: Array,
  answer_length: Array,
) -> Batch:
  """tokens [B, P + A]: the prompt, then the answer from column prompt_length, then 0."""
  width_a = answer.shape[1]
  pos = base.positions(prompt.shape[1] + width_a)
  lp, la = prompt_length[:, None], answer_length[:, None]
  tail = jnp.take_along_axis(answer, jnp.clip(pos - lp, 0, width_a - 1), axis=1)
  tokens = jnp.where(
    pos < lp, jnp.pad(prompt, ((0, 0), (0, width_a))), jnp.where(pos < lp + la, tail, 0)
  )
  return {
    'tokens': tokens.astype(jnp.int32),
    'prompt_length': prompt_length.astype(jnp.int32),
    'length': (prompt_length + answer_length).astype(jnp.int32),
  }


def with_index_hints(
  tokens: Array, length: Array, start: Array, num_symbols: int, width: int
) -> tuple[Array, Array]:
  """Index hints (Zhou et al. 2024): an index symbol before every digit, the same symbol for
  the same significance in every number (each written least-significant digit first).

  Digit k of a number (counted from its first, least significant, digit) gets index symbol
  (start + k) mod K: consecutive symbols from a random start, wrapping around the alphabet.

  Args:
    tokens: int [B, N] with `length` [B] real tokens.
    start: int [B], the first symbol of each example.
    num_symbols: K.
    width: the width of the result (>= N + the digits of the longest row).

  Returns:
    (tokens [B, width] with zeros past the new length, the new length [B]).

  Example (start 0): `98+385=` -> `a9b8+a3b8c5=`.
  """
  n = tokens.shape[1]
  pos = base.positions(n)
  digit = (tokens < 10) & (pos < length[:, None])
  starts_run = digit & ~jnp.pad(digit, ((0, 0), (1, 0)))[:, :-1]
  run_start = base.cumulative(jnp.maximum, jnp.where(starts_run, pos, 0), 0)
  hint = FIRST_INDEX_SYMBOL + (start[:, None] + pos - run_start) % num_symbols
  # Every token moves right by the hints inserted at or before it; its hint sits just before.
  dest = pos + base.cumulative(jnp.add, digit.astype(jnp.int32), 0)
  inside = pos < length[:, None]
  rows = jnp.arange(tokens.shape[0])[:, None]
  out = jnp.zeros((tokens.shape[0], width), jnp.int32)
  out = out.at[rows, jnp.where(inside, dest, width)].set(tokens, mode='drop')
  out = out.at[rows, jnp.where(digit, dest - 1, width)].set(hint, mode='drop')
  return out, length + jnp.sum(digit, axis=1)
