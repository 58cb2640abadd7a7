"""What every kind of evaluation's protocol shares: the `Protocol` record, the
`EvalContext` it is called with, the one resumable loop over cells (`run_cells`) and the
training variants (`Training`).

A protocol is how one kind of task is judged (each kind's protocol.py in `posenc.kinds`): the
evaluation (`evaluate(run, state, ctx)`: cells measured through `run_cells`, then its
record, the kind's record.py), its checks, the one-line summary of a finished run, its
frozen evaluation sets, and the training variant its tasks take (`Training`: the study's
length curriculum, or sequences), and what it reads off a task (`task_type`, a
`typing.Protocol`). Every hook takes the run (`posenc.training.run.Run`) first. A task names its kind
once (`task.protocol`); a run looks its protocol up once (`posenc.setup`), where a task that
lacks part of its kind's task type is refused (`members`).

Example:
  >>> ctx = EvalContext('runs/parity', progress=print)
  >>> record = run.protocol.evaluate(run, state, ctx)   # doctest: +SKIP
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
import typing
from typing import Any, Callable, Hashable, Sequence

import jax
import numpy as np


from posenc.storage import lease
from posenc.storage import io
from posenc.models import objectives
from posenc.programs import compiling
from posenc.training import population

# On CPU, evaluation runs micro-batches whose attention weights fit this many floats (8 MB:
# the passes over them stay in cache; measured fastest among 2**21..2**27 at T = 200..1,000).
_CPU_ATTENTION_BUDGET = 2**21
# On GPU and TPU a micro-batch's attention weights may take this share of device memory
# (a layer's logits, weights and one temporary live at once).
_ACCELERATOR_MEMORY_SHARE = 0.5
# Device memory assumed when the device does not report it (a program exported for an
# accelerator from another machine): 16 GiB, the smallest of the common ones (TPU v5e).
_DEFAULT_DEVICE_MEMORY = 16 * 2**30


# A run (`posenc.training.run.Run`): the config with everything it names, built once above this
# package. Every hook of a protocol takes it; the type is named here only, not imported.
Run = Any


@dataclasses.dataclass(frozen=True)
class EvalContext:
  """What an evaluation gets besides the run and its trained state: the work directory (where
  measured cells are kept), `progress` for its lines, `should_stop` (polled between cells)
  and `traces` (a Counter of compiled programs, or None); `programs`, the evaluation's
  programs compiled before training (`posenc.programs`), or None: compiled as needed."""

  workdir: str
  progress: Callable[[str], None] = print
  should_stop: Callable[[], bool] = lambda: False
  traces: collections.Counter | None = None
  programs: compiling.Compiled | None = None


def members_program(
  run: Run, local: Callable[..., Any], shared: int, from_data: bool = False, outputs: int = 1
) -> Callable[..., Any]:
  """An evaluation's program over the population's mesh, jitted: local(params [p, ...],
  *`shared` arguments every device gets whole, keys [p][, the examples `from_data`]) ->
  `outputs` results [p] for this device's p members (the members split over the devices).

  Example: members_program(run, local, 1) takes (params [P], length, eval_keys [P]).
  """
  P, member = population.P, population.P(population.POP)
  params = jax.tree.map(lambda _: member, run.abstract_state.params)
  in_specs = (params, *[P()] * shared, member) + ((P(),) if from_data else ())
  out_specs = member if outputs == 1 else (member,) * outputs
  return jax.jit(run.population.shard_map(local, in_specs=in_specs, out_specs=out_specs))


def diverged(run: Run, state: Any) -> np.ndarray:
  """The real members' divergence flags, bool [P], of a population `state`."""
  return np.asarray(jax.device_get(state.diverged))[: run.population.size]


