"""The task interface shared by the 15 tasks, plus the sampling helpers they use.

A task is a frozen (hence hashable) dataclass. It is sampled on the device, inside `jit`,
vectorised over the batch, from one `jax.random` key and nothing else.

Padding convention (see also `tasks/__init__.py`):
  Every sampler is written once, for a static buffer size `max_length` and a traced
  length `length` (1 <= length <= max_length). The batch is a dict

    inputs        int32   [B, Lmax]   tokens, 0 at positions >= L_in
    targets       int32   [B, Omax]   Omax = output_length(Lmax); 0 at positions >= O(L_in)
    mask          float32 [B, Omax]   the reference's accuracy mask; 0 at positions >= O(L_in)
    output_valid  float32 [B, Omax]   1 exactly on the O(L_in) real output positions
    length        int32   []          L_in, the length actually used (`input_length(length)`)
    output_length int32   []          O(L_in)

  `sample_padded(key, B, length, max_length)` returns it with Lmax = max_length and compiles
  once per (task, B, max_length): `length` is traced. `sample(key, B, length)` is the same
  program run with Lmax = L_in, so both follow one code path and the padded batch restricted
  to its valid part has exactly the distribution of the exact-shape batch (with the same key
  and max_length == L_in they are identical).

Uniform draws: bits come from `jax.random.bits`; draws from {0..k-1} with a fixed k are
exact (several base-k digits per 32-bit word, with rejection); draws whose range varies per
example (a split point, a random index) use 64 random bits reduced mod k, like
`jax.random.randint`, i.e. with a relative bias below k / 2**64.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array
Batch = dict[str, Array]


@runtime_checkable
class DigitTask(Protocol):
  """A task whose tokens include the digits 0..9 (arithmetic, the byte corpora): what an
  encoding that reads digits (Abacus, position coupling) needs from it.

  Example: isinstance(tasks.get('addition'), DigitTask) -> True (digit_ids: the ids of 0..9).
  """

  @property
  def digit_ids(self) -> tuple[int, ...]: ...


@runtime_checkable
class TextTask(Protocol):
  """A task made of natural text (a byte corpus): its (train, valid) texts as uint8 arrays,
  for the analyses that read the text itself (a shuffled prefix)."""

  def texts(self) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Task:
  """Base class: subclasses set the four fields and implement `_target` (and `_sample`).

  A task of the range kind of evaluation: it has what that kind reads off a task
  (`posenc.kinds.range.protocol.RangeTask`: the sizes, `output_length`, `sample`,
  `sample_padded`), which is checked when a run is built.

  Attributes:
    name: the registry name, e.g. 'parity_check'.
    level: 'regular', 'dcf' or 'cs' (the Chomsky-hierarchy level of the study).
    vocab_size: V, number of input token ids (0..V-1).
    num_classes: C, number of output classes.
  """

  name: str = ''
  level: str = ''
  # How the task is trained and judged: its kind of evaluation (`posenc.kinds.KINDS`).
  protocol: ClassVar[str] = 'range'
  vocab_size: int = 0
  num_classes: int = 0

  # ----------------------------------------------------------------------- sizes
  def output_length(self, length: Any) -> Any:
    """O(L): the number of outputs for an input of length L (int or traced int32)."""
    return length * 0 + 1

  def input_length(self, length: Any) -> Any:
    """The length actually used when `length` is asked for (the identity but for
    modular_arithmetic, which turns an even L into L - 1)."""
    return length

  @property
  def is_classification(self) -> bool:
    """True when there is one output per sequence (the reference tests O(10) == 1)."""
    return self.output_length(10) == 1

  # ----------------------------------------------------------------------- targets
  def target(self, inputs: Array) -> tuple[Array, Array]:
    """The reference's output for valid inputs (degenerate short lengths included).

    Args:
      inputs: int32 [B, L], all L tokens valid.

    Returns:
      (targets int32 [B, O(L)], mask float32 [B, O(L)]), mask = the accuracy mask.
    """
    inputs = jnp.asarray(inputs, jnp.int32)
    return self._target(inputs, inputs.shape[1])

  def _target(self, inputs: Array, length: Any) -> tuple[Array, Array]:
    """Targets for inputs [B, Lmax] whose first `length` (int or traced) tokens are valid.

    Returns arrays of width output_length(Lmax), zero at positions >= O(length).
    """
    raise NotImplementedError

  # ----------------------------------------------------------------------- sampling
  def _sample(
    self, key: Array, batch_size: int, length: Array, max_length: int
  ) -> tuple[Array, Array, Array]:
    """(inputs [B, Lmax], targets [B, Omax], mask [B, Omax]) for the traced L_in `length`.

    The default draws the inputs with `_sample_inputs` and computes `_target`.
    """
    inputs = self._sample_inputs(key, batch_size, length, max_length)
    targets, mask = self._target(inputs, length)
    return inputs, targets, mask

  def _sample_inputs(self, key: Array, batch_size: int, length: Array, max_length: int) -> Array:
    raise NotImplementedError

  def sample(self, key: Array, batch_size: int, length: int) -> Batch:
    """A batch at one static length L (shapes [B, L_in] and [B, O(L_in)])."""
    if length < 1:
      raise ValueError(f'length must be >= 1, got {length}')
    return _sample_jit(self, key, batch_size, length, self.input_length(length))

  def sample_padded(self, key: Array, batch_size: int, length: Any, max_length: int) -> Batch:
    """A batch at a traced length, padded to the static `max_length` (see module doc).

    A traced length must be <= max_length (not checked inside the program); a concrete one
    is checked here.
    """
    if isinstance(length, int) and not (length >= 1 and self.input_length(length) <= max_length):
      raise ValueError(
        f'length {length} does not fit max_length={max_length} '
        f'(input length {self.input_length(length)})'
      )
    return _sample_jit(self, key, batch_size, length, max_length)


@functools.partial(jax.jit, static_argnums=(0, 2, 4))
def _sample_jit(task: Task, key: Array, batch_size: int, length: Any, max_length: int) -> Batch:
  length = task.input_length(jnp.asarray(length, jnp.int32))
  # pylint: disable-next=protected-access
  inputs, targets, mask = task._sample(key, batch_size, length, max_length)
  out_len = task.output_length(length)
  valid = (jnp.arange(targets.shape[1]) < out_len)[None, :]
  return {
    'inputs': inputs.astype(jnp.int32),
    'targets': targets.astype(jnp.int32),
    'mask': mask.astype(jnp.float32),
    'output_valid': jnp.broadcast_to(valid, targets.shape).astype(jnp.float32),
    'length': length,
    'output_length': jnp.asarray(out_len, jnp.int32),
  }


# The arrays of a padded batch and the width each is padded to: inputs to Lmax, the
# output arrays to output_length(Lmax); `length` and `output_length` are scalars.
_PADDED_TO_OUTPUT = ('targets', 'mask', 'output_valid')


def widen(task: Task, batch: Batch, max_length: int, xp: Any = jnp) -> Batch:
  """A padded batch (the module's convention) padded further, to `max_length`.

  What is appended is what a sampler writes past the real length (zeros), so the result
  is a valid batch of width `max_length` with the same examples; any leading axes (a
  sub-batch axis) are kept. `xp` is `jnp` inside a program or `numpy` on the host.

  Example: a batch of even_pairs padded to 8 (inputs [B, 8], targets [B, 1]) widened to
  16 -> inputs [B, 16] (zeros in columns 8..15), targets [B, 1].
  """
  out = int(task.output_length(max_length))

  def pad(name, x):
    width = max_length if name == 'inputs' else out if name in _PADDED_TO_OUTPUT else None
    if width is None or x.shape[-1] == width:
      return x
    return xp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, width - x.shape[-1])])

  return {name: pad(name, x) for name, x in batch.items()}


# ========================================================================= helpers
def positions(width: int) -> Array:
  """int32 [1, width]: 0, 1, ..., width - 1."""
  return jnp.arange(width, dtype=jnp.int32)[None, :]


def cls_output(y: Array) -> tuple[Array, Array]:
  """Classification target [B] -> (targets [B, 1], all-ones mask [B, 1])."""
  y = y.astype(jnp.int32)[:, None]
  return y, jnp.ones(y.shape, jnp.float32)


def seq_output(y: Array, out_len: Any) -> tuple[Array, Array]:
  """Unmasked sequence target: zero past `out_len`, mask = 1 on the real outputs."""
  valid = jnp.broadcast_to(positions(y.shape[1]) < out_len, y.shape)
  return jnp.where(valid, y, 0).astype(jnp.int32), valid.astype(jnp.float32)


def terminated_output(bits: Array, bits_len: Any, width: int) -> tuple[Array, Array]:
  """`bits[:bits_len]`, then the terminator 2, then zeros, to `width`; mask up to the 2.

  Args:
    bits: int32 [B, N] (N >= width is cropped, N < width is zero-padded).
    bits_len: int32 [B] (or scalar), the number of leading entries to keep.
    width: the output width.
  """
  batch, n = bits.shape
  if n < width:
    bits = jnp.pad(bits, ((0, 0), (0, width - n)))
  bits = bits[:, :width]
  pos = positions(width)
  bits_len = jnp.broadcast_to(jnp.asarray(bits_len, jnp.int32).reshape(-1, 1), (batch, 1))
  y = jnp.where(pos < bits_len, bits, jnp.where(pos == bits_len, 2, 0))
  return y.astype(jnp.int32), (pos <= bits_len).astype(jnp.float32)


def take_col(x: Array, index: Any) -> Array:
  """x[:, index] for a traced scalar index (clipped into range)."""
  return lax.dynamic_index_in_dim(x, jnp.clip(index, 0, x.shape[1] - 1), axis=1, keepdims=False)


def take_per_row(x: Array, index: Array) -> Array:
  """x[b, index[b]] for int index [B] (clipped into range)."""
  index = jnp.clip(index, 0, x.shape[1] - 1)
  return jnp.take_along_axis(x, index[:, None], axis=1)[:, 0]


def shift_right(x: Array, shift: Any) -> Array:
  """y[:, i] = x[:, i - shift] (0 for i < shift); `shift` is a traced scalar in [0, N]."""
  n = x.shape[1]
  padded = jnp.concatenate([jnp.zeros_like(x), x], axis=1)
  return lax.dynamic_slice_in_dim(padded, n - shift, n, axis=1)


def shift_left(x: Array, shift: Any) -> Array:
  """y[:, i] = x[:, i + shift] (0 past the end); `shift` is a traced scalar in [0, N]."""
  n = x.shape[1]
  padded = jnp.concatenate([x, jnp.zeros_like(x)], axis=1)
  return lax.dynamic_slice_in_dim(padded, shift, n, axis=1)


def shift_left_rows(x: Array, shift: Array) -> Array:
  """Per-row shift: y[b, i] = x[b, i + shift[b]] (0 past the end)."""
  idx = positions(x.shape[1]) + shift[:, None]
  y = jnp.take_along_axis(x, jnp.clip(idx, 0, x.shape[1] - 1), axis=1)
  return jnp.where(idx < x.shape[1], y, 0)


def cumulative(op, x: Array, identity: int, reverse: bool = False) -> Array:
  """Inclusive scan carry_i = op(carry_{i-1}, x[:, i]) along axis 1 of x [B, N]
  (from the right if `reverse`), starting from `identity`; `op` need not be associative.

  A sequential `lax.scan` over positions with [B]-vectors: on CPU it is an order of
  magnitude faster than XLA's cumulative reductions (`jnp.cumsum`, `lax.cummax`).
  """

  def step(carry, column):
    carry = op(carry, column)
    return carry, carry

  init = jnp.full(x.shape[:1], identity, x.dtype)
  _, out = lax.scan(step, init, x.T, reverse=reverse)
  return out.T


# ------------------------------------------------------------------------- random
def words32(key: Array, count: int) -> Array:
  """`count` iid uniform uint32 words: `jax.random.bits`, drawn at an even size.

  Threefry makes words in pairs; at an odd size XLA's CPU program was measured 3-5x slower
  than at the even size just above (28,445 words: 1.3 ms, 28,444: 0.25 ms), so the
  draw is rounded up to even and sliced.
  """
  return jax.random.bits(key, (count + count % 2,), jnp.uint32)[:count]


def uniform_digits(key: Array, shape: tuple[int, ...], base: int) -> Array:
  """Exact iid uniform draws from {0..base-1}, int32 of `shape`.

  A power-of-two base slices each 32-bit word into log2(base)-bit fields. Any other base
  packs the most base-`base` digits per word, k, whose rejection rate (the words at or
  above the largest multiple of base**k below 2**32) is at most 2**-10 (base 5: 9 digits,
  rejection 1e-5; base 3: 13 digits, 3e-4); rejected words are redrawn (`_accepted_words`),
  so every digit is exactly uniform. One word per k digits instead of two per digit
  (`jax.random.randint`) matters because threefry dominates the simple samplers.
  """
  count = math.prod(shape)
  if base == 1:
    return jnp.zeros(shape, jnp.int32)
  if base & (base - 1) == 0:
    width = base.bit_length() - 1
    per_word = 32 // width
    words = words32(key, -(-count // per_word))
    shifts = jnp.arange(per_word, dtype=jnp.uint32) * width
    digits = (words[None, :] >> shifts[:, None]) & (base - 1)
  else:
    per_word = max(k for k in range(1, 33) if base**k <= 2**32 and 2**32 % base**k <= 2**22)
    block = base**per_word
    limit = (2**32 // block) * block
    words = _accepted_words(key, -(-count // per_word), limit)
    words = words % jnp.uint32(block) if limit < 2**32 else words
    # Division by scalar constants compiles to multiply-shift (vectorised); by an array of
    # powers it would be a scalar division per digit, the slowest part of the simple tasks.
    digits = jnp.stack(
      [(words // jnp.uint32(base**j)) % jnp.uint32(base) for j in range(per_word)], axis=0
    )
  # Digit j of word w lands at flat position j * W + w (any bijection gives iid digits);
  # this one is a plain concatenation, where w * k + j needed a transposing copy.
  return digits.reshape(-1)[:count].reshape(shape).astype(jnp.int32)


def _accepted_words(key: Array, count: int, limit: int) -> Array:
  """`count` iid uniform uint32 words below `limit` (rejection rate <= 2**-10), exactly.

  Round r draws a fresh array of `count` words and fills the slots still rejected; each
  slot thus ends with the first accepted word of its own iid sequence. With the packing of
  `uniform_digits` the loop body rarely runs at all.
  """
  limit = jnp.uint32(limit)
  words = words32(jax.random.fold_in(key, 0), count)

  def body(state):
    words, i = state
    fresh = words32(jax.random.fold_in(key, i), count)
    return jnp.where(words >= limit, fresh, words), i + 1

  words, _ = lax.while_loop(lambda s: jnp.any(s[0] >= limit), body, (words, jnp.int32(1)))
  return words


def randbelow(hi: Array, lo: Array, n: Array) -> Array:
  """(hi * 2**32 + lo) mod n for uint32 words hi, lo and int n >= 1: uniform on {0..n-1}
  up to a relative bias below n / 2**64 (the method of `jax.random.randint`)."""
  n = jnp.maximum(n, 1).astype(jnp.uint32)
  base = (jnp.uint32(0xFFFFFFFF) % n + 1) % n  # 2**32 mod n
  return (((hi % n) * base + lo % n) % n).astype(jnp.int32)


def uniform_below(key: Array, n: Array) -> Array:
  """One draw from {0..n[b]-1} per entry of the int array `n` (see `randbelow`)."""
  words = jax.random.bits(key, (2,) + tuple(n.shape), jnp.uint32)
  return randbelow(words[0], words[1], n)


def redraw_until(key: Array, draw, bad_rows) -> Array:
  """Rejection sampling per row: `draw(key) -> x [B, ...]` until `bad_rows(x)` is False.

  Exact: each row keeps the first of its iid draws that is not rejected.
  """
  x = draw(jax.random.fold_in(key, 0))
  bad = bad_rows(x)

  def body(state):
    x, bad, i = state
    new = draw(jax.random.fold_in(key, i))
    x = jnp.where(bad.reshape((-1,) + (1,) * (x.ndim - 1)), new, x)
    return x, bad & bad_rows(new), i + 1

  x, _, _ = lax.while_loop(lambda s: jnp.any(s[1]), body, (x, bad, jnp.int32(1)))
  return x
