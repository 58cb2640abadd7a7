"""Run an experiment file's whole grid: `python -m launch.sweep --config=FILE --workdir=DIR`.

  python -m launch.sweep --config=experiments/rpe_table1.py --workdir=sweeps/table1 \
      --tasks=reverse_string,missing_duplicate_string --encodings=relative,randomized_relative

One population per cell (see `grid()` in the experiment file), each in
DIR/cells/<task>__<encoding>. Complete cells are skipped, partial ones resumed, failing
ones recorded (DIR/cells/<cell>/error.json) while the sweep goes on. `--config.KEY=VALUE`
overrides apply to every cell.

Worker processes on one host: `--jobs=N` runs the cells still to run in N processes at
once (each the same command for its share of them, its lines marked [k/N]), then the
report; `--jobs=0` (the default) chooses: several on a CPU-only host when at least two
cells of 1,000 steps or more are to run (one per core, at most 8), else one (see
launch/workers.py). The cells' results do not depend on it.

Slicing across processes or hosts: `--shard=i/n` runs every n-th cell from i; with
`--distributed`, `jax.distributed.initialize` is called (coordinator, process count and
index from --coordinator_address/--num_processes/--process_id, or from the environment on
TPU pods and SLURM) and the shard is this process's index of the process count. Each
process writes only its own cells and DIR/index/shard-i-of-n.json.

  --cells    only these cells (their directory names, e.g. even_pairs__rotary).
  --status   print every cell's state and exit.
  --cost     print what the selected grid would cost on this machine's devices, from
             measured throughput, and exit (see posenc.sweep.cost). With --device=H100|A100|v4|v5e
             (and --chips=N), a roofline estimate for that accelerator instead, from XLA's
             cost analysis of the accelerator programs.
  --report   after the sweep, write DIR/report (Table 1, Table 4, Figure 4, per-length
             table) and print it, once every cell of the grid is complete. Default on.
  --partial  a report even if some cells are not complete: from the complete ones, its
             titles marked partial and the others listed with the reason (held by another
             process, failed, unfinished) at the end of every table and of the printout.

A cell is done when its run is complete and of the same config (the resumable fields such
as --config.train.log_every aside). If cells hold runs of another config -- the same
command with a changed override -- the sweep names them and their changed fields and
refuses (exit status 2) before running anything: give a fresh --workdir for the new runs.
--status shows such cells as "config differs".

A cell another process holds is never counted done. The sweep runs the other cells first,
then tries each held cell again, waiting for it up to --lease_wait (default: long enough for
its lease to expire once): a holder that died or was preempted without releasing it is taken
over then, and a holder that completes the cell meanwhile leaves it complete. A shard of a
distributed job (--shard=i/n with n > 1, or --distributed) leaves held cells to their
holders. The closing line counts the cells run, already done, held (naming the holders) and
failed.

Exit status: 0 when every selected cell is complete; 1 when some failed (listed, with
their errors); 75 when none failed but some are still held by other processes (listed);
2 for bad input; 143 when SIGTERM made the running cell checkpoint at its next step (the
rerun resumes it).
"""

import os
import sys
import time
from typing import NoReturn

from absl import flags
import jax
from ml_collections import config_flags

from launch import common
from launch import full_disk
from launch import workers
from launch import compile_cache
from posenc import config as config_lib
from posenc.sweep import cost
from posenc.storage import lease
from posenc import sweep as sweep_lib