@dataclasses.dataclass(frozen=True)
class Training:
  """How a kind of task is trained: two variants, `TRAINING` (the study's: a length per
  step, one program per length bucket; `posenc.kinds.range.protocol`) and `SEQUENCE` (tasks that
  sample `prompt ⊕ answer` sequences of every length up to N in one batch), each protocol
  taking one, with its own pieces where its tasks differ (`dataclasses.replace`). Every
  piece takes the run first.

  Attributes:
    name: 'curriculum' or 'sequence'.
    buckets: run -> the padded input lengths training runs at, ascending.
    shape: (run, bucket) -> the shape the objective pads its batches to.
    batch: (run, key, step, length, shape) -> one training batch.
    objective: (run, shape) -> the `objectives.Objective` of batches padded to `shape`.
    model_sizes: run -> the model's vocab_size and its output sizes (num_classes for an
      encoder, num_outputs for a decoder); asked while the run is built, before its model
      exists.
    inputs: (run, key, examples, length) -> (tokens [B, T], real lengths, causal): model
      inputs at one length, drawn as training draws them (for the analyses).
    tokens: (run, shape) -> the positions a sequence of a batch padded to `shape` fills
      (inputs and outputs), for the program plan's estimate of its work.
    widen: (run, batch, shape) -> the batch, drawn at a narrower shape, padded to `shape`;
      None where one program cannot serve several buckets (the plan keeps one per bucket).
  """

  name: str
  buckets: Callable[[Run], list[int]]
  shape: Callable[[Run, int], Any]
  batch: Callable[..., dict[str, jax.Array]]
  objective: Callable[[Run, Any], Any]
  model_sizes: Callable[[Run], dict[str, int]]
  inputs: Callable[..., tuple[jax.Array, jax.Array, bool]]
  tokens: Callable[[Run, Any], int] | None = None
  widen: Callable[[Run, dict[str, jax.Array], Any], dict[str, jax.Array]] | None = None


@dataclasses.dataclass(frozen=True)
class Protocol:
  """How one kind of task is judged, and the training variant its tasks take. Every hook
  takes the run (`posenc.training.run.Run`) first.

  Attributes:
    name: results.json's `evaluation` ('range', 'grid', 'lengths', 'perplexity').
    validate: run -> None, or `config.ConfigError` (one line) for what the protocol cannot
      run (after the general checks; called by the builder before it returns the run).
    evaluate: (run, state, ctx) -> the protocol's evaluation record (`results`) of the
      population `state` (its `params` and `diverged` flags): its axes and members (per
      member its score and metrics).
    summary: a run's `posenc.results.Results` -> the end of its closing line, e.g. 'best
      score 0.9531 over lengths [41, 500]'.
    results: the evaluation's record class in `posenc.results` (e.g. `RangeResults`), with
      `to_json` / `from_json`; its `evaluation` is the protocol's name.
    training: how its tasks are trained (`Training`).
    longest_tokens: run -> (tokens, where): the longest sequence a run feeds the model, in
      training or evaluation, and where it occurs ('at length 12 of reverse_string'), for
      the one check that a bounded encoding covers it.
    longest_length: run -> the longest length the evaluation reaches (for defaults that
      scale with it, e.g. an intervention's factor).
    task_type: what the kind reads off a task (`run.task`), written as a `typing.Protocol`
      in its protocol.py, e.g. `posenc.kinds.range.protocol.RangeTask`; `posenc.setup`
      refuses a task that lacks any of its `members`.
    families: the model families it can train (`model.family`), checked first.
    examples: run -> [(cell name, arrays)]: the exact examples the evaluation reads, for a
      frozen evaluation set (`training.frozen`); with `eval.from_files` the
      evaluation reads them from there instead of sampling.
    example_fields: the config fields that decide `examples` (with the task and options).
    example_cells: run -> the names of the cells the evaluation reads.
    example_specs: run -> {cell: {array: (shape, dtype)}} of `examples`.
    programs: (run, params) -> the evaluation's `posenc.programs.Stage` (its programs by
      width, planned and compiled with training's before the loop), or None: the kind
      compiles its programs as it reaches them.
  """

  name: str
  validate: Callable[[Run], None]
  evaluate: Callable[[Run, Any, EvalContext], Any]
  summary: Callable[[Any], str]
  results: type
  training: Training
  longest_tokens: Callable[[Run], tuple[int, str]]
  longest_length: Callable[[Run], int]
  task_type: type
  families: tuple[str, ...] = ('encoder', 'decoder')
  examples: Callable[[Run], Any] | None = None
  example_fields: tuple[str, ...] = ()
  example_cells: Callable[[Run], list[str]] | None = None
  example_specs: Callable[[Run], Any] | None = None
  programs: Callable[[Run, Any], Any] | None = None


