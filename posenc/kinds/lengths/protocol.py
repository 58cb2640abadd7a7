"""Evaluation per test length and test distribution (Awasthi & Gupta 2023): full-sequence
accuracy and mean edit distance of greedy generations, through the main task's head.

A cell is (distribution, n): `eval.examples_per_length` examples, every one of input length n
drawn from the main task's test distribution (sorting: 'uniform', or rep(n, r) as 'rep2'..
'rep5'), in sub-batches of `eval.batch_size`, from a key of the cell and sub-batch alone (the
same data for every model). The model decodes exactly as many tokens as the true answer has
(the tasks have no EOS: the paper decodes exactly n tokens after ⊥). Per cell and member:

  exact_match    the share of examples whose whole answer is right (full-sequence accuracy)
  edit_distance  the mean Levenshtein distance between the generated and the true answer
  accuracy       the share of answer tokens right at their position

One compiled program per test length serves every distribution (a switch over the
samplers), so a run compiles at most len(eval.lengths) evaluation programs. Measured cells
are appended to `workdir/lengths.jsonl`; a resumed evaluation measures only the others.

  >>> by_cell = evaluate_cells(run, params, ctx)  # doctest: +SKIP
  >>> by_cell[('rep2', 50)]['exact_match']    # one value per member  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, ClassVar, Iterator, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from posenc.models import generate
from posenc.training import multitask
from posenc import config as config_lib
from posenc.training import population as population_lib
from posenc import results as results_lib
from posenc.training import protocol as protocol_lib
from posenc.training import frozen as frozen_lib
from posenc.kinds.lengths import record as lengths_record

Array = jax.Array
METRICS = ('exact_match', 'edit_distance', 'accuracy')
# Never emitted (ids are >= 0): generation runs to each answer's full length.
_NO_EOS = -1
Run = protocol_lib.Run

ConfigError = config_lib.ConfigError


@runtime_checkable
class LengthsTask(Protocol):
  """What the lengths kind reads off a task, the main task and each of its hints alike:
  `prompt answer` sequences of one input length n, drawn from a test distribution, and for
  training one example per key (`tasks.hint_core.HintingTask` has them all). Checked when a
  run is built (`posenc.setup.protocol_of`).

  Example:
    >>> import tasks
    >>> isinstance(tasks.get('sorting_hinted'), LengthsTask)
    True
  """

  name: str
  vocab_size: int
  min_length: int  # the shortest training length
  DISTRIBUTIONS: ClassVar[tuple[str, ...]]  # the test distributions, 'uniform' first

  def max_prompt(self, n: int) -> int:
    """Prompt tokens of any example of input length up to n."""

  def max_answer(self, n: int) -> int:
    """Answer tokens of any example of input length up to n."""

  def check_length(self, n: int, distribution: str = 'uniform') -> None:
    """ValueError when input length n cannot be sampled from `distribution`."""

  def sample(
    self,
    key: jax.Array,
    batch_size: int,
    n: Any,
    prompt_width: int,
    answer_width: int,
    distribution: str = 'uniform',
  ) -> dict[str, jax.Array]:
    """Every example of input length n: `tokens` [B, prompt_width + answer_width],
    `prompt_length` [B], `length` [B]."""

  def sample_train_keys(
    self, keys: jax.Array, max_length: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """A training batch of one example per key of `keys` [B], as `sample` lays it out."""


def edit_distance(a: Array, b: Array, len_a: Array, len_b: Array) -> Array:
  """Levenshtein distance between a[i, :len_a[i]] and b[i, :len_b[i]] (unit costs).

  Args:
    a: int [B, N]; b: int [B, M]; len_a, len_b: int [B], at most N and M.

  Returns:
    int32 [B].

  The dynamic programme runs over the rows of a (a scan of N steps); within a row the
  insertion chain D[i, j] = min_k<=j (E[k] + j - k) is one cumulative minimum, so a row is a
  handful of vector operations over every example at once.

  Example: 'kitten' vs 'sitting' -> 3; [1, 2, 3] vs [1, 3] -> 1.
  """
  batch, m = b.shape
  j = jnp.arange(m + 1, dtype=jnp.int32)
  # The zero derived from `a` gives the carry a's type inside a shard_map (varying over the
  # population's devices when a is).
  first = jnp.broadcast_to(j, (batch, m + 1)) + jnp.zeros_like(a[:, :1], jnp.int32)

  def row(prev, inputs):
    i, a_i = inputs
    substitute = prev[:, :-1] + (a_i[:, None] != b).astype(jnp.int32)
    delete = prev[:, 1:] + 1
    e = jnp.concatenate(
      [jnp.full((batch, 1), i, jnp.int32), jnp.minimum(substitute, delete)], axis=1
    )
    new = j + lax.cummin(e - j, axis=1)
    return new, new

  _, rows = lax.scan(row, first, (jnp.arange(1, a.shape[1] + 1, dtype=jnp.int32), a.T))
  rows = jnp.concatenate([first[None], rows])  # [N + 1, B, M + 1]
  return rows[len_a, jnp.arange(batch), len_b]


def cells(run: Run) -> list[tuple[str, int]]:
  """The evaluated cells: every distribution at every length, in config order.

  Example: distributions [uniform, rep2], lengths [10, 50] -> (uniform, 10) (uniform, 50)
    (rep2, 10) (rep2, 50).
  """
  settings = run.eval_settings
  return [(d, int(n)) for d in settings.distributions for n in settings.lengths]


def sample_key(data_key: Array, d: Array, length: int, j: Array) -> Array:
  """The key of sub-batch j of distribution index d at `length`."""
  return jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(data_key, d), length), j)


def examples(run: Run) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
  """Every (distribution, length)'s examples as the evaluation draws them:
  ('DIST_length_N', arrays [sub-batch, example, ...])."""
  task, data_key = run.task, run.eval_key
  size = run.eval_settings.batch_size
  num_sub = run.eval_settings.examples_per_length // size
  for d, dist in enumerate(run.eval_settings.distributions):
    for n in run.eval_settings.lengths:
      n = int(n)
      draw = jax.jit(
        jax.vmap(
          lambda j, d=d, n=n, dist=dist: task.sample(
            sample_key(data_key, jnp.int32(d), n, j),
            size,
            n,
            task.max_prompt(n),
            task.max_answer(n),
            dist,
          )
        )
      )
      yield f'{dist}_length_{n}', jax.tree.map(np.asarray, draw(jnp.arange(num_sub)))


def example_specs(run: Run) -> dict[str, dict[str, tuple[tuple[int, ...], str]]]:
  """{'DIST_length_N': {array: (shape, dtype)}} of `examples`, without drawing them."""
  task = run.task
  size = run.eval_settings.batch_size
  num_sub = run.eval_settings.examples_per_length // size
  return {
    f'{dist}_length_{n}': protocol_lib.shape_spec(
      jax.eval_shape(
        jax.vmap(
          lambda j, n=n, dist=dist: task.sample(
            jax.random.key(0), size, n, task.max_prompt(n), task.max_answer(n), dist
          )
        ),
        jnp.arange(num_sub),
      )
    )
    for dist, n in cells(run)
  }


def make_length_fn(
  run: Run, length: int, traces: collections.Counter | None = None, from_data: bool = False
) -> Callable[..., dict]:
  """The jitted evaluation of every distribution at one `length`.

  f(params [P], distribution index, eval_keys [P]) -> {metric: [P]}; with `from_data`,
  f(params, d, eval_keys, data) reads the sub-batches from `data` (`examples`).
  """
  task, model = run.task, run.model
  data_key = run.eval_key
  distributions = list(run.eval_settings.distributions)
  size = run.eval_settings.batch_size
  num_sub = run.eval_settings.examples_per_length // size
  width_p, width_a = task.max_prompt(length), task.max_answer(length)

  def local(params, d, keys, data=None):
    if traces is not None:
      traces['eval'] += 1

    def sub_batch(j):
      if data is None:
        batch = lax.switch(
          d,
          [
            lambda k, dist=dist: task.sample(k, size, length, width_p, width_a, dist)
            for dist in distributions
          ],
          sample_key(data_key, d, length, j),
        )
      else:
        batch = jax.tree.map(lambda x: x[j], data)
      tokens, prompt_lengths = batch['tokens'], batch['prompt_length']
      answer_lengths = batch['length'] - prompt_lengths
      column = jnp.arange(width_p)[None, :]
      prompts = jnp.where(column < prompt_lengths[:, None], tokens[:, :width_p], 0)
      at = jnp.minimum(prompt_lengths[:, None] + jnp.arange(width_a)[None, :], tokens.shape[1] - 1)
      target = jnp.take_along_axis(tokens, at, axis=1)
      valid = jnp.arange(width_a)[None, :] < answer_lengths[:, None]

      def member(args):
        p, member_key = args
        noise = jax.random.fold_in(jax.random.fold_in(member_key, length), j)
        out = generate.generate(
          model,
          {'params': p},
          prompts,
          prompt_lengths,
          width_a,
          _NO_EOS,
          {'noise': noise},
          answer_lengths=answer_lengths,
          task=jnp.zeros_like(prompt_lengths),
        )
        right = (out == target) & valid
        return {
          'exact_match': jnp.mean(jnp.all(right | ~valid, axis=-1)),
          'edit_distance': jnp.mean(
            edit_distance(out, target, answer_lengths, answer_lengths).astype(jnp.float32)
          ),
          'accuracy': jnp.sum(right) / jnp.sum(valid),
        }

      return lax.map(member, (params, keys))

    return jax.tree.map(lambda x: jnp.mean(x, axis=0), lax.map(sub_batch, jnp.arange(num_sub)))

  return protocol_lib.members_program(run, local, 1, from_data)


def evaluate_cells(
  run: Run, params: Any, ctx: protocol_lib.EvalContext
) -> dict[tuple[str, int], dict[str, list[float]]]:
  """Every cell's metrics per member (`params` [P, ...]): {(distribution, n): {metric:
  [member i]}}."""
  population, settings = run.population, run.eval_settings
  index = {d: i for i, d in enumerate(settings.distributions)}
  fns: dict[int, Callable[..., dict]] = {}
  frozen = bool(run.eval_settings.from_files)

  def measure(cell):
    dist, n = cell
    if n not in fns:
      fns[n] = make_length_fn(run, n, ctx.traces, from_data=frozen)
    data = (frozen_lib.load(settings.from_files, f'{dist}_length_{n}'),) if frozen else ()
    metrics = fns[n](params, jnp.int32(index[dist]), population.eval_keys, *data)
    return {name: protocol_lib.member_values(metrics[name], population.size) for name in METRICS}

  return protocol_lib.run_cells(
    run,
    ctx,
    'lengths.jsonl',
    cells(run),
    lambda c: {'distribution': c[0], 'length': c[1]},
    measure,
    lambda c: f'{c[0]} length {c[1]}',
    note=lambda m: f' | exact match {np.mean(m["exact_match"]):.3f}',
  )


def evaluate(run: Run, state: Any, ctx: protocol_lib.EvalContext) -> lengths_record.LengthsResults:
  """A hinting task's evaluation: the main head's full-sequence accuracy, edit distance and
  token accuracy per test distribution and length, per member; the score is the exact match
  over the first distribution's lengths past training."""
  config, population, diverged = run.config, run.population, protocol_lib.diverged(run, state)
  by_cell = evaluate_cells(run, state.params, ctx)
  lengths = [int(n) for n in run.eval_settings.lengths]
  unseen = [n for n in lengths if n > run.train_settings.max_length]
  first = run.eval_settings.distributions[0]
  members = []
  for i, member in enumerate(population.members):
    table = {
      metric: {
        d: {n: by_cell[(d, n)][metric][i] for n in lengths} for d in run.eval_settings.distributions
      }
      for metric in METRICS
    }
    score = (
      float(np.mean([table['exact_match'][first][n] for n in unseen]))
      if unseen and not diverged[i]
      else None
    )
    members.append(
      lengths_record.LengthsMember(
        **member, diverged=bool(diverged[i]), score=score, by_length=table
      )
    )
  return lengths_record.LengthsResults(
    tuple(config.hints),
    run.train_settings.hint_schedule,
    tuple(lengths),
    tuple(run.eval_settings.distributions),
    first,
    tuple(unseen),
    tuple(members),
  )


