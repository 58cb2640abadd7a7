"""The sorting family of the task-hinting study: sorting and its hint tasks successor, count
and fill (tasks/hinting.py)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from tasks import base
from tasks import hint_core

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class _SortingFamily(hint_core.HintingTask):
  """Tasks over values 1..num_values (module docstring: vocabulary).

  Attributes:
    num_values: V, the values 1..V (ids 1..V); >= 2.
  """

  num_values: int = 100
  family: ClassVar[str] = 'sorting'
  OPTIONS: ClassVar[tuple[str, ...]] = hint_core.HintingTask.OPTIONS + ('num_values',)

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
    hint_core.check_share(self.name, 'repeat_share', self.repeat_share)

  def check_train(self, max_length, prompt_width, answer_width):
    super().check_train(max_length, prompt_width, answer_width)
    if self.repeat_share > 0:  # r = 2 asks for the most distinct values
      self._check_repeats(max_length, hint_core.REP_RANGE[0])

  def _check_repeats(self, n: int, r: int) -> None:
    if n // r > self.num_values:
      raise ValueError(
        f'{self.name}: rep{r} at length {n} needs {n // r} distinct values, '
        f'more than num_values={self.num_values}; valid lengths for rep{r}: '
        f'n <= {r * self.num_values + r - 1}'
      )

  def _test_values(self, key: Array, n: Array, distribution: str, width: int) -> Array:
    if distribution == 'uniform':
      return hint_core.uniform_values(key, n, width, self.num_values)
    return hint_core.repeated_values(
      key, n, hint_core.repeats(distribution), width, self.num_values
    )

  def _train_values(self, key: Array, n: Array, width: int) -> Array:
    k_uniform, k_repeat, k_r, k_pick = jax.random.split(key, 4)
    values = hint_core.uniform_values(k_uniform, n, width, self.num_values)
    if self.repeat_share == 0:
      return values
    low, high = hint_core.REP_RANGE
    r = low + hint_core.below(k_r, jnp.maximum(jnp.minimum(n, high) - low + 1, 1))
    repeats = hint_core.repeated_values(k_repeat, n, r, width, self.num_values)
    return jnp.where(hint_core.coin(k_pick, self.repeat_share), repeats, values)


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
  DISTRIBUTIONS: ClassVar[tuple[str, ...]] = (
    ('uniform',)
    + tuple(f'rep{r}' for r in range(hint_core.REP_RANGE[0], hint_core.REP_RANGE[1] + 1))
    + ('distinct',)
  )

  def max_prompt(self, n):
    return n + 1

  def max_answer(self, n):
    return n

  def check_length(self, n, distribution='uniform'):
    super().check_length(n, distribution)
    if distribution != 'uniform':
      self._check_repeats(n, hint_core.repeats(distribution))

  def _rows(self, key, n, distribution, prompt_width, answer_width):
    values = self._test_values(key, n, distribution, prompt_width)
    return self._sort(values, n, prompt_width, answer_width)

  def _train_rows(self, key, n, prompt_width, answer_width):
    return self._sort(self._train_values(key, n, prompt_width), n, prompt_width, answer_width)

  def _sort(self, values: Array, n: Array, prompt_width: int, answer_width: int) -> hint_core.Rows:
    pos = hint_core.positions(prompt_width)
    valid = pos < n
    prompt = jnp.where(valid, values, jnp.where(pos == n, self.sep_id, hint_core.PAD))
    # Absent entries sort last as V + 1 and are then cleared.
    ordered = jnp.sort(jnp.where(valid, values, self.num_values + 1))
    answer = hint_core.fit(jnp.where(valid, ordered, hint_core.PAD), answer_width)
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
      raise ValueError(
        f'{self.name}: unknown max_successor {self.max_successor!r}; valid: '
        f'{", ".join(self._MODES)}'
      )
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

  def _ask(
    self, key: Array, values: Array, n: Array, prompt_width: int, answer_width: int
  ) -> hint_core.Rows:
    pos = hint_core.positions(prompt_width)
    valid = pos < n
    top = jnp.max(jnp.where(valid, values, 0))
    unique_top = valid & (values == top) & (jnp.sum(valid & (values == top)) == 1)
    askable = valid & ~unique_top if self.max_successor == 'exclude' else valid
    k = hint_core.below(key, jnp.sum(askable))
    where = jnp.argmax(jnp.cumsum(askable) > k)  # the k-th askable position
    a = values[where]
    twice = jnp.sum(valid & (values == a)) >= 2
    above = jnp.min(jnp.where(valid & (values > a), values, self.num_values + 1))
    succ = jnp.where(twice, a, jnp.where(above > self.num_values, self.top_id, above))
    prompt = jnp.where(
      valid, values, jnp.where(pos == n, self.sep_id, jnp.where(pos == n + 1, a, hint_core.PAD))
    )
    answer = jnp.where(hint_core.positions(answer_width) == 0, succ, hint_core.PAD)
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
    u, w = 1 + hint_core.random_order(k_pair, self.num_values, self.num_values)[:2]
    # c uniform over the n - 1 - [n even] counts of 1..n-1 other than n/2.
    even = (n % 2 == 0).astype(jnp.int32)
    c = 1 + hint_core.below(k_count, n - 1 - even)
    c = c + ((even == 1) & (c >= n // 2)).astype(jnp.int32)
    pos = hint_core.positions(prompt_width)
    ordered = jnp.where(pos < c, u, jnp.where(pos < n, w, hint_core.PAD))
    values = ordered[hint_core.random_order(k_order, n, prompt_width)]
    prompt = jnp.where(pos == n, self.sep_id, values)
    rarer = jnp.where(2 * c < n, u, w)
    answer = jnp.where(hint_core.positions(answer_width) == 0, rarer, hint_core.PAD)
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
    j = hint_core.below(k_prefix, n)
    pos = hint_core.positions(prompt_width)
    prompt = jnp.where(pos == n, self.sep_id, jnp.where(pos < n + 1 + j, v, hint_core.PAD))
    answer = jnp.where(hint_core.positions(answer_width) < n - j, v, hint_core.PAD)
    return prompt, n + 1 + j, answer, n - j


# ------------------------------------------------------------------------- increment family
