"""What each model family is trained on and judged by, for the study's tasks.

- encoder (the study's): the inputs, then one empty query token per output, read off in one
  pass; cross-entropy on the output positions; per-token accuracy under the task's mask.
- decoder: the sequence `inputs ⊕ SEP ⊕ answer ⊕ EOS` (answer tokens are the task's classes,
  shifted past the input vocabulary), trained by teacher forcing with the loss on the answer
  and EOS (`train.loss_on='all'`: on every token); judged by greedy generation from
  `inputs ⊕ SEP` with a KV cache: per-token accuracy under the task's mask, and exact match
  (every masked answer token right).

Each takes the run (`posenc.training.run.Run`: its config, task, model and family) and returns an
`Objective` (loss for training, counts for evaluation): `study(run, bucket)` for the study's
tasks, `sequence(run, shape)` for tasks that sample `prompt ⊕ answer (⊕ EOS)` themselves,
`masked(run, shape)` for masked language modelling. The evaluation protocol of a task
(`posenc.training.protocol`) picks one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax

from posenc import config as config_lib
from posenc.models import generate
from posenc.models import encoder as encoder_lib
from posenc import suggest

Array = jax.Array
# A run (`posenc.training.run.Run`, built above this module): the type is named here, not imported.
Run = Any
LOSS_ON = ('answer', 'all')


def check(config: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for an unknown `train.loss_on`."""
  if config.train.loss_on not in LOSS_ON:
    raise config_lib.ConfigError(
      f'unknown train.loss_on {config.train.loss_on!r}'
      f'{suggest.did_you_mean(config.train.loss_on, LOSS_ON)}; valid: {", ".join(LOSS_ON)}'
    )


@dataclasses.dataclass(frozen=True)
class DecoderVocab:
  """Token ids of a task in decoder form: inputs 0..V-1, SEP = V, answer class c -> V + 1 + c,
  EOS = V + C + 1; `size` = V + C + 2.

  Example: V = 2, C = 2 -> sep 2, answer classes 3, 4, eos 5, size 6.
  """

  sep: int
  answer_offset: int
  eos: int
  size: int


def decoder_vocab(task: Any) -> DecoderVocab:
  v, c = task.vocab_size, task.num_classes
  return DecoderVocab(sep=v, answer_offset=v + 1, eos=v + c + 1, size=v + c + 2)


def decoder_layout(
  batch: dict[str, Array], max_output: int, vocab: DecoderVocab
) -> tuple[Array, Array]:
  """`inputs ⊕ SEP ⊕ answer ⊕ EOS`, packed from position 0 and zero-padded.

  Args:
    batch: a task batch (`inputs` [B, Lmax], `targets` [B, Omax], `length`,
      `output_length`).
    max_output: Omax (static).
    vocab: the token ids.

  Returns:
    (tokens int32 [B, Lmax + Omax + 2], length L + O + 2 (int32 scalar)).

  Example (V = 2, C = 2): inputs [[1, 0]], targets [[1, 1]], L = 2, O = 2 ->
    [[1, 0, 2, 4, 4, 5]], 6.
  """
  inputs, targets = batch['inputs'], batch['targets']
  b, l_max = inputs.shape
  length, out = batch['length'], batch['output_length']
  i = jnp.arange(l_max + max_output + 2)[None, :]
  answer_at = jnp.clip(i - length - 1, 0, max_output - 1)
  answer = jnp.take_along_axis(targets, jnp.broadcast_to(answer_at, (b, i.shape[1])), axis=1)
  padded_inputs = jnp.pad(inputs, ((0, 0), (0, max_output + 2)))
  tokens = jnp.where(
    i < length,
    padded_inputs,
    jnp.where(
      i == length,
      vocab.sep,
      jnp.where(
        i <= length + out,
        answer + vocab.answer_offset,
        jnp.where(i == length + out + 1, vocab.eos, 0),
      ),
    ),
  )
  return tokens.astype(jnp.int32), jnp.asarray(length + out + 2, jnp.int32)


class Objective(NamedTuple):
  """loss(params, batch, rngs, window) -> (loss, per-token accuracy), for training;
  counts(params, batch, rngs) -> {'correct', 'total', 'exact', 'examples'} sums, for
  evaluation (deterministic unless eval_dropout)."""

  loss: Callable[..., tuple[Array, Array]]
  counts: Callable[..., dict[str, Array]]


def study(run: Run, bucket: int) -> Objective:
  """The study's tasks for the model family: the encoder reads its outputs off empty query
  tokens in one pass, the decoder writes them after a separator (inputs padded to
  `bucket`)."""
  max_output = int(run.task.output_length(bucket))
  if run.family.generates:
    return _decoder(run, max_output)
  return _encoder(run, max_output)


