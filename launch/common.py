"""What every entry point that runs JAX shares (`launch.cli` has the command line itself).

- One-line errors: bad input prints `error: ...` on one line and exits with status 2
  (`fail`, from `launch.cli`), before anything is written. The experiment file named by
  `--config` is loaded and called here first, so a missing file, a file that does not
  import, or a bad arg string gets one line instead of absl's traceback.
- List-valued config fields take command-line overrides: `--config.seeds='[0,1,2]'`,
  `--config.learning_rates=1e-3,3e-4` (brackets, parentheses or bare commas).
- Quiet logs (`launch.cli`): only warnings of the libraries reach the terminal unless
  `--verbosity` is given (`--verbosity=0` shows their INFO lines again).
- The compilation cache: JAX's persistent cache, on unless turned off
  (`launch.compile_cache`).
- CPU devices: a config's `cpu_devices` starts JAX's CPU backend with that many devices
  (`cpu_devices`), before anything runs.
- Preemption: SIGTERM asks the run to checkpoint at the next step boundary and exit with
  status 143 (`PREEMPTED_EXIT`), or, while it waits for a held work directory, to leave the
  wait at once having taken nothing over; rerunning the same command resumes. Ctrl-C is one
  line and exit status 130 (`cli.INTERRUPTED_EXIT`).
- A busy work directory: one held by another live process (after `--lease_wait`), or a lease
  this process lost, is one line and exit status 75 (`BUSY_EXIT`, sysexits' EX_TEMPFAIL):
  not bad input, and nothing to redo here while the other process runs it.
- A full disk: one line naming the file and what is kept (`launch.full_disk`), exit status 2;
  every file is written atomically, so nothing is half-written.
"""

from __future__ import annotations

import ast
import fnmatch
import glob
import importlib.util
import math
import os
import signal
import sys
import subprocess
import tempfile
from typing import Any, Callable, NoReturn, Sequence

from absl import flags
from ml_collections import config_flags
import jax

import experiments
from launch import cli
from launch import compile_cache
from posenc import config as config_lib
from posenc.storage import io
from posenc.storage import lease
from posenc.storage import store
from posenc import suggest

# 128 + SIGTERM, the status a shell reports for a process ended by SIGTERM: schedulers and
# wrappers see an unfinished job, and the checkpoint makes the rerun lose nothing.
PREEMPTED_EXIT = 143
# sysexits.h's EX_TEMPFAIL: the work directory (or a sweep's cell) is held by another live
# process, or this process lost its lease to one. Not bad input (2): the same command
# succeeds once the other process has ended.
BUSY_EXIT = 75

fail = cli.fail


# ---------------------------------------------------------------------------------------
# List-valued config overrides.


class ListParser(flags.ArgumentParser):
  """Parses `[0,1]`, `(0, 1)`, `0,1` or `0` into a list of Python literals.

  Elements are Python literals, or the bare words nan and inf (floats, so that the config's
  check can say why they are refused); any other element is an error naming it.

  Example:
    >>> from launch.common import ListParser
    >>> ListParser().parse('[1e-3, 3e-4]'), ListParser().parse('7')
    ([0.001, 0.0003], [7])
  """

  def parse(self, argument: Any) -> list[Any]:
    if isinstance(argument, (list, tuple)):
      return list(argument)
    text = str(argument).strip()
    if not text:
      return []  # `--config.seeds=`: the config's check says whether a field may be empty.
    inner = text
    if text[:1] in '[(':
      closing = ']' if text[0] == '[' else ')'
      if not text.endswith(closing):
        raise ValueError(
          f'{text!r} is not a list: it opens with {text[0]!r} and does not '
          f'end with {closing!r}; write it as [a,b,...] or a,b,...'
        )
      inner = text[1:-1]
    try:
      value = ast.literal_eval(f'[{inner}]')
      if isinstance(value, list):
        return value
    except (ValueError, SyntaxError):
      pass
    return [self._element(item.strip(), text) for item in inner.split(',') if item.strip()]

  @staticmethod
  def _element(item: str, text: str) -> Any:
    try:
      return ast.literal_eval(item)
    except (ValueError, SyntaxError):
      pass
    try:
      return float(item)  # nan, inf, -inf
    except ValueError:
      raise ValueError(
        f'element {item!r} of {text!r} is not a number or a quoted string; '
        'write the list as [a,b,...] or a,b,...'
      ) from None

  def flag_type(self) -> str:
    return 'list'


