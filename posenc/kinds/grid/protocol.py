"""Two-dimensional evaluation (McLeish et al. 2024): exact match of greedy generations per
cell (a, b) of a sequence task's two axes, e.g. the digit counts of the two operands.

Cells: every (a, b) in [1..M]² (with `eval.grid_stride`, the cells 1, 1 + s, ..., and M), and
the equal lengths of `eval.beyond` past M (the paper's "100+"). Regions: **id** (both <= n,
the training size), **ood** (some > n, both <= M), **beyond**. Each cell draws
`eval.samples_per_cell` examples from a key of the cell alone, the same for every model
(never randomly padded: the padding ablation pads training data only); a
cell's batch is padded to the widths of its bucket (`eval.bucket_size`), so a bounded number
of programs serves the grid. Measured cells are appended to `workdir/grid.jsonl`; a resumed
evaluation measures only the others.

  >>> by_cell = evaluate_cells(run, params, ctx)  # {(a, b): {'exact_match': ...}}  # doctest: +SKIP
  >>> region_means(by_cell, config)  # per member {'id', 'ood', 'beyond'}  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, ClassVar, Iterator, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from posenc.models import objectives
from posenc import config as config_lib
from posenc import programs
from posenc import results as results_lib
from posenc.training import protocol as protocol_lib
from posenc.training import frozen as frozen_lib
from posenc.kinds.grid import record as grid_record

REGIONS = ('id', 'ood', 'beyond')
Run = protocol_lib.Run

ConfigError = config_lib.ConfigError


@runtime_checkable
class GridTask(Protocol):
  """What the grid kind reads off a task: `prompt answer EOS` sequences drawn per cell (a, b)
  of its two axes, and their bounds (`tasks.arithmetic.SequenceTask` has them all). Checked
  when a run is built (`posenc.setup.protocol_of`).

  Example:
    >>> import tasks
    >>> [isinstance(tasks.get(name), GridTask) for name in ('addition', 'parity_check')]
    [True, False]
  """

  axes: ClassVar[tuple[str, str]]  # the names of the two axes, e.g. ('a', 'b')
  vocab_size: int
  eos_id: int  # where generation stops
  pad_probability: float  # the padding ablation's, for training data only (0 when evaluated)

  def max_prompt(self, a: int, b: int) -> int:
    """Prompt tokens of any cell up to (a, b)."""

  def max_answer(self, a: int, b: int) -> int:
    """Answer tokens, EOS included, of any cell up to (a, b)."""

  def check_cell(self, a: int, b: int) -> None:
    """ValueError when cell (a, b) cannot be sampled."""

  def sample(
    self, key: jax.Array, batch_size: int, a: Any, b: Any, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """Every example at cell (a, b): `tokens` [B, prompt_width + answer_width],
    `prompt_length` [B], `length` [B]."""

  def sample_train(
    self, key: jax.Array, batch_size: int, n: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """A training batch, cells stratified over [1..n]², as `sample` lays it out."""


def cells(run: Run) -> list[tuple[int, int]]:
  """The evaluated cells, row-major, then the diagonal past M.

  Example: M = 5, stride 2, beyond [7] -> (1,1) (1,3) (1,5) (3,1) ... (5,5) (7,7).
  """
  settings = run.eval_settings
  m, stride = settings.grid_max, max(settings.grid_stride, 1)
  axis = sorted(set(range(1, m + 1, stride)) | {m})
  return [(a, b) for a in axis for b in axis] + [(x, x) for x in settings.beyond]


def region(a: int, b: int, n: int, m: int) -> str:
  """'id' (both <= n), 'ood' (some > n, both <= m) or 'beyond'.

  Example: region(3, 7, 5, 10) == 'ood'; region(12, 12, 5, 10) == 'beyond'.
  """
  if a <= n and b <= n:
    return 'id'
  return 'ood' if a <= m and b <= m else 'beyond'


def widths(task: Any, a: int, b: int, bucket: int) -> tuple[int, int]:
  """(prompt width, answer width) of cell (a, b): the task's bounds rounded up to `bucket`."""
  return (
    programs.round_up(task.max_prompt(a, b), bucket),
    programs.round_up(task.max_answer(a, b), bucket),
  )


def eval_run(run: Run) -> Run:
  """The run as evaluated: the random-padding ablation pads training data only (as the
  paper's code does), so test prompts are written plainly."""
  if run.task.pad_probability:
    return dataclasses.replace(run, task=dataclasses.replace(run.task, pad_probability=0.0))
  return run


def sample_cell(
  run: Run, data_key: jax.Array, a: jax.Array, b: jax.Array, shape: tuple[int, int]
) -> dict[str, jax.Array]:
  """The examples of cell (a, b), padded to `shape`: the same for every model and run."""
  return run.task.sample(
    jax.random.fold_in(jax.random.fold_in(data_key, a), b),
    run.eval_settings.samples_per_cell,
    a,
    b,
    *shape,
  )