def train_batch(
  run: Run, key: Array, step: Array, length: Array, shape: tuple[int, int]
) -> dict[str, Array]:
  """The main task and its hints, each example through its own head (`multitask`)."""
  del length  # every example draws its own
  return multitask.train_batch(
    run.train_settings, run.tasks, key, population_lib.dataset_key(run.config), step, shape
  )


def train_shape(run: Run, bucket: int) -> tuple[int, int]:
  """The widest (prompt, answer) of the main task and its hints at N."""
  del bucket  # one bucket, N
  return multitask.train_shape(run.tasks, run.train_settings.max_length)


def model_sizes(run: Run) -> dict[str, int]:
  """A head per task: the main task's, then each hint's."""
  return {'vocab_size': run.task.vocab_size, 'num_outputs': len(run.tasks)}


def summary(results: results_lib.Results) -> str:
  evaluation = results.evaluation
  hints = '+'.join(evaluation.hints) or 'no hint'
  return (
    f'best score {protocol_lib.best_score_text(results)} over {evaluation.score_distribution} '
    f'lengths {list(evaluation.score_lengths)} (full-sequence accuracy, {hints})'
  )


def inputs(run: Run, key: Array, examples: int, length: int) -> tuple[Array, Array, bool]:
  """Sequences of the main task at input length n, read through its head (head 0)."""
  task = run.task
  batch = task.sample(key, examples, length, task.max_prompt(length), task.max_answer(length))
  return batch['tokens'], batch['length'], True