def sequence(run: Run, shape: tuple[int, int]) -> Objective:
  """Sequence tasks: teacher forcing on `tokens`, the loss on the answer and EOS (or on every
  token), each example through its output head `batch['task']` when the batch has one;
  greedy generation after each prompt, exact match of the answer through EOS."""
  task, model = run.task, run.model
  prompt_width, answer_width = shape

  def loss(params, batch, rngs, window=None):
    tokens = batch['tokens']
    inputs, labels = tokens[:, :-1], tokens[:, 1:]
    lengths = batch['length'] - 1  # the tokens fed: all but the last
    logits, _ = model.apply(
      {'params': params},
      inputs,
      lengths,
      deterministic=False,
      rngs=rngs,
      window=window,
      task=batch.get('task'),
    )
    j = jnp.arange(labels.shape[1])[None, :]
    real = j < lengths[:, None]
    answer = real & (j >= batch['prompt_length'][:, None] - 1)
    weights = (real if run.train_settings.loss_on == 'all' else answer).astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    correct = (jnp.argmax(logits, -1) == labels) & answer
    return jnp.sum(ce * weights) / jnp.sum(weights), jnp.sum(correct) / jnp.sum(answer)

  def counts(params, batch, rngs):
    tokens, prompt_lengths = batch['tokens'], batch['prompt_length']
    answer_lengths = batch['length'] - prompt_lengths  # with the EOS
    column = jnp.arange(prompt_width)[None, :]
    prompts = jnp.where(column < prompt_lengths[:, None], tokens[:, :prompt_width], 0)
    out = generate.generate(
      model,
      {'params': params},
      prompts,
      prompt_lengths,
      answer_width,
      task.eos_id,
      {'noise': rngs['noise']},
      answer_lengths=answer_lengths,
      recurrences=_eval_recurrences(run),
    )
    at = jnp.minimum(
      prompt_lengths[:, None] + jnp.arange(answer_width)[None, :], tokens.shape[1] - 1
    )
    target = jnp.take_along_axis(tokens, at, axis=1)
    valid = jnp.arange(answer_width)[None, :] < answer_lengths[:, None]
    correct = (out == target) & valid
    every = jnp.all(correct | ~valid, axis=-1)
    return {
      'correct': jnp.sum(correct),
      'total': jnp.sum(valid),
      'exact': jnp.sum(every),
      'examples': jnp.float32(tokens.shape[0]),
    }

  return Objective(loss, counts)


# Masked language modelling (Haviv et al.'s bidirectional models): the share of positions
# masked, each replaced by the mask token (the encoder's extra id, vocab_size).
MASK_RATE = 0.15


def mask_positions(key: Array, shape: tuple[int, ...]) -> Array:
  """bool [B, T]: MASK_RATE of the positions, and at least the first drawn one per row."""
  u = jax.random.uniform(key, shape)
  return (u < MASK_RATE) | (u == u.min(axis=-1, keepdims=True))


def masked_nll(
  model: encoder_lib.Encoder,
  params: Any,
  tokens: Array,
  mask: Array,
  rngs: Any,
  deterministic: bool,
) -> tuple[Array, Array]:
  """(negative log-likelihood [B, T] of each token given the masked input, its argmax
  prediction [B, T]): tokens [B, T] with `mask` positions replaced by the mask token."""
  inputs = jnp.where(mask, model.vocab_size, tokens)
  logits = model.apply(
    {'params': params}, inputs, jnp.int32(tokens.shape[1]), deterministic=deterministic, rngs=rngs
  ).astype(jnp.float32)
  nll = optax.softmax_cross_entropy_with_integer_labels(logits, tokens)
  return nll, jnp.argmax(logits, -1)


def masked(run: Run, shape: tuple[int, int]) -> Objective:
  """A text corpus for an encoder: masked language modelling. Each training window loses
  MASK_RATE of its bytes to the mask token (all of them replaced; BERT's 80/10/10 split is
  not used) and the loss is the cross-entropy at those positions."""
  del shape  # windows of every length share the one shape
  model = run.model

  def loss(params, batch, rngs, window=None):
    del window
    tokens = batch['tokens'][:, 1:]  # the n bytes of the window after its one-byte "prompt"
    mask = mask_positions(jax.random.fold_in(rngs['dropout'], 1), tokens.shape)
    nll, pred = masked_nll(model, params, tokens, mask, rngs, deterministic=False)
    weights = mask.astype(jnp.float32)
    return (
      jnp.sum(nll * weights) / jnp.sum(weights),
      jnp.sum((pred == tokens) * weights) / jnp.sum(weights),
    )

  # Perplexity (posenc.kinds.perplexity) is the study's measure; these are for training.
  def counts(params, batch, rngs):
    tokens = batch['tokens'][:, 1:]
    mask = mask_positions(rngs['noise'], tokens.shape)
    _, pred = masked_nll(model, params, tokens, mask, rngs, deterministic=True)
    right = (pred == tokens) & mask
    return {
      'correct': jnp.sum(right),
      'total': jnp.sum(mask),
      'exact': jnp.sum(jnp.all(right | ~mask, axis=-1)),
      'examples': jnp.float32(tokens.shape[0]),
    }

  return Objective(loss, counts)


