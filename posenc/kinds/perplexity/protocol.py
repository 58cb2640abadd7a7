"""Perplexity of a language model at lengths beyond its training length (Qin et al. 2023;
Press et al. 2022).

At each evaluated length L the validation text (its first `eval.lm_tokens` + 1 bytes) is
scored two ways:
- **non-overlapping** windows of L tokens: window k feeds text[kL : kL + L] and scores the
  next token at every position, so a token sees between 0 and L - 1 tokens of context;
- **sliding** windows of L tokens with stride S (`eval.sliding_stride`): window k starts at
  kS and scores only its last S predictions (the first window all of them), so every
  scored token but the first L - S sees at least L - S tokens of context. It costs about L/S
  times more.
Perplexity = exp(mean negative log-likelihood per scored byte). Each (L, mode) is one
compiled program; measured lengths are appended to `workdir/perplexity.jsonl` and a resumed
evaluation measures only the others. Wall time per mode is recorded.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from posenc.models import objectives
from posenc import config as config_lib
from posenc import results as results_lib
from posenc.training import protocol as protocol_lib
from posenc.training import frozen as frozen_lib
from posenc.kinds.perplexity import record as perplexity_record

MODES = ('nonoverlapping', 'sliding')
# An encoder (a masked language model) is scored on non-overlapping windows with a fixed
# MASK_RATE of their bytes masked: the perplexity of the masked bytes.
MASKED = 'masked'
Run = protocol_lib.Run

ConfigError = config_lib.ConfigError


@runtime_checkable
class CorpusTask(Protocol):
  """What the perplexity kind reads off a task: a text split for training and validation,
  and windows of it as `prompt answer` sequences of one byte and n bytes
  (`tasks.corpus.StdlibCorpus` has them all). Checked when a run is built
  (`posenc.setup.protocol_of`).

  Example:
    >>> import tasks
    >>> isinstance(tasks.get('python_stdlib'), CorpusTask)
    True
  """

  vocab_size: int  # the byte values

  def texts(self) -> tuple[np.ndarray, np.ndarray]:
    """(training text, validation text), uint8 [bytes] each."""

  def split_info(self) -> dict[str, Any]:
    """How the text was split (files, bytes), for the record."""

  def check_cell(self, a: int, b: int) -> None:
    """ValueError when windows of a bytes cannot be drawn."""

  def max_prompt(self, a: int, b: int) -> int:
    """Prompt tokens of a window of a bytes."""

  def max_answer(self, a: int, b: int) -> int:
    """Answer tokens of a window of a bytes."""

  def sample_train(
    self, key: jax.Array, batch_size: int, n: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """Training windows of n + 1 bytes: `tokens` [B, prompt_width + answer_width],
    `prompt_length` [B], `length` [B]."""

  def sample(
    self, key: jax.Array, batch_size: int, a: int, b: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """Validation windows of a + 1 bytes, as `sample_train` lays them out."""


def windows(text: np.ndarray, length: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
  """(windows int32 [W, L + 1], scored float32 [W, L]) over `text`: window k is
  text[k·stride : k·stride + L + 1] (inputs: its first L, labels: its last L); the first
  window scores every label, the others their last `stride` (all when stride = L).

  Example: text 0..6, L = 3, stride 3 -> windows [0..3], [3..6], each scoring 3 labels.
  """
  count = (len(text) - 1 - length) // stride + 1
  if count < 1:
    raise ValueError(f'a validation text of {len(text)} bytes holds no window of {length}')
  starts = np.arange(count) * stride
  idx = starts[:, None] + np.arange(length + 1)[None, :]
  scored = np.ones((count, length), np.float32)
  scored[1:, : length - stride] = 0.0
  return text[idx].astype(np.int32), scored


def _population_scorer(run: Run, group: Callable[..., tuple[Any, Any]]) -> Callable[..., Any]:
  """f(params [P], windows [G, Bg, L + 1], scored [G, Bg, L], keys [P]) -> (sum of negative
  log-likelihoods [P], scored tokens [P]): `group(params, window group, its scored mask,
  key)` summed over the groups, members one after another, sharded like the population."""

  def local(params, wins, scored, keys):
    def member(args):
      p, key = args
      nll, count = jax.lax.map(
        lambda g: group(p, wins[g], scored[g], jax.random.fold_in(key, g), g),
        jnp.arange(wins.shape[0]),
      )
      return jnp.sum(nll), jnp.sum(count)

    return jax.lax.map(member, (params, keys))

  return protocol_lib.members_program(run, local, 2, outputs=2)


def make_score_fn(run: Run) -> Callable[..., Any]:
  """A causal model's scorer (`_population_scorer`): each window feeds its first L tokens
  and scores the next token at the positions marked in `scored`."""
  model = run.model

  def group(p, w, s, key, g):
    del g
    inputs, labels = w[:, :-1], w[:, 1:]
    lengths = jnp.full((w.shape[0],), inputs.shape[1])
    logits, _ = model.apply({'params': p}, inputs, lengths, deterministic=True, rngs={'noise': key})
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    nll = -jnp.take_along_axis(logp, labels[..., None], -1)[..., 0]
    return jnp.sum(nll * s), jnp.sum(s)

  return _population_scorer(run, group)


def make_masked_score_fn(run: Run) -> Callable[..., Any]:
  """A masked language model's scorer (`_population_scorer`; `scored` unused): the masks
  are drawn from eval.seed, the same for every member, and the masked bytes are scored."""
  model = run.model
  mask_key = jax.random.key(run.eval_settings.seed)

  def group(p, w, s, key, g):
    del s
    tokens = w[:, 1:]
    mask = objectives.mask_positions(jax.random.fold_in(mask_key, g), tokens.shape)
    nll, _ = objectives.masked_nll(model, p, tokens, mask, {'noise': key}, True)
    return jnp.sum(nll * mask), jnp.sum(mask.astype(jnp.float32))

  return _population_scorer(run, group)


def modes(run: Run) -> tuple[str, ...]:
  """The window modes of the run's family: MODES for a decoder, (MASKED,) for an encoder."""
  return MODES if run.family.causal else (MASKED,)


