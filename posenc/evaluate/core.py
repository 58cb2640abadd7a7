"""What every evaluation protocol shares: the `Protocol` record, the `EvalContext` it is
called with, and the one resumable loop over cells (`run_cells`).

A protocol is how one kind of task is judged: the evaluation (`evaluate`: cells measured
through `run_cells`, then its record in `posenc.results`), its checks, the one-line summary
of a finished run, its frozen evaluation sets, and the training variant its tasks take
(`Training`: the study's length curriculum, or sequences); the report finds its section by
the record's `evaluation` (`posenc.report.SECTIONS`).
A task names its protocol once (`task.protocol`); a run looks it up once (`posenc.setup`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Any, Callable, Hashable, Sequence

import jax
import ml_collections
import numpy as np

from posenc import checkpoint
from posenc import families
from posenc import io
from posenc import objectives

# On CPU, evaluation runs micro-batches whose attention weights fit this many floats (8 MB:
# the passes over them stay in cache; measured fastest among 2**21..2**27 at T = 200..1,000).
_CPU_ATTENTION_BUDGET = 2**21
# On GPU and TPU a micro-batch's attention weights may take this share of device memory
# (a layer's logits, weights and one temporary live at once).
_ACCELERATOR_MEMORY_SHARE = 0.5
# Device memory assumed when the device does not report it (a program exported for an
# accelerator from another machine): 16 GiB, the smallest of the common ones (TPU v5e).
_DEFAULT_DEVICE_MEMORY = 16 * 2**30


@dataclasses.dataclass(frozen=True)
class EvalContext:
  """What an evaluation reads: the run's config, task, model and population, the final
  parameters [P, ...], the evaluation data key, the work directory (where measured cells
  are kept), `progress` for its lines, `traces` (a Counter of compiled programs),
  `should_stop` (polled between cells) and the members' divergence flags [P]."""

  config: ml_collections.ConfigDict
  task: Any
  model: Any
  population: Any
  params: Any
  data_key: jax.Array
  workdir: str
  progress: Callable[[str], None] = print
  traces: collections.Counter | None = None
  should_stop: Callable[[], bool] = lambda: False
  diverged: Any = None


@dataclasses.dataclass(frozen=True)
class Training:
  """How a kind of task is trained: two variants, `CURRICULUM` (the study's: a length per
  step, one program per length bucket; `posenc.evaluate.range`) and `SEQUENCE` (tasks that
  sample `prompt ⊕ answer` sequences of every length up to N in one batch), each protocol
  taking one, with its own pieces where its tasks differ (`dataclasses.replace`).

  Attributes:
    name: 'curriculum' or 'sequence'.
    buckets: config -> the padded input lengths training runs at, ascending.
    shape: (config, task, bucket) -> the shape the objective pads its batches to.
    batch: (config, task, key, step, length, shape) -> one training batch.
    objective: (config, task, model, shape) -> the `objectives.Objective` of batches padded
      to `shape`.
    model_sizes: (config, task) -> the model's vocab_size and its output sizes
      (num_classes for an encoder, num_outputs for a decoder).
    inputs: (config, task, key, examples, length) -> (tokens [B, T], real lengths, causal):
      model inputs at one length, drawn as training draws them (for the analyses).
  """

  name: str
  buckets: Callable[[ml_collections.ConfigDict], list[int]]
  shape: Callable[..., Any]
  batch: Callable[..., dict[str, jax.Array]]
  objective: Callable[..., Any]
  model_sizes: Callable[[ml_collections.ConfigDict, Any], dict[str, int]]
  inputs: Callable[..., tuple[jax.Array, jax.Array, bool]]


