"""The task-hinting study's tasks (Awasthi & Gupta 2023), as on-device samplers.

"Improving Length-Generalization in Transformers via Task Hinting": a main task (sorting or
increment) trained together with an auxiliary "hint" task on one shared backbone. Every
example is one decoder sequence `prompt answer`, with no EOS token (the paper has none: the
evaluator decodes exactly as many tokens as the answer has).

    from tasks import hinting
    task = hinting.TASKS['sorting_hinted']
    width_p, width_a = task.max_prompt(20), task.max_answer(20)            # 21, 20
    batch = task.sample_train(key, 512, 20, width_p, width_a)   # the 80/20 length law
    batch = task.sample(key, 64, n, 101, 100, 'rep3')           # every example of length n
    hinting.decode(task, batch['tokens'][0, :batch['length'][0]])  # e.g. '17 5 92 5 ⊥ 5 5 17 92'

Tasks (n is the input length; ⊥ ends the input):

    family     task            prompt               answer
    sorting    sorting_hinted  σ0 … σn-1 ⊥          the non-decreasing sort of σ (n tokens)
               successor       σ0 … σn-1 ⊥ a        succ(a), 1 token (see `Successor`)
               count           σ0 … σn-1 ⊥          the rarer of σ's two values, 1 token
               fill            v … v (n) ⊥ v … v (j) v … v (n - j)
    increment  increment       x, MSB first, ⊥      x + 1, least-significant digit first
               carry           x, MSB first, ⊥      per digit of x + 1: digit ↑ carry-out

Vocabularies (tasks of one family share theirs, so one backbone can train them together):

    sorting    id 0 PAD, 1..V the values (value v is id v), V + 1 ⊥, V + 2 ⊤ ("no successor");
               vocab_size V + 3 = 103 for the default V = num_values = 100: the paper's q = 103
               (100 values, ⊥, PAD and a token it never names; ours is ⊤).
    increment  ids 0..9 the digits, 10 ⊥, 11 ↑; vocab_size 12. Past `length` the filler 0 is
               padding (it is a digit too: the lengths mask it).

`decode(task, ids)` renders a sequence: values as numbers, separated by spaces, and '⊥',
'⊤', '↑' (PAD as '_'); `encode(task, text)` is its inverse.

Batches. Every batch sampler returns

    tokens        int32 [B, prompt_width + answer_width]  prompt from column 0, the answer
                  right after it (from column prompt_length), zeros after `length`
    prompt_length int32 [B]   the prompt, ⊥ (and successor's query a, fill's prefix) included
    length        int32 [B]   prompt + answer tokens

Widths are static; the input length n of `sample` may be traced (one compiled program serves
every n). `max_prompt(n)` / `max_answer(n)` give widths that hold any example of length n;
a traced n that does not fit the widths is not detected (truncated sequences). Examples are
drawn one at a time (`example`, `example_train`) and vmapped over per-example keys, so a fixed
training set of D examples is just D keys (`sample_train_keys`).

Training length law (options `min_length`, `short_max`, `short_share`): with probability
short_share (0.8) n is uniform in min_length..short_max, else uniform in
short_max + 1..max_length, max_length being the trainer's (20 in the paper's sorting, 10 in
its increment). When max_length <= short_max every n is uniform in min_length..max_length.
Defaults: sorting family 2..5 ("80% of examples have n in {2..5}"), count 3..5 (it needs
n >= 3), increment family 1..4 ("80% have length <= 4").

Our choices where the paper is silent (digest: ../shared/papers/awasthi2023_task_hinting.md):
  * rep(i, r) is shuffled uniformly after it is built; sorting's training set mixes it in
    with probability `repeat_share` (the paper's "modified" set: 0.1), r uniform in
    2..min(5, i) (r = 2 when i = 1, which makes rep(1, 2) a single uniform value).
  * successor's layout `σ ⊥ a -> succ(a)` is a sorting prefix with one output token; a
    duplicated a is its own successor; a unique maximum is never asked ('exclude') or
    answered ⊤ ('token').
  * count's rarer value occurs c times, c uniform in 1..n-1 without n/2; fill's prefix j is
    uniform in 0..n-1.
  * increment's numbers have no leading zero (1..9 for n = 1); a run of trailing 9s leaves
    the digit above it uniform (so it may be 9 and the run longer than drawn).

Randomness: values and digits are exact uniform draws (`base.uniform_digits`); draws with a
per-example range (a length, a count, a position) use 64 random bits reduced mod k
(`base.uniform_below`), biased by less than k / 2**64; shuffles and draws without
replacement sort by 64 random bits per position (`random_order`); Bernoulli choices compare
a float32 uniform with the share.
"""
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
from tasks import digits as digits_lib