def validate(run: Run) -> None:
  """The task-hinting study: a decoder, a known schedule, test lengths and distributions the
  main task can sample, tables that cover the longest sequence."""
  config, task_list, main = run.config, run.tasks, run.task
  if run.train_settings.hint_schedule not in multitask.SCHEDULES:
    raise config_lib.choices(
      run.train_settings.hint_schedule, 'train.hint_schedule', list(multitask.SCHEDULES)
    )
  size = run.train_settings.dataset_size
  if not config_lib.is_int(size) or size < 0 or 0 < size < len(task_list):
    raise ConfigError(
      f'train.dataset_size={size!r} must be 0 (fresh examples) or an integer '
      f'>= the {len(task_list)} tasks it is split between'
    )
  if run.train_settings.hint_schedule == 'mixed' and run.train_settings.batch_size < len(task_list):
    raise ConfigError(
      f'train.batch_size={run.train_settings.batch_size} cannot be split between '
      f'{len(task_list)} tasks (train.hint_schedule=mixed)'
    )
  n = run.train_settings.max_length
  for task in task_list:
    if n < task.min_length:
      raise ConfigError(
        f'train.max_length={n} is below task {task.name!r}\'s shortest '
        f'training length {task.min_length}'
      )
  distributions, lengths = list(run.eval_settings.distributions), list(run.eval_settings.lengths)
  if not distributions:
    raise ConfigError(f'eval.distributions is empty; valid: {", ".join(main.DISTRIBUTIONS)}')
  for d in distributions:
    if d not in main.DISTRIBUTIONS:
      raise ConfigError(
        f'unknown eval.distributions entry {d!r} of task {config.task!r}; '
        f'valid: {", ".join(main.DISTRIBUTIONS)}'
      )
  if len(set(distributions)) != len(distributions):
    raise ConfigError(f'eval.distributions {distributions} has duplicates')
  if not lengths:
    raise ConfigError(
      'eval.lengths is empty; give the test lengths, e.g. --config.eval.lengths=\'[10, 50, 100]\''
    )
  if not any(length > n for length in lengths):
    raise ConfigError(
      f'eval.lengths {lengths} are all within train.max_length={n}: the score, '
      'the exact match past training, needs a length past '
      f'{n}; add one to eval.lengths'
    )
  for d in distributions:
    for length in lengths:
      try:
        main.check_length(length, d)
      except ValueError as e:
        raise ConfigError(f'eval.lengths: {e}') from None