def members(task_type: type) -> tuple[str, ...]:
  """The members a `typing.Protocol` asks for, in the order it declares them: its annotated
  attributes, properties and methods, and those of the protocols it extends.

  Example:
    >>> from posenc.kinds.range import protocol
    >>> members(protocol.RangeTask)
    ('vocab_size', 'num_classes', 'output_length', 'sample', 'sample_padded')
  """
  found = []
  for cls in reversed(task_type.__mro__):
    if cls in (object, typing.Protocol, typing.Generic):
      continue
    for name in (*cls.__dict__.get('__annotations__', {}), *cls.__dict__):
      if not name.startswith('_') and name not in found:
        found.append(name)
  return tuple(found)


def shape_spec(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
  """{name: (shape, dtype name)} of a dict of arrays or `jax.ShapeDtypeStruct`s.

  Example: shape_spec({'x': np.zeros((2, 3), np.int32)}) == {'x': ((2, 3), 'int32')}.
  """
  return {k: (tuple(int(d) for d in v.shape), str(np.dtype(v.dtype))) for k, v in tree.items()}


def best_score_text(results: Any) -> str:
  """The best member's score of a run's `posenc.results.Results`, or why there is none, for
  a protocol's summary. Example: '0.9531', or 'n/a (all members diverged)'."""
  scores = [m.score for m in results.members if m.score is not None]
  return f'{max(scores):.4f}' if scores else 'n/a (all members diverged)'


def duration(seconds: float) -> str:
  """'1h02m03s' or '2m03s'."""
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f'{h}h{m:02d}m{s:02d}s' if h else f'{m}m{s:02d}s'


def run_cells(
  run: Run,
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
  cells `should_stop` is polled (raises `lease.Preempted`); every `every` cells (and
  at the last) one progress line: 'eval LABEL (k/n)NOTE | elapsed .. | ETA ..'.

  Args:
    run: the run evaluated.
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
    >>> run_cells(run, ctx, 'eval.jsonl', [41, 42], lambda n: {'length': n}, measure,
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
      raise lease.Preempted(
        run.train_settings.steps,
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


def sequence_buckets(run: Run) -> list[int]:
  """One bucket, N: a sequence task's batches mix every length up to N."""
  return [run.train_settings.max_length]


def sequence_shape(run: Run, bucket: int) -> tuple[int, int]:
  """(prompt width, answer width) of a sequence task's training batches: its bounds at N."""
  del bucket  # one bucket, N
  n = run.train_settings.max_length
  return run.task.max_prompt(n, n), run.task.max_answer(n, n)


def sequence_inputs(
  run: Run, key: jax.Array, examples: int, length: int
) -> tuple[jax.Array, jax.Array, bool]:
  """Sequences of the cell (length, length): a decoder reads them causally; a masked
  language model (an encoder) reads whole windows of one length."""
  task = run.task
  batch = task.sample(
    key, examples, length, length, task.max_prompt(length, length), task.max_answer(length, length)
  )
  if not run.family.causal:
    return batch['tokens'], jax.numpy.int32(batch['tokens'].shape[1]), False
  return batch['tokens'], batch['length'], True


def sequence_batch(
  run: Run, key: jax.Array, step: jax.Array, length: jax.Array, shape: tuple[int, int]
) -> dict[str, jax.Array]:
  """Every example its own lengths, drawn stratified over [1..N]²."""
  del step, length  # every step draws every length
  return run.task.sample_train(
    key, run.train_settings.batch_size, run.train_settings.max_length, *shape
  )


def sequence_sizes(run: Run) -> dict[str, int]:
  """A decoder over the task's own tokens, one output head."""
  return {'vocab_size': run.task.vocab_size, 'num_outputs': 1}


SEQUENCE = Training(
  'sequence',
  buckets=sequence_buckets,
  shape=sequence_shape,
  batch=sequence_batch,
  objective=objectives.sequence,
  model_sizes=sequence_sizes,
  inputs=sequence_inputs,
)