@dataclasses.dataclass(frozen=True)
class Protocol:
  """How one kind of task is judged, and the training variant its tasks take.

  Attributes:
    name: results.json's `evaluation` ('range', 'grid', 'lengths', 'perplexity').
    validate: (config, task, encoding spec) -> None, or `config.ConfigError` (one line) for
      what the protocol cannot run (after `config.validate`'s general checks).
    evaluate: ctx -> the protocol's evaluation record (`results`): its axes and members
      (per member its score and metrics).
    summary: a run's `posenc.results.Results` -> the end of its closing line, e.g. 'best
      score 0.9531 over lengths [41, 500]'.
    results: the evaluation's record class in `posenc.results` (e.g. `RangeResults`), with
      `to_json` / `from_json`; its `evaluation` is the protocol's name.
    training: how its tasks are trained (`Training`).
    longest_tokens: (config, task) -> (tokens, where): the longest sequence a run feeds
      the model, in training or evaluation, and where it occurs ('at length 12 of
      reverse_string'), for the one check that a bounded encoding covers it.
    families: the model families it can train (`model.family`), checked first.
    examples: (config, task, data key) -> [(cell name, arrays)]: the exact examples the
      evaluation reads, for a frozen evaluation set (`evaluate.frozen`); with
      `config.eval.from_files` the evaluation reads them from there instead of sampling.
    example_fields: the config fields that decide `examples` (with the task and options).
    example_cells: config -> the names of the cells the evaluation reads.
    example_specs: (config, task) -> {cell: {array: (shape, dtype)}} of `examples`.
    longest_length: config -> the longest length the evaluation reaches (for defaults that
      scale with it, e.g. an intervention's factor).
  """

  name: str
  validate: Callable[[ml_collections.ConfigDict, Any, Any], None]
  evaluate: Callable[[EvalContext], Any]
  summary: Callable[[Any], str]
  results: type
  training: Training
  longest_tokens: Callable[[ml_collections.ConfigDict, Any], tuple[int, str]]
  longest_length: Callable[[ml_collections.ConfigDict], int]
  families: tuple[str, ...] = ('encoder', 'decoder')
  examples: Callable[..., Any] | None = None
  example_fields: tuple[str, ...] = ()
  example_cells: Callable[[ml_collections.ConfigDict], list[str]] | None = None
  example_specs: Callable[..., Any] | None = None


