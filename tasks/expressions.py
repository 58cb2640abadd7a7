"""Bracket expressions mod 5: the reference's random generator and an evaluator, on device.

Both run as one `lax.scan` over token positions, vectorised over the batch, with a
per-example stack of frames ([B, D] int32, pushed at `(` and popped at `)`).

Grammar of the reference generator gen(n) (exact length n, tokens below):
  n = 1: `d`    n = 2: `-d`    n = 3: `(d)`    n = 4: `(-d)`
  n >= 5: `(` gen(l) op gen(n - 3 - l) `)` with l ~ U{1..n-4}, op ~ U(ops), d ~ U{0..4}.
Every draw is independent, so drawing a digit for every position and an operator for every
position up front, and only the split points l inside the scan, gives the same law.

Internal token codes (those of modular_arithmetic_brackets): 0-4 digits, 5 `+`, 6 `-`,
7 `*`, 8 `(`, 9 `)`, 10 `x` (the unknown of solve_equation), PAD = 11 (no token).
Values are affine forms a*x + b mod 5 so that the same evaluator solves for `x`
(products are only ever taken with an x-free factor: solve_equation has no `*`).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tasks import base

Array = jax.Array

PLUS, MINUS, TIMES, OPEN, CLOSE, X, PAD = 5, 6, 7, 8, 9, 10, 11
_NO_OP = 0  # frame op codes: 0 none, 1 +, 2 -, 3 *
UNROLL = 1  # scan unrolling: compile time grows with it, run time barely shrinks on CPU


def max_depth(max_length: int) -> int:
  """A bound on the nesting depth of gen(n), n <= max_length: each level of brackets costs
  at least 4 tokens (`(`, an operator or `-`, the sibling or digit, `)`)."""
  return max_length // 4 + 2


def _pack(a, b, op, have, gen):
  return a + 5 * b + 25 * op + 100 * have + 200 * gen


def _unpack(f):
  return f % 5, (f // 5) % 5, (f // 25) % 4, (f // 100) % 2, f // 200


def _eval_token(tok, top, neg, parent):
  """Consume one token. top/parent = (a, b, op, have) of the top frame and of the frame
  below it (used at `)`); returns the new top frame and unary-minus flag."""
  a, b, op, have = top
  is_close = tok == CLOSE
  is_value = (tok < 5) | (tok == X) | is_close
  unary = (tok == MINUS) & (have == 0)
  binop = ((tok == PLUS) | (tok == TIMES) | (tok == MINUS)) & ~unary
  # The value delivered (a digit, x, or a closed frame) and the frame receiving it.
  va = jnp.where(is_close, a, (tok == X).astype(jnp.int32))
  vb = jnp.where(is_close, b, jnp.where(tok < 5, tok, 0))
  sgn = jnp.where(neg & ~is_close, -1, 1)
  va, vb = va * sgn, vb * sgn
  ra, rb, rop, _ = [jnp.where(is_close, p, t) for p, t in zip(parent, top)]
  na = jnp.select([rop == 1, rop == 2, rop == 3], [ra + va, ra - va, ra * vb + va * rb], va)
  nb = jnp.select([rop == 1, rop == 2, rop == 3], [rb + vb, rb - vb, rb * vb], vb)
  new_op = jnp.where(tok == PLUS, 1, jnp.where(tok == MINUS, 2, 3))
  a = jnp.where(is_value, na % 5, a)
  b = jnp.where(is_value, nb % 5, b)
  op = jnp.where(is_value, _NO_OP, jnp.where(binop, new_op, op))
  have = jnp.where(is_value, 1, jnp.where(binop, 0, have))
  # `(` starts an empty frame (the old top is pushed by the caller).
  is_open = tok == OPEN
  a, b, op, have = [jnp.where(is_open, 0, v) for v in (a, b, op, have)]
  neg = jnp.where(unary, True, jnp.where(is_value, False, neg))
  return (a, b, op, have), neg


def _scan(step, init, xs, unroll):
  return lax.scan(step, init, xs, unroll=unroll)


def evaluate(tokens: Array, length: Any) -> tuple[Array, Array]:
  """Value a*x + b (mod 5) of the expressions tokens[:, :length] (internal codes).

  Args:
    tokens: int32 [B, Lmax], internal codes; positions >= length are ignored.
    length: int or traced int32 scalar.

  Returns:
    (a, b) int32 [B] each.
  """
  batch, width = tokens.shape
  tokens = jnp.where(base.positions(width) < length, tokens, PAD)
  depth = max_depth(width)
  rows = jnp.arange(batch)
  zeros = jnp.zeros((batch,), jnp.int32)

  def step(carry, tok):
    top, neg, sp, stack = carry
    parent = _unpack(stack[rows, jnp.maximum(sp - 1, 0)])[:4]
    new_top, neg = _eval_token(tok, top, neg, parent)
    push, pop = tok == OPEN, tok == CLOSE
    stack = stack.at[rows, jnp.where(push, sp, depth)].set(_pack(*top, 0), mode='drop')
    sp = sp + push - pop
    return (new_top, neg, sp, stack), None

  init = ((zeros,) * 4, zeros.astype(bool), zeros, jnp.zeros((batch, depth), jnp.int32))
  (top, _, _, _), _ = _scan(step, init, tokens.T, unroll=UNROLL)
  return top[0], top[1]


def generate(key: Array, batch_size: int, length: Any, max_length: int,
             num_ops: int) -> tuple[Array, Array]:
  """Sample gen(length) (the reference's law) for every example, and its value.

  Args:
    key: PRNG key.
    batch_size: B.
    length: n, int or traced int32 scalar (n <= 0 gives an empty expression).
    max_length: static buffer size, >= n.
    num_ops: 3 for {+, -, *}, 2 for {+, -}.

  Returns:
    tokens int32 [B, max_length] (internal codes, PAD past n), value int32 [B] in {0..4}.
  """
  k_token, k_split = jax.random.split(key)
  draw = base.uniform_digits(k_token, (max_length, batch_size), 5 * num_ops)
  digits, ops = draw % 5, draw // 5 + PLUS
  # One split point per internal node, in preorder; a node uses >= 4 tokens.
  num_nodes = max(1, (max_length - 1) // 4)
  words = jax.random.bits(k_split, (2, batch_size, num_nodes), jnp.uint32)
  depth = max_depth(max_length)
  rows = jnp.arange(batch_size)
  zeros = jnp.zeros((batch_size,), jnp.int32)
  # Leaf patterns by length m (row m, column = index in the leaf); -1 marks the digit.
  leaf = jnp.asarray([[PAD] * 4, [-1, PAD, PAD, PAD], [MINUS, -1, PAD, PAD],
                      [OPEN, -1, CLOSE, PAD], [OPEN, MINUS, -1, CLOSE]], jnp.int32)

  def step(carry, xs):
    # gen state: cur = length of the segment starting here (0: none); leaf_len/leaf_i =
    # the leaf being written; right = top generator frame: > 0 the pending right length of
    # an internal node whose left child is being written, 0 right child (or leaf bracket),
    # -1 the root level. node = internal nodes so far (indexes the split words).
    (cur, leaf_len, leaf_i, right, node), top, neg, sp, stack = carry
    digit, op = xs
    start, internal = cur > 0, cur >= 5
    in_leaf = ~start & (leaf_i < leaf_len)
    leaf_tok = leaf[jnp.where(start, cur, leaf_len).clip(0, 4),
                    jnp.where(start, 0, leaf_i).clip(0, 3)]
    leaf_tok = jnp.where(leaf_tok == -1, digit, leaf_tok)
    done_tok = jnp.select([right > 0, right == 0], [op, CLOSE], PAD)
    tok = jnp.select([internal, start | in_leaf], [OPEN, leaf_tok], done_tok)

    saved = _unpack(stack[rows, jnp.maximum(sp - 1, 0)])
    split = 1 + base.randbelow(base.take_per_row(words[0], node),
                               base.take_per_row(words[1], node), cur - 4)
    push, pop = tok == OPEN, tok == CLOSE
    stack = stack.at[rows, jnp.where(push, sp, depth)].set(
        _pack(*top, right + 1), mode='drop')
    sp = sp + push - pop
    new_top, neg = _eval_token(tok, top, neg, saved[:4])

    leaf_start = start & ~internal
    new_cur = jnp.select([internal, start, ~in_leaf & (right > 0)], [split, 0, right], 0)
    new_leaf_len = jnp.where(leaf_start, cur, leaf_len)
    new_leaf_i = jnp.where(leaf_start, 1, jnp.where(in_leaf, leaf_i + 1, leaf_i))
    new_right = jnp.select(
        [internal, push, pop, ~start & ~in_leaf & (right > 0)],
        [cur - 3 - split, 0, saved[4] - 1, 0], right)
    node = node + internal
    carry = ((new_cur, new_leaf_len, new_leaf_i, new_right, node), new_top, neg, sp, stack)
    return carry, tok

  cur = jnp.broadcast_to(jnp.maximum(jnp.asarray(length, jnp.int32), 0), (batch_size,))
  gen = (cur, zeros, zeros, zeros - 1, zeros)
  init = (gen, (zeros,) * 4, zeros.astype(bool), zeros, jnp.zeros((batch_size, depth), jnp.int32))
  (_, top, _, _, _), tokens = _scan(step, init, (digits, ops), unroll=UNROLL)
  return tokens.T, top[1]