def mode_windows(
  run: Run, text: np.ndarray, length: int, mode: str
) -> tuple[np.ndarray, np.ndarray]:
  """The windows of `length` scored in `mode` (`windows` at the mode's stride)."""
  stride = length if mode != 'sliding' else min(run.eval_settings.sliding_stride, length)
  return windows(text, length, stride)


def examples(run: Run) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
  """Every length's windows of the validation text, per mode: ('length_L',
  {'MODE_windows': [W, L + 1], 'MODE_scored': [W, L]}). An encoder's masks are drawn from
  eval.seed in the evaluation, not stored."""
  _, valid = run.task.texts()
  text = valid[: run.eval_settings.lm_tokens + 1]
  for length in run.eval_settings.lengths:
    out = {}
    for mode in modes(run):
      out[f'{mode}_windows'], out[f'{mode}_scored'] = mode_windows(run, text, length, mode)
    yield f'length_{length}', out


def example_specs(run: Run) -> dict[str, dict[str, tuple[tuple[int, ...], str]]]:
  """{'length_L': {array: (shape, dtype)}} of `examples` (cut from the text: cheap)."""
  return {name: protocol_lib.shape_spec(arrays) for name, arrays in examples(run)}


def evaluate_lengths(
  run: Run, params: Any, ctx: protocol_lib.EvalContext
) -> dict[int, dict[str, Any]]:
  """{L: {'nonoverlapping': [ppl per member], 'sliding': [...], 'seconds': {mode: s}}}
  (an encoder: {'masked': [...]}) of `params` [P, ...], resuming from
  `workdir/perplexity.jsonl`."""
  population = run.population
  _, valid = run.task.texts()
  text = valid[: run.eval_settings.lm_tokens + 1]
  b = run.eval_settings.batch_size
  fn = (make_score_fn if run.family.causal else make_masked_score_fn)(run)

  frozen = bool(run.eval_settings.from_files)

  def measure(length):
    row = {'seconds': {}}
    stored = frozen_lib.load(run.eval_settings.from_files, f'length_{length}') if frozen else {}
    for mode in modes(run):
      if frozen:
        wins, scored = stored[f'{mode}_windows'], stored[f'{mode}_scored']
      else:
        wins, scored = mode_windows(run, text, length, mode)
      groups = -(-len(wins) // b)
      pad = groups * b - len(wins)
      wins = np.concatenate([wins, np.zeros((pad, length + 1), np.int32)])
      scored = np.concatenate([scored, np.zeros((pad, length), np.float32)])
      if ctx.traces is not None:
        ctx.traces['eval'] += 1
      t0 = time.time()
      nll, count = jax.device_get(
        fn(
          params,
          wins.reshape(groups, b, -1),
          scored.reshape(groups, b, -1),
          population.eval_keys,
        )
      )
      row['seconds'][mode] = time.time() - t0
      row[mode] = [
        float(np.exp(x / c))
        for x, c in zip(np.asarray(nll)[: population.size], np.asarray(count)[: population.size])
      ]
    return row

  return protocol_lib.run_cells(
    run,
    ctx,
    'perplexity.jsonl',
    list(run.eval_settings.lengths),
    lambda n: {'length': n},
    measure,
    lambda n: f'perplexity at length {n}',
    note=lambda row: ': ' + ', '.join(f'{m} {np.mean(row[m]):.3f}' for m in modes(run)),
  )


def evaluate(
  run: Run, state: Any, ctx: protocol_lib.EvalContext
) -> perplexity_record.PerplexityResults:
  """A text corpus's evaluation: perplexity per length and window mode; a member's score is
  its first mode's perplexity at the longest length."""
  task, population = run.task, run.population
  diverged = protocol_lib.diverged(run, state)
  by = evaluate_lengths(run, state.params, ctx)
  lengths = list(run.eval_settings.lengths)
  n = run.train_settings.max_length
  members = []
  for i, member in enumerate(population.members):
    ppl = {mode: {l: by[l][mode][i] for l in lengths} for mode in modes(run)}
    first = ppl[modes(run)[0]]
    at_n, longest = first.get(n), first[max(lengths)]
    # Qin et al.'s Def. 0.1: |ppl_L - ppl_m| / ppl_m at the longest length.
    members.append(
      perplexity_record.PerplexityMember(
        **member,
        diverged=bool(diverged[i]),
        score=None if diverged[i] else longest,
        degradation=(None if diverged[i] or at_n is None else abs(longest - at_n) / at_n),
        perplexity_by_length=ppl,
      )
    )
  return perplexity_record.PerplexityResults(
    tuple(lengths), task.split_info(), {str(l): by[l]['seconds'] for l in lengths}, tuple(members)
  )


def model_sizes(run: Run) -> dict[str, int]:
  """A causal LM predicts the next byte; a masked LM's id vocab_size is the mask token."""
  task = run.task
  if run.family.causal:
    return {'vocab_size': task.vocab_size, 'num_outputs': 1}
  return {'vocab_size': task.vocab_size, 'num_classes': task.vocab_size}


def summary(results: results_lib.Results) -> str:
  best = results_lib.best_score(results.members, min)
  mode = next(iter(results.members[0].perplexity_by_length))
  return (
    f'best perplexity {"n/a" if best is None else f"{best:.3f}"} at length '
    f'{max(results.evaluation.eval_lengths)} ({mode} windows)'
  )


def objective(run: Run, shape: tuple[int, int]) -> objectives.Objective:
  """Next-byte prediction for a decoder, masked language modelling for an encoder."""
  if not run.family.causal:
    return objectives.masked(run, shape)
  return objectives.sequence(run, shape)


def validate(run: Run) -> None:
  """A text corpus: a decoder trained on every token (or an encoder as a masked language
  model), lengths that fit the text and tables."""
  config, task = run.config, run.task
  if run.family.causal and run.train_settings.loss_on != 'all':
    raise ConfigError(f'task {config.task!r} trains on every token: set train.loss_on=all')
  lengths = list(run.eval_settings.lengths)
  if not lengths or any(not config_lib.is_int(l) or l < 2 for l in lengths):
    raise ConfigError(
      f'eval.lengths={lengths} must be a non-empty list of integers >= 2 (the perplexity lengths)'
    )
  for key in ('lm_tokens', 'sliding_stride'):
    value = getattr(run.eval_settings, key)
    if not config_lib.is_int(value) or value < 1:
      raise ConfigError(f'eval.{key}={value!r} must be a positive integer')
  longest = max(lengths + [run.train_settings.max_length])
  try:
    task.check_cell(longest, longest)
    _, valid = task.texts()
  except ValueError as e:
    raise ConfigError(str(e)) from None
  scored = min(run.eval_settings.lm_tokens + 1, valid.size)
  if scored < longest + 1:
    raise ConfigError(
      f'the validation text scored ({scored} bytes: eval.lm_tokens and the '
      f'split) holds no window of {longest}; lower eval.lengths or raise '
      'eval.lm_tokens'
    )


def longest_tokens(run: Run) -> tuple[int, str]:
  """The longest window, trained or evaluated."""
  config = run.config
  return (
    max(list(run.eval_settings.lengths) + [run.train_settings.max_length]),
    f'the longest window of {config.task}',
  )


PROTOCOL = protocol_lib.Protocol(
  name='perplexity',
  validate=validate,
  evaluate=evaluate,
  summary=summary,
  results=perplexity_record.PerplexityResults,
  # A causal LM predicts the next byte, an encoder is a masked LM of the same windows.
  training=dataclasses.replace(protocol_lib.SEQUENCE, model_sizes=model_sizes, objective=objective),
  longest_tokens=longest_tokens,
  longest_length=lambda run: max(run.eval_settings.lengths),
  task_type=CorpusTask,
  examples=examples,
  example_fields=('eval.lengths', 'eval.lm_tokens', 'eval.sliding_stride', 'model.family'),
  example_cells=lambda run: [f'length_{n}' for n in run.eval_settings.lengths],
  example_specs=example_specs,
)
