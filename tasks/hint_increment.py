"""The increment family of the task-hinting study: increment and its carry hint task
(tasks/hinting.py)."""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from tasks import digits as digits_lib
from tasks import hint_core

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class _IncrementFamily(hint_core.HintingTask):
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
  OPTIONS: ClassVar[tuple[str, ...]] = hint_core.HintingTask.OPTIONS + ('nines_share',)

  def __post_init__(self):
    super().__post_init__()
    hint_core.check_share(self.name, 'nines_share', self.nines_share)

  @property
  def vocab_size(self) -> int:
    return 12

  @property
  def digit_ids(self) -> tuple[int, ...]:
    """The digits' ids, for encodings that read digits (Abacus)."""
    return tuple(range(10))

  @property
  def sep_id(self) -> int:
    return hint_core.INCREMENT_SEP

  @property
  def up_id(self) -> int:
    """The id of ↑, which precedes each carry in the carry hint."""
    return hint_core.UP

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
    digits = jnp.where(
      hint_core.coin(k_pick, self.nines_share), self._end_in_nines(k_run, digits, n), digits
    )
    return self._write(digits, n, prompt_width, answer_width)

  @staticmethod
  def _number(key: Array, n: Array, width: int) -> Array:
    """A uniform n-digit number as little-endian digits [width]."""
    return digits_lib.draw_operands(key, n[None], width)[0]

  @staticmethod
  def _end_in_nines(key: Array, digits: Array, n: Array) -> Array:
    run = 1 + hint_core.below(key, n)
    return jnp.where(hint_core.positions(digits.shape[0]) < run, 9, digits)

  def _write(self, digits: Array, n: Array, prompt_width: int, answer_width: int) -> hint_core.Rows:
    """The prompt of x (little-endian digits [W], W >= n + 1) and the task's answer."""
    pos = hint_core.positions(prompt_width)
    big_endian = jnp.take(digits, jnp.clip(n - 1 - pos, 0, digits.shape[0] - 1))
    prompt = jnp.where(pos < n, big_endian, jnp.where(pos == n, self.sep_id, hint_core.PAD))
    one = (hint_core.positions(digits.shape[0]) == 0).astype(jnp.int32)
    result = digits_lib.add_digits(digits[None], one[None])[0]  # [W + 1]
    size = digits_lib.num_digits(result[None])[0]  # n, or n + 1 for 9..9
    answer, answer_length = self._answer(digits, result, size, answer_width)
    return prompt, n + 1, answer, answer_length

  @abc.abstractmethod
  def _answer(
    self, digits: Array, result: Array, size: Array, answer_width: int
  ) -> tuple[Array, Array]:
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
    answer = jnp.where(
      hint_core.positions(answer_width) < size, hint_core.fit(result, answer_width), hint_core.PAD
    )
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
    pos = hint_core.positions(answer_width)
    i = jnp.minimum(pos // 3, digits.shape[0] - 1)
    triple = jnp.where(
      pos % 3 == 0, jnp.take(result, i), jnp.where(pos % 3 == 1, self.up_id, jnp.take(carries, i))
    )
    return jnp.where(pos < 3 * size, triple, hint_core.PAD), 3 * size