# New attributes: an encoding's own options (`--config.encoding_options.NAME`); the names
# of other fields are checked by common.check_overrides.
_CONFIG = config_flags.DEFINE_config_file(
  'config', None, 'Experiment file[:arg].', lock_config=False, accept_new_attributes=True
)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Sweep directory (created or resumed).')
_TASKS = flags.DEFINE_list('tasks', [], 'Only these tasks (default: all in the grid).')
_ENCODINGS = flags.DEFINE_list('encodings', [], 'Only these encodings (default: all).')
_CELLS = flags.DEFINE_list('cells', [], 'Only these cells, by directory name (default: all).')
_SHARD = flags.DEFINE_string('shard', '0/1', 'i/n: run every n-th cell from i.')
_JOBS = flags.DEFINE_integer(
  'jobs', 0, 'Worker processes running cells at once on this host; 0: chosen (see --help).'
)
_DISTRIBUTED = flags.DEFINE_bool(
  'distributed', False, 'Call jax.distributed.initialize; shard = process i/n.'
)
_COORDINATOR = flags.DEFINE_string('coordinator_address', None, 'host:port of process 0.')
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'Number of processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'This process index.')
_STATUS = flags.DEFINE_bool('status', False, 'Print the state of every cell and exit.')
_COST = flags.DEFINE_bool('cost', False, 'Print the estimated cost of the grid and exit.')
_COST_STEPS = flags.DEFINE_integer('cost_steps', 20, 'Steps timed per bucket by --cost.')
_DEVICE = flags.DEFINE_string(
  'device',
  None,
  'With --cost: estimate a roofline on this '
  'accelerator instead of timing this machine (H100, A100, v4, '
  'v5e).',
)
_CHIPS = flags.DEFINE_integer(
  'chips', 1, 'With --cost --device: chips the grid is spread over (e.g. 256 for a v5e-256 slice).'
)
_REPORT = flags.DEFINE_bool(
  'report', True, 'Write and print DIR/report once every cell of the grid is complete.'
)
_PARTIAL = flags.DEFINE_bool(
  'partial',
  False,
  'With --report: write the report from the complete cells even if others are not, its '
  'titles marked partial.',
)
_LEASE_WAIT = flags.DEFINE_float('lease_wait', None, common.LEASE_WAIT_HELP)
_RETRY_FAILED = flags.DEFINE_bool('retry_failed', True, 'Run previously failed cells again.')


def _grid():
  """The experiment file's grid, each cell checked against the config (one-line errors)."""
  path, _, arg = flags.FLAGS['config'].config_filename.partition(':')
  module = common.load_experiment(path)
  if not hasattr(module, 'grid'):
    common.fail(f'experiment file {path} has no grid(arg); it cannot be swept')
  try:
    grid = module.grid(arg or None)
    sweep_lib.check_grid(_CONFIG.value, grid)
  except config_lib.ConfigError as e:
    common.fail(f'{path}: {e}')
  except Exception as e:  # pylint: disable=broad-except
    common.fail(f'{path}: grid() failed: {type(e).__name__}: {e}')
  return grid


def _distributed() -> tuple[int, int]:
  """Joins the multi-process job; returns this process's shard (index, count)."""
  count, index = _NUM_PROCESSES.value, _PROCESS_ID.value
  if count is not None and count < 1:
    common.fail(f'--num_processes={count} must be a positive integer')
  if index is not None and index < 0:
    common.fail(f'--process_id={index} must be an integer >= 0')
  if index is not None and count is not None and index >= count:
    common.fail(
      f'--process_id={index} is not a process of --num_processes={count} (0..{count - 1})'
    )
  # CPU hosts talk through gloo; GPU and TPU backends ignore this setting.
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  try:
    jax.distributed.initialize(
      coordinator_address=_COORDINATOR.value, num_processes=count, process_id=index
    )
  except (ValueError, RuntimeError) as e:
    common.fail(f'--distributed: jax.distributed.initialize failed: {e}')
  return jax.process_index(), jax.process_count()