config_flags.register_flag_parser_for_type(list, ListParser())


# ---------------------------------------------------------------------------------------
# The experiment file behind --config.


def source_commit() -> str | None:
  """The git commit of the checkout posenc runs from ('0123abcd4567', '... with local
  changes' when tracked files differ from it), or None outside a git checkout: the stamp of
  what a leaderboard or a site was written from."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  git = ['git', '-C', root]
  try:
    head = subprocess.run(
      [*git, 'rev-parse', '--short=12', 'HEAD'], capture_output=True, text=True, timeout=30
    )
    if head.returncode != 0:
      return None
    changed = subprocess.run(
      [*git, 'status', '--porcelain', '--untracked-files=no'],
      capture_output=True,
      text=True,
      timeout=30,
    )
  except (OSError, subprocess.TimeoutExpired):
    return None
  return head.stdout.strip() + (' with local changes' if changed.stdout.strip() else '')


def experiment_files() -> list[str]:
  """The experiment files shipped with posenc, as `experiments/NAME.py` paths."""
  # The package directory, wherever posenc is installed.
  names = glob.glob(os.path.join(os.path.dirname(experiments.__file__), '*.py'))
  return sorted(
    f'experiments/{os.path.basename(n)}' for n in names if not n.endswith('__init__.py')
  )


def load_experiment(path: str) -> Any:
  """Imports the experiment file at `path`; fails with one line if it cannot."""
  if not os.path.isfile(path):
    what = 'is a directory' if os.path.isdir(path) else 'does not exist'
    fail(f'config file {path!r} {what}; experiment files: {", ".join(experiment_files())}')
  try:
    spec = importlib.util.spec_from_file_location('_posenc_experiment', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  except Exception as e:  # pylint: disable=broad-except
    fail(f'config file {path!r} does not import: {type(e).__name__}: {e}')
  if not callable(getattr(module, 'get_config', None)):
    fail(f'config file {path!r} has no get_config(arg); it is not an experiment file')
  return module


def check_experiment(spec: str) -> Any:
  """Loads `path[:arg]` and returns its get_config(arg), failing with one line on error."""
  path, _, arg = spec.partition(':')
  module = load_experiment(path)
  try:
    return module.get_config(arg or None)
  except config_lib.ConfigError as e:
    fail(f'{spec}: {e}')
  except Exception as e:  # pylint: disable=broad-except
    fail(f'{spec}: get_config failed: {type(e).__name__}: {e}')


def check_overrides(config: Any, argv: Sequence[str], name: str = 'config') -> None:
  """Fails with one line if an override `--config.a.b=...` names a field `config` lacks (any
  `encoding_options.NAME` may be given: the encoding's options are checked when it is)."""
  for arg in argv:
    if arg == '--':
      break
    for prefix in (f'--{name}.', f'-{name}.'):
      if arg.startswith(prefix):
        path = arg[len(prefix) :].partition('=')[0].split('.')
        node = config
        for depth, part in enumerate(path):
          where = '.'.join(path[:depth]) or name
          if not hasattr(node, 'keys'):
            fail(f'unknown config field {".".join(path)!r}: {where} is a value, not a group')
          if part not in node.keys():
            if path[:-1] == ['encoding_options'] and depth == 1:
              break  # an encoding's own option: encodings.resolve_options checks its name
            # The nearest field of this group, named in full ('train.steps' for 'stepz').
            near = suggest.nearest(part, node.keys())
            hint = '' if near is None else f' (did you mean {".".join([*path[:depth], near])!r}?)'
            fail(
              f'unknown config field {".".join(path)!r}{hint}; valid fields of {where}: '
              f'{", ".join(sorted(node.keys()))}'
            )
          node = node[part]
        break


def _flag_value(argv: Sequence[str], name: str) -> str | None:
  """The last value of --name in argv (`--name=v`, `--name v`, single dash too)."""
  value = None
  for i, arg in enumerate(argv):
    if arg == '--':
      break
    for prefix in (f'--{name}', f'-{name}'):
      if arg.startswith(prefix + '='):
        value = arg[len(prefix) + 1 :]
      elif arg == prefix and i + 1 < len(argv):
        value = argv[i + 1]
  return value


def _parse_flags(argv: list[str]) -> list[str]:
  if 'config' in flags.FLAGS:
    spec = _flag_value(argv[1:], 'config')
    if spec is not None and not spec.partition(':')[0]:
      fail(
        f'--config={spec} names no experiment file, e.g. '
        f'--config=experiments/rpe_table1.py:tiny; experiment files: '
        f'{", ".join(experiment_files())}'
      )
    if spec:
      check_overrides(check_experiment(spec), argv[1:])
  return cli.parse_flags(argv)


# ---------------------------------------------------------------------------------------
# Directories and files an entry point writes.


def make_dir(path: str, flag: str) -> None:
  """Creates directory `path` (and missing parents) and checks it is writable.

  Fails with one line naming `flag` and `path` if it is a file or cannot be created or
  written; whatever this call created is removed again first. A store URL (gs://, s3://) is
  checked by writing and deleting one object (the bucket, the credentials, the permission).
  """
  _check_scheme(path, flag)
  if store.is_url(path):
    _check_store(path, flag)
    return
  if os.path.exists(path) and not os.path.isdir(path):
    fail(f'{flag}={path} is a file, not a directory')
  created = []
  try:
    missing, parent = [], os.path.abspath(path)
    while not os.path.exists(parent):
      missing.append(parent)
      parent = os.path.dirname(parent)
    for directory in reversed(missing):
      os.mkdir(directory)
      created.append(directory)
    with tempfile.TemporaryFile(dir=path):
      pass
  except OSError as e:
    for directory in reversed(created):
      os.rmdir(directory)
    fail(f'{flag}={path} cannot be created or written: {e.strerror or e}')


def check_out_dir(path: str, flag: str) -> None:
  """Fails with one line unless directory `path` exists or could be created and written,
  before any work is done; creates nothing (`make_dir` creates it once there is output)."""
  if not path:
    fail(f'{flag} is empty; give a directory')
  _check_scheme(path, flag)
  if store.is_url(path):
    _check_store(path, flag)
    return
  if os.path.exists(path) and not os.path.isdir(path):
    fail(f'{flag}={path} is a file, not a directory')
  parent = os.path.abspath(path)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    fail(f'{flag}={path} cannot be created: {parent} is a file, not a directory')
  if not os.access(parent, os.W_OK | os.X_OK):
    fail(f'{flag}={path} cannot be created or written: {parent} is not writable')


def where(path: str) -> str:
  """Where a file really is, for a closing line: a store URL as it is, a local path made
  absolute (a relative path reads like the URL a typo meant).

  Example: where('runs/a/results.json') -> '/home/me/runs/a/results.json'.
  """
  return path if store.is_url(path) else os.path.abspath(path)


def _check_scheme(path: str, flag: str) -> None:
  """Fails with one line for a path that names a store's scheme without being its URL
  ('s3:/bucket/run'): written as it is, it would be a local directory named 's3:'."""
  try:
    store.check_path(path)
  except store.StoreError as e:
    fail(f'{flag}={e}')


def _check_store(url: str, flag: str) -> None:
  """Fails with one line unless an object can be written under `url` and deleted again."""
  try:
    store.check_writable(url)
  except store.StoreError as e:
    fail(f'{flag}={e}')


def check_store(path: str, flag: str) -> None:
  """Fails with one line if `path` is a URL of an unknown scheme, or of a store whose package
  is not installed, or names a store's scheme without being its URL; a local path passes."""
  _check_scheme(path, flag)
  if store.is_url(path):
    try:
      store.check(path)
    except store.StoreError as e:
      fail(f'{flag}={e}' if flag.startswith('--') else e)


def cell_config(arg: str, flag: str = '--cell') -> Any:
  """The validated rpe_table1 config of a speed measurement's `--cell` arg, or one line."""
  # Deferred: both import Flax; launch.report imports this module but no Flax
  # (tests/test_results_schema.py).
  from experiments import rpe_table1  # pylint: disable=g-import-not-at-top
  from posenc import setup  # pylint: disable=g-import-not-at-top

  try:
    config = rpe_table1.get_config(arg)
    setup.build(config)
  except config_lib.ConfigError as e:
    fail(f'{flag}={arg}: {e}')
  return config


def positive_ints(values: Sequence[str], flag: str) -> list[int]:
  """`values` as positive integers, or a one-line failure naming `flag`."""
  try:
    out = [int(v) for v in values]
  except ValueError:
    out = []
  if not out or any(v < 1 for v in out):
    fail(f'{flag}={",".join(values)} must be comma-separated positive integers')
  return out


def at_least(value: int, flag: str, low: int = 1) -> None:
  """Fails with one line naming `flag` unless the integer `value` is >= `low`."""
  if value < low:
    fail(f'{flag}={value} must be an integer >= {low}')


def check_output_file(path: str, flag: str) -> None:
  """Fails with one line unless a file can be written at `path` (nothing is created). A
  store URL is checked by writing and deleting one object beside it."""
  _check_scheme(path, flag)
  if store.is_url(path):
    parent = path.rstrip('/').rsplit('/', 1)[0]
    if parent.endswith(':/') or parent.endswith(':'):
      fail(f'{flag}={path} names no object; give gs://BUCKET/FILE or s3://BUCKET/FILE')
    _check_store(parent, flag)
    return
  directory = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    fail(f'{flag}={path} is a directory, not a file')
  if not os.path.isdir(directory):
    fail(f'{flag}={path}: directory {directory} does not exist')
  try:
    with tempfile.TemporaryFile(dir=directory):
      pass
  except OSError as e:
    fail(f'{flag}={path} cannot be written: {e.strerror or e}')


# ---------------------------------------------------------------------------------------
# Running an entry point.


# How long a lease on a store lasts without renewal (`posenc.storage.lease.Lease`, default lease.LEASE_S):
# what a rerun on another host waits at most for a holder that died. Shortened by the tests
# of a killed or stalled holder; a waiting process goes by the holder's own length.
LEASE_S = 'POSENC_LEASE_S'


def lease_seconds() -> float:
  """The lease length of the runs this process starts: POSENC_LEASE_S if given, else
  lease.LEASE_S; one line unless it is a finite number of seconds of at least
  lease.MIN_LEASE_S."""
  value = os.environ.get(LEASE_S, '')
  if not value:
    return lease.LEASE_S
  try:
    seconds = float(value)
  except ValueError:
    seconds = math.nan
  if not lease.MIN_LEASE_S <= seconds < math.inf:
    fail(
      f'{LEASE_S}={value!r} must be a finite number of seconds >= {lease.MIN_LEASE_S:g} '
      f'(a holder renews every quarter of it and stops a quarter before it ends: '
      f'{lease.MIN_LEASE_S:g} s leaves a few round trips of a store for each)'
    )
  return seconds


# The help of --lease_wait, which every entry point that takes work directories defines.
LEASE_WAIT_HELP = (
  'Seconds to wait for a work directory (or sweep cell) another process holds, taking it '
  'over if its holder stops renewing its lease; default: long enough for the lease to '
  'expire once; 0: refuse at once. Still held after it: exit status 75.'
)


def workdir_lock(
  wait_s: float | None, should_stop: Callable[[], bool] | None = None
) -> Callable[..., Any]:
  """lock(directory, wait_s=`wait_s`): lease.lock with this process's lease length, waiting up
  to wait_s (the --lease_wait value; None: one expiry), the wait said on stdout and left at
  once when `should_stop` (SIGTERM) says so. It is `train_and_evaluate`'s `lock` and
  `run_sweep`'s."""
  if wait_s is not None and not 0 <= wait_s < math.inf:
    fail(f'--lease_wait={wait_s:g} must be a finite number of seconds >= 0')
  lease_s = lease_seconds()

  def lock(directory: str, wait: float | None = wait_s) -> Any:
    return lease.lock(directory, lease_s, wait, lambda line: print(line, flush=True), should_stop)

  return lock


def busy(error: Exception, hint: str = '') -> NoReturn:
  """Prints `error: ...` (one line, a busy work directory or a lost lease) and exits with
  status 75 (BUSY_EXIT)."""
  print('error: ' + ' '.join(f'{error}{hint}'.split()), file=sys.stderr)
  sys.exit(BUSY_EXIT)


# Fault injection for testing a store that refuses a write halfway (a permission withdrawn, a
# quota): every write of an object whose name matches this pattern is refused.
STORE_REFUSES_AT = 'POSENC_STORE_REFUSES_AT'


def refuse_store_writes() -> None:
  pattern = os.environ.get(STORE_REFUSES_AT, '')
  if not pattern:
    return

  def refuse(path: str) -> None:
    if store.is_url(path) and fnmatch.fnmatch(os.path.basename(path), pattern):
      raise store.StoreError(f'{path}: writing failed: AccessDenied ({STORE_REFUSES_AT})')

  io.before_write = refuse


# Fault injection for testing resumption: the process kills itself (SIGKILL, no cleanup)
# right after writing the checkpoint of this step, as a crash would.
KILL_AFTER_CHECKPOINT = 'POSENC_KILL_AFTER_CHECKPOINT'


def checkpoint_hook() -> Callable[[int], None]:
  """`train_and_evaluate`'s `checkpointed`: nothing, or with POSENC_KILL_AFTER_CHECKPOINT=N
  in the environment, a SIGKILL of this process once the checkpoint of step N is written."""
  value = os.environ.get(KILL_AFTER_CHECKPOINT, '')
  if not value:
    return lambda step: None
  try:
    at = int(value)
  except ValueError:
    fail(f'{KILL_AFTER_CHECKPOINT}={value!r} must be a step number')

  def hook(step: int) -> None:
    if step == at:
      os.kill(os.getpid(), signal.SIGKILL)

  return hook


class Preemption:
  """Set by SIGTERM: the run checkpoints at the next step boundary and stops."""

  def __init__(self):
    self.requested = False

  def __call__(self) -> bool:
    return self.requested

  def install(self) -> None:
    def handler(signum, frame):
      del signum, frame
      self.requested = True

    signal.signal(signal.SIGTERM, handler)


def cpu_devices(configs: Sequence[Any]) -> int:
  """Starts JAX's CPU backend with the most `cpu_devices` any of `configs` asks for (the
  population is then sharded over them, `population.local_devices`), or leaves it alone
  when none asks. Process-wide, so called before anything runs JAX.

  Returns:
    The number of CPU devices asked for (0: JAX's default).
  """
  # A bad value is left to the config's own check (`population.check`, one line).
  asked = [c.get('cpu_devices', 0) for c in configs]
  wanted = max(
    (n for n in asked if config_lib.is_int(n) and 0 < n <= config_lib.MAX_CPU_DEVICES), default=0
  )
  if wanted:
    try:
      jax.config.update('jax_num_cpu_devices', wanted)
    except RuntimeError as e:  # JAX ran something already: a caller's mistake, not the user's
      raise RuntimeError(f'cpu_devices={wanted} comes too late: {e}') from None
  return wanted


def run(
  main: Callable[[list[str]], None], argv: list[str] | None = None, doc: str | None = None
) -> NoReturn:
  """`cli.run` for an entry point that runs JAX: the experiment file of `--config` checked
  first (one line), JAX's persistent compilation cache on (`compilation_cache`). `doc`: the
  help text, if not the docstring of `main`'s module."""

  def cached_main(args):
    compile_cache.compilation_cache()
    refuse_store_writes()
    try:
      return main(args)
    except store.StoreError as e:
      # A store that fails during the run (a permission withdrawn, a quota, the network):
      # every write is one put, so what is there is whole; the rerun resumes.
      fail(f'{e}; what was written is kept whole, and rerunning the same command resumes')
    finally:
      # Also after a failure or a preemption: what was tuned is valid, and saves the rerun.
      compile_cache.put_autotune_results()

  cli.run(cached_main, argv, doc=doc, flags_parser=_parse_flags, module=main.__module__)