def shape_spec(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
  """{name: (shape, dtype name)} of a dict of arrays or `jax.ShapeDtypeStruct`s.

  Example: shape_spec({'x': np.zeros((2, 3), np.int32)}) == {'x': ((2, 3), 'int32')}.
  """
  return {k: (tuple(int(d) for d in v.shape), str(np.dtype(v.dtype))) for k, v in tree.items()}


def duration(seconds: float) -> str:
  """'1h02m03s' or '2m03s'."""
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f'{h}h{m:02d}m{s:02d}s' if h else f'{m}m{s:02d}s'


def run_cells(
  ctx: EvalContext,
  file: str,
  cells: Sequence[Hashable],
  fields: Callable[[Any], dict[str, Any]],
  measure: Callable[[Any], dict],
  label: Callable[[Any], str],
  every: int = 1,
  note: Callable[[dict], str] = lambda metrics: '',
) -> dict[Any, dict]:
  """The metrics of every cell, measuring only those `workdir/file` does not hold yet.

  Each measured cell is appended to the JSON-lines file as `{**fields(cell), **metrics}`
  at once, so an evaluation stopped at any moment resumes with the cells it had. Between
  cells `should_stop` is polled (raises `checkpoint.Preempted`); every `every` cells (and
  at the last) one progress line: 'eval LABEL (k/n)NOTE | elapsed .. | ETA ..'.

  Args:
    ctx: the evaluation's context.
    file: the JSON-lines file's name in ctx.workdir, e.g. 'eval.jsonl'.
    cells: the cells wanted, in order; hashable.
    fields: cell -> the fields that name it in a row, e.g. {'length': 41}; a row's cell is
      read back as the tuple of those fields' values (one field: the value itself, a
      list-valued field: a tuple).
    measure: cell -> {metric: [value per member]} (the real members only).
    label: cell -> how progress names it, e.g. 'length 41'.
    every: a progress line every this many cells.
    note: metrics -> text after the count, e.g. ' | exact match 0.93'.

  Returns:
    {cell: metrics} for every cell of `cells`, in their order.

  Example:
    >>> run_cells(ctx, 'eval.jsonl', [41, 42], lambda n: {'length': n}, measure,
    ...           lambda n: f'length {n}')  # doctest: +SKIP
    {41: {'accuracy': [0.9]}, 42: {'accuracy': [0.8]}}
  """
  path = os.path.join(ctx.workdir, file)
  names = list(fields(cells[0])) if cells else []

  def cell_of(row):
    values = [tuple(row[k]) if isinstance(row[k], list) else row[k] for k in names]
    return values[0] if len(values) == 1 else tuple(values)

  done = {
    cell_of(r): {k: v for k, v in r.items() if k not in names}
    for r in io.read_jsonl(path, rewrite=True)
  }
  todo = [c for c in cells if c not in done]
  t0 = time.time()
  for k, cell in enumerate(todo):
    if ctx.should_stop():
      raise checkpoint.Preempted(
        ctx.config.train.steps,
        f'preempted during evaluation, before {label(cell)}: the cells measured so far are kept',
      )
    metrics = measure(cell)
    io.append_jsonl(path, {**fields(cell), **metrics})
    done[cell] = metrics
    if (k + 1) % every == 0 or k + 1 == len(todo):
      elapsed = time.time() - t0
      ctx.progress(
        f'eval {label(cell)} ({k + 1}/{len(todo)}){note(metrics)} | elapsed '
        f'{duration(elapsed)} | ETA {duration(elapsed / (k + 1) * (len(todo) - k - 1))}'
      )
  return {c: done[c] for c in cells}


def member_values(values: Any, size: int) -> list[float]:
  """The real members' values of a [padded P] array, as floats."""
  return [float(x) for x in np.asarray(jax.device_get(values))[:size]]


def _divisor_at_most(n: int, limit: int) -> int:
  return max(d for d in range(1, n + 1) if n % d == 0 and d <= max(limit, 1))


def device_memory(platform: str) -> int:
  """Bytes of memory of one local device of `platform`, or `_DEFAULT_DEVICE_MEMORY` when no
  such device is here or it does not say."""
  try:
    stats = jax.local_devices(backend=platform)[0].memory_stats() or {}
  except RuntimeError:
    stats = {}
  return int(stats.get('bytes_limit', _DEFAULT_DEVICE_MEMORY))


def eval_micro_batch(
  batch_size: int,
  num_heads: int,
  tokens: int,
  platform: str = 'cpu',
  memory_bytes: int | None = None,
) -> int:
  """Examples per evaluation micro-batch, a divisor of `batch_size`.

  On CPU: the most whose [H, T, T] attention weights fit `_CPU_ATTENTION_BUDGET` floats, so
  each pass over them stays in cache. On GPU and TPU: the most whose weights (with the
  logits and a temporary) fit `_ACCELERATOR_MEMORY_SHARE` of the device's memory: the whole
  sub-batch unless sequences are very long.

  Example: eval_micro_batch(64, 8, 1000) -> 1; eval_micro_batch(64, 8, 100) -> 16;
    eval_micro_batch(64, 8, 1000, 'tpu', 16 * 2**30) -> 64.
  """
  if platform == 'cpu':
    return _divisor_at_most(batch_size, _CPU_ATTENTION_BUDGET // (num_heads * tokens * tokens))
  memory = device_memory(platform) if memory_bytes is None else memory_bytes
  per_example = 3 * 4 * num_heads * tokens * tokens
  return _divisor_at_most(batch_size, int(_ACCELERATOR_MEMORY_SHARE * memory) // per_example)


# The shared training hooks of the sequence tasks (prompt ⊕ answer, every length in one batch).


def sequence_buckets(config: ml_collections.ConfigDict) -> list[int]:
  """One bucket, N: a sequence task's batches mix every length up to N."""
  return [config.train.max_length]


def sequence_shape(config: ml_collections.ConfigDict, task: Any, bucket: int) -> tuple[int, int]:
  """(prompt width, answer width) of a sequence task's training batches: its bounds at N."""
  del bucket
  n = config.train.max_length
  return task.max_prompt(n, n), task.max_answer(n, n)


def sequence_inputs(
  config: ml_collections.ConfigDict, task: Any, key: jax.Array, examples: int, length: int
) -> tuple[jax.Array, jax.Array, bool]:
  """Sequences of the cell (length, length): a decoder reads them causally; a masked
  language model (an encoder) reads whole windows of one length."""
  batch = task.sample(
    key, examples, length, length, task.max_prompt(length, length), task.max_answer(length, length)
  )
  if not families.of(config.model.family).causal:
    return batch['tokens'], jax.numpy.int32(batch['tokens'].shape[1]), False
  return batch['tokens'], batch['length'], True


def sequence_batch(
  config: ml_collections.ConfigDict,
  task: Any,
  key: jax.Array,
  step: jax.Array,
  length: jax.Array,
  shape: tuple[int, int],
) -> dict[str, jax.Array]:
  """Every example its own lengths, drawn stratified over [1..N]²."""
  del step, length
  return task.sample_train(key, config.train.batch_size, config.train.max_length, *shape)


def sequence_sizes(config: ml_collections.ConfigDict, task: Any) -> dict[str, int]:
  """A decoder over the task's own tokens, one output head."""
  del config
  return {'vocab_size': task.vocab_size, 'num_outputs': 1}


SEQUENCE = Training(
  'sequence',
  buckets=sequence_buckets,
  shape=sequence_shape,
  batch=sequence_batch,
  objective=objectives.sequence,
  model_sizes=sequence_sizes,
  inputs=sequence_inputs,
)