def _encoder(run: Run, max_output: int) -> Objective:
  model = run.model

  def logits_of(params, batch, rngs, deterministic, **kw):
    tokens, seq_length = encoder_lib.empty_output_layout(
      batch['inputs'], batch['length'], batch['output_length'], max_output, model.vocab_size
    )
    logits = model.apply(
      {'params': params}, tokens, seq_length, deterministic=deterministic, rngs=rngs, **kw
    )
    return encoder_lib.read_outputs(logits, batch['length'], max_output)

  def loss(params, batch, rngs, window=None):
    logits = logits_of(params, batch, rngs, False, window=window)
    return loss_and_accuracy(logits, batch, run.train_settings.masked_loss)

  def counts(params, batch, rngs):
    logits = logits_of(
      params, batch, rngs, not run.eval_settings.eval_dropout, recurrences=_eval_recurrences(run)
    )
    correct = (jnp.argmax(logits, -1) == batch['targets']) * batch['mask']
    every = jnp.all((correct > 0) | (batch['mask'] == 0), axis=-1)
    return {
      'correct': jnp.sum(correct),
      'total': jnp.sum(batch['mask']),
      'exact': jnp.sum(every),
      'examples': jnp.float32(every.shape[0]),
    }

  return Objective(loss, counts)


def _decoder(run: Run, max_output: int) -> Objective:
  model = run.model
  vocab = decoder_vocab(run.task)

  def loss(params, batch, rngs, window=None):
    tokens, length = decoder_layout(batch, max_output, vocab)
    b = tokens.shape[0]
    # Teacher forcing: position j predicts token j + 1.
    inputs, labels = tokens[:, :-1], tokens[:, 1:]
    lengths = jnp.full((b,), length - 1)
    logits, _ = model.apply(
      {'params': params}, inputs, lengths, deterministic=False, rngs=rngs, window=window
    )
    j = jnp.arange(labels.shape[1])[None, :]
    start = batch['length']  # the label of position L (SEP) is the first answer token
    answer = (j >= start) & (j < start + batch['output_length'])
    if run.train_settings.loss_on == 'all':
      weights = (j < length - 1).astype(jnp.float32)
    else:  # the answer and its EOS
      weights = (answer | (j == start + batch['output_length'])).astype(jnp.float32)
      if run.train_settings.masked_loss:
        mask = _answer_values(batch['mask'], start, labels.shape[1])
        weights = jnp.where(answer, mask, weights)
    weights = jnp.broadcast_to(weights, labels.shape)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    mask = _answer_values(batch['mask'], start, labels.shape[1]) * answer
    correct = (jnp.argmax(logits, -1) == labels) * mask
    return jnp.sum(ce * weights) / jnp.sum(weights), jnp.sum(correct) / jnp.sum(mask)

  def counts(params, batch, rngs):
    tokens, _ = decoder_layout(batch, max_output, vocab)
    b, l_max = batch['inputs'].shape
    prompts = tokens[:, : l_max + 1]
    prompt_lengths = jnp.full((b,), batch['length'] + 1)
    # Generation is deterministic (eval_dropout is an encoder option).
    out = generate.generate(
      model,
      {'params': params},
      prompts,
      prompt_lengths,
      max_output + 1,
      vocab.eos,
      {'noise': rngs['noise']},
      answer_lengths=jnp.full((b,), batch['output_length'] + 1),
      recurrences=_eval_recurrences(run),
    )
    correct = (out[:, :max_output] == batch['targets'] + vocab.answer_offset) * batch['mask']
    every = jnp.all((correct > 0) | (batch['mask'] == 0), axis=-1)
    return {
      'correct': jnp.sum(correct),
      'total': jnp.sum(batch['mask']),
      'exact': jnp.sum(every),
      'examples': jnp.float32(b),
    }

  return Objective(loss, counts)


def _answer_values(values: Array, start: Array, width: int) -> Array:
  """values [B, Omax] placed at columns start..start+Omax-1 of a [B, width] array (0 else)."""
  b, o = values.shape
  padded = jnp.pad(values, ((0, 0), (0, width)))
  j = jnp.arange(width)[None, :] - start
  return jnp.where(
    (j >= 0) & (j < o),
    jnp.take_along_axis(padded, jnp.broadcast_to(jnp.clip(j, 0, o), (b, width)), axis=1),
    0.0,
  )


def _eval_recurrences(run: Any) -> int | None:
  """The recurrences a looped model applies at evaluation: `model.eval_recurrences`, or (0)
  the training's."""
  return run.model_settings.eval_recurrences or None


def loss_and_accuracy(
  logits: Array, batch: dict[str, Array], masked_loss: bool = False
) -> tuple[Array, Array]:
  """The reference's loss and accuracy on one (padded) batch of encoder outputs.

  loss: mean cross-entropy over every real output position (the reference's loss is
    unmasked: the zeros after a terminator are trained on); with `masked_loss`, only
    over the positions of the accuracy mask.
  accuracy: sum(mask * correct) / sum(mask), pooled over the batch (per token).
  """
  ce = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), batch['targets'])
  weights = batch['mask'] if masked_loss else batch['output_valid']
  loss = jnp.sum(ce * weights) / jnp.sum(weights)
  correct = (jnp.argmax(logits, -1) == batch['targets']).astype(jnp.float32)
  accuracy = jnp.sum(correct * batch['mask']) / jnp.sum(batch['mask'])
  return loss, accuracy