Array = jax.Array
Batch = dict[str, Array]
Example = tuple[Array, Array, Array]       # tokens [W], prompt_length [], length []
Rows = tuple[Array, Array, Array, Array]   # prompt [P], its length, answer [A], its length

PAD = 0
# The increment family's ids above the digits.
INCREMENT_SEP, UP = 10, 11
_REP_RANGE = (2, 5)     # the paper's r of rep(i, r), and of the repeats mixed into training


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
      raise ValueError(f'token id {i} is not in the vocabulary of {task.name} '
                       f'(ids 0..{len(shown) - 1})')
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
def _positions(width: int) -> Array:
  """int32 [width]: 0, 1, ..., width - 1."""
  return jnp.arange(width, dtype=jnp.int32)


def _below(key: Array, k: Any) -> Array:
  """int32 []: uniform in 0..k-1 (k an int or traced int32 scalar, >= 1)."""
  return base.uniform_below(key, jnp.asarray(k, jnp.int32))


def _coin(key: Array, share: float) -> Array:
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
  pos = _positions(width)
  outside = (pos >= count).astype(jnp.int32)
  # Outside positions also compare equal on the random words, so they keep their order.
  hi, lo = jnp.where(outside == 1, 0, hi), jnp.where(outside == 1, 0, lo)
  return lax.sort((outside, hi, lo, pos), num_keys=4)[-1]