def examples(run: Run) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
  """Every cell's examples as the evaluation draws them: ('cell_A_B', arrays [example,
  ...] padded to the cell's widths)."""
  run = eval_run(run)
  draw = jax.jit(lambda a, b, shape: sample_cell(run, run.eval_key, a, b, shape), static_argnums=2)
  for a, b in cells(run):
    shape = widths(run.task, a, b, run.eval_settings.bucket_size)
    yield f'cell_{a}_{b}', jax.tree.map(np.asarray, draw(jnp.int32(a), jnp.int32(b), shape))


def example_specs(run: Run) -> dict[str, dict[str, tuple[tuple[int, ...], str]]]:
  """{'cell_A_B': {array: (shape, dtype)}} of `examples`, traced once per pair of widths.

  Example: {'cell_1_1': {'tokens': ((4, P + A), 'int32'), ...}, ...} with (P, A) the cell's
  widths (`widths`) and 4 samples per cell.
  """
  run = eval_run(run)
  by_shape, out = {}, {}
  for a, b in cells(run):
    shape = widths(run.task, a, b, run.eval_settings.bucket_size)
    if shape not in by_shape:
      by_shape[shape] = protocol_lib.shape_spec(
        jax.eval_shape(
          lambda x, y, s=shape: sample_cell(run, jax.random.key(0), x, y, s),
          jnp.int32(a),
          jnp.int32(b),
        )
      )
    out[f'cell_{a}_{b}'] = by_shape[shape]
  return out


def make_cell_fn(
  run: Run,
  shape: tuple[int, int],
  traces: collections.Counter | None = None,
  from_data: bool = False,
) -> Callable[..., dict]:
  """The jitted evaluation of one cell padded to `shape` (of the run as evaluated,
  `eval_run`): f(params [P], a, b, eval_keys [P]) -> {'exact_match', 'accuracy'} [P].
  Members run one after another. With `from_data`, f(params, a, b, eval_keys, data) reads
  the cell's examples from `data` (`examples`)."""
  objective = objectives.sequence(run, shape)

  def local(params, a, b, keys, data=None):
    if traces is not None:
      traces['eval'] += 1
    batch = sample_cell(run, run.eval_key, a, b, shape) if data is None else data

    def member(args):
      p, key = args
      noise = jax.random.fold_in(jax.random.fold_in(key, a), b)
      sums = objective.counts(p, batch, {'dropout': noise, 'noise': noise})
      return {
        'exact_match': sums['exact'] / sums['examples'],
        'accuracy': sums['correct'] / sums['total'],
      }

    return jax.lax.map(member, (params, keys))

  return protocol_lib.members_program(run, local, 2, from_data)


def evaluate_cells(
  run: Run, params: Any, ctx: protocol_lib.EvalContext
) -> dict[tuple[int, int], dict[str, list[float]]]:
  """Every cell's metrics per member (`params` [P, ...]): {(a, b): {'exact_match': [..],
  'accuracy': [..]}}."""
  population, settings = run.population, run.eval_settings
  evaluated = eval_run(run)
  fns: dict[tuple[int, int], Callable[..., dict]] = {}
  frozen = bool(settings.from_files)

  def measure(cell):
    a, b = cell
    shape = widths(evaluated.task, a, b, settings.bucket_size)
    if shape not in fns:
      fns[shape] = make_cell_fn(evaluated, shape, ctx.traces, from_data=frozen)
    data = (frozen_lib.load(settings.from_files, f'cell_{a}_{b}'),) if frozen else ()
    metrics = fns[shape](params, jnp.int32(a), jnp.int32(b), population.eval_keys, *data)
    return {name: protocol_lib.member_values(v, population.size) for name, v in metrics.items()}

  return protocol_lib.run_cells(
    run,
    ctx,
    'grid.jsonl',
    cells(run),
    lambda c: {'cell': list(c)},
    measure,
    lambda c: f'cell {c[0]},{c[1]}',
    every=50,
  )


def region_means(
  by_cell: dict[tuple[int, int], dict[str, list[float]]],
  run: Run,
  metric: str = 'exact_match',
) -> list[dict[str, float | None]]:
  """Per member, the mean of `metric` over each region's cells (None for an empty region).

  Example: cells (1,1) id 1.0 and (9,9) ood 0.5 -> [{'id': 1.0, 'ood': 0.5, 'beyond': None}].
  """
  n, m = run.train_settings.max_length, run.eval_settings.grid_max
  members = len(next(iter(by_cell.values()))[metric])
  out = []
  for i in range(members):
    groups = collections.defaultdict(list)
    for (a, b), metrics in by_cell.items():
      groups[region(a, b, n, m)].append(metrics[metric][i])
    out.append({r: float(np.mean(groups[r])) if groups[r] else None for r in REGIONS})
  return out


