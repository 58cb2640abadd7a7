"""The study's protocol (Ruoss et al. 2023): accuracy per input length.

Training runs a curriculum of lengths ~ U{1..N} in length buckets (one program each);
evaluation measures every length of `config_lib.eval_lengths` (41..500 in the study) on
`eval.examples_per_length` examples in sub-batches, the same data for every model, and
scores a member by its mean accuracy over the lengths past N. Measured lengths are kept in
`workdir/eval.jsonl`.

  >>> record = PROTOCOL.evaluate(run, state, ctx)    # a RangeResults (record.py)  # doctest: +SKIP
  >>> record.members[0].accuracy_by_length[41]  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import os
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from posenc import config as config_lib
from posenc.storage import io
from posenc.models import encoder as encoder_lib
from posenc.models import objectives
from posenc import results as results_lib
from posenc.training import protocol as protocol_lib
from posenc.training import frozen as frozen_lib
from posenc.kinds.range import record as range_record
from posenc import programs as programs_lib
from posenc.programs import compiling
from tasks import base as task_base

EVAL_FILE = 'eval.jsonl'  # the measured lengths, kept as they are measured
Run = protocol_lib.Run

ConfigError = config_lib.ConfigError


@runtime_checkable
class RangeTask(Protocol):
  """What the range kind reads off a task: its sizes and its two samplers, in the padding
  convention of tasks/base.py (`tasks.base.Task` has them all). Checked when a run is built
  (`posenc.setup.protocol_of`).

  Example:
    >>> import tasks
    >>> [isinstance(tasks.get(name), RangeTask) for name in ('parity_check', 'addition')]
    [True, False]
  """

  vocab_size: int  # V: input token ids 0..V-1
  num_classes: int  # C: output classes 0..C-1

  def output_length(self, length: Any) -> Any:
    """O(L), the outputs of an input of length L (an int, or a traced int32)."""

  def sample(self, key: jax.Array, batch_size: int, length: int) -> dict[str, jax.Array]:
    """A batch at one static length: `inputs` [B, L], `targets` and `mask` [B, O(L)], ..."""

  def sample_padded(
    self, key: jax.Array, batch_size: int, length: Any, max_length: int
  ) -> dict[str, jax.Array]:
    """A batch at a traced `length`, padded to `max_length`: `inputs` [B, max_length],
    `targets`, `mask`, `output_valid` [B, O(max_length)], `length`, `output_length` []."""


def train_buckets(run: Run) -> list[int]:
  """The padded input lengths training runs at, ascending.

  Example: N = 40, bucket_size 5 -> [5, 10, ..., 40].
  """
  n, size = run.train_settings.max_length, run.train_settings.bucket_size
  return programs_lib.data_widths(n, size)


def train_batch(
  run: Run, key: jax.Array, step: jax.Array, length: jax.Array, bucket: int
) -> dict[str, jax.Array]:
  """`train.batch_size` examples of the step's (traced) length, padded to `bucket`."""
  del step  # the step's length is drawn from it by the curriculum
  return run.task.sample_padded(key, run.train_settings.batch_size, length, bucket)


def model_sizes(run: Run) -> dict[str, int]:
  """An encoder reads its classes off empty query tokens; a decoder writes them as tokens."""
  if run.family.generates:
    return {'vocab_size': objectives.decoder_vocab(run.task).size, 'num_outputs': 1}
  return {'vocab_size': run.task.vocab_size, 'num_classes': run.task.num_classes}


def sample_sub_batch(
  run: Run, data_key: jax.Array, length: jax.Array, j: jax.Array, bucket: int
) -> dict[str, jax.Array]:
  """The examples of (length, sub-batch j): the same for every model and run."""
  return run.task.sample_padded(
    jax.random.fold_in(jax.random.fold_in(data_key, length), j),
    run.eval_settings.batch_size,
    length,
    bucket,
  )


def eval_bucket(run: Run, length: Any) -> Any:
  """The data width of an evaluated length (int, or traced): its `eval.bucket_size`
  bucket, which decides the examples drawn (the program serving it may be wider)."""
  return programs_lib.data_width(
    length, run.eval_settings.max_length, run.eval_settings.bucket_size
  )


def widen(run: Run, batch: dict[str, jax.Array], width: int) -> dict[str, jax.Array]:
  """A batch drawn at a narrower width, padded to `width` (`tasks.base.widen`)."""
  return task_base.widen(run.task, batch, width)


def tokens(run: Run, width: int) -> int:
  """Positions of a sequence padded to `width`: inputs and outputs, and a decoder's
  separator and EOS."""
  return width + int(run.task.output_length(width)) + (2 if run.family.generates else 0)


