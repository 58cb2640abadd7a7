"""The task-hinting study's shared pieces (tasks/hinting.py): the base class `HintingTask`,
the vocabulary text, random helpers and batch assembly."""

from __future__ import annotations

import abc
import dataclasses
import functools
import numbers
from typing import Any, ClassVar, Sequence

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from tasks import base

Array = jax.Array
Batch = dict[str, Array]
Example = tuple[Array, Array, Array]  # tokens [W], prompt_length [], length []
Rows = tuple[Array, Array, Array, Array]  # prompt [P], its length, answer [A], its length

PAD = 0
# The increment family's ids above the digits.
INCREMENT_SEP, UP = 10, 11
REP_RANGE = (2, 5)  # the paper's r of rep(i, r), and of the repeats mixed into training


# ========================================================================= text
def decode(task: HintingTask, ids: Sequence[int] | Array) -> str:
  """The text of a sequence of token ids of `task`'s family, tokens separated by spaces.

  Examples: sorting family, decode(task, [17, 5, 101, 5, 17]) == '17 5 ⊥ 5 17';
  increment family, decode(task, [1, 2, 3, 10, 4, 11, 0]) == '1 2 3 ⊥ 4 ↑ 0'.
  """
  shown = _symbols(task)
  out = []
  for i in np.asarray(ids).reshape(-1).tolist():
    if not 0 <= i < len(shown):
      raise ValueError(
        f'token id {i} is not in the vocabulary of {task.name} (ids 0..{len(shown) - 1})'
      )
    out.append(shown[i])
  return ' '.join(out)


def encode(task: HintingTask, text: str) -> list[int]:
  """The ids of `text` (tokens separated by spaces), the inverse of `decode`.

  Example: sorting family, encode(task, '17 5 ⊥ 5 17') == [17, 5, 101, 5, 17].
  """
  index = {s: i for i, s in enumerate(_symbols(task))}
  try:
    return [index[piece] for piece in text.split()]
  except KeyError as e:
    raise ValueError(f'{e.args[0]!r} is not a token of {task.name}') from None


def _symbols(task: HintingTask) -> list[str]:
  """The rendering of every id of `task`'s vocabulary, by id."""
  if task.family == 'sorting':
    return ['_'] + [str(v) for v in range(1, task.num_values + 1)] + ['⊥', '⊤']
  return [str(d) for d in range(10)] + ['⊥', '↑']


# ========================================================================= random helpers
# One example at a time: arrays are 1-D [width] (vmapped over the batch by the samplers).
def positions(width: int) -> Array:
  """int32 [width]: 0, 1, ..., width - 1."""
  return jnp.arange(width, dtype=jnp.int32)


def below(key: Array, k: Any) -> Array:
  """int32 []: uniform in 0..k-1 (k an int or traced int32 scalar, >= 1)."""
  return base.uniform_below(key, jnp.asarray(k, jnp.int32))


def coin(key: Array, share: float) -> Array:
  """bool []: True with probability `share`."""
  return jax.random.uniform(key) < share


def random_order(key: Array, count: Any, width: int) -> Array:
  """A permutation of 0..width-1 whose first `count` entries shuffle 0..count-1 uniformly.

  The entries count..width-1 stay in place, so `x[random_order(key, n, W)]` shuffles the first
  n entries of x [W] and keeps the rest. Each position sorts by 64 random bits (ties, of
  probability below count**2 / 2**65, go by position).

  Args:
    key: a jax.random key.
    count: how many leading positions take part (int or traced int32 scalar, <= width).
    width: the static length.

  Returns:
    int32 [width]. Example: count 3, width 5 -> e.g. [2, 0, 1, 3, 4].
  """
  hi, lo = jax.random.bits(key, (2, width), jnp.uint32)
  pos = positions(width)
  outside = (pos >= count).astype(jnp.int32)
  # Outside positions also compare equal on the random words, so they keep their order.
  hi, lo = jnp.where(outside == 1, 0, hi), jnp.where(outside == 1, 0, lo)
  return lax.sort((outside, hi, lo, pos), num_keys=4)[-1]