def evaluate(run: Run, state: Any, ctx: protocol_lib.EvalContext) -> grid_record.GridResults:
  """The grid's evaluation of sequence tasks: exact match per grid cell and region; a
  member's score is its OOD region's."""
  task, population, settings = run.task, run.population, run.eval_settings
  diverged = protocol_lib.diverged(run, state)
  by_cell = evaluate_cells(run, state.params, ctx)
  regions = region_means(by_cell, run)
  token_regions = region_means(by_cell, run, 'accuracy')
  members = []
  for i, member in enumerate(population.members):
    cell = lambda metric: {(a, b): v[metric][i] for (a, b), v in by_cell.items()}
    members.append(
      grid_record.GridMember(
        **member,
        diverged=bool(diverged[i]),
        score=None if diverged[i] else regions[i]['ood'],
        regions=regions[i],
        token_accuracy_regions=token_regions[i],
        exact_match_by_cell=cell('exact_match'),
        accuracy_by_cell=cell('accuracy'),
      )
    )
  return grid_record.GridResults(
    tuple(task.axes),
    settings.grid_max,
    settings.grid_stride,
    tuple(settings.beyond),
    settings.samples_per_cell,
    tuple(members),
  )


def summary(results: results_lib.Results) -> str:
  return (
    f'best score {protocol_lib.best_score_text(results)} over out-of-distribution cells (exact '
    f'match) up to {results.evaluation.grid_max}'
  )


def validate(run: Run) -> None:
  """The arithmetic study's checks: a decoder, a sane grid, tables that cover it."""
  config, task, spec, settings = run.config, run.task, run.encoding, run.eval_settings
  for key in ('grid_max', 'grid_stride', 'samples_per_cell'):
    value = getattr(settings, key)
    if not config_lib.is_int(value) or value < 1:
      raise ConfigError(f'eval.{key}={value!r} must be a positive integer')
  m = settings.grid_max
  bad = [x for x in settings.beyond if not (config_lib.is_int(x) and x > m)]
  if bad:
    raise ConfigError(f'eval.beyond {bad} must be integers past eval.grid_max={m}')
  top = largest_cell(run)
  try:
    task.check_cell(top, top)  # e.g. sorting: enough index symbols for the longest array
  except ValueError as e:
    raise ConfigError(f'{e} (the grid reaches {top} x {top})') from None
  if spec.reads_digits:
    # Abacus: a digit's index reaches the longest number (an operand or an answer) plus the offset.
    longest = max(top, task.max_answer(top, top) - 1)
    need = longest + config.encoding_options.get('abacus_offset', 99) + 1
    max_position = run.model_settings.max_position
    if max_position < need:
      raise ConfigError(
        f'model.max_position={max_position} is smaller than the '
        f'Abacus table needs ({need}: numbers of up to {longest} digits plus '
        f'offsets up to {config.encoding_options.get("abacus_offset", 99)})'
      )
  largest = config.encoding_options.get('coupling_max_position', 0)
  rows = run.model_settings.max_position
  if 'coupling_max_position' in spec.embedding_options and not 0 <= largest < rows:
    raise ConfigError(
      f'encoding_options.coupling_max_position={largest} must be in 0..{rows - 1}: position '
      f"coupling's ids index a table of model.max_position={rows} rows"
    )


def largest_cell(run: Run) -> int:
  """The largest operand length a run reaches: the grid's, its diagonal past it, training's."""
  settings = run.eval_settings
  return max([settings.grid_max, run.train_settings.max_length, *settings.beyond])


def longest_tokens(run: Run) -> tuple[int, str]:
  """The prompt and answer of the largest cell, fed all but its last token."""
  task, top = run.task, largest_cell(run)
  return (
    task.max_prompt(top, top) + task.max_answer(top, top) - 1,
    f'at {top} x {top} of {run.config.task}',
  )


PROTOCOL = protocol_lib.Protocol(
  name='grid',
  validate=validate,
  evaluate=evaluate,
  summary=summary,
  results=grid_record.GridResults,
  training=protocol_lib.SEQUENCE,
  longest_tokens=longest_tokens,
  longest_length=lambda run: max([run.eval_settings.grid_max, *run.eval_settings.beyond]),
  task_type=GridTask,
  families=('decoder',),
  examples=examples,
  example_fields=(
    'eval.seed',
    'eval.grid_max',
    'eval.grid_stride',
    'eval.beyond',
    'eval.samples_per_cell',
    'eval.bucket_size',
  ),
  example_cells=lambda run: [f'cell_{a}_{b}' for a, b in cells(run)],
  example_specs=example_specs,
)
