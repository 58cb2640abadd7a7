"""Regular tasks: even_pairs, modular_arithmetic, parity_check, cycle_navigation."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base

Array = jax.Array


def _masked_bits(
  key: Array, batch_size: int, length: Any, max_length: int, base_: int = 2
) -> Array:
  """Uniform tokens from {0..base_-1} at positions < length, 0 after: int32 [B, Lmax]."""
  x = base.uniform_digits(key, (batch_size, max_length), base_)
  return jnp.where(base.positions(max_length) < length, x, 0)


@dataclasses.dataclass(frozen=True)
class EvenPairs(base.Task):
  """Is the number of adjacent pairs `ab`/`ba` even? Tokens 0/1; class 1 = odd count.

  The count of changes between neighbours is odd iff the first and last tokens differ, so
  y = [x_0 != x_{L-1}] (L = 1 gives 0).

  Example: `0110` has changes 0->1 and 1->0: 2, even, so y = 0 (x_0 == x_3).
  """

  name: str = 'even_pairs'
  level: str = 'regular'
  vocab_size: int = 2
  num_classes: int = 2

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _masked_bits(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    return base.cls_output(inputs[:, 0] != base.take_col(inputs, length - 1))


@dataclasses.dataclass(frozen=True)
class ModularArithmetic(base.Task):
  """Evaluate `d op d op ... d` mod 5 with the usual precedence (`*` first).

  Tokens: 0-4 digits, 5 `+`, 6 `-`, 7 `*`, 8 `_` (in the vocabulary, never sampled).
  Digits at even positions, operators (uniform over + - *) at odd positions; `a - b` is
  `a + (-b)`; the result is taken in {0..4}.

  Quirk kept from the reference: an even length L is silently turned into L - 1, so the
  sequence always ends with a digit (`input_length`); `sample(key, B, 40)` has shape
  [B, 39] and `length` = 39.

  Example: `0 - 4 + 1 + 1` -> 3; `0 + 1 - 4 * 4` -> 0.
  """

  name: str = 'modular_arithmetic'
  level: str = 'regular'
  vocab_size: int = 9
  num_classes: int = 5

  def input_length(self, length):
    return length - 1 + length % 2

  def _sample_inputs(self, key, batch_size, length, max_length):
    # One draw from {0..14} per position gives an independent digit and operator.
    draw = base.uniform_digits(key, (batch_size, max_length), 15)
    digits, ops = draw % 5, jnp.asarray([5, 6, 7], jnp.int32)[draw // 5]
    pos = base.positions(max_length)
    x = jnp.where(pos % 2 == 0, digits, ops)
    return jnp.where(pos < length, x, 0)

  def _target(self, inputs, length):
    # Left to right with (total, sign, term): `*` multiplies the current term, `+`/`-`
    # closes it into the total and opens a new one with that sign. Everything mod 5.
    width = inputs.shape[1]
    if width % 2 == 0:
      inputs = jnp.pad(inputs, ((0, 0), (0, 1)))
    digits = inputs[:, 0::2]
    ops = inputs[:, 1::2]
    valid = base.positions(digits.shape[1] - 1) < (length - 1) // 2  # operator i+1 valid
    ops = jnp.where(valid, ops, 7)  # past the end: `* 1`, a no-op
    later = jnp.where(valid, digits[:, 1:], 1)

    def step(state, xs):
      total, sign, term = state
      op, digit = xs
      mul = op == 7
      total = jnp.where(mul, total, total + sign * term)
      sign = jnp.where(mul, sign, jnp.where(op == 6, -1, 1))
      term = jnp.where(mul, term * digit, digit) % 5
      return (total % 5, sign, term), None

    init = (jnp.zeros_like(digits[:, 0]), jnp.ones_like(digits[:, 0]), digits[:, 0])
    (total, sign, term), _ = lax.scan(step, init, (ops.T, later.T))
    return base.cls_output((total + sign * term) % 5)


@dataclasses.dataclass(frozen=True)
class ParityCheck(base.Task):
  """Is the number of 1s odd? Tokens 0/1. Example: `1010100` has three 1s -> class 1."""

  name: str = 'parity_check'
  level: str = 'regular'
  vocab_size: int = 2
  num_classes: int = 2

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _masked_bits(key, batch_size, length, max_length)

  def _target(self, inputs, length):
    valid = base.positions(inputs.shape[1]) < length
    return base.cls_output(jnp.sum(jnp.where(valid, inputs, 0), axis=1) % 2)


@dataclasses.dataclass(frozen=True)
class CycleNavigation(base.Task):
  """Walk on a cycle of length 5 from state 0; output the final state.

  Token a in {0, 1, 2} is a step of a - 1: 0 = left, 1 = stay, 2 = right (the reference's
  docstring describes the tokens differently; its code does this). y = sum(a - 1) mod 5.

  Example: `2 2 0 1 2` -> +1 +1 -1 +0 +1 = 2.
  """

  name: str = 'cycle_navigation'
  level: str = 'regular'
  vocab_size: int = 3
  num_classes: int = 5

  def _sample_inputs(self, key, batch_size, length, max_length):
    return _masked_bits(key, batch_size, length, max_length, base_=3)

  def _target(self, inputs, length):
    valid = base.positions(inputs.shape[1]) < length
    return base.cls_output(jnp.sum(jnp.where(valid, inputs - 1, 0), axis=1) % 5)
