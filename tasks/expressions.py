"""Bracket expressions mod 5: the reference's random generator and an evaluator, on device.

`generate` samples whole expressions with their values: a walk over the internal nodes
(not the tokens), then parallel token assembly and a bottom-up evaluation (see its
docstring). `evaluate` reads any token sequence: one `lax.scan` over token positions,
vectorised over the batch, with a per-example stack of frames ([B, D] int32, pushed at `(`
and popped at `)`); it gives `task.target` for arbitrary inputs.

Grammar of the reference generator gen(n) (exact length n, tokens below):
  n = 1: `d`    n = 2: `-d`    n = 3: `(d)`    n = 4: `(-d)`
  n >= 5: `(` gen(l) op gen(n - 3 - l) `)` with l ~ U{1..n-4}, op ~ U(ops), d ~ U{0..4}.
Every draw is independent, so drawing a digit for every position up front and the split
and operator of each internal node during the walk gives the same law.

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


def _pack(a, b, op, have):
  """One evaluator frame (a, b, op, have) as an int32."""
  return a + 5 * b + 25 * op + 100 * have


def _unpack(f):
  return f % 5, (f // 5) % 5, (f // 25) % 4, (f // 100) % 2


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
    below = stack[rows, jnp.maximum(sp - 1, 0)]
    new_top, neg = _eval_token(tok, top, neg, _unpack(below))
    push, pop = tok == OPEN, tok == CLOSE
    # In place, not a copy per token: see `_walk`.
    stack = stack.at[rows, jnp.where(push, sp, depth)].set(
      jnp.where(push, _pack(*top), below), mode='drop'
    )
    sp = sp + push - pop
    return (new_top, neg, sp, stack), None

  init = ((zeros,) * 4, zeros.astype(bool), zeros, jnp.zeros((batch, depth), jnp.int32))
  (top, _, _, _), _ = _scan(step, init, tokens.T, unroll=UNROLL)
  return top[0], top[1]


def _shift(x: Array, k: int) -> Array:
  """y[:, i] = x[:, i - k] for a static k (negative: from the right), 0 where out of range.
  Slices and pads fuse into their consumers, unlike a traced shift."""
  if abs(k) >= x.shape[1]:
    return jnp.zeros_like(x)
  if k >= 0:
    return jnp.pad(x[:, : x.shape[1] - k], ((0, 0), (k, 0)))
  return jnp.pad(x[:, -k:], ((0, 0), (0, -k)))


def generate(
  key: Array, batch_size: int, length: Any, max_length: int, num_ops: int
) -> tuple[Array, Array]:
  """Sample gen(length) (the reference's law) for every example, and its value.

  Three passes, none of them over token positions one at a time:
  1. A preorder walk over the internal nodes (segments of length >= 5), one node per
     iteration, at most (max_length - 1) // 4 iterations: split l ~ U{1..n-4} drawn from
     the node's own words, the left child next if internal, the right child pushed on a
     per-example stack of pending segments.
  2. The tokens, in parallel: an internal node at s with split l writes `(` at s, its
     operator at s + 1 + l and `)` at s + n - 1 (one scatter); the positions left are the
     leaves, runs of 1..4 tokens (`d`, `-d`, `(d)`, `(-d)`) told apart by their length.
  3. The value: leaves valued in parallel at their first position, then internal nodes in
     reverse preorder (children before parents), each reading its children's values at
     their first positions.
  Every draw is independent (a digit per position; per node in preorder, one draw from
  {0..(n-4)·num_ops - 1} that gives its split and its operator; each is used at most once),
  so this is the reference's recursive law (up to the 2**-64-relative bias of the node
  draws, see `base.randbelow`).

  Args:
    key: PRNG key.
    batch_size: B.
    length: n, int or traced int32 scalar (n <= 0 gives an empty expression).
    max_length: static buffer size, >= n.
    num_ops: 3 for {+, -, *}, 2 for {+, -}.

  Returns:
    tokens int32 [B, max_length] (internal codes, PAD past n), value int32 [B] in {0..4}.

  Example: n = 6 with split l = 1 and operator `*` gives `( d * -d )`, i.e. the left child
  gen(1) = `d` and the right child gen(2) = `-d`.
  """
  k_digit, k_node = jax.random.split(key)
  num_nodes = max(1, (max_length - 1) // 4)  # each internal node spends >= 4 tokens
  digits = base.uniform_digits(k_digit, (batch_size, max_length), 5)  # one per position
  words = jax.random.bits(k_node, (num_nodes, 2, batch_size), jnp.uint32)
  n = jnp.broadcast_to(jnp.asarray(length, jnp.int32), (batch_size,))
  with jax.named_scope('walk'):
    nodes = _walk(words, n, max_length, num_ops)
  with jax.named_scope('assemble'):
    tokens, leaf_values = _assemble(nodes, digits, n)
  with jax.named_scope('evaluate'):
    value = _evaluate_nodes(nodes, leaf_values)
  return tokens, value


def _walk(
  words: Array, n: Array, max_length: int, num_ops: int
) -> tuple[Array, Array, Array, Array]:
  """Pass 1: the internal nodes of gen(n) in preorder, from their words.

  Args:
    words: uint32 [K, 2, B], two words per node (node k of every example uses words[k]).
    n: int32 [B], the expression lengths.
    max_length: static bound on n.
    num_ops: operators to draw from (+, -, and * if 3).

  Returns:
    (starts, sizes, splits, ops) int32 [K, B]: node k spans tokens start..start+size-1,
    its left child has `split` tokens and its operator token is `op`; start = -1 past the
    example's last internal node.
  """
  batch_size = n.shape[0]
  depth = max_depth(max_length)
  rows = jnp.arange(batch_size)
  width = max_length + 1

  # Carry: the segment (start, size) split at this iteration (size < 5: the example is
  # done) and the stack of pending right segments, packed start * width + size.
  def visit(carry, w):
    start, size, sp, stack = carry
    active = size >= 5
    draw = base.randbelow(w[0], w[1], (size - 4) * num_ops)
    split, op = 1 + draw // num_ops, PLUS + draw % num_ops
    right_start, right_size = start + 2 + split, size - 3 - split
    go_left = active & (split >= 5)
    go_right = active & ~go_left & (right_size >= 5)
    push = go_left & (right_size >= 5)
    pop = active & ~go_left & ~go_right & (sp > 0)
    top = stack[rows, jnp.maximum(sp - 1, 0)]
    new_start = jnp.select([go_left, go_right, pop], [start + 1, right_start, top // width], 0)
    new_size = jnp.select([go_left, go_right, pop], [split, right_size, top % width], 0)
    # Writing `top` where nothing is pushed (dropped anyway) makes the scatter depend on the
    # gather: XLA then updates the stack in place instead of copying it every iteration.
    stack = stack.at[rows, jnp.where(push, sp, depth)].set(
      jnp.where(push, right_start * width + right_size, top), mode='drop'
    )
    sp = sp + push - pop
    return (new_start, new_size, sp, stack), (jnp.where(active, start, -1), size, split, op)

  zeros = jnp.zeros((batch_size,), jnp.int32)
  init = (zeros, n, zeros, jnp.zeros((batch_size, depth), jnp.int32))
  _, nodes = lax.scan(visit, init, words)
  return nodes  # [K, B] each: node-major, as the later passes read them


def _assemble(nodes, digits: Array, n: Array) -> tuple[Array, Array]:
  """Pass 2: tokens [B, Lmax] (PAD past n) and the leaves' values at their first token.

  `digits` [B, Lmax] holds a digit per position (those of the leaves are used).

  An internal node at s with split l writes `(` at s, its operator at s + 1 + l and `)`
  at s + size - 1; every other position < n belongs to a leaf, and leaves are runs of 1..4
  tokens separated by those marks, so a run's length tells its pattern.
  """
  starts, sizes, splits, ops = nodes
  batch_size, max_length = digits.shape
  internal = starts >= 0
  where_ = lambda p: jnp.where(internal, p, max_length)  # dropped if not a node
  marks = jnp.concatenate(
    [where_(starts), where_(starts + 1 + splits), where_(starts + sizes - 1)], 0
  )  # [3K, B]
  values = jnp.concatenate([jnp.full_like(ops, OPEN), ops, jnp.full_like(ops, CLOSE)], 0)
  # The tokens of internal nodes (`(`, operator, `)`); -1 elsewhere.
  marked = (
    jnp.full((batch_size, max_length), -1, jnp.int32)
    .at[jnp.arange(batch_size)[None, :], marks]
    .set(values, mode='drop')
  )
  pos = base.positions(max_length)
  leaf = (pos < n[:, None]) & (marked < 0)
  lf = leaf.astype(jnp.int32)
  b1, b2, b3 = (_shift(lf, k) for k in (1, 2, 3))
  a1, a2, a3 = (_shift(lf, -k) for k in (1, 2, 3))
  before = b1 + b1 * b2 + b1 * b2 * b3  # offset in the run
  run = before + 1 + a1 + a1 * a2 + a1 * a2 * a3  # the leaf's length
  # Leaf patterns by length: `d`, `-d`, `(d)`, `(-d)`.
  digit_offset = run // 2  # 0, 1, 1, 2 for runs of 1, 2, 3, 4
  leaf_tok = jnp.select(
    [before == digit_offset, before == digit_offset - 1, before == 0],
    [digits, jnp.where(run % 2 == 0, MINUS, OPEN), OPEN],
    CLOSE,
  )
  tokens = jnp.where(leaf, leaf_tok, jnp.where(marked >= 0, marked, PAD))
  # The digit sits at offset 0, 1, 1, 2 of a run of 1, 2, 3, 4; `-d` and `(-d)` negate it.
  digit_at = jnp.select(
    [digit_offset == 0, digit_offset == 2], [digits, _shift(digits, -2)], _shift(digits, -1)
  )
  first = leaf & (before == 0)
  values = jnp.where(first, jnp.where((run == 2) | (run == 4), -digit_at, digit_at) % 5, 0)
  return tokens, values


def _evaluate_nodes(nodes, values: Array) -> Array:
  """Pass 3: the expression's value [B] from the leaves' values [B, Lmax] (at their first
  token): internal nodes in reverse preorder, children before parents.

  Node values are kept by node index ([K, B]), not by position: in preorder the left child
  of node k, when internal, is node k + 1, and the right child's index comes from a
  position -> node map made once before the loop; leaf children are read before the loop
  too. The loop body then does one small gather instead of two from [B, Lmax].
  """
  starts, _, splits, ops = nodes  # [K, B]
  batch_size, max_length = values.shape
  num_nodes = starts.shape[0]
  exists = starts >= 0
  cols = jnp.arange(batch_size)
  node_at = (
    jnp.full((batch_size, max_length + 1), -1, jnp.int32)
    .at[cols[None, :], jnp.where(exists, starts, max_length)]
    .set(jnp.arange(num_nodes, dtype=jnp.int32)[:, None])
  )
  take = lambda x, p: x[cols[None, :], jnp.clip(p, 0, max_length - 1)]  # [K, B]
  left_pos, right_pos = starts + 1, starts + 2 + splits
  xs = (
    ops,
    take(node_at, left_pos),
    take(node_at, right_pos),
    take(values, left_pos),
    take(values, right_pos),
  )

  def body(node_values, x):
    k, (op, left_node, right_node, left_leaf, right_leaf) = x
    left = jnp.where(left_node >= 0, node_values[jnp.minimum(k + 1, num_nodes - 1)], left_leaf)
    right = jnp.where(right_node >= 0, node_values[jnp.maximum(right_node, 0), cols], right_leaf)
    v = jnp.select([op == PLUS, op == MINUS], [left + right, left - right], left * right) % 5
    return node_values.at[k].set(v), None

  init = jnp.zeros((num_nodes, batch_size), jnp.int32)
  node_values, _ = lax.scan(body, init, (jnp.arange(num_nodes), xs), reverse=True)
  return jnp.where(exists[0], node_values[0], values[:, 0])
