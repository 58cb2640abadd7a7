"""Train and evaluate one population: `python -m launch.train --config=FILE[:ARG] --workdir=DIR`.

  python -m launch.train --config=experiments/rpe_table1.py:task=parity_check,tiny \
      --workdir=/tmp/parity --config.train.steps=50 --config.seeds='[0,1,2]'

Any config field can be overridden with `--config.KEY=VALUE`; lists as `'[a,b]'` or `a,b`.
Rerunning the same command on the same workdir resumes the run; SIGTERM makes it
checkpoint at the next step and exit with status 143.

A work directory another live process holds is waited for (`--lease_wait`, default long
enough for its lease to expire once: a holder that died or was preempted without releasing
it is taken over then); still held after that, the run exits with status 75. So does a run
that lost its lease to another process (it stalled past the lease): it writes nothing more.
"""

import os

from absl import flags
from ml_collections import config_flags

from launch import common
from launch import full_disk
from launch import compile_cache
from posenc import config as config_lib
from posenc.storage import lease
from posenc.analysis import receptive
from posenc import results as results_lib
from posenc import setup
from posenc.training import train

# New attributes: an encoding's own options (`--config.encoding_options.NAME`); the names
# of other fields are checked by common.check_overrides.
_CONFIG = config_flags.DEFINE_config_file(
  'config', None, 'Experiment file[:arg].', lock_config=False, accept_new_attributes=True
)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Run directory (created or resumed).')
_LEASE_WAIT = flags.DEFINE_float('lease_wait', None, common.LEASE_WAIT_HELP)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    common.fail(f'unexpected arguments {argv[1:]}; give flags only (--config, --workdir)')
  if _CONFIG.value is None:
    common.fail('--config is required, e.g. --config=experiments/rpe_table1.py:tiny')
  if _CONFIG.value.get('compilation_cache', True) is not True:  # True: opened by common.run
    compile_cache.compilation_cache(_CONFIG.value.compilation_cache)  # before anything compiles
  common.cpu_devices([_CONFIG.value])  # before anything runs: the backend starts once
  if not _WORKDIR.value:
    common.fail('--workdir is required, e.g. --workdir=runs/my_run')
  common.check_store(_WORKDIR.value, '--workdir')
  # Read before the workdir is made: a bad POSENC_KILL_AFTER_CHECKPOINT leaves nothing behind.
  checkpointed = common.checkpoint_hook()
  preemption = common.Preemption()
  lock = common.workdir_lock(_LEASE_WAIT.value, preemption)
  try:
    run = setup.build(_CONFIG.value)
  except config_lib.ConfigError as e:
    common.fail(e)
  common.make_dir(_WORKDIR.value, '--workdir')
  config = run.config
  # Before training: does the bias family satisfy Qin et al.'s condition for extrapolation?
  line = receptive.diagnostic(
    config.encoding,
    num_heads=config.model.num_heads,
    head_dim=config.model.d_model // config.model.num_heads,
    options=config.encoding_options.to_dict(),
  )
  if line:
    print(line, flush=True)
  preemption.install()
  workdir = _WORKDIR.value
  try:
    with full_disk.on_full_disk(lambda: full_disk.kept_checkpoint(workdir), workdir):
      results = train.train_and_evaluate(
        run,
        workdir,
        progress=lambda line: print(line, flush=True),
        should_stop=preemption,
        checkpointed=checkpointed,
        lock=lock,
      )
  except config_lib.ConfigError as e:
    common.fail(e)
  except lease.LeaseLost as e:
    common.busy(
      e, f'; {e.holder} resumes the run' if e.holder else '; rerunning the same command resumes'
    )
  except lease.DirectoryBusy as e:
    common.busy(e, '; rerun once it has ended, or with a longer --lease_wait')
  except lease.Preempted as e:
    print(f'{e}; rerun the same command to resume', flush=True)
    raise SystemExit(common.PREEMPTED_EXIT) from None
  summary = run.protocol.summary(results_lib.Results.from_json(results, run.protocol.results))
  print(
    f'done: {results["task"]} / {results["encoding"]}: {summary}; results in '
    f'{common.where(os.path.join(_WORKDIR.value, "results.json"))}'
  )


if __name__ == '__main__':
  common.run(main)
