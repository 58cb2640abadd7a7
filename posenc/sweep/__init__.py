"""A grid of cells (one population each) run as one resumable, shardable sweep.

An experiment file lists its cells with `grid(arg) -> [overrides]`, e.g.
`[{'task': 'even_pairs', 'encoding': 'none'}, ...]`. The sweep directory holds

  cells/<task>__<encoding>/   one run directory per cell (see posenc.training.train)
  cells/<cell>/error.json     the error of a cell that raised (cleared when it completes)
  index/shard-<i>-of-<n>.json the state of the cells of shard i, rewritten atomically

A cell's state is read from its directory, so any process can tell the whole sweep's
state (`status`) without coordination; each shard writes only its own cells and its own
index file, so shards never race.

A cell is done only if its run is complete and its config.json equals the config the sweep
asks for (`config.config_changes`, the test training applies before resuming a run; the
resumable fields such as train.log_every may differ). A sweep whose cells hold runs of
another config (e.g. a changed `train.steps`) refuses before running anything
(`check_configs`): the new runs belong in a fresh sweep directory.

Example:
  >>> from experiments import rpe_table1
  >>> cells = select_cells(rpe_table1.grid(), tasks=['parity_check'], encodings=None)
  >>> mine = shard_cells(cells, index=0, count=2)
  >>> len(cells), len(mine), mine[0]   # one cell per encoding; this shard's first
  (13, 7, {'task': 'parity_check', 'encoding': 'none'})
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Any, Callable, Sequence

import ml_collections

from posenc import config as config_lib
from posenc.storage import io
from posenc.storage import lease
from posenc.storage import store
from posenc import suggest

COMPLETE, PARTIAL, PENDING, FAILED, HELD = 'complete', 'partial', 'pending', 'failed', 'held'
# The cell's directory holds a run of another config than the one asked for.
DIFFERS = 'config differs'
STATES = (COMPLETE, PARTIAL, PENDING, HELD, FAILED, DIFFERS)


def cell_name(overrides: dict[str, Any]) -> str:
  """The directory name of a cell: its override values joined, task first.

  Example: {'task': 'even_pairs', 'encoding': 'none'} -> 'even_pairs__none'; a list value
  joins with '+' ({'hints': ['count', 'fill']} -> 'count+fill'; [] -> 'none').
  """
  keys = sorted(overrides, key=lambda k: (k != 'task', k != 'encoding', k))
  text = lambda v: ('+'.join(map(str, v)) or 'none') if isinstance(v, (list, tuple)) else str(v)
  return '__'.join(text(overrides[k]).replace('/', '_') for k in keys)


def check_grid(base: ml_collections.ConfigDict, grid: Any) -> None:
  """Raises ConfigError (one line) unless `grid` is a non-empty list of cells, each a dict
  of overrides with a task and an encoding whose every key names a field of `base`.

  Example: [{'task': 'parity_check', 'encoding': 'none', 'train.stepz': 5}] is refused,
  naming the cell, 'train.stepz' and the fields of `train`.
  """
  if not isinstance(grid, (list, tuple)) or not grid:
    raise config_lib.ConfigError(
      f'grid() returned {str(grid)[:40]!r}, not a non-empty list '
      'of cells (dicts of config overrides)'
    )
  for cell in grid:
    if not isinstance(cell, dict) or not {'task', 'encoding'} <= set(cell):
      raise config_lib.ConfigError(
        f'grid cell {str(cell)[:60]} is not a dict of config overrides with a task and an encoding'
      )
    for key in cell:
      node, parts = base, str(key).split('.')
      for depth, part in enumerate(parts):
        where = '.'.join(parts[:depth]) or 'config'
        if not hasattr(node, 'keys') or part not in node.keys():
          valid = ', '.join(sorted(node.keys())) if hasattr(node, 'keys') else 'none'
          raise config_lib.ConfigError(
            f'grid cell {cell_name(cell)} sets unknown config field {key!r}; valid fields '
            f'of {where}: {valid}'
          )
        node = node[part]


def select_cells(
  grid: Sequence[dict[str, Any]],
  tasks: Sequence[str] | None = None,
  encodings: Sequence[str] | None = None,
  names: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
  """The cells of `grid` whose task, encoding and name (`cell_name`) pass the filters
  (None keeps all).

  Raises:
    ConfigError: a filter names a task, encoding or cell the grid does not have.
  """
  for name, wanted in (('task', tasks), ('encoding', encodings)):
    known = list(dict.fromkeys(c[name] for c in grid))
    bad = [w for w in wanted or () if w not in known]
    if bad:
      raise config_lib.ConfigError(
        f'unknown {name} {bad[0]!r}{suggest.did_you_mean(bad[0], known)} in the sweep filter; valid {name}s: {", ".join(known)}'
      )
  known = [cell_name(c) for c in grid]
  bad = [n for n in names or () if n not in known]
  if bad:
    raise config_lib.ConfigError(
      f'unknown cell {bad[0]!r}{suggest.did_you_mean(bad[0], known)} in the sweep filter; '
      f'valid cells: {", ".join(known)}'
    )
  return [
    c
    for c in grid
    if (not tasks or c['task'] in tasks)
    and (not encodings or c['encoding'] in encodings)
    and (not names or cell_name(c) in names)
  ]


def parse_shard(text: str) -> tuple[int, int]:
  """'i/n' -> (i, n) with 0 <= i < n.

  Example: parse_shard('1/4') == (1, 4).
  """
  try:
    index, count = (int(x) for x in text.split('/'))
  except ValueError:
    raise config_lib.ConfigError(f'bad shard {text!r}; use i/n with 0 <= i < n, e.g. 0/2') from None
  if not 0 <= index < count:
    raise config_lib.ConfigError(f'bad shard {text!r}; use i/n with 0 <= i < n, e.g. 0/2')
  return index, count


def shard_cells(cells: Sequence[dict[str, Any]], index: int, count: int) -> list[dict[str, Any]]:
  """Shard `index` of `count`: every count-th cell from `index` (shards are disjoint and
  together cover every cell exactly once)."""
  return list(cells[index::count])


def recorded_changes(
  workdir: str, config: ml_collections.ConfigDict
) -> list[tuple[str, Any, Any]] | None:
  """How the run recorded in `workdir` differs from `config` (`config.config_changes`), [] if
  it does not, None if `workdir` holds no run.

  Raises:
    ConfigError: config.json cannot be read.
  """
  path = os.path.join(workdir, 'config.json')
  if not io.exists(path):
    return None
  try:
    recorded = io.read_json(path)
  except (OSError, ValueError) as e:
    raise config_lib.ConfigError(
      f'cannot read {path}: {getattr(e, "strerror", None) or e}; remove that cell '
      'directory to run the cell again'
    ) from None
  return config_lib.config_changes(recorded, config_lib.as_json(config))


def cell_state(workdir: str, config: ml_collections.ConfigDict | None = None) -> str:
  """complete (results.json), failed (error.json), partial (started) or pending; with the
  requested `config`, 'config differs' first if the recorded run is of another config."""
  if config is not None and recorded_changes(workdir, config):
    return DIFFERS
  if io.exists(os.path.join(workdir, 'results.json')):
    return COMPLETE
  if io.exists(os.path.join(workdir, 'error.json')):
    return FAILED
  if io.exists(os.path.join(workdir, 'config.json')):
    return PARTIAL
  return PENDING


def status(
  sweep_dir: str,
  cells: Sequence[dict[str, Any]],
  base: ml_collections.ConfigDict | None = None,
  holders: bool = False,
) -> list[dict[str, Any]]:
  """The state of every cell: [{'cell', 'overrides', 'state', 'error'?, 'changes'?,
  'held'?}].

  With the experiment's `base` config, a cell whose run has another config than the one
  the sweep asks for is 'config differs', its `changes` as `config.describe_changes` text.
  With `holders`, a cell not complete that a live process holds (`lease.holder`: its lock or
  lease, read, nothing taken) is 'held', `held` naming the holder ('process 7 on host a').

  Example:
    >>> rows = status('sweeps/tiny', sweep_tiny.grid(), sweep_tiny.get_config())  # doctest: +SKIP
    >>> [r['state'] for r in rows]                                                # doctest: +SKIP
    ['complete', 'config differs', 'partial', 'pending']
  """
  rows = []
  for overrides in cells:
    name = cell_name(overrides)
    workdir = os.path.join(sweep_dir, 'cells', name)
    changes = (
      None if base is None else recorded_changes(workdir, config_lib.cell_config(base, overrides))
    )
    row = {
      'cell': name,
      'overrides': overrides,
      'state': DIFFERS if changes else cell_state(workdir),
    }
    if changes:
      row['changes'] = config_lib.describe_changes(changes)
    if holders and row['state'] in (PARTIAL, PENDING):
      holder = lease.holder(workdir)
      if holder is not None:
        row['state'], row['held'] = HELD, holder
    if row['state'] == FAILED:
      row['error'] = io.read_json(os.path.join(workdir, 'error.json'))['error']
    rows.append(row)
  return rows


def _names(names: Sequence[str], limit: int = 3) -> str:
  more = len(names) - limit
  return ', '.join(names[:limit]) + (f' and {more} more' if more > 0 else '')


def check_configs(
  base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]], sweep_dir: str
) -> None:
  """Refuses a sweep some of whose cells hold runs of another config than it asks for.

  Such a cell is neither done (its results answer another question) nor resumable (training
  refuses it), so the sweep would otherwise report it done or fail on it.

  Raises:
    ConfigError: one line naming the cells and their changed fields (old -> new), cells
      with the same changes grouped, e.g. "1 of 2 cells in runs/qs hold runs of a different
      config: even_pairs__rotary (train.steps 2000 -> 4000); ...".
  """
  groups: dict[str, list[str]] = {}
  for overrides in cells:
    name = cell_name(overrides)
    changes = recorded_changes(
      os.path.join(sweep_dir, 'cells', name), config_lib.cell_config(base, overrides)
    )
    if changes:
      groups.setdefault(config_lib.describe_changes(changes), []).append(name)
  if groups:
    count = sum(len(names) for names in groups.values())
    listed = '; '.join(f'{_names(names)} ({changes})' for changes, names in groups.items())
    raise config_lib.ConfigError(
      f'{count} of {len(cells)} cells in {sweep_dir} '
      f'{"holds a run" if count == 1 else "hold runs"} of a different config: '
      f'{listed}; a sweep neither counts nor reruns them: give a fresh --workdir for the '
      'new runs (or the recorded config to resume these); --status lists them'
    )


def missing_from_report(
  rows: Sequence[dict[str, Any]], held: dict[str, str] | None = None
) -> list[str]:
  """'cell: why' for every row (of `status`) that is not complete: what a report built from
  the complete cells leaves out, and what makes a sweep unfinished. `held` maps cells this
  process found held by another to the holder ('process 7 on host a').

  Example:
    >>> missing_from_report([{'cell': 'a', 'state': 'pending'}], {'a': 'process 7 on host h'})
    ['a: held by process 7 on host h (another sweep or run is training it)']
  """
  held = held or {}
  out = []
  for row in rows:
    state, name = row['state'], row['cell']
    if state == COMPLETE:
      continue
    if name in held or state == HELD:
      why = f'held by {held.get(name) or row["held"]} (another sweep or run is training it)'
    elif state == FAILED:
      why = f'failed: {row["error"]}'
    elif state == DIFFERS:
      why = f'holds a run of a different config ({row["changes"]})'
    elif state == PARTIAL:
      why = 'incomplete: started, not finished'
    else:
      why = 'not run'
    out.append(f'{name}: {why}')
  return out


def _duration(seconds: float) -> str:
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  return f'{h}h{rem // 60:02d}m' if h else f'{rem // 60}m{rem % 60:02d}s'


def build_cells(
  base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]], shard: tuple[int, int] = (0, 1)
) -> list[Any]:
  """The runs of this shard's cells (`posenc.training.run.Run`), each built once (`setup.build`)
  from `base` with the cell's overrides.

  Raises:
    ConfigError: a cell's config is impossible (one line); nothing has run or been written.
  """
  from posenc import setup  # Deferred: status and cell selection need no JAX.

  return [setup.build(config_lib.cell_config(base, o)) for o in shard_cells(cells, *shard)]


def run_sweep(
  base: ml_collections.ConfigDict,
  cells: Sequence[dict[str, Any]],
  sweep_dir: str,
  shard: tuple[int, int] = (0, 1),
  run_cell: Callable[[Any, str], Any] | None = None,
  retry_failed: bool = True,
  progress: Callable[[str], None] = print,
  should_stop: Callable[[], bool] = lambda: False,
  lock: Callable[[str, float | None], Any] = lambda directory, wait_s: lease.lock(
    directory, wait_s=wait_s
  ),
  wait_s: float | None = None,
  wait_for_held: bool = True,
  runs: Sequence[Any] | None = None,
  checkpointed: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
  """Runs this shard's cells: skips complete ones, resumes partial ones, records failures.

  A cell another live process holds is never counted done. The first pass over the cells
  does not wait for it (a cell whose holder is gone is taken over at once); once the other
  cells are done, with `wait_for_held` each held cell is tried again, its lock waiting up to
  `wait_s` (None: long enough for its holder's lease to expire once): a holder that died or
  was preempted is taken over then, one that completed the cell leaves it complete. A cell
  still held after that (or at once without `wait_for_held`: a distributed job leaves it
  to its holder) is unfinished: its row gets `held`, the holder ('process 7 on host a').
  `should_stop` is passed to every cell's run; its `Preempted` ends the sweep (the cell
  resumes on the next run). The last progress line counts the cells run, already done,
  held and failed, e.g. 'sweep shard 0/1: 4 cells: 2 run, 1 already done, 1 held (by
  process 7 on host a), 0 failed'.

  Args:
    base: the experiment's config; each cell applies its overrides to a copy.
    cells: the (filtered) grid, the same list in every shard.
    sweep_dir: the sweep directory.
    shard: (index, count): this process runs `shard_cells(cells, index, count)`.
    run_cell: (run, workdir) -> anything; default `posenc.training.train.train_and_evaluate`
      under `lock`. One of its own raises lease.DirectoryBusy for a held cell.
    retry_failed: run cells that failed before again (their error stays recorded until
      they complete).
    progress: receives progress lines.
    should_stop: see `posenc.training.train.train_and_evaluate`.
    lock: (directory, wait_s) -> the lock of a cell (`lease.lock`, with the lease's length).
    wait_s: how long the second try of a held cell waits for it (None: one expiry).
    wait_for_held: try held cells again at the end (False: leave them to their holders).
    runs: this shard's runs, when the caller has built them (`build_cells`); else built
      here, before any cell runs.
    checkpointed: see `posenc.training.train.train_and_evaluate` (the default `run_cell`'s).

  Returns:
    This shard's index rows (`status`) after the sweep, with `held` on the held cells.

  Raises:
    ConfigError: a cell's config is impossible, or a cell holds a run of another config
      (`check_configs`); nothing has run or been written then.
  """
  from posenc.training import train  # Deferred: status and cell selection need no JAX.

  wait_now = [0.0]  # the wait of the current pass: none first, then wait_s
  if run_cell is None:
    run_cell = lambda run, workdir: train.train_and_evaluate(
      run,
      workdir,
      progress=progress,
      should_stop=should_stop,
      lock=lambda directory: lock(directory, wait_now[0]),
      checkpointed=checkpointed or (lambda step: None),
    )
  mine = shard_cells(cells, *shard)
  if runs is None:  # Fail fast, before any cell runs, on an impossible cell.
    runs = build_cells(base, cells, shard)
  check_configs(base, mine, sweep_dir)
  shard_run = _ShardRun(sweep_dir, base, mine, shard, run_cell, progress)
  shard_run.write_index()
  before = {cell_name(o): cell_state(os.path.join(sweep_dir, 'cells', cell_name(o))) for o in mine}
  todo = [
    (o, r)
    for o, r in zip(mine, runs)
    if before[cell_name(o)] != COMPLETE and (retry_failed or before[cell_name(o)] != FAILED)
  ]
  done = sum(state == COMPLETE for state in before.values())
  not_retried = len(mine) - done - len(todo)
  progress(
    f'sweep shard {shard[0]}/{shard[1]}: {len(mine)} cells, {done} already done'
    + (f', {not_retried} failed before (not retried)' if not_retried else '')
    + f', {len(todo)} to run'
  )
  t0 = time.time()
  for k, (overrides, run) in enumerate(todo):
    progress(f'cell {cell_name(overrides)} ({k + 1}/{len(todo)})')
    shard_run.attempt(overrides, run)
    elapsed = time.time() - t0
    progress(
      f'sweep: {k + 1}/{len(todo)} cells tried | elapsed {_duration(elapsed)} | '
      f'ETA {_duration(elapsed / (k + 1) * (len(todo) - k - 1))}'
    )
  if wait_for_held and shard_run.held:
    wait_now[0] = wait_s
    shard_run.retry_held(todo)
  held = shard_run.held
  holders = ', '.join(dict.fromkeys(held.values()))
  progress(
    f'sweep shard {shard[0]}/{shard[1]}: {len(mine)} cells: {shard_run.ran} run, {done} already '
    f'done'
    + (f', {shard_run.by_others} completed by another process' if shard_run.by_others else '')
    + f', {len(held)} held'
    + (f' (by {holders})' if held else '')
    + f', {shard_run.failed + not_retried} failed'
    + (f' ({not_retried} before, not retried)' if not_retried else '')
  )
  return shard_run.rows()


class _ShardRun:
  """One shard's pass over its cells: runs a cell (`attempt`), recording its failure or
  that another process holds it, and rewrites the shard's index file after each."""

  def __init__(self, sweep_dir, base, mine, shard, run_cell, progress):
    self.sweep_dir, self.base, self.mine, self.shard = sweep_dir, base, mine, shard
    self.run_cell, self.progress = run_cell, progress
    self.index_path = os.path.join(sweep_dir, 'index', f'shard-{shard[0]}-of-{shard[1]}.json')
    io.makedirs(os.path.dirname(self.index_path))
    self.held: dict[str, str] = {}  # cell name -> its holder, for the cells held when tried
    self.ran = self.failed = self.by_others = 0

  def rows(self) -> list[dict[str, Any]]:
    out = status(self.sweep_dir, self.mine, self.base)
    for row in out:
      if row['cell'] in self.held and row['state'] != COMPLETE:
        row['held'] = self.held[row['cell']]
    return out

  def write_index(self) -> None:
    io.write_json_atomic(
      self.index_path, {'shard': list(self.shard), 'updated': time.time(), 'cells': self.rows()}
    )

  def attempt(self, overrides, cell) -> None:
    """Runs one cell (`cell`, as `run_cell` takes it), recording its failure or that it
    is held."""
    name = cell_name(overrides)
    workdir = os.path.join(self.sweep_dir, 'cells', name)
    try:
      self.run_cell(cell, workdir)
    except lease.Preempted:
      self.write_index()
      raise
    except lease.DirectoryBusy as e:
      self.held[name] = e.holder or 'another process'
      self.progress(f'cell {name} is held: {e}')
    except Exception as e:  # pylint: disable=broad-except
      if io.no_space(e) is not None or isinstance(e, store.StoreError):
        raise  # Every cell would fail: the sweep stops, and this cell resumes on the rerun.
      # A failing cell must not stop the sweep: record it and go on.
      self.failed += 1
      io.makedirs(workdir)
      io.write_json_atomic(
        os.path.join(workdir, 'error.json'),
        {'error': f'{type(e).__name__}: {e}', 'traceback': traceback.format_exc()},
      )
      self.progress(f'cell {name} failed: {type(e).__name__}: {e}')
    else:
      self.ran += 1
      self.held.pop(name, None)
      if io.exists(os.path.join(workdir, 'error.json')):
        io.remove(os.path.join(workdir, 'error.json'))
    self.write_index()

  def retry_held(self, todo) -> None:
    """Tries each cell of `todo` held when tried once more (its lock now waits), unless its
    holder completed it meanwhile."""
    for overrides, cell in todo:
      name = cell_name(overrides)
      if name not in self.held:
        continue
      if cell_state(os.path.join(self.sweep_dir, 'cells', name)) == COMPLETE:
        self.held.pop(name)  # Its holder completed it meanwhile.
        self.by_others += 1
        continue
      self.progress(f'cell {name}: held by {self.held[name]} when tried; trying it again')
      self.attempt(overrides, cell)
      if name in self.held and cell_state(os.path.join(self.sweep_dir, 'cells', name)) == COMPLETE:
        self.held.pop(name)  # Its holder completed it while this process waited.
        self.by_others += 1
    self.write_index()
