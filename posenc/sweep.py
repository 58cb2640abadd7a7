"""A grid of cells (one population each) run as one resumable, shardable sweep.

An experiment file lists its cells with `grid(arg) -> [overrides]`, e.g.
`[{'task': 'even_pairs', 'encoding': 'none'}, ...]`. The sweep directory holds

  cells/<task>__<encoding>/   one run directory per cell (see posenc.train)
  cells/<cell>/error.json     the error of a cell that raised (cleared when it completes)
  index/shard-<i>-of-<n>.json the state of the cells of shard i, rewritten atomically

A cell's state is read from its directory, so any process can tell the whole sweep's
state (`status`) without coordination; each shard writes only its own cells and its own
index file, so shards never race.

Example:
  >>> cells = select_cells(rpe_table1.grid(), tasks=['parity_check'], encodings=None)
  >>> mine = shard_cells(cells, index=0, count=2)
"""

from __future__ import annotations

import copy
import os
import time
import traceback
from typing import Any, Callable, Sequence

import ml_collections

from posenc import config as config_lib
from posenc import io

COMPLETE, PARTIAL, PENDING, FAILED = 'complete', 'partial', 'pending', 'failed'


def cell_name(overrides: dict[str, Any]) -> str:
  """The directory name of a cell: its override values joined, task first.

  Example: {'task': 'even_pairs', 'encoding': 'none'} -> 'even_pairs__none'; a list value
  joins with '+' ({'hints': ['count', 'fill']} -> 'count+fill'; [] -> 'none').
  """
  keys = sorted(overrides, key=lambda k: (k != 'task', k != 'encoding', k))
  text = lambda v: ('+'.join(map(str, v)) or 'none') if isinstance(v, (list, tuple)) else str(v)
  return '__'.join(text(overrides[k]).replace('/', '_') for k in keys)


def select_cells(grid: Sequence[dict[str, Any]], tasks: Sequence[str] | None = None,
                 encodings: Sequence[str] | None = None) -> list[dict[str, Any]]:
  """The cells of `grid` whose task and encoding pass the filters (None keeps all).

  Raises:
    ConfigError: a filter names a task or encoding the grid does not have.
  """
  for name, wanted in (('task', tasks), ('encoding', encodings)):
    known = list(dict.fromkeys(c[name] for c in grid))
    bad = [w for w in wanted or () if w not in known]
    if bad:
      raise config_lib.ConfigError(
          f'unknown {name} {bad[0]!r} in the sweep filter; valid {name}s: {", ".join(known)}')
  return [c for c in grid if (not tasks or c['task'] in tasks)
          and (not encodings or c['encoding'] in encodings)]


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


def cell_config(base: ml_collections.ConfigDict,
                overrides: dict[str, Any]) -> ml_collections.ConfigDict:
  """`base` with the cell's overrides (dotted keys allowed)."""
  config = copy.deepcopy(base)
  with config.unlocked():
    for key, value in overrides.items():
      node = config
      *path, leaf = key.split('.')
      for part in path:
        node = node[part]
      node[leaf] = value
  return config


def cell_state(workdir: str) -> str:
  """complete (results.json), failed (error.json), partial (started) or pending."""
  if os.path.exists(os.path.join(workdir, 'results.json')):
    return COMPLETE
  if os.path.exists(os.path.join(workdir, 'error.json')):
    return FAILED
  if os.path.exists(os.path.join(workdir, 'config.json')):
    return PARTIAL
  return PENDING