def main(argv):
  if len(argv) > 1:
    common.fail(f'unexpected arguments {argv[1:]}; give flags only')
  if _CONFIG.value is not None and _CONFIG.value.get('compilation_cache', True) is not True:
    compile_cache.compilation_cache(_CONFIG.value.compilation_cache)  # before anything compiles
  if _CONFIG.value is not None:
    common.cpu_devices([_CONFIG.value])  # every cell of the sweep runs in this process
  if _CONFIG.value is None:
    common.fail('--config is required, e.g. --config=experiments/rpe_table1.py')
  if not _WORKDIR.value and not _COST.value:  # --cost writes nothing.
    common.fail('--workdir is required, e.g. --workdir=sweeps/table1')
  if _WORKDIR.value:
    common.check_store(_WORKDIR.value, '--workdir')
  try:
    cells = sweep_lib.select_cells(_grid(), _TASKS.value, _ENCODINGS.value, _CELLS.value)
    shard = sweep_lib.parse_shard(_SHARD.value)
    _check_jobs(shard)
    if _DISTRIBUTED.value:
      shard = _distributed()
    if _STATUS.value:
      return _print_status(cells)
    if _COST.value:
      if _COST_STEPS.value < 1:
        common.fail(f'--cost_steps={_COST_STEPS.value} must be a positive integer')
      if _DEVICE.value:
        if _CHIPS.value < 1:
          common.fail(f'--chips={_CHIPS.value} must be a positive integer')
        est = cost.roofline(
          _CONFIG.value, cells, _DEVICE.value, progress=lambda line: print(line, flush=True)
        )
        print(cost.format_roofline(est, _CHIPS.value))
      else:
        print(cost.format_estimate(cost.estimate(_CONFIG.value, cells, _COST_STEPS.value)))
      return
    if _DEVICE.value:
      common.fail('--device needs --cost (it estimates what a grid costs on that device)')
    runs = sweep_lib.build_cells(_CONFIG.value, cells, shard)  # Fail before writing anything.
    preemption = common.Preemption()
    lock = common.workdir_lock(_LEASE_WAIT.value, preemption)
    common.make_dir(_WORKDIR.value, '--workdir')
    preemption.install()
    todo = _to_run(cells)
    jobs = _jobs(todo, cells, runs, shard)
    if jobs > 1:
      _run_workers(cells, todo, jobs, preemption)
    with full_disk.on_full_disk(_kept, _WORKDIR.value):
      rows = sweep_lib.run_sweep(
        _CONFIG.value,
        cells,
        _WORKDIR.value,
        shard=shard,
        # What the workers tried and failed is recorded; it is not run a second time here.
        retry_failed=_RETRY_FAILED.value and jobs == 1,
        progress=lambda line: print(line, flush=True),
        should_stop=preemption,
        lock=lock,
        wait_s=_LEASE_WAIT.value,
        wait_for_held=shard[1] == 1,
        runs=runs,
        checkpointed=common.checkpoint_hook(),
      )
      held = {r['cell']: r['held'] for r in rows if 'held' in r}
      unfinished = sweep_lib.missing_from_report(rows, held)
      for line in unfinished:
        print(f'unfinished: {line}', flush=True)
      if _REPORT.value and shard[1] == 1:
        _report(cells, held)
  except config_lib.ConfigError as e:
    common.fail(e)
  except lease.Preempted as e:
    print(f'{e}; rerun the same command to resume the sweep', flush=True)
    raise SystemExit(common.PREEMPTED_EXIT) from None
  if unfinished:
    _stop_unfinished(unfinished, rows, held, shard)


def _check_jobs(shard) -> None:
  """One line, exit 2, for a --jobs that is not an integer >= 0, or workers asked of a shard
  or a distributed sweep (whose processes already divide the cells)."""
  if _JOBS.value > 1 and (shard[1] > 1 or _DISTRIBUTED.value):
    common.fail(
      f'--jobs={_JOBS.value} runs worker processes on this host; a shard (--shard={_SHARD.value}) '
      'or a distributed sweep already divides the cells between processes: give --jobs=1 or 0'
    )
  workers.check(_JOBS.value, jax.default_backend)  # not before a distributed job's start


def _to_run(cells) -> list[str]:
  """The names of the selected cells that are not complete (nor failed, without
  --retry_failed)."""
  skip = {sweep_lib.COMPLETE} | (set() if _RETRY_FAILED.value else {sweep_lib.FAILED})
  return [r['cell'] for r in sweep_lib.status(_WORKDIR.value, cells) if r['state'] not in skip]


def _jobs(todo: list[str], cells, runs, shard) -> int:
  """The worker processes to run for the cells `todo` (names): --jobs, or for 0
  `workers.auto_jobs` of this host. `runs` are this shard's cells' runs."""
  if _JOBS.value:
    return min(_JOBS.value, max(len(todo), 1))
  mine = sweep_lib.shard_cells(cells, *shard)
  return workers.auto_jobs(
    jax.default_backend(),
    cores=len(os.sched_getaffinity(0)),
    steps=[r.train_settings.steps for c, r in zip(mine, runs) if sweep_lib.cell_name(c) in todo],
    cpu_devices=max([r.config.get('cpu_devices', 0) for r in runs], default=0),
    sharded=shard[1] > 1 or _DISTRIBUTED.value,
  )


def _run_workers(cells, todo: list[str], jobs: int, preemption) -> None:
  """Runs the cells `todo` (names) in `jobs` worker processes (launch/workers.py); exits
  143 when SIGTERM stopped them (each checkpointed its cell; the rerun resumes)."""
  sweep_lib.check_configs(_CONFIG.value, cells, _WORKDIR.value)  # before any worker starts
  shares = workers.split(todo, jobs)
  print(
    f'sweep: {sum(map(len, shares))} cells in {len(shares)} worker processes (--jobs); '
    f'their lines are marked [k/{len(shares)}]',
    flush=True,
  )
  start = time.time()
  codes = workers.run(
    [
      workers.command('launch.sweep', sys.argv[1:], f'--cells={",".join(share)}', '--noreport')
      for share in shares
    ],
    out=lambda line: print(line, flush=True),
    err=lambda line: print(line, file=sys.stderr, flush=True),
  )
  print(
    f'sweep: the workers ended (exit {codes}) | elapsed {time.time() - start:.0f} s', flush=True
  )
  if preemption.requested or common.PREEMPTED_EXIT in codes:
    print('the workers checkpointed their cells; rerun the same command to resume the sweep')
    raise SystemExit(common.PREEMPTED_EXIT)


