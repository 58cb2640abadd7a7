"""The arithmetic tasks of McLeish et al. (2024), as on-device samplers of token sequences.

"Transformers Can Do Arithmetic with the Right Embeddings": addition, multiplication,
mixed addition/subtraction, sorting and bitwise OR, each example one sequence
`prompt answer EOS` for a causal decoder, numbers written least-significant digit first.

    import tasks
    from tasks import arithmetic
    task = tasks.get('addition')
    width_p, width_a = task.max_prompt(20, 20), task.max_answer(20, 20)     # 42, 22
    batch = task.sample_train(key, 512, 20, width_p, width_a)  # cells stratified over [1..20]^2
    batch = task.sample(key, 64, a, b, width_p, width_a)      # every example at cell (a, b)
    arithmetic.decode(batch['tokens'][0, :batch['length'][0]])  # e.g. '98282+3859172=2787472$'

Vocabulary (shared by all tasks; `decode` renders it):

    id      0..9  10  11  12  13  14  15  16  17     18   19, 20, ...
    token   0..9  +   -   *   =   ,   :   |   ' '  EOS  index symbols (sorting only)
    shown   0..9  +   -   *   =   ,   :   |   ' '  $    a..z A..Z <i52> <i53> ...

`|` is our choice of the bitwise-OR operator: the paper's symbol for it is not confirmed.
' ' is the random padding of the Fig. 20 ablation. Index symbol k (id 19 + k) is shown as
the k-th letter of a..zA..Z, and as `<ik>` from k = 52 on. A task's `vocab_size` is 19, plus
`num_index_symbols` for sorting.

Batches. Every sampler returns

    tokens        int32 [B, prompt_width + answer_width]
    prompt_length int32 [B]   the prompt (up to and including '=') is tokens[:, :prompt_length]
    length        int32 [B]   prompt + answer + EOS; tokens past `length` are 0

The answer starts right after '=' (after the padded prompt when there is padding). The
widths are static (one compiled program per task, batch size and widths); the grid cell
(a, b) is traced. `max_prompt(a, b)` / `max_answer(a, b)` give the widths that hold every
cell up to (a, b); a traced cell whose sequences do not fit the widths is not detected and
gives truncated sequences.

Random padding (`pad_probability = p > 0`): before each prompt character, '=' included, one
space with probability p, a second with probability 0.1 p given the first, never more, so a
prompt can grow to 3x its length: `max_prompt` is 3x the unpadded bound.

Operands: a number of l digits is uniform over [10**(l-1), 10**l - 1] (no leading zeros in
its usual form), drawn digit by digit from exact uniform draws (`base.uniform_digits`).
Draws with a per-example range (a sorting length, a symbol offset, a position, the first
cell of a training batch) use 64 random bits reduced mod k (`base.uniform_below`), biased
by less than k / 2**64.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import numbers
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base
from tasks import digits as digits_lib
from tasks import arithmetic_text as text

# The vocabulary, its text form and index hints are this module's too (re-exported).
from tasks.arithmetic_text import (
  COLON,
  COMMA,
  DIGITS,
  EOS,
  EQUALS,
  FIRST_INDEX_SYMBOL,
  MINUS,
  NUM_BASE_TOKENS,
  OR,
  PLUS,
  SPACE,
  TIMES,
  decode,
  encode,
  with_index_hints,
)

Array = jax.Array
Batch = dict[str, Array]


def train_cells(key: Array, batch_size: int, n: int) -> tuple[Array, Array]:
  """The grid cells of a `sample_train` batch: (a [B], b [B]), int32 in 1..n.

  Cell (a, b) is number (a - 1) * n + (b - 1) of the row-major list of the n**2 cells; the
  batch takes B consecutive cells from a uniformly random start, wrapping around.

  Example: n = 2, B = 3, start 3 -> a = [2, 1, 1], b = [2, 1, 2].
  """
  start = base.uniform_below(key, jnp.full((), n * n, jnp.int32))
  cell = (start + jnp.arange(batch_size, dtype=jnp.int32)) % (n * n)
  return cell // n + 1, cell % n + 1


# ========================================================================= tasks
@dataclasses.dataclass(frozen=True)
class SequenceTask(abc.ABC):
  """Base class: a task samples `prompt answer EOS` sequences on a grid of cells (a, b).

  Subclasses set `name` and `axes` and implement `_max_raw_prompt`, `max_answer` and `_rows`.
  A task of the grid kind of evaluation: it has what that kind reads off a task
  (`posenc.kinds.grid.protocol.GridTask`), which is checked when a run is built.

  Attributes:
    name: the registry name, e.g. 'addition'.
    level: 'arithmetic'.
    pad_probability: p of the random-padding ablation (0: no padding).
    axes: the names of the grid's two axes, e.g. ('digits_a', 'digits_b').
  """

  name: str = ''
  level: str = 'arithmetic'
  protocol: ClassVar[str] = 'grid'
  pad_probability: float = 0.0
  axes: ClassVar[tuple[str, str]] = ('a', 'b')
  # The fields a config may set (`task_options`; `tasks.get(name, options)`).
  OPTIONS: ClassVar[tuple[str, ...]] = ('pad_probability',)

  def __post_init__(self):
    if not 0.0 <= self.pad_probability <= 1.0:
      raise ValueError(f'pad_probability must be in [0, 1], got {self.pad_probability}')

  # ----------------------------------------------------------------------- vocabulary
  @property
  def vocab_size(self) -> int:
    return NUM_BASE_TOKENS

  @property
  def digit_ids(self) -> tuple[int, ...]:
    return DIGITS

  @property
  def eos_id(self) -> int:
    return EOS

  # ----------------------------------------------------------------------- sizes
  def max_prompt(self, a: int, b: int) -> int:
    """Prompt tokens ('=' included) of any cell up to (a, b); 3x that with padding."""
    raw = self._max_raw_prompt(a, b)
    return text.MAX_PAD_FACTOR * raw if self.pad_probability > 0 else raw

  @abc.abstractmethod
  def max_answer(self, a: int, b: int) -> int:
    """Answer tokens, EOS included, of any cell up to (a, b)."""

  @abc.abstractmethod
  def _max_raw_prompt(self, a: int, b: int) -> int:
    """Prompt tokens ('=' included) of any cell up to (a, b), without padding."""

  def _raw_width(self, prompt_width: int) -> int:
    """The longest unpadded prompt whose padded form always fits `prompt_width`."""
    return prompt_width // text.MAX_PAD_FACTOR if self.pad_probability > 0 else prompt_width

  def check_cell(self, a: int, b: int) -> None:
    """Raises ValueError when cell (a, b) cannot be sampled (e.g. a < 1)."""
    if a < 1 or b < 1:
      raise ValueError(f'{self.name}: grid cells start at 1, got ({a}, {b})')

  def _check_widths(self, a: int, b: int, prompt_width: int, answer_width: int) -> None:
    self.check_cell(a, b)
    need_p, need_a = self.max_prompt(a, b), self.max_answer(a, b)
    if prompt_width < need_p or answer_width < need_a:
      raise ValueError(
        f'{self.name}: cell ({a}, {b}) needs prompt_width >= {need_p} and '
        f'answer_width >= {need_a}, got {prompt_width} and {answer_width}'
      )

  # ----------------------------------------------------------------------- sampling
  def sample(
    self, key: Array, batch_size: int, a: Any, b: Any, prompt_width: int, answer_width: int
  ) -> Batch:
    """A batch in which every example has axis values exactly (a, b).

    Args:
      key: a jax.random key.
      batch_size: B (static).
      a, b: the cell (ints or traced int32 scalars; one compiled program serves all cells).
      prompt_width, answer_width: static widths, >= max_prompt(a, b) and max_answer(a, b)
        (checked when a and b are Python ints).

    Returns:
      {'tokens' [B, prompt_width + answer_width], 'prompt_length' [B], 'length' [B]}.
    """
    if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
      self._check_widths(int(a), int(b), prompt_width, answer_width)
    return _sample_jit(self, key, batch_size, a, b, prompt_width, answer_width)

  def sample_train(
    self, key: Array, batch_size: int, n: int, prompt_width: int, answer_width: int
  ) -> Batch:
    """A training batch, cells stratified over [1..n]**2 (see `train_cells`).

    The widths must be >= max_prompt(n, n) and max_answer(n, n) (checked). Returns the same
    dict as `sample`.
    """
    self._check_widths(n, n, prompt_width, answer_width)
    return _sample_train_jit(self, key, batch_size, n, prompt_width, answer_width)

  def _sample_rows(
    self, key: Array, a: Array, b: Array, prompt_width: int, answer_width: int
  ) -> Batch:
    """Examples at per-row cells a, b [B] (traced), assembled and padded."""
    k_rows, k_pad = jax.random.split(key)
    prompt, prompt_length, answer, answer_length = self._rows(
      k_rows, a, b, self._raw_width(prompt_width), answer_width
    )
    if self.pad_probability > 0:
      prompt, prompt_length = text.pad_prompt(
        k_pad, prompt, prompt_length, self.pad_probability, prompt_width
      )
    else:
      prompt = digits_lib.fit(prompt, prompt_width)
    return text.assemble(prompt, prompt_length, answer, answer_length)

  @abc.abstractmethod
  def _rows(
    self, key: Array, a: Array, b: Array, prompt_width: int, answer_width: int
  ) -> tuple[Array, Array, Array, Array]:
    """(prompt [B, prompt_width], its length [B], answer [B, answer_width], its length [B]).

    Unpadded; zeros past each length; the answer length counts the EOS.
    """


@functools.partial(jax.jit, static_argnums=(0, 2, 5, 6))
def _sample_jit(
  task: SequenceTask,
  key: Array,
  batch_size: int,
  a: Any,
  b: Any,
  prompt_width: int,
  answer_width: int,
) -> Batch:
  a = jnp.broadcast_to(jnp.asarray(a, jnp.int32), (batch_size,))
  b = jnp.broadcast_to(jnp.asarray(b, jnp.int32), (batch_size,))
  # pylint: disable-next=protected-access
  return task._sample_rows(key, a, b, prompt_width, answer_width)


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4, 5))
def _sample_train_jit(
  task: SequenceTask, key: Array, batch_size: int, n: int, prompt_width: int, answer_width: int
) -> Batch:
  k_cells, k_rows = jax.random.split(key)
  a, b = train_cells(k_cells, batch_size, n)
  # pylint: disable-next=protected-access
  return task._sample_rows(k_rows, a, b, prompt_width, answer_width)


def _operand_width(prompt_width: int, answer_width: int) -> int:
  """A static bound on the digits of either operand of `a op b =` when the widths hold the
  cell: prompt_width >= l_a + l_b + 2 and answer_width >= max(l_a, l_b) + 2."""
  return max(1, min(prompt_width - 3, answer_width - 2))


@dataclasses.dataclass(frozen=True)
class Addition(SequenceTask):
  """a + b, reversed. Axes: the digits of a and of b.

  Example (a = 28289, b = 2719583): `98282+3859172=` answer `2787472` EOS.

  Attributes:
    index_hints: write an index symbol before every digit, the same for the same
      significance in the operands and the answer (Zhou et al. 2024; `with_index_hints`),
      consecutive symbols from a random start per example, in training and at evaluation
      alike (as the paper): `a9b8c2d8e2+a3b8c5d9e1f7g2=` answer `a2b7c8d7e4f7g2` EOS.
    num_index_symbols: K, the hint alphabet (ids 19..19 + K - 1; the paper's 102).
  """

  name: str = 'addition'
  index_hints: bool = False
  num_index_symbols: int = 102
  axes: ClassVar[tuple[str, str]] = ('digits_a', 'digits_b')
  OPTIONS: ClassVar[tuple[str, ...]] = ('pad_probability', 'index_hints', 'num_index_symbols')

  def __post_init__(self):
    super().__post_init__()
    if self.num_index_symbols < 1:
      raise ValueError(f'num_index_symbols must be >= 1, got {self.num_index_symbols}')
    if self.index_hints and self.pad_probability > 0:
      raise ValueError(
        'index_hints and pad_probability > 0 do not combine (spaces would split '
        'the numbers the hints count)'
      )

  @property
  def vocab_size(self) -> int:
    return NUM_BASE_TOKENS + (self.num_index_symbols if self.index_hints else 0)

  def _max_raw_prompt(self, a, b):
    return (2 if self.index_hints else 1) * (a + b) + 2

  def max_answer(self, a, b):
    return (2 if self.index_hints else 1) * (max(a, b) + 1) + 1

  def _rows(self, key, a, b, prompt_width, answer_width):
    if self.index_hints:  # the widths the same cell takes without hints
      width = _operand_width((prompt_width - 2) // 2 + 2, (answer_width - 1) // 2 + 1)
    else:
      width = _operand_width(prompt_width, answer_width)
    k_x, k_y = jax.random.split(key)
    x, y = digits_lib.draw_operands(k_x, a, width), digits_lib.draw_operands(k_y, b, width)
    prompt, prompt_length = text.binary_prompt(x, a, PLUS, y, b, prompt_width)
    answer, answer_length = text.number_answer(digits_lib.add_digits(x, y), None, answer_width)
    if self.index_hints:
      start = base.uniform_below(
        jax.random.fold_in(key, 2), jnp.full(a.shape, self.num_index_symbols, jnp.int32)
      )
      prompt, prompt_length = with_index_hints(
        prompt, prompt_length, start, self.num_index_symbols, prompt_width
      )
      answer, answer_length = with_index_hints(
        answer, answer_length, start, self.num_index_symbols, answer_width
      )
    return prompt, prompt_length, answer, answer_length


@dataclasses.dataclass(frozen=True)
class Multiplication(SequenceTask):
  """a * b, reversed (up to l_a + l_b digits). Axes: the digits of a and of b.

  Example (a = 12, b = 34): `21*43=` answer `804` EOS (408).
  """

  name: str = 'multiplication'
  axes: ClassVar[tuple[str, str]] = ('digits_a', 'digits_b')

  def _max_raw_prompt(self, a, b):
    return a + b + 2

  def max_answer(self, a, b):
    return a + b + 1

  def _rows(self, key, a, b, prompt_width, answer_width):
    width = _operand_width(prompt_width, answer_width)
    product_width = max(1, answer_width - 1)
    # min(l_a, l_b) <= (l_a + l_b) / 2, and l_a + l_b fits both widths.
    short_width = max(1, min(width, min(prompt_width - 2, answer_width - 1) // 2))
    k_x, k_y = jax.random.split(key)
    x, y = digits_lib.draw_operands(k_x, a, width), digits_lib.draw_operands(k_y, b, width)
    prompt, prompt_length = text.binary_prompt(x, a, TIMES, y, b, prompt_width)
    # The loop runs over the digits of the shorter operand, and only as far as the longest
    # of those in the batch.
    swap = (a > b)[:, None]
    short, long = jnp.where(swap, y, x)[:, :short_width], jnp.where(swap, x, y)
    count = jnp.clip(jnp.max(jnp.minimum(a, b)), 0, short_width)
    product = digits_lib.multiply_digits(short, long, product_width, count)
    answer, answer_length = text.number_answer(product, None, answer_width)
    return prompt, prompt_length, answer, answer_length


@dataclasses.dataclass(frozen=True)
class AdditionSubtraction(Addition):
  """With probability 1/2 a + b, else a - b, reversed. Axes: the digits of a and of b.

  The answer reverses the usual written form, so a negative result ends with '-' and zero
  is `0`. Examples: `321+654=` -> `975`; `321-654=` -> `333-` (123 - 456 = -333);
  `21-21=` -> `0`.
  """

  name: str = 'addition_subtraction'  # addition's sizes: |a - b| has at most max(a, b) digits

  def _rows(self, key, a, b, prompt_width, answer_width):
    width = _operand_width(prompt_width, answer_width)
    k_x, k_y, k_op = jax.random.split(key, 3)
    x, y = digits_lib.draw_operands(k_x, a, width), digits_lib.draw_operands(k_y, b, width)
    is_sum = base.uniform_digits(k_op, (a.shape[0], 1), 2) == 1
    prompt, prompt_length = text.binary_prompt(
      x, a, jnp.where(is_sum, PLUS, MINUS), y, b, prompt_width
    )
    difference, negative = digits_lib.subtract_digits(x, y)
    result = jnp.where(is_sum, digits_lib.add_digits(x, y), digits_lib.fit(difference, width + 1))
    answer, answer_length = text.number_answer(result, negative & ~is_sum[:, 0], answer_width)
    return prompt, prompt_length, answer, answer_length


@dataclasses.dataclass(frozen=True)
class Sorting(SequenceTask):
  """Sort m labelled numbers of up to j digits. Axes: the count m and the digits j.

  Each number has its own length, uniform in 1..j, and is uniform over the numbers of that
  length; it is written reversed (so it may begin with 0). The labels are m consecutive
  index symbols from a uniformly random offset in 0..num_index_symbols - m. The answer lists
  the labels in ascending order of value, ties in order of position, comma-separated.

  Example (the paper's): `a:64957,b:99963,c:10218,d:7141,e:05781=` -> `d,e,b,a,c`
  (values 75946, 36999, 81201, 1417, 18750).

  Attributes:
    num_index_symbols: K, the number of index symbols (ids 19..19 + K - 1); m <= K.
  """

  name: str = 'sorting'
  num_index_symbols: int = 64
  axes: ClassVar[tuple[str, str]] = ('count', 'digits')
  OPTIONS: ClassVar[tuple[str, ...]] = ('pad_probability', 'num_index_symbols')

  def __post_init__(self):
    super().__post_init__()
    if self.num_index_symbols < 1:
      raise ValueError(f'num_index_symbols must be >= 1, got {self.num_index_symbols}')

  @property
  def vocab_size(self) -> int:
    return NUM_BASE_TOKENS + self.num_index_symbols

  def _max_raw_prompt(self, a, b):
    return a * (b + 3)  # per number: symbol, ':', digits, ',' (the last one '=')

  def max_answer(self, a, b):
    return 2 * a  # symbols and commas, then EOS

  def check_cell(self, a, b):
    super().check_cell(a, b)
    if a > self.num_index_symbols:
      raise ValueError(
        f'sorting: {a} numbers need more than num_index_symbols='
        f'{self.num_index_symbols} index symbols'
      )

  def _rows(self, key, m, j, prompt_width, answer_width):
    batch = m.shape[0]
    count = max(1, min(answer_width // 2, self.num_index_symbols))  # static bound on m
    k_len, k_off, k_low, k_top = jax.random.split(key, 4)
    valid = base.positions(count) < m[:, None]
    lengths = jnp.where(
      valid, 1 + base.uniform_below(k_len, jnp.broadcast_to(j[:, None], (batch, count))), 0
    )
    # The prompt is laid out flat: number i fills [starts_i, ends_i) with its symbol, ':',
    # digits and a separator, so memory is O(prompt_width), whatever the widest number.
    ends = jnp.cumsum(jnp.where(valid, lengths + 3, 0), axis=1)
    starts = ends - jnp.where(valid, lengths + 3, 0)
    pos = base.positions(prompt_width)
    # The number at each position: how many numbers end at or before it. One comparison
    # per number, up to the batch's largest m; jnp.searchsorted was 4x slower on CPU.
    which = lax.fori_loop(
      0,
      jnp.max(m),
      lambda i, acc: acc + (lax.dynamic_index_in_dim(ends, i, axis=1) <= pos),
      jnp.zeros((batch, prompt_width), jnp.int32),
    )
    which = jnp.minimum(which, count - 1)
    offset = pos - jnp.take_along_axis(starts, which, axis=1)
    size = jnp.take_along_axis(lengths, which, axis=1)
    top = 1 + base.uniform_digits(k_top, (batch, count), 9)
    digits = jnp.where(
      offset == size + 1,
      jnp.take_along_axis(top, which, axis=1),
      base.uniform_digits(k_low, (batch, prompt_width), 10),
    )
    digits = jnp.where((offset >= 2) & (offset <= size + 1), digits, 0)
    first = FIRST_INDEX_SYMBOL + base.uniform_below(k_off, self.num_index_symbols - m + 1)
    last = which == m[:, None] - 1
    prompt = jnp.where(
      offset == 0,
      first[:, None] + which,
      jnp.where(
        offset == 1, COLON, jnp.where(offset <= size + 1, digits, jnp.where(last, EQUALS, COMMA))
      ),
    )
    prompt = jnp.where(pos < ends[:, -1:], prompt, 0)

    order = _sort_numbers(digits, starts, lengths, valid)
    pos_a = base.positions(answer_width)
    rank = jnp.minimum(pos_a // 2, count - 1)
    symbol = first[:, None] + jnp.take_along_axis(
      order, jnp.broadcast_to(rank, (batch, answer_width)), axis=1
    )
    answer = jnp.where(pos_a % 2 == 0, symbol, jnp.where(pos_a // 2 < m[:, None] - 1, COMMA, EOS))
    answer = jnp.where(pos_a < 2 * m[:, None], answer, 0)
    return prompt, ends[:, -1], answer, 2 * m


def _sort_numbers(digits: Array, starts: Array, lengths: Array, valid: Array) -> Array:
  """The indices of the numbers in ascending order of value, stable; invalid ones last.

  Args:
    digits: int32 [B, P], the flat prompt's digits (0 elsewhere); number i has its
      little-endian digits at starts[:, i] + 2 + k for k < lengths[:, i].
    starts, lengths: int32 [B, M].
    valid: bool [B, M], the numbers that exist.

  Returns:
    int32 [B, M], a permutation per row.

  A least-significant-first radix sort: values are cut into 9-digit chunks (below 2**31),
  and each round is one stable sort by the next 4 chunks (lexicographic keys), so the
  order ends by (value, position); a missing number's chunks are all 10**9, above any
  value. The rounds run only as far as the longest number of the batch: one round up to 36
  digits. Example: values [70, 5, 70] -> [1, 0, 2].
  """
  batch, count = starts.shape
  chunk_digits, chunks_per_round = 9, 4
  q = jnp.arange(chunk_digits, dtype=jnp.int32)
  weights = 10**q

  def chunk(c):
    k = chunk_digits * c + q  # [9]
    at = (starts[:, :, None] + 2 + k).reshape(batch, -1)
    d = jnp.take_along_axis(digits, jnp.clip(at, 0, digits.shape[1] - 1), axis=1)
    d = jnp.where(k < lengths[:, :, None], d.reshape(batch, count, chunk_digits), 0)
    # Above every 9-digit chunk, so the missing numbers sort last in every round.
    return jnp.where(valid, jnp.sum(d * weights, axis=-1), 10**chunk_digits)

  def stable_by(keys, order):
    """Stable sort of `order` by keys (most significant first), each [B, M] by index."""
    keys = tuple(jnp.take_along_axis(k, order, axis=1) for k in keys)
    return lax.sort(keys + (order,), dimension=1, num_keys=len(keys), is_stable=True)[-1]

  def round_(r, order):
    first = chunks_per_round * r
    return stable_by([chunk(first + c) for c in reversed(range(chunks_per_round))], order)

  order = jnp.broadcast_to(jnp.arange(count, dtype=jnp.int32), (batch, count))
  per_round = chunk_digits * chunks_per_round
  rounds = jnp.maximum((jnp.max(lengths) + per_round - 1) // per_round, 1)
  return lax.fori_loop(0, rounds, round_, order)


@dataclasses.dataclass(frozen=True)
class BitwiseOr(SequenceTask):
  """The OR of two left-aligned binary vectors. Axes: the lengths of the two vectors.

  The longer vector is all zeros, the shorter holds a single 1 at a uniform position (with
  equal lengths the 1 is in either vector with probability 1/2); the answer is their OR, of
  length max(l_1, l_2). Bits are the digit ids 0 and 1; `|` is our operator symbol.

  Example: `001|00000=` -> `00100`.
  """

  name: str = 'bitwise_or'
  axes: ClassVar[tuple[str, str]] = ('length_a', 'length_b')

  def _max_raw_prompt(self, a, b):
    return a + b + 2

  def max_answer(self, a, b):
    return max(a, b) + 1

  def _rows(self, key, a, b, prompt_width, answer_width):
    k_side, k_pos = jax.random.split(key)
    first_side = base.uniform_digits(k_side, (a.shape[0],), 2) == 1
    in_a = ((a < b) | ((a == b) & first_side))[:, None]
    one = base.uniform_below(k_pos, jnp.minimum(a, b))[:, None]
    hot = (base.positions(prompt_width) == one).astype(jnp.int32)
    prompt, prompt_length = text.binary_prompt(
      jnp.where(in_a, hot, 0), a, OR, jnp.where(in_a, 0, hot), b, prompt_width
    )
    pos_a = base.positions(answer_width)
    longest = jnp.maximum(a, b)[:, None]
    answer = jnp.where(
      pos_a < longest, (pos_a == one).astype(jnp.int32), jnp.where(pos_a == longest, EOS, 0)
    )
    return prompt, prompt_length, answer, longest[:, 0] + 1


# This module's tasks, registered in `tasks.REGISTRY`.
TASKS: dict[str, SequenceTask] = {
  'addition': Addition(),
  'multiplication': Multiplication(),
  'addition_subtraction': AdditionSubtraction(),
  'sorting': Sorting(),
  'bitwise_or': BitwiseOr(),
}