def uniform_values(key: Array, n: Any, width: int, num_values: int) -> Array:
  """int32 [width]: n values iid uniform in 1..num_values, then zeros."""
  values = 1 + base.uniform_digits(key, (width,), num_values)
  return jnp.where(_positions(width) < n, values, PAD)


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
  pos = _positions(width)
  blocks = jnp.take(distinct, jnp.minimum(pos // r, num_values - 1))
  ordered = jnp.where(pos < (n // r) * r, blocks, uniform_values(k_rest, n, width, num_values))
  return ordered[random_order(k_order, n, width)]


def _repeats(distribution: str) -> int:
  """r of a repetition distribution: 'rep3' -> 3; 'distinct' -> 1 (rep(n, 1))."""
  return 1 if distribution == 'distinct' else int(distribution[3:])


def _fit(x: Array, width: int) -> Array:
  """x [N] cropped or zero-padded on the right to [width]."""
  n = x.shape[0]
  return x[:width] if n >= width else jnp.pad(x, (0, width - n))


def _assemble(prompt: Array, prompt_length: Array, answer: Array,
              answer_length: Array) -> Example:
  """tokens [P + A]: the prompt, then the answer from column prompt_length, then zeros."""
  width_a = answer.shape[0]
  pos = _positions(prompt.shape[0] + width_a)
  tail = jnp.take(answer, jnp.clip(pos - prompt_length, 0, width_a - 1))
  tokens = jnp.where(pos < prompt_length, jnp.pad(prompt, (0, width_a)),
                     jnp.where(pos < prompt_length + answer_length, tail, PAD))
  return (tokens.astype(jnp.int32), jnp.asarray(prompt_length, jnp.int32),
          jnp.asarray(prompt_length + answer_length, jnp.int32))


# ========================================================================= tasks
@dataclasses.dataclass(frozen=True)
class HintingTask(abc.ABC):
  """Base class: a task samples `prompt answer` sequences of one input length n.

  Subclasses set the class constants and implement the vocabulary, the sizes and `_rows`.

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
      raise ValueError(f'{self.name}: need {self.min_input_length} <= min_length <= short_max, '
                       f'got min_length={self.min_length}, short_max={self.short_max}')
    _check_share(self.name, 'short_share', self.short_share)

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
      raise ValueError(f'{self.name}: length {n} is too short; valid lengths: '
                       f'n >= {self.min_input_length}')

  def _check_distribution(self, distribution: str) -> None:
    if distribution not in self.DISTRIBUTIONS:
      raise ValueError(f'{self.name}: unknown distribution {distribution!r}; valid '
                       f'distributions: {", ".join(self.DISTRIBUTIONS)}')

  def _check_widths(self, n: int, prompt_width: int, answer_width: int) -> None:
    need_p, need_a = self.max_prompt(n), self.max_answer(n)
    if prompt_width < need_p or answer_width < need_a:
      raise ValueError(f'{self.name}: length {n} needs prompt_width >= {need_p} and '
                       f'answer_width >= {need_a}, got {prompt_width} and {answer_width}')

  def check_train(self, max_length: int, prompt_width: int, answer_width: int) -> None:
    """Raises ValueError when the training law at `max_length` cannot fill these widths."""
    if max_length < self.min_length:
      raise ValueError(f'{self.name}: max_length {max_length} is below min_length='
                       f'{self.min_length}; valid: max_length >= {self.min_length}')
    self._check_widths(max_length, prompt_width, answer_width)

  # ----------------------------------------------------------------------- one example
  def example(self, key: Array, n: Any, distribution: str, prompt_width: int,
              answer_width: int) -> Example:
    """One example of input length n (int or traced int32 scalar) from a test distribution.

    Returns:
      (tokens int32 [prompt_width + answer_width], prompt_length int32 [], length int32 []).
    """
    self._check_distribution(distribution)
    n = jnp.asarray(n, jnp.int32)
    return _assemble(*self._rows(key, n, distribution, prompt_width, answer_width))

  def example_train(self, key: Array, max_length: Any, prompt_width: int,
                    answer_width: int) -> Example:
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
    short = self.min_length + _below(k_short, jnp.maximum(top - self.min_length + 1, 1))
    long = self.short_max + 1 + _below(k_long, jnp.maximum(max_length - self.short_max, 1))
    use_long = (max_length > self.short_max) & ~_coin(k_pick, self.short_share)
    return jnp.where(use_long, long, short).astype(jnp.int32)

  @abc.abstractmethod
  def _rows(self, key: Array, n: Array, distribution: str, prompt_width: int,
            answer_width: int) -> Rows:
    """(prompt [prompt_width], its length, answer [answer_width], its length) of length n.

    Zeros past each length.
    """

  def _train_rows(self, key: Array, n: Array, prompt_width: int, answer_width: int) -> Rows:
    """`_rows` of the training law given the drawn n (default: the 'uniform' test law)."""
    return self._rows(key, n, 'uniform', prompt_width, answer_width)

  # ----------------------------------------------------------------------- batches
  def sample(self, key: Array, batch_size: int, n: Any, prompt_width: int,
             answer_width: int, distribution: str = 'uniform') -> Batch:
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

  def sample_train(self, key: Array, batch_size: int, max_length: int, prompt_width: int,
                   answer_width: int) -> Batch:
    """A training batch: `sample_train_keys(jax.random.split(key, batch_size), ...)`."""
    return self.sample_train_keys(jax.random.split(key, batch_size), max_length, prompt_width,
                                  answer_width)

  def sample_train_keys(self, keys: Array, max_length: int, prompt_width: int,
                        answer_width: int) -> Batch:
    """A training batch of one example per key of `keys` [B] (`example_train`).

    A fixed training set of D examples is D keys, e.g. example i's key
    fold_in(dataset_key, i). max_length (static) is the longest training length; the widths
    must hold it (checked). Returns the same dict as `sample`.
    """
    self.check_train(max_length, prompt_width, answer_width)
    return _sample_train_keys_jit(self, keys, max_length, prompt_width, answer_width)


def _check_share(name: str, field: str, value: float) -> None:
  if not 0.0 <= value <= 1.0:
    raise ValueError(f'{name}: {field} must be in [0, 1], got {value}')


def _as_batch(example: Example) -> Batch:
  tokens, prompt_length, length = example
  return {'tokens': tokens, 'prompt_length': prompt_length, 'length': length}


@functools.partial(jax.jit, static_argnums=(0, 2, 4, 5, 6))
def _sample_jit(task: HintingTask, key: Array, batch_size: int, n: Any, prompt_width: int,
                answer_width: int, distribution: str) -> Batch:
  n = jnp.asarray(n, jnp.int32)
  keys = jax.random.split(key, batch_size)
  return _as_batch(jax.vmap(
      lambda k: task.example(k, n, distribution, prompt_width, answer_width))(keys))


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4))
def _sample_train_keys_jit(task: HintingTask, keys: Array, max_length: int, prompt_width: int,
                           answer_width: int) -> Batch:
  return _as_batch(jax.vmap(
      lambda k: task.example_train(k, max_length, prompt_width, answer_width))(keys))


# ------------------------------------------------------------------------- sorting family
@dataclasses.dataclass(frozen=True)
class _SortingFamily(HintingTask):
  """Tasks over values 1..num_values (module docstring: vocabulary).

  Attributes:
    num_values: V, the values 1..V (ids 1..V); >= 2.
  """
  num_values: int = 100
  family: ClassVar[str] = 'sorting'
  OPTIONS: ClassVar[tuple[str, ...]] = HintingTask.OPTIONS + ('num_values',)

  def __post_init__(self):
    # Count needs two distinct values; one value would make every task trivial.
    if self.num_values < 2:
      raise ValueError(f'{self.name}: num_values must be >= 2, got {self.num_values}')
    super().__post_init__()

  @property
  def vocab_size(self) -> int:
    return self.num_values + 3

  @property
  def sep_id(self) -> int:
    return self.num_values + 1

  @property
  def top_id(self) -> int:
    """The id of ⊤: successor's answer when a unique maximum is asked ('token' mode)."""
    return self.num_values + 2


@dataclasses.dataclass(frozen=True)
class _RepeatedInputs(_SortingFamily):
  """Sorting's inputs: uniform values, rep(n, r) mixed in with probability repeat_share.

  Attributes:
    repeat_share: the share of training inputs drawn as rep(n, r), r uniform in
      2..min(5, n) (the paper's "modified" training set has 10% "non-trivial repetitions").
  """
  repeat_share: float = 0.0
  OPTIONS: ClassVar[tuple[str, ...]] = _SortingFamily.OPTIONS + ('repeat_share',)

  def __post_init__(self):
    super().__post_init__()
    _check_share(self.name, 'repeat_share', self.repeat_share)

  def check_train(self, max_length, prompt_width, answer_width):
    super().check_train(max_length, prompt_width, answer_width)
    if self.repeat_share > 0:     # r = 2 asks for the most distinct values
      self._check_repeats(max_length, _REP_RANGE[0])

  def _check_repeats(self, n: int, r: int) -> None:
    if n // r > self.num_values:
      raise ValueError(f'{self.name}: rep{r} at length {n} needs {n // r} distinct values, '
                       f'more than num_values={self.num_values}; valid lengths for rep{r}: '
                       f'n <= {r * self.num_values + r - 1}')

  def _test_values(self, key: Array, n: Array, distribution: str, width: int) -> Array:
    if distribution == 'uniform':
      return uniform_values(key, n, width, self.num_values)
    return repeated_values(key, n, _repeats(distribution), width, self.num_values)

  def _train_values(self, key: Array, n: Array, width: int) -> Array:
    k_uniform, k_repeat, k_r, k_pick = jax.random.split(key, 4)
    values = uniform_values(k_uniform, n, width, self.num_values)
    if self.repeat_share == 0:
      return values
    low, high = _REP_RANGE
    r = low + _below(k_r, jnp.maximum(jnp.minimum(n, high) - low + 1, 1))
    repeats = repeated_values(k_repeat, n, r, width, self.num_values)
    return jnp.where(_coin(k_pick, self.repeat_share), repeats, values)


@dataclasses.dataclass(frozen=True)
class SortingHinted(_RepeatedInputs):
  """Sort n values of 1..V, non-decreasing; the main task of the sorting family.

  Training inputs are iid uniform values (with replacement, so with duplicates), a share
  `repeat_share` of them rep(n, r) instead. Test distributions: 'uniform', 'rep2' .. 'rep5' =
  rep(n, r) (`repeated_values`), and 'distinct' = rep(n, 1), n distinct values (ours, not
  the paper's: it separates length generalization from the handling of duplicates).

  Example: `17 5 92 5 ⊥` answer `5 5 17 92`.
  """
  name: str = 'sorting_hinted'
  HINTS: ClassVar[tuple[str, ...]] = ('successor', 'count', 'fill')
  DISTRIBUTIONS: ClassVar[tuple[str, ...]] = ('uniform',) + tuple(
      f'rep{r}' for r in range(_REP_RANGE[0], _REP_RANGE[1] + 1)) + ('distinct',)

  def max_prompt(self, n):
    return n + 1

  def max_answer(self, n):
    return n

  def check_length(self, n, distribution='uniform'):
    super().check_length(n, distribution)
    if distribution != 'uniform':
      self._check_repeats(n, _repeats(distribution))

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    values = self._test_values(key, n, distribution, prompt_width)
    return self._sort(values, n, prompt_width, answer_width)

  def _train_rows(self, key, n, prompt_width, answer_width):
    return self._sort(self._train_values(key, n, prompt_width), n, prompt_width, answer_width)

  def _sort(self, values: Array, n: Array, prompt_width: int, answer_width: int) -> Rows:
    pos = _positions(prompt_width)
    valid = pos < n
    prompt = jnp.where(valid, values, jnp.where(pos == n, self.sep_id, PAD))
    # Absent entries sort last as V + 1 and are then cleared.
    ordered = jnp.sort(jnp.where(valid, values, self.num_values + 1))
    answer = _fit(jnp.where(valid, ordered, PAD), answer_width)
    return prompt, n + 1, answer, n


@dataclasses.dataclass(frozen=True)
class Successor(_RepeatedInputs):
  """The successor hint: `σ ⊥ a` -> the token after a in σ's sort (one answer token).

  σ follows sorting's training law (values, lengths and repeat_share). succ(a) is a itself
  when a occurs at least twice in σ, else the smallest element of σ greater than a: exactly
  what sorting's prefix `σ ⊥ a` asks for next when a is σ's smallest element. a is drawn
  uniformly over the positions of σ whose element has a successor, so a value is asked as
  often as it occurs.

  Examples: `5 9 5 ⊥ 5` -> `5`; `5 9 5 ⊥ 9` is never asked ('exclude'), or -> `⊤` ('token');
  `7 3 9 ⊥ 3` -> `7`; `9 9 ⊥ 9` -> `9`.

  Attributes:
    max_successor: 'exclude' (default): a unique maximum is never asked, as sorting ends
      after its maximum; needs n >= 2. 'token': a is uniform over all n positions and a
      unique maximum is answered ⊤ (id V + 2).
  """
  name: str = 'successor'
  max_successor: str = 'exclude'
  OPTIONS: ClassVar[tuple[str, ...]] = _RepeatedInputs.OPTIONS + ('max_successor',)
  _MODES: ClassVar[tuple[str, ...]] = ('exclude', 'token')

  def __post_init__(self):
    if self.max_successor not in self._MODES:
      raise ValueError(f'{self.name}: unknown max_successor {self.max_successor!r}; valid: '
                       f'{", ".join(self._MODES)}')
    super().__post_init__()

  @property
  def min_input_length(self):
    # With 'exclude' a single element is a unique maximum: nothing can be asked.
    return 2 if self.max_successor == 'exclude' else 1

  def max_prompt(self, n):
    return n + 2

  def max_answer(self, n):
    return 1

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    k_values, k_query = jax.random.split(key)
    values = self._test_values(k_values, n, distribution, prompt_width)
    return self._ask(k_query, values, n, prompt_width, answer_width)

  def _train_rows(self, key, n, prompt_width, answer_width):
    k_values, k_query = jax.random.split(key)
    values = self._train_values(k_values, n, prompt_width)
    return self._ask(k_query, values, n, prompt_width, answer_width)

  def _ask(self, key: Array, values: Array, n: Array, prompt_width: int,
           answer_width: int) -> Rows:
    pos = _positions(prompt_width)
    valid = pos < n
    top = jnp.max(jnp.where(valid, values, 0))
    unique_top = valid & (values == top) & (jnp.sum(valid & (values == top)) == 1)
    askable = valid & ~unique_top if self.max_successor == 'exclude' else valid
    k = _below(key, jnp.sum(askable))
    where = jnp.argmax(jnp.cumsum(askable) > k)        # the k-th askable position
    a = values[where]
    twice = jnp.sum(valid & (values == a)) >= 2
    above = jnp.min(jnp.where(valid & (values > a), values, self.num_values + 1))
    succ = jnp.where(twice, a, jnp.where(above > self.num_values, self.top_id, above))
    prompt = jnp.where(valid, values,
                       jnp.where(pos == n, self.sep_id, jnp.where(pos == n + 1, a, PAD)))
    answer = jnp.where(_positions(answer_width) == 0, succ, PAD)
    return prompt, n + 2, answer, jnp.int32(1)


@dataclasses.dataclass(frozen=True)
class Count(_SortingFamily):
  """The count hint: σ holds two distinct values; answer the one that occurs fewer times.

  The values u != w are uniform without replacement from 1..V; u occurs c times and w n - c
  times, c uniform in 1..n-1 except n/2 (so one value is strictly rarer), and the n entries
  are shuffled uniformly. Needs n >= 3, so the training law starts at min_length = 3.

  Example: `8 3 3 8 3 ⊥` -> `8`.
  """
  name: str = 'count'
  min_length: int = 3

  @property
  def min_input_length(self):
    return 3

  def max_prompt(self, n):
    return n + 1

  def max_answer(self, n):
    return 1

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    k_pair, k_count, k_order = jax.random.split(key, 3)
    u, w = 1 + random_order(k_pair, self.num_values, self.num_values)[:2]
    # c uniform over the n - 1 - [n even] counts of 1..n-1 other than n/2.
    even = (n % 2 == 0).astype(jnp.int32)
    c = 1 + _below(k_count, n - 1 - even)
    c = c + ((even == 1) & (c >= n // 2)).astype(jnp.int32)
    pos = _positions(prompt_width)
    ordered = jnp.where(pos < c, u, jnp.where(pos < n, w, PAD))
    values = ordered[random_order(k_order, n, prompt_width)]
    prompt = jnp.where(pos == n, self.sep_id, values)
    rarer = jnp.where(2 * c < n, u, w)
    answer = jnp.where(_positions(answer_width) == 0, rarer, PAD)
    return prompt, n + 1, answer, jnp.int32(1)


@dataclasses.dataclass(frozen=True)
class Fill(_SortingFamily):
  """The fill hint: n copies of one value, ⊥, its first j copies; answer the other n - j.

  The value v is uniform in 1..V, j uniform in 0..n-1 (so at least one copy is answered).

  Example (n = 4, j = 1): `7 7 7 7 ⊥ 7` -> `7 7 7`.
  """
  name: str = 'fill'

  def max_prompt(self, n):
    return 2 * n

  def max_answer(self, n):
    return n

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    k_value, k_prefix = jax.random.split(key)
    v = 1 + base.uniform_digits(k_value, (), self.num_values)
    j = _below(k_prefix, n)
    pos = _positions(prompt_width)
    prompt = jnp.where(pos == n, self.sep_id, jnp.where(pos < n + 1 + j, v, PAD))
    answer = jnp.where(_positions(answer_width) < n - j, v, PAD)
    return prompt, n + 1 + j, answer, n - j


# ------------------------------------------------------------------------- increment family
@dataclasses.dataclass(frozen=True)
class _IncrementFamily(HintingTask):
  """Tasks on an n-digit number x written most-significant digit first (ids 0..9).

  x is uniform over the n-digit numbers (no leading zero: 1..9 when n = 1). With 'nines'
  (test) or with probability nines_share (training) x ends in a run of 9s of length k,
  uniform in 1..n; the digits above the run keep their law, so the digit just above may be 9
  too (the run is then longer than k).

  Attributes:
    nines_share: the share of training numbers that end in a run of 9s (the paper's 10%).
  """
  min_length: int = 1
  short_max: int = 4
  nines_share: float = 0.1
  family: ClassVar[str] = 'increment'
  OPTIONS: ClassVar[tuple[str, ...]] = HintingTask.OPTIONS + ('nines_share',)

  def __post_init__(self):
    super().__post_init__()
    _check_share(self.name, 'nines_share', self.nines_share)

  @property
  def vocab_size(self) -> int:
    return 12

  @property
  def digit_ids(self) -> tuple[int, ...]:
    """The digits' ids, for encodings that read digits (Abacus)."""
    return tuple(range(10))

  @property
  def sep_id(self) -> int:
    return INCREMENT_SEP

  @property
  def up_id(self) -> int:
    """The id of ↑, which precedes each carry in the carry hint."""
    return UP

  def max_prompt(self, n):
    return n + 1

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    k_number, k_run = jax.random.split(key)
    digits = self._number(k_number, n, prompt_width)
    if distribution == 'nines':
      digits = self._end_in_nines(k_run, digits, n)
    return self._write(digits, n, prompt_width, answer_width)

  def _train_rows(self, key, n, prompt_width, answer_width):
    k_number, k_run, k_pick = jax.random.split(key, 3)
    digits = self._number(k_number, n, prompt_width)
    digits = jnp.where(_coin(k_pick, self.nines_share),
                       self._end_in_nines(k_run, digits, n), digits)
    return self._write(digits, n, prompt_width, answer_width)

  @staticmethod
  def _number(key: Array, n: Array, width: int) -> Array:
    """A uniform n-digit number as little-endian digits [width]."""
    return digits_lib.draw_operands(key, n[None], width)[0]

  @staticmethod
  def _end_in_nines(key: Array, digits: Array, n: Array) -> Array:
    run = 1 + _below(key, n)
    return jnp.where(_positions(digits.shape[0]) < run, 9, digits)

  def _write(self, digits: Array, n: Array, prompt_width: int, answer_width: int) -> Rows:
    """The prompt of x (little-endian digits [W], W >= n + 1) and the task's answer."""
    pos = _positions(prompt_width)
    big_endian = jnp.take(digits, jnp.clip(n - 1 - pos, 0, digits.shape[0] - 1))
    prompt = jnp.where(pos < n, big_endian, jnp.where(pos == n, self.sep_id, PAD))
    one = (_positions(digits.shape[0]) == 0).astype(jnp.int32)
    result = digits_lib.add_digits(digits[None], one[None])[0]       # [W + 1]
    size = digits_lib.num_digits(result[None])[0]                    # n, or n + 1 for 9..9
    answer, answer_length = self._answer(digits, result, size, answer_width)
    return prompt, n + 1, answer, answer_length

  @abc.abstractmethod
  def _answer(self, digits: Array, result: Array, size: Array,
              answer_width: int) -> tuple[Array, Array]:
    """(answer [answer_width], its length) from x's digits, x + 1's and its digit count."""


@dataclasses.dataclass(frozen=True)
class Increment(_IncrementFamily):
  """x + 1, written least-significant digit first (n or n + 1 digits).

  Test distributions: 'uniform' (uniform n-digit numbers) and 'nines' (each ends in a run of
  9s, `_IncrementFamily`).

  Examples (the paper's): `1 2 3 ⊥` -> `4 2 1`; `9 9 9 ⊥` -> `0 0 0 1`.
  """
  name: str = 'increment'
  HINTS: ClassVar[tuple[str, ...]] = ('carry',)
  DISTRIBUTIONS: ClassVar[tuple[str, ...]] = ('uniform', 'nines')

  def max_answer(self, n):
    return n + 1

  def _answer(self, digits, result, size, answer_width):
    answer = jnp.where(_positions(answer_width) < size, _fit(result, answer_width), PAD)
    return answer, size


@dataclasses.dataclass(frozen=True)
class Carry(_IncrementFamily):
  """The carry hint: for each digit of x + 1, least-significant first, `digit ↑ carry`.

  The carry is the one out of that position when adding 1: 1 exactly when x's digits up to
  it are all 9; the new top digit of 9..9 + 1 carries 0.

  Examples (the first is the paper's): `1 2 3 ⊥` -> `4 ↑ 0 2 ↑ 0 1 ↑ 0`;
  `1 9 9 ⊥` -> `0 ↑ 1 0 ↑ 1 2 ↑ 0`; `9 9 ⊥` -> `0 ↑ 1 0 ↑ 1 1 ↑ 0`.
  """
  name: str = 'carry'

  def max_answer(self, n):
    return 3 * (n + 1)

  def _answer(self, digits, result, size, answer_width):
    # Digits are zero above x's top, so the carry out of position n is 0.
    carries = jnp.cumprod((digits == 9).astype(jnp.int32))
    pos = _positions(answer_width)
    i = jnp.minimum(pos // 3, digits.shape[0] - 1)
    triple = jnp.where(pos % 3 == 0, jnp.take(result, i),
                       jnp.where(pos % 3 == 1, self.up_id, jnp.take(carries, i)))
    return jnp.where(pos < 3 * size, triple, PAD), 3 * size


TASKS: dict[str, HintingTask] = {
    'sorting_hinted': SortingHinted(),
    'successor': Successor(),
    'count': Count(),
    'fill': Fill(),
    'increment': Increment(),
    'carry': Carry(),
}