def longest_tokens(run: Run) -> tuple[int, str]:
  """The longest prompt and answer of every task at the training length and of the main task
  at the test lengths, fed all but the last token."""
  config, task_list, n = run.config, run.tasks, run.train_settings.max_length
  longest = max(
    [t.max_prompt(n) + t.max_answer(n) - 1 for t in task_list]
    + [
      task_list[0].max_prompt(l) + task_list[0].max_answer(l) - 1 for l in run.eval_settings.lengths
    ]
  )
  return longest, f'of {config.task} and its hints'


PROTOCOL = protocol_lib.Protocol(
  name='lengths',
  validate=validate,
  evaluate=evaluate,
  summary=summary,
  results=lengths_record.LengthsResults,
  # A main task and its hints share every batch (`multitask`).
  training=dataclasses.replace(
    protocol_lib.SEQUENCE,
    shape=train_shape,
    batch=train_batch,
    model_sizes=model_sizes,
    inputs=inputs,
  ),
  longest_tokens=longest_tokens,
  longest_length=lambda run: max(int(n) for n in run.eval_settings.lengths),
  task_type=LengthsTask,
  families=('decoder',),
  examples=examples,
  example_fields=(
    'eval.seed',
    'eval.distributions',
    'eval.lengths',
    'eval.batch_size',
    'eval.examples_per_length',
  ),
  example_cells=lambda run: [f'{d}_length_{n}' for d, n in cells(run)],
  example_specs=example_specs,
)