def examples(run: Run) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
  """Every evaluated length's examples, as the evaluation draws them: ('length_N', arrays
  [sub-batch, example, ...] padded to the length's bucket, `length` [sub-batch])."""
  config = run.config
  num_sub = run.eval_settings.examples_per_length // run.eval_settings.batch_size
  draw = jax.jit(
    lambda length, bucket: jax.vmap(
      lambda j: sample_sub_batch(run, run.eval_key, length, j, bucket)
    )(jnp.arange(num_sub)),
    static_argnums=1,
  )
  for length in config_lib.eval_lengths(config):
    bucket = eval_bucket(run, length)
    yield f'length_{length}', jax.tree.map(np.asarray, draw(jnp.int32(length), bucket))


def example_specs(run: Run) -> dict[str, dict[str, tuple[tuple[int, ...], str]]]:
  """{'length_N': {array: (shape, dtype)}} of `examples`, traced once per bucket.

  Example: parity_check in tiny mode (2 sub-batches of 8, buckets of 6) ->
    {'length_1': {'inputs': ((2, 8, 6), 'int32'), 'length': ((2,), 'int32'), ...}, ...}
  """
  config = run.config
  num_sub = run.eval_settings.examples_per_length // run.eval_settings.batch_size
  by_bucket = {}
  for length in config_lib.eval_lengths(config):
    bucket = eval_bucket(run, length)
    if bucket not in by_bucket:
      by_bucket[bucket] = protocol_lib.shape_spec(
        jax.eval_shape(
          lambda n, b=bucket: jax.vmap(lambda j: sample_sub_batch(run, jax.random.key(0), n, j, b))(
            jnp.arange(num_sub)
          ),
          jnp.int32(length),
        )
      )
  return {f'length_{n}': by_bucket[eval_bucket(run, n)] for n in config_lib.eval_lengths(config)}


