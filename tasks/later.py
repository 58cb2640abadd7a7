"""Tasks from the literature after the study, in the study's interface (`tasks.base.Task`):
flip_flop, associative_recall and copy.

Each runs in the study's protocol as its 15 tasks do (an input of length L, an output of
O(L) classes, encoder or decoder form), so an encoding is measured on them by the same
training, evaluation and report. The length L counts input tokens; where a task's own size
is another count (instruction pairs, key-value pairs) it follows from L, and `input_length`
drops the tokens that do not make a whole unit, as modular_arithmetic does.

    flip_flop           Liu et al. 2023, "Exposing Attention Glitches with Flip-Flop
                        Language Modeling": the bit of the most recent write.
    associative_recall  multi-query associative recall (MQAR), Arora et al. 2023, "Zoology":
                        the value of each queried key (or of one, as in H3).
    copy                Jelassi et al. 2024, "Repeat After Me": the input string itself.

Options (`tasks.get(name, options)`, `--config.task_options.NAME=VALUE`):

    flip_flop           ignore_probability (0.8: the paper's FFL(0.8); 0.98 its sparse and
                        0.1 its dense variant)
    associative_recall  num_keys, num_values (256 each), queries ('all': MQAR; 'one')
    copy                num_symbols (26)

Where the papers leave a choice, or where their form does not fit an input and an output,
the choice is in the class's docstring.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base

Array = jax.Array

LEVEL = 'later'


def _check_int(task: str, name: str, value, least: int) -> None:
  if isinstance(value, bool) or not isinstance(value, int) or value < least:
    raise ValueError(f'{task}: {name} must be an integer >= {least}, got {value!r}')


def _orders(key: Array, batch_size: int, width: int, count=None) -> Array:
  """int32 [B, width]: per row, a uniformly random order of 0..count-1 in the first `count`
  columns, then count..width-1 in order (count: a traced scalar; None for `width`).

  Sorted by 64 random bits per entry, so that ties (which keep the index order) have
  probability below width**2 / 2**65 a row.
  """
  hi, lo = jax.random.bits(key, (2, batch_size, width), jnp.uint32)
  iota = jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), (batch_size, width))
  if count is not None:
    late = iota >= count
    top = jnp.uint32(0xFFFFFFFF)
    hi, lo = jnp.where(late, top, hi), jnp.where(late, top, lo)
  return lax.sort((hi, lo, iota), dimension=1, is_stable=True, num_keys=2)[2]


# ============================================================================= flip-flop
# Token ids: the bits are 0 and 1 (their own classes), then the three instructions.
WRITE, READ, IGNORE = 2, 3, 4


@dataclasses.dataclass(frozen=True)
class FlipFlop(base.Task):
  """Flip-flop language (Liu et al. 2023): the bit of the most recent write.

  Tokens: 0, 1 bits; 2 `w` (write), 3 `r` (read), 4 `i` (ignore). The paper's strings are
  instruction-bit pairs drawn as FFL(T, p): the first instruction is `w`, the others i.i.d.
  with probabilities (p_w, p_r, p_i), p_w = p_r = (1 - p_i) / 2, and the last one `r`; the
  bit after `w` or `i` is uniform, the bit after `r` is the bit of the most recent `w`.

  Here an input is such a string up to its last `r`, and the class is that read's bit: O = 1.
  The earlier reads carry their correct bits in the input, as in the paper's strings. Every
  read of a paper's string is the last read of one of its prefixes, and such a prefix has
  exactly this law, so the score is the paper's read accuracy (its language model is graded
  on the reads only), one read per example at a known length instead of all reads of one
  length-T string. The paper tests other p_i at its training length T = 512; here the test
  is longer strings at the same p_i (`ignore_probability`, which both use).

  Lengths: the input has an odd length 2n + 1 (n pairs and the read): an even L becomes
  L - 1, as in modular_arithmetic. L = 1 (and 2) is degenerate: the input is `r` alone and
  the class 0 (the register before any write is reset).

  Instruction probabilities are drawn to 2**-31 (31 random bits against a threshold).

  Example: `w 1 i 0 r 1 w 0 i 1 r` (ids 2 1 4 0 3 1 2 0 4 1 3) -> 0, the bit of the second
  write; `w 1 i 0 r` -> 1.
  """

  name: str = 'flip_flop'
  level: str = LEVEL
  vocab_size: int = 5
  num_classes: int = 2
  # p_i of FFL(p_i); writes and reads share the rest equally.
  ignore_probability: float = 0.8
  OPTIONS: ClassVar[tuple[str, ...]] = ('ignore_probability',)

  def __post_init__(self):
    p = self.ignore_probability
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
      raise ValueError(f'flip_flop: ignore_probability must be in [0, 1], got {p!r}')

  def input_length(self, length):
    return length - 1 + length % 2

  def _sample_inputs(self, key, batch_size, length, max_length):
    pairs = max_length // 2 + 1
    words = base.words32(key, batch_size * pairs).reshape(batch_size, pairs)
    draw, bit = words >> 1, (words & 1).astype(jnp.int32)
    p_write = (1.0 - self.ignore_probability) / 2
    t_write, t_read = (min(round(p * 2**31), 2**31) for p in (p_write, 2 * p_write))
    instruction = jnp.where(
      draw < jnp.uint32(t_write), WRITE, jnp.where(draw < jnp.uint32(t_read), READ, IGNORE)
    )
    instruction = instruction.at[:, 0].set(WRITE)
    # The register after each pair: the bit of the last write so far (reads do not move it).
    written = jnp.where(instruction == WRITE, bit, -1)
    register = base.cumulative(lambda r, w: jnp.where(w >= 0, w, r), written, 0)
    bit = jnp.where(instruction == READ, register, bit)
    x = jnp.stack([instruction, bit], axis=2).reshape(batch_size, 2 * pairs)[:, :max_length]
    pos = base.positions(max_length)
    x = jnp.where(pos == length - 1, READ, x)
    return jnp.where(pos < length, x, 0)

  def _target(self, inputs, length):
    pos = base.positions(inputs.shape[1])
    writes = (pos % 2 == 0) & (pos < length - 1) & (inputs == WRITE)
    last = jnp.max(jnp.where(writes, pos, -1), axis=1)
    bit = base.take_per_row(inputs, last + 1)
    return base.cls_output(jnp.where(last >= 0, bit, 0))


# ==================================================================== associative recall
QUERIES = ('all', 'one')


@dataclasses.dataclass(frozen=True)
class AssociativeRecall(base.Task):
  """Associative recall: key-value pairs, then queries; the output is the value of each
  queried key. `queries='all'` is multi-query associative recall (MQAR; Arora et al. 2023,
  Zoology), `queries='one'` the single query of the associative recall in H3 (Fu et al.
  2023) that MQAR extends.

  Tokens: keys 0..K-1, values K..K+C-1 (K = num_keys, C = num_values; value id K + c is
  class c). n pairs `k_1 v_1 ... k_n v_n` hold n distinct keys and n distinct values, each
  a uniform draw without replacement (as Zoology's). Then the queries:

    all   `q_1 ... q_n`, the n keys in a uniformly random order (Zoology queries every key
          once); the output is their values' classes in query order: O = n, L = 3n.
    one   `q`, one of the n keys, uniform; the output is its value's class: O = 1,
          L = 2n + 1.

  Where 'all' differs from Zoology's sequences: there a language model answers each query
  at the query's position, the queries spaced by power-law gaps of random tokens; here the
  answers follow the input (the study's form), so the queries are contiguous, with nothing
  between them, and the i-th answer must find the i-th query (n tokens back in decoder
  form) as well as its key. 'one' answers right after its query, as Zoology's model does.
  Zoology's vocabulary is 8,192 (4,096 keys and values); the default here is 256 of each.

  Lengths: `input_length` drops the tokens that make no whole unit (L mod 3 for 'all'; an
  even L becomes L - 1 for 'one'). Lengths without a pair (L < 3) are degenerate, as
  solve_equation's: L tokens of id 0 and the class 0 (O = 1). A buffer must hold at most
  min(K, C) pairs (distinct keys and values); a longer one is refused (one line, the
  capacity named): with the defaults, lengths up to 770 ('all') or 513 ('one').

  Examples (num_keys = num_values = 4: values are ids 4..7; keys 2, 0, 3 hold classes 1, 3,
  0): 'all' `2 5 0 7 3 4 0 3 2` (queries 0, 3, 2) -> `3 0 1`; 'one' `2 5 0 7 3 4 0` -> 3.
  """

  name: str = 'associative_recall'
  level: str = LEVEL
  vocab_size: int = dataclasses.field(init=False, default=0)  # K + C
  num_classes: int = dataclasses.field(init=False, default=0)  # C
  # K and C: the ids of keys and of values (Zoology: half of its vocabulary each).
  num_keys: int = 256
  num_values: int = 256
  queries: str = 'all'
  OPTIONS: ClassVar[tuple[str, ...]] = ('num_keys', 'num_values', 'queries')

  def __post_init__(self):
    for option in ('num_keys', 'num_values'):
      _check_int(self.name, option, getattr(self, option), 1)
    if self.queries not in QUERIES:
      raise ValueError(
        f'associative_recall: unknown queries {self.queries!r}; valid: {", ".join(QUERIES)}'
      )
    object.__setattr__(self, 'vocab_size', self.num_keys + self.num_values)
    object.__setattr__(self, 'num_classes', self.num_values)

  def pairs(self, length):
    """n, the key-value pairs of an input of length L (0 for the degenerate L < 3)."""
    return length // 3 if self.queries == 'all' else (length - 1) // 2

  def input_length(self, length):
    if self.queries == 'all':
      return length - length % 3 * (length >= 3)
    return length - 1 + length % 2

  def output_length(self, length):
    if self.queries == 'all':
      return length // 3 + (length < 3)
    return length * 0 + 1

  def check_capacity(self, max_length: int) -> None:
    """ValueError (one line) when `max_length` holds more pairs than there are distinct keys
    or values."""
    capacity, pairs = min(self.num_keys, self.num_values), self.pairs(max_length)
    if pairs > capacity:
      longest = 3 * capacity + 2 if self.queries == 'all' else 2 * capacity + 2
      raise ValueError(
        f'associative_recall: length {max_length} holds {pairs} key-value pairs, more than '
        f'num_keys={self.num_keys}, num_values={self.num_values} allow ({capacity} pairs: '
        f'lengths up to {longest}); raise num_keys and num_values'
      )

  def _sample_inputs(self, key, batch_size, length, max_length):
    self.check_capacity(max_length)
    width = max(self.pairs(max_length), 1)
    k_keys, k_values, k_query = jax.random.split(key, 3)
    keys = _orders(k_keys, batch_size, self.num_keys)[:, :width]
    values = self.num_keys + _orders(k_values, batch_size, self.num_values)[:, :width]
    n = self.pairs(length)
    if self.queries == 'all':
      asked = _orders(k_query, batch_size, width, n)
    else:
      asked = base.uniform_below(k_query, jnp.full((batch_size, 1), jnp.maximum(n, 1)))
    queries = jnp.take_along_axis(keys, asked, axis=1)
    pos = base.positions(max_length)
    pair = jnp.broadcast_to(jnp.minimum(pos // 2, width - 1), (batch_size, max_length))
    column = jnp.clip(pos - 2 * n, 0, queries.shape[1] - 1)
    column = jnp.broadcast_to(column, (batch_size, max_length))
    stored = jnp.where(
      pos % 2 == 0,
      jnp.take_along_axis(keys, pair, axis=1),
      jnp.take_along_axis(values, pair, axis=1),
    )
    x = jnp.where(pos < 2 * n, stored, jnp.take_along_axis(queries, column, axis=1))
    return jnp.where((pos < length) & (n >= 1), x, 0)

  def _target(self, inputs, length):
    width = max(self.pairs(inputs.shape[1]), 1)
    out_width = self.output_length(inputs.shape[1])
    n = self.pairs(length)
    padded = jnp.pad(inputs, ((0, 0), (0, 3 * width + 2 - inputs.shape[1])))
    keys, values = padded[:, 0 : 2 * width : 2], padded[:, 1 : 2 * width : 2]
    queries = base.shift_left(padded, 2 * n)[:, :out_width]
    stored = base.positions(width)[:, None, :] < n  # [1, 1, width]: pair j holds a key
    match = (queries[:, :, None] == keys[:, None, :]) & stored
    value = jnp.sum(jnp.where(match, values[:, None, :], 0), axis=2)
    classes = jnp.where(n >= 1, value - self.num_keys, 0)
    return base.seq_output(jnp.maximum(classes, 0), self.output_length(length))


# ================================================================================ copy
@dataclasses.dataclass(frozen=True)
class Copy(base.Task):
  """Copy the input string (Jelassi et al. 2024, "Repeat After Me"): O = L.

  Tokens and classes: 0..S-1 (S = num_symbols), uniform and independent. The paper's
  examples are `$ x | x .` over the lowercase letters: S = 26 here (its code's `vocab_size`
  option, 10 by default, at most 26). In decoder form the sequence is `x SEP x EOS`, the
  answer in ids of its own (the decoder form's answer tokens), where the paper repeats the
  input's tokens. The study's duplicate_string is the binary `x -> x x`.

  Example: `3 0 25 3` -> `3 0 25 3`.
  """

  name: str = 'copy'
  level: str = LEVEL
  vocab_size: int = dataclasses.field(init=False, default=0)  # S
  num_classes: int = dataclasses.field(init=False, default=0)  # S
  num_symbols: int = 26
  OPTIONS: ClassVar[tuple[str, ...]] = ('num_symbols',)

  def __post_init__(self):
    _check_int(self.name, 'num_symbols', self.num_symbols, 2)
    object.__setattr__(self, 'vocab_size', self.num_symbols)
    object.__setattr__(self, 'num_classes', self.num_symbols)

  def output_length(self, length):
    return length

  def _sample_inputs(self, key, batch_size, length, max_length):
    x = base.uniform_digits(key, (batch_size, max_length), self.num_symbols)
    return jnp.where(base.positions(max_length) < length, x, 0)

  def _target(self, inputs, length):
    return base.seq_output(inputs, length)


# This module's tasks, registered in `tasks.REGISTRY` (`tasks.LATER`).
TASKS = {'flip_flop': FlipFlop(), 'associative_recall': AssociativeRecall(), 'copy': Copy()}