def status(sweep_dir: str, cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """The state of every cell: [{'cell', 'overrides', 'state', 'error'?}]."""
  rows = []
  for overrides in cells:
    name = cell_name(overrides)
    workdir = os.path.join(sweep_dir, 'cells', name)
    row = {'cell': name, 'overrides': overrides, 'state': cell_state(workdir)}
    if row['state'] == FAILED:
      row['error'] = io.read_json(os.path.join(workdir, 'error.json'))['error']
    rows.append(row)
  return rows


def _duration(seconds: float) -> str:
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  return f'{h}h{rem // 60:02d}m' if h else f'{rem // 60}m{rem % 60:02d}s'


def run_sweep(base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]], sweep_dir: str,
              shard: tuple[int, int] = (0, 1),
              run_cell: Callable[[ml_collections.ConfigDict, str], Any] | None = None,
              retry_failed: bool = True,
              progress: Callable[[str], None] = print,
              should_stop: Callable[[], bool] = lambda: False) -> list[dict[str, Any]]:
  """Runs this shard's cells: skips complete ones, resumes partial ones, records failures.

  A cell that another live process is running (its lock is held) is skipped. `should_stop`
  is passed to every cell's run; its `Preempted` ends the sweep (the cell resumes on the
  next run).

  Args:
    base: the experiment's config; each cell applies its overrides to a copy.
    cells: the (filtered) grid, the same list in every shard.
    sweep_dir: the sweep directory.
    shard: (index, count): this process runs `shard_cells(cells, index, count)`.
    run_cell: (config, workdir) -> anything; default `posenc.train.train_and_evaluate`.
    retry_failed: run cells that failed before again (their error stays recorded until
      they complete).
    progress: receives progress lines.
    should_stop: see `posenc.train.train_and_evaluate`.

  Returns:
    This shard's index rows after the sweep.
  """
  from posenc import train  # Deferred: status and cell selection need no JAX.
  if run_cell is None:
    run_cell = lambda config, workdir: train.train_and_evaluate(
        config, workdir, progress=progress, should_stop=should_stop)
  mine = shard_cells(cells, *shard)
  configs = [cell_config(base, overrides) for overrides in mine]
  for config in configs:  # Fail fast, before any cell runs, on an impossible cell.
    config_lib.validate(config)
  index_path = os.path.join(sweep_dir, 'index', f'shard-{shard[0]}-of-{shard[1]}.json')
  os.makedirs(os.path.dirname(index_path), exist_ok=True)

  def write_index():
    io.write_json_atomic(index_path, {'shard': list(shard), 'updated': time.time(),
                                      'cells': status(sweep_dir, mine)})

  write_index()
  todo = [(o, c) for o, c in zip(mine, configs)
          if cell_state(os.path.join(sweep_dir, 'cells', cell_name(o))) != COMPLETE
          and (retry_failed or cell_state(os.path.join(sweep_dir, 'cells', cell_name(o)))
               != FAILED)]
  progress(f'sweep shard {shard[0]}/{shard[1]}: {len(mine)} cells, '
           f'{len(mine) - len(todo)} already done, {len(todo)} to run')
  t0 = time.time()
  for k, (overrides, config) in enumerate(todo):
    name = cell_name(overrides)
    workdir = os.path.join(sweep_dir, 'cells', name)
    progress(f'cell {name} ({k + 1}/{len(todo)})')
    try:
      run_cell(config, workdir)
    except train.Preempted:
      write_index()
      raise
    except io.DirectoryBusy as e:
      progress(f'cell {name} skipped: {e}')
    except Exception as e:  # pylint: disable=broad-except
      # A failing cell must not stop the sweep: record it and go on.
      os.makedirs(workdir, exist_ok=True)
      io.write_json_atomic(os.path.join(workdir, 'error.json'), {
          'error': f'{type(e).__name__}: {e}', 'traceback': traceback.format_exc()})
      progress(f'cell {name} failed: {type(e).__name__}: {e}')
    else:
      if os.path.exists(os.path.join(workdir, 'error.json')):
        os.unlink(os.path.join(workdir, 'error.json'))
    write_index()
    elapsed = time.time() - t0
    progress(f'sweep: {k + 1}/{len(todo)} cells run | elapsed {_duration(elapsed)} | '
             f'ETA {_duration(elapsed / (k + 1) * (len(todo) - k - 1))}')
  return status(sweep_dir, mine)