def make_eval_fn(
  run: Run,
  bucket: int,
  traces: collections.Counter | None = None,
  from_data: bool = False,
  data: tuple[int, ...] | None = None,
) -> Callable[..., dict[str, jax.Array]]:
  """The jitted evaluation of one length, for lengths padded to `bucket` input tokens.

  The program serves the lengths of the data widths `data` (default: `bucket` alone, the
  lengths of its `eval.bucket_size` bucket); each sub-batch is drawn at its length's data
  width and padded to `bucket`, so its examples are those of every plan.

  evaluate(params [P], length, eval_keys [P]) -> {'accuracy', 'exact_match'} [P]: the mean
  over examples_per_length / batch_size sub-batches of the pooled per-token accuracy and of
  the share of examples whose every masked output is right (`objectives`: the encoder reads
  its outputs in one pass, the decoder generates them greedily). The data of (length,
  sub-batch j) is the same for every model; randomized positions and (with eval_dropout)
  dropout are redrawn per sub-batch.

  Members run one after another, and a sub-batch runs in micro-batches sized for the
  run's platform (`eval_micro_batch`): on CPU at T = 1,000 a whole sub-batch of 64 would stream
  2 GB per attention pass through memory. All micro-batches of a sub-batch share its
  position draw (the 'noise' key), so the result is that of one call on the sub-batch.
  With `from_data`, evaluate(params, length, eval_keys, data) reads the sub-batches from
  `data` (`examples`' arrays of the length) instead of sampling them.
  """
  data = (bucket,) if data is None else tuple(data)
  batch_size = run.eval_settings.batch_size
  num_sub = run.eval_settings.examples_per_length // batch_size
  max_output = int(run.task.output_length(bucket))
  tokens = bucket + max_output
  micro = protocol_lib.eval_micro_batch(
    batch_size, run.model_settings.num_heads, tokens, run.platform
  )
  objective = objectives.study(run, bucket)

  def local_eval(params, length, keys, examples=None):
    if traces is not None:
      traces['eval'] += 1

    def sub_batch(j):
      if examples is None:
        draw = lambda d: sample_sub_batch(run, run.eval_key, length, j, d)
        widen_to = lambda b, w: widen(run, b, w)
        batch = programs_lib.widened(bucket, data, draw, widen_to, eval_bucket(run, length))
      else:
        batch = jax.tree.map(lambda x: x[j], examples)
      per_example = {k: v for k, v in batch.items() if k not in ('length', 'output_length')}
      micro_batches = jax.tree.map(
        lambda x: x.reshape(batch_size // micro, micro, *x.shape[1:]), per_example
      )

      def member(args):
        p, key = args
        dropout, noise = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, length), j))

        def counts(args):
          i, mb = args
          mb = {**mb, 'length': batch['length'], 'output_length': batch['output_length']}
          return objective.counts(
            p, mb, {'dropout': jax.random.fold_in(dropout, i), 'noise': noise}
          )

        if micro == batch_size:
          sums = counts((0, jax.tree.map(lambda x: x[0], micro_batches)))
        else:
          with jax.named_scope('eval_micro_batches'):
            sums = jax.tree.map(
              jnp.sum, jax.lax.map(counts, (jnp.arange(batch_size // micro), micro_batches))
            )
        return {
          'accuracy': sums['correct'] / sums['total'],
          'exact_match': sums['exact'] / sums['examples'],
        }

      return jax.lax.map(member, (params, keys))

    return jax.tree.map(lambda x: jnp.mean(x, axis=0), jax.lax.map(sub_batch, jnp.arange(num_sub)))

  return protocol_lib.members_program(run, local_eval, 1, from_data)


def evaluate_lengths(
  run: Run, params: Any, ctx: protocol_lib.EvalContext
) -> dict[int, dict[str, list[float]]]:
  """Per-length metrics of every member (`params` [P, ...]): {length: {'accuracy': [member
  i], 'exact_match': [member i]}}, resuming from `workdir/eval.jsonl`."""
  config, population = run.config, run.population
  fns: dict[int, Callable[..., Any]] = {}
  frozen = bool(run.eval_settings.from_files)

  def program(data_width):
    """(width, program) of a data width: compiled before training, else made here (of the
    plan's width, or of the data width without a plan)."""
    plan = None if ctx.programs is None else ctx.programs.plan
    width = data_width if plan is None else plan.program_of(data_width)
    if plan is not None and width in ctx.programs.fns:
      return width, ctx.programs.fns[width]
    if width not in fns:
      served = (width,) if plan is None else plan.serves(width)
      fns[width] = make_eval_fn(run, width, ctx.traces, from_data=frozen, data=served)
    return width, fns[width]

  def measure(length):
    width, fn = program(eval_bucket(run, length))
    data = ()
    if frozen:  # the frozen set's arrays are at the data width: padded here, on the host
      arrays = frozen_lib.load(run.eval_settings.from_files, f'length_{length}')
      data = (task_base.widen(run.task, arrays, width, np),)
    metrics = fn(params, jnp.int32(length), population.eval_keys, *data)
    return {name: protocol_lib.member_values(v, population.size) for name, v in metrics.items()}

  return protocol_lib.run_cells(
    run,
    ctx,
    EVAL_FILE,
    config_lib.eval_lengths(config),
    lambda n: {'length': n},
    measure,
    lambda n: f'length {n}',
    every=25,
  )


def programs(
  run: Run, traces: collections.Counter | None = None, workdir: str | None = None
) -> programs_lib.Stage:
  """The evaluation's programs by width, for the plan (`eval.programs`) and for compiling
  them with training's before the loop: one call per evaluated length (`needed`: the data
  widths of the lengths `workdir/eval.jsonl` does not hold yet); a program's loops run each
  member's micro-batches of each sub-batch."""
  config, population = run.config, run.population
  frozen = bool(run.eval_settings.from_files)
  num_sub = run.eval_settings.examples_per_length // run.eval_settings.batch_size
  lengths = config_lib.eval_lengths(config)
  at = [eval_bucket(run, length) for length in lengths]
  data = tuple(sorted(set(at)))
  measured = set()
  if workdir is not None:
    measured = {row['length'] for row in io.read_jsonl(os.path.join(workdir, EVAL_FILE))}
  needed = tuple(sorted({d for d, l in zip(at, lengths) if l not in measured}))

  def make(width: int, served: tuple[int, ...], count: bool = True) -> compiling.Program:
    fn = make_eval_fn(run, width, traces if count else None, from_data=frozen, data=served)
    args = (run.abstract_state.params, jax.ShapeDtypeStruct((), jnp.int32), population.eval_keys)
    if frozen:
      draw = lambda j: widen(run, sample_sub_batch(run, run.eval_key, 1, j, served[0]), width)
      args += (jax.eval_shape(lambda: jax.vmap(draw)(jnp.arange(num_sub))),)
    return compiling.Program(f'eval {width}', fn, args)

  top = data[-1]
  micro = protocol_lib.eval_micro_batch(
    run.eval_settings.batch_size, run.model_settings.num_heads, tokens(run, top), run.platform
  )
  members = population.padded_size // population.num_devices
  return programs_lib.Stage(
    name='eval',
    choice=run.eval_settings.programs,
    data=data,
    calls=tuple(float(at.count(d)) for d in data),
    work=lambda width: run.model_settings.flops(tokens(run, width), depth=1),
    make=make,
    repeats=num_sub * members * (run.eval_settings.batch_size // micro),
    threads=run.train_settings.compile_threads,
    needed=needed,
  )


def evaluate(run: Run, state: Any, ctx: protocol_lib.EvalContext) -> range_record.RangeResults:
  """The study's evaluation: per-length metrics per member; a member's scores are their means
  over the lengths past training."""
  config, diverged = run.config, protocol_lib.diverged(run, state)
  by = evaluate_lengths(run, state.params, ctx)
  eval_list = config_lib.eval_lengths(config)
  unseen = [l for l in eval_list if l > run.train_settings.max_length]
  members = []
  for i, member in enumerate(run.population.members):
    by_length = {l: by[l]['accuracy'][i] for l in eval_list}
    exact = {l: by[l].get('exact_match', [None] * (i + 1))[i] for l in eval_list}
    mean_unseen = lambda values: (
      float(np.mean([values[l] for l in unseen])) if unseen and not diverged[i] else None
    )
    exact_score = None if None in exact.values() else mean_unseen(exact)
    members.append(
      range_record.RangeMember(
        **member,
        diverged=bool(diverged[i]),
        score=mean_unseen(by_length),
        accuracy_by_length=by_length,
        exact_match_score=exact_score,
        exact_match_by_length=exact,
      )
    )
  return range_record.RangeResults(
    tuple(eval_list), (unseen[0], unseen[-1]) if unseen else None, tuple(members)
  )


def summary(results: results_lib.Results) -> str:
  lengths = results.evaluation.score_lengths
  return (
    f'best score {protocol_lib.best_score_text(results)} over lengths '
    f'{None if lengths is None else list(lengths)}'
  )


def inputs(
  run: Run, key: jax.Array, examples: int, length: int
) -> tuple[jax.Array, jax.Array, bool]:
  """The family's layout of `examples` inputs at `length`: the decoder's inputs ⊕ SEP ⊕
  answer ⊕ EOS (causal), or the encoder's inputs and empty query tokens."""
  task = run.task
  batch = task.sample(key, examples, length)
  max_output = batch['targets'].shape[1]
  if run.family.generates:
    tokens, total = objectives.decoder_layout(batch, max_output, objectives.decoder_vocab(task))
    return tokens, jnp.full((examples,), total), True
  tokens, seq_length = encoder_lib.empty_output_layout(
    batch['inputs'], batch['length'], batch['output_length'], max_output, task.vocab_size
  )
  return tokens, seq_length, False


def validate(run: Run) -> None:
  """A length past training to score.

  Example: train.max_length=8 with eval.lengths [4, 8] is refused (no length past 8: the
  score, the mean over the lengths past training, is undefined).
  """
  config = run.config
  n = run.train_settings.max_length
  if not any(l > n for l in config_lib.eval_lengths(config)):
    lengths = (
      f'eval.lengths {sorted(run.eval_settings.lengths)}'
      if run.eval_settings.lengths
      else f'1..eval.max_length={run.eval_settings.max_length}'
    )
    raise ConfigError(
      f'the evaluation lengths ({lengths}) are all within train.max_length={n}:'
      ' the score, the mean over the lengths past training, needs one past '
      f'{n}; add one to eval.lengths or raise eval.max_length'
    )


def longest_tokens(run: Run) -> tuple[int, str]:
  """Inputs and outputs at the longest length, trained or evaluated; the decoder's
  sequences add a separator and EOS, and it is fed all but the last token."""
  longest = max(run.eval_settings.max_length, run.train_settings.max_length)
  extra = 1 if run.family.generates else 0
  return (
    longest + int(run.task.output_length(longest)) + extra,
    f'at length {longest} of {run.config.task} for the {run.family.name}',
  )


# The config fields that decide `examples` (with the task and its options).
EXAMPLE_FIELDS = (
  'eval.seed',
  'eval.max_length',
  'eval.lengths',
  'eval.stride',
  'eval.bucket_size',
  'eval.batch_size',
  'eval.examples_per_length',
)


# The study's training: a length per step from U{1..N}, one program per length bucket.
TRAINING = protocol_lib.Training(
  'curriculum',
  buckets=train_buckets,
  shape=lambda run, bucket: bucket,
  batch=train_batch,
  objective=objectives.study,
  model_sizes=model_sizes,
  inputs=inputs,
  tokens=tokens,
  widen=widen,
)

PROTOCOL = protocol_lib.Protocol(
  name='range',
  validate=validate,
  evaluate=evaluate,
  summary=summary,
  results=range_record.RangeResults,
  training=TRAINING,
  longest_tokens=longest_tokens,
  longest_length=lambda run: max(config_lib.eval_lengths(run.config)),
  task_type=RangeTask,
  examples=examples,
  example_fields=EXAMPLE_FIELDS,
  example_cells=lambda run: [f'length_{n}' for n in config_lib.eval_lengths(run.config)],
  example_specs=example_specs,
  programs=programs,
)
