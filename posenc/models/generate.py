"""Greedy generation with a KV cache, and the uncached re-decoding it is tested against.

One compiled program per (batch, prompt bucket, maximum answer length): the prompt runs in
one pass that fills the cache, then one token per step inside `lax.while_loop`, each
sequence stopping at its end-of-sequence token or the maximum length. Prompts of different
lengths share a batch (left-aligned, padded): each sequence decodes from its own position.
The answers come back as int32 [B, max_new], EOS-filled after their EOS:

  >>> tokens = generate(model, variables, prompts, prompt_lengths,  # doctest: +SKIP
  ...                   max_new=12, eos_id=9, rngs={'noise': key})
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from posenc.models import decoder as decoder_lib

Array = jax.Array


def pad_cache(cache: Any, total: int) -> Any:
  """Keys and values [.., B, P, H, K] of a prompt pass, padded to [.., B, total, H, K]."""

  def pad(x):
    widths = [(0, 0)] * x.ndim
    widths[-3] = (0, total - x.shape[-3])
    return jnp.pad(x, widths)

  return jax.tree.map(pad, cache)


def _draws(
  prompts: Array, prompt_lengths: Array, max_new: int, answer_lengths: Array | None
) -> tuple[int, Array]:
  """(S, draw lengths [B]): the tokens a generation feeds the model, at most and each.

  The last generated token is never fed back, so a sequence feeds its prompt and
  answer_length - 1 generated tokens: what its training sequence (without its last token)
  held, so randomized encodings draw for the same length in both.
  """
  answer_lengths = max_new if answer_lengths is None else answer_lengths
  return prompts.shape[1] + max_new - 1, prompt_lengths + answer_lengths - 1


def generate(
  model: decoder_lib.Decoder,
  variables: Any,
  prompts: Array,
  prompt_lengths: Array,
  max_new: int,
  eos_id: int,
  rngs: dict[str, Array],
  *,
  answer_lengths: Array | None = None,
  task: Array | None = None,
  recurrences: int | None = None,
) -> Array:
  """Greedy continuation of each prompt, with a KV cache.

  Args:
    model: the decoder.
    variables: its variables ({'params': ...}).
    prompts: int [B, P]: prompts, left-aligned, anything past their length.
    prompt_lengths: int [B], >= 1.
    max_new: the most tokens to generate per sequence (static).
    eos_id: the end-of-sequence token: a sequence stops after emitting it.
    rngs: {'noise': key} for randomized encodings: the same draws for every step.
    answer_lengths: optional int [B]: each answer's expected length with its EOS (default
      max_new), for the length randomized encodings draw positions for (`_draws`).
    task: optional int [B]: each example's output head.
    recurrences: R of a looped model (default its training R).

  Returns:
    int32 [B, max_new]: the generated tokens, `eos_id` after each sequence's end.
  """
  b = prompts.shape[0]
  total, draw_length = _draws(prompts, prompt_lengths, max_new, answer_lengths)
  call = lambda tokens, lengths, **kw: model.apply(
    variables,
    tokens,
    lengths,
    deterministic=True,
    num_positions=total,
    draw_length=draw_length,
    task=task,
    recurrences=recurrences,
    rngs=rngs,
    **kw,
  )
  logits, cache = call(prompts, prompt_lengths)
  rows = jnp.arange(b)
  first = jnp.argmax(logits[rows, prompt_lengths - 1], -1).astype(jnp.int32)
  out = jnp.full((b, max_new), eos_id, jnp.int32).at[:, 0].set(first)
  # Every token so far, for encodings that read the sequence (Abacus). Adding a zero derived
  # from `first` gives it the same type as the loop's outputs inside a shard_map (varying
  # over the population's devices).
  seq = (
    jnp.zeros((b, total), jnp.int32).at[:, : prompts.shape[1]].set(prompts)
    + jnp.zeros_like(first)[:, None]
  )

  def cond(state):
    i, _, _, _, done = state
    return (i < max_new) & ~jnp.all(done)

  def step(state):
    i, cache, seq, out, done = state
    q_idx = (prompt_lengths + i - 1)[:, None]  # where token i - 1 sits
    seq = seq.at[rows, q_idx[:, 0]].set(out[:, i - 1])
    logits, cache = call(
      out[:, i - 1][:, None], q_idx[:, 0] + 1, q_idx=q_idx, cache=cache, context=seq
    )
    token = jnp.where(done, eos_id, jnp.argmax(logits[:, 0], -1).astype(jnp.int32))
    return i + 1, cache, seq, out.at[:, i].set(token), done | (token == eos_id)

  state = (jnp.int32(1), pad_cache(cache, total), seq, out, first == eos_id)
  return jax.lax.while_loop(cond, step, state)[3]


def generate_uncached(
  model: decoder_lib.Decoder,
  variables: Any,
  prompts: Array,
  prompt_lengths: Array,
  max_new: int,
  eos_id: int,
  rngs: dict[str, Array],
  *,
  answer_lengths: Array | None = None,
  task: Array | None = None,
  recurrences: int | None = None,
) -> Array:
  """`generate` without a cache: every token re-decodes the whole sequence so far (the
  definition cached generation is tested against, and its speed baseline)."""
  b, p = prompts.shape
  total, draw_length = _draws(prompts, prompt_lengths, max_new, answer_lengths)
  # One spare column takes the last token, which is never fed back.
  seq = jnp.zeros((b, total + 1), jnp.int32).at[:, :p].set(prompts)
  rows = jnp.arange(b)

  def step(i, state):
    seq, out, done = state
    lengths = prompt_lengths + i
    logits, _ = model.apply(
      variables,
      seq[:, :total],
      lengths,
      deterministic=True,
      num_positions=total,
      draw_length=draw_length,
      task=task,
      recurrences=recurrences,
      rngs=rngs,
    )
    token = jnp.argmax(logits[rows, lengths - 1], -1).astype(jnp.int32)
    token = jnp.where(done, eos_id, token)
    return seq.at[rows, lengths].set(token), out.at[:, i].set(token), done | (token == eos_id)

  out = jnp.full((b, max_new), eos_id, jnp.int32)
  return jax.lax.fori_loop(0, max_new, step, (seq, out, jnp.zeros(b, bool)))[1]