def _print_status(cells) -> None:
  """--status: each cell's state (and error or config changes), then the count per state."""
  if os.path.exists(_WORKDIR.value) and not os.path.isdir(_WORKDIR.value):
    common.fail(f'--workdir={_WORKDIR.value} is a file, not a sweep directory')
  rows = sweep_lib.status(_WORKDIR.value, cells, _CONFIG.value, holders=True)
  for row in rows:
    detail = row.get('error') or row.get('changes') or row.get('held')
    print(f'{row["cell"]:50s} {row["state"]}' + (f'  {detail}' if detail else ''))
  print(' | '.join(f'{s}: {sum(r["state"] == s for r in rows)}' for s in sweep_lib.STATES))


def _stop_unfinished(unfinished: list[str], rows, held: dict[str, str], shard) -> NoReturn:
  """Exits on cells left unfinished: status 1 if one failed, else the busy status (their
  holders still run them)."""
  names = ', '.join(line.split(':', 1)[0] for line in unfinished)
  failed = any(r['state'] == sweep_lib.FAILED and r['cell'] not in held for r in rows)
  message = (
    f'{len(unfinished)} of {len(rows)} cells of shard {shard[0]}/{shard[1]} are not complete: '
    f'{names}'
  )
  if failed:
    print(f'error: {message}', file=sys.stderr)
    raise SystemExit(1)
  common.busy(
    message,
    '; rerun the same command once their holders have ended (or with a longer --lease_wait)',
  )


def _kept() -> str:
  """What a full disk leaves of the sweep: its complete cells, and the checkpoints of the
  cell it was running."""
  return (
    'the complete cells are kept, and the rerun resumes the cell that was running from '
    'its last checkpoint'
  )


def _report(cells, held: dict[str, str]) -> None:
  """Writes DIR/report from the grid once every cell is complete (with --partial, from the
  complete cells, listing the others and why).

  Two sweeps of one directory take turns (the lock of DIR/index), and each reads the cells'
  states inside its turn: the last report written is built from the most complete state, and
  a sweep that ends first cannot write its partial report over a later, whole one.
  """
  waiting = False
  while True:
    try:
      with lease.lock(os.path.join(_WORKDIR.value, 'index')):
        _write_report(cells, held)
      return
    except lease.DirectoryBusy as e:
      if not waiting:
        print(f'report: waiting for {e.holder}, which is writing the report', flush=True)
      waiting = True
      time.sleep(2)


def _write_report(cells, held: dict[str, str]) -> None:
  # Deferred: scipy.stats and matplotlib take about 2.5 s, which --status, --cost and a
  # sweep without its report (a shard, --noreport) need not wait for.
  from posenc import report as report_lib  # pylint: disable=g-import-not-at-top

  # Read again now: a cell another process held may have completed since it was skipped.
  rows = sweep_lib.status(_WORKDIR.value, cells, _CONFIG.value)
  complete = [
    os.path.join(_WORKDIR.value, 'cells', r['cell'])
    for r in rows
    if r['state'] == sweep_lib.COMPLETE
  ]
  missing = sweep_lib.missing_from_report(rows, held)
  out = os.path.join(_WORKDIR.value, 'report')
  if missing and not _PARTIAL.value:
    print(
      f'no report: {len(missing)} of {len(rows)} cells are not complete (listed above); '
      '--partial writes one from the complete cells'
    )
    return
  if not complete:
    print('no report: no cell of the grid is complete')
    for line in missing:
      print(f'  {line}')
    return
  try:
    text = report_lib.write_report(complete, out, per_length=True, absent=missing)
  except report_lib.ReportError as e:
    print(f'no report: {e}')
  else:
    print(text)
    print(
      f'report written to {common.where(out)}/'
      + (
        f' (partial: from {len(complete)} of {len(rows)} cells; the others are listed above)'
        if missing
        else ''
      )
    )


if __name__ == '__main__':
  common.run(main)