def uniform_values(key: Array, n: Any, width: int, num_values: int) -> Array:
  """int32 [width]: n values iid uniform in 1..num_values, then zeros."""
  values = 1 + base.uniform_digits(key, (width,), num_values)
  return jnp.where(positions(width) < n, values, PAD)


def repeated_values(key: Array, n: Any, r: Any, width: int, num_values: int) -> Array:
  """rep(n, r) as int32 [width], zeros after the first n entries.

  floor(n / r) distinct values, drawn uniformly without replacement from 1..num_values (the
  first of a random order of them), each written r times; the other n - r floor(n / r)
  entries iid uniform in 1..num_values; then the n entries shuffled uniformly. n and r may be
  traced; floor(n / r) <= num_values is the caller's to ensure.

  Example: n = 7, r = 3 -> two distinct values three times each and one more value, e.g.
  [40, 9, 40, 77, 9, 40, 9] (40 and 9 the blocks, 77 the remainder).
  """
  k_distinct, k_rest, k_order = jax.random.split(key, 3)
  distinct = 1 + random_order(k_distinct, num_values, num_values)
  pos = positions(width)
  blocks = jnp.take(distinct, jnp.minimum(pos // r, num_values - 1))
  ordered = jnp.where(pos < (n // r) * r, blocks, uniform_values(k_rest, n, width, num_values))
  return ordered[random_order(k_order, n, width)]


def repeats(distribution: str) -> int:
  """r of a repetition distribution: 'rep3' -> 3; 'distinct' -> 1 (rep(n, 1))."""
  return 1 if distribution == 'distinct' else int(distribution[3:])


def fit(x: Array, width: int) -> Array:
  """x [N] cropped or zero-padded on the right to [width]."""
  n = x.shape[0]
  return x[:width] if n >= width else jnp.pad(x, (0, width - n))


def _assemble(prompt: Array, prompt_length: Array, answer: Array, answer_length: Array) -> Example:
  """tokens [P + A]: the prompt, then the answer from column prompt_length, then zeros."""
  width_a = answer.shape[0]
  pos = positions(prompt.shape[0] + width_a)
  tail = jnp.take(answer, jnp.clip(pos - prompt_length, 0, width_a - 1))
  tokens = jnp.where(
    pos < prompt_length,
    jnp.pad(prompt, (0, width_a)),
    jnp.where(pos < prompt_length + answer_length, tail, PAD),
  )
  return (
    tokens.astype(jnp.int32),
    jnp.asarray(prompt_length, jnp.int32),
    jnp.asarray(prompt_length + answer_length, jnp.int32),
  )


# ========================================================================= tasks
@dataclasses.dataclass(frozen=True)
class HintingTask(abc.ABC):
  """Base class: a task samples `prompt answer` sequences of one input length n.

  Subclasses set the class constants and implement the vocabulary, the sizes and `_rows`.
  A task of the lengths kind of evaluation (a hint task trains beside a main one): it has
  what that kind reads off a task (`posenc.kinds.lengths.protocol.LengthsTask`), which is
  checked when a run of it is built.

  Attributes:
    name: the registry name, e.g. 'sorting_hinted'.
    level: 'hinting'.
    min_length, short_max, short_share: the training length law (module docstring).
    family: 'sorting' or 'increment'; tasks of one family share a vocabulary.
    OPTIONS: the fields `tasks.get(name, options)` may set.
    HINTS: a main task's valid hint tasks; () for a hint task.
    DISTRIBUTIONS: the test distributions of `sample` ('uniform' first, the default).
  """

  name: str = ''
  level: str = 'hinting'
  protocol: ClassVar[str] = 'lengths'
  min_length: int = 2
  short_max: int = 5
  short_share: float = 0.8
  family: ClassVar[str] = ''
  OPTIONS: ClassVar[tuple[str, ...]] = ('min_length', 'short_max', 'short_share')
  HINTS: ClassVar[tuple[str, ...]] = ()
  DISTRIBUTIONS: ClassVar[tuple[str, ...]] = ('uniform',)

  def __post_init__(self):
    if not self.min_input_length <= self.min_length <= self.short_max:
      raise ValueError(
        f'{self.name}: need {self.min_input_length} <= min_length <= short_max, '
        f'got min_length={self.min_length}, short_max={self.short_max}'
      )
    check_share(self.name, 'short_share', self.short_share)

  # ----------------------------------------------------------------------- vocabulary
  @property
  @abc.abstractmethod
  def vocab_size(self) -> int:
    """Token ids are 0..vocab_size-1."""

  @property
  @abc.abstractmethod
  def sep_id(self) -> int:
    """The id of ⊥, which ends the input."""

  # ----------------------------------------------------------------------- sizes
  @property
  def min_input_length(self) -> int:
    """The shortest input length n that can be sampled."""
    return 1

  @abc.abstractmethod
  def max_prompt(self, n: int) -> int:
    """Prompt tokens (⊥ included) of any example of input length n (and any shorter one)."""

  @abc.abstractmethod
  def max_answer(self, n: int) -> int:
    """Answer tokens of any example of input length n (and any shorter one)."""

  def check_length(self, n: int, distribution: str = 'uniform') -> None:
    """Raises ValueError when input length n cannot be sampled from `distribution`."""
    self._check_distribution(distribution)
    if n < self.min_input_length:
      raise ValueError(
        f'{self.name}: length {n} is too short; valid lengths: n >= {self.min_input_length}'
      )

  def _check_distribution(self, distribution: str) -> None:
    if distribution not in self.DISTRIBUTIONS:
      raise ValueError(
        f'{self.name}: unknown distribution {distribution!r}; valid '
        f'distributions: {", ".join(self.DISTRIBUTIONS)}'
      )

  def _check_widths(self, n: int, prompt_width: int, answer_width: int) -> None:
    need_p, need_a = self.max_prompt(n), self.max_answer(n)
    if prompt_width < need_p or answer_width < need_a:
      raise ValueError(
        f'{self.name}: length {n} needs prompt_width >= {need_p} and '
        f'answer_width >= {need_a}, got {prompt_width} and {answer_width}'
      )

  def check_train(self, max_length: int, prompt_width: int, answer_width: int) -> None:
    """Raises ValueError when the training law at `max_length` cannot fill these widths."""
    if max_length < self.min_length:
      raise ValueError(
        f'{self.name}: max_length {max_length} is below min_length='
        f'{self.min_length}; valid: max_length >= {self.min_length}'
      )
    self._check_widths(max_length, prompt_width, answer_width)

  # ----------------------------------------------------------------------- one example
  def example(
    self, key: Array, n: Any, distribution: str, prompt_width: int, answer_width: int
  ) -> Example:
    """One example of input length n (int or traced int32 scalar) from a test distribution.

    Returns:
      (tokens int32 [prompt_width + answer_width], prompt_length int32 [], length int32 []).
    """
    self._check_distribution(distribution)
    n = jnp.asarray(n, jnp.int32)
    return _assemble(*self._rows(key, n, distribution, prompt_width, answer_width))

  def example_train(
    self, key: Array, max_length: Any, prompt_width: int, answer_width: int
  ) -> Example:
    """One example of the training law (its length drawn by `train_length`); as `example`."""
    k_length, k_rows = jax.random.split(key)
    n = self.train_length(k_length, max_length)
    return _assemble(*self._train_rows(k_rows, n, prompt_width, answer_width))

  def train_length(self, key: Array, max_length: Any) -> Array:
    """int32 []: an input length of the training law (module docstring).

    Example: defaults of the sorting family, max_length 20 -> 2..5 with probability 0.8
    (each 0.2), else 6..20 (each 0.2 / 15).
    """
    k_short, k_long, k_pick = jax.random.split(key, 3)
    top = jnp.minimum(self.short_max, max_length)
    short = self.min_length + below(k_short, jnp.maximum(top - self.min_length + 1, 1))
    long = self.short_max + 1 + below(k_long, jnp.maximum(max_length - self.short_max, 1))
    use_long = (max_length > self.short_max) & ~coin(k_pick, self.short_share)
    return jnp.where(use_long, long, short).astype(jnp.int32)

  @abc.abstractmethod
  def _rows(
    self, key: Array, n: Array, distribution: str, prompt_width: int, answer_width: int
  ) -> Rows:
    """(prompt [prompt_width], its length, answer [answer_width], its length) of length n.

    Zeros past each length.
    """

  def _train_rows(self, key: Array, n: Array, prompt_width: int, answer_width: int) -> Rows:
    """`_rows` of the training law given the drawn n (default: the 'uniform' test law)."""
    return self._rows(key, n, 'uniform', prompt_width, answer_width)

  # ----------------------------------------------------------------------- batches
  def sample(
    self,
    key: Array,
    batch_size: int,
    n: Any,
    prompt_width: int,
    answer_width: int,
    distribution: str = 'uniform',
  ) -> Batch:
    """A batch in which every example has input length n.

    Args:
      key: a jax.random key (example i uses `jax.random.split(key, batch_size)[i]`).
      batch_size: B (static).
      n: the input length, an int or a traced int32 scalar (one compiled program serves
        every n); checked with `check_length` and against the widths when it is an int.
      prompt_width, answer_width: static widths, >= max_prompt(n) and max_answer(n).
      distribution: one of `DISTRIBUTIONS` (static).

    Returns:
      {'tokens' [B, prompt_width + answer_width], 'prompt_length' [B], 'length' [B]}.
    """
    self._check_distribution(distribution)
    if isinstance(n, numbers.Integral):
      self.check_length(int(n), distribution)
      self._check_widths(int(n), prompt_width, answer_width)
    return _sample_jit(self, key, batch_size, n, prompt_width, answer_width, distribution)

  def sample_train(
    self, key: Array, batch_size: int, max_length: int, prompt_width: int, answer_width: int
  ) -> Batch:
    """A training batch: `sample_train_keys(jax.random.split(key, batch_size), ...)`."""
    return self.sample_train_keys(
      jax.random.split(key, batch_size), max_length, prompt_width, answer_width
    )

  def sample_train_keys(
    self, keys: Array, max_length: int, prompt_width: int, answer_width: int
  ) -> Batch:
    """A training batch of one example per key of `keys` [B] (`example_train`).

    A fixed training set of D examples is D keys, e.g. example i's key
    fold_in(dataset_key, i). max_length (static) is the longest training length; the widths
    must hold it (checked). Returns the same dict as `sample`.
    """
    self.check_train(max_length, prompt_width, answer_width)
    return _sample_train_keys_jit(self, keys, max_length, prompt_width, answer_width)


def check_share(name: str, field: str, value: float) -> None:
  if not 0.0 <= value <= 1.0:
    raise ValueError(f'{name}: {field} must be in [0, 1], got {value}')


def _as_batch(example: Example) -> Batch:
  tokens, prompt_length, length = example
  return {'tokens': tokens, 'prompt_length': prompt_length, 'length': length}


@functools.partial(jax.jit, static_argnums=(0, 2, 4, 5, 6))
def _sample_jit(
  task: HintingTask,
  key: Array,
  batch_size: int,
  n: Any,
  prompt_width: int,
  answer_width: int,
  distribution: str,
) -> Batch:
  n = jnp.asarray(n, jnp.int32)
  keys = jax.random.split(key, batch_size)
  return _as_batch(
    jax.vmap(lambda k: task.example(k, n, distribution, prompt_width, answer_width))(keys)
  )


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4))
def _sample_train_keys_jit(
  task: HintingTask, keys: Array, max_length: int, prompt_width: int, answer_width: int
) -> Batch:
  return _as_batch(
    jax.vmap(lambda k: task.example_train(k, max_length, prompt_width, answer_width))(keys)
  )


# ------------------------------------------------------------------------- sorting family
