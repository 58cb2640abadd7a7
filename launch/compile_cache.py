"""JAX's persistent compilation cache for the entry points: on unless turned off, in a local
directory or a gs:// / s3:// URL a pod's hosts share, and XLA's GPU autotuning results
beside it (for a URL, a local mirror put back when the entry point ends). `launch.common.run`
turns it on for every launcher; `launch.train` and `launch.sweep` pass their config's
`compilation_cache` (docs/scaling.md).
"""

from __future__ import annotations

import os
import sys
import tempfile

import jax

from launch import cli
from posenc import config as config_lib
from posenc.storage import io
from posenc.storage import store

fail = cli.fail


# Set to 0 (or false, no, off) to run without JAX's persistent compilation cache.
CACHE_SWITCH = 'POSENC_COMPILATION_CACHE'
# The subdirectory of a cache where JAX keeps XLA's GPU autotuning results (per fusion, one
# small text file each), when `jax_persistent_cache_enable_xla_caches` names it.
XLA_AUTOTUNE = 'xla_gpu_per_fusion_autotune_cache_dir'


def compilation_cache(setting: bool | str = True) -> str | None:
  """Turns JAX's persistent compilation cache on for every program however small or quick to
  compile (a rerun, a resume, a sweep's cells of equal shapes, an analysis of a saved run
  then load what an earlier process compiled), or off.

  `setting`: True, the directory $JAX_COMPILATION_CACHE_DIR, else
  $XDG_CACHE_HOME/posenc/jax (~/.cache/posenc/jax); False, off; or a directory (the config
  field `compilation_cache`). A directory may be a gs://BUCKET/PATH or s3://BUCKET/PATH URL
  shared by a pod's hosts: JAX reads and writes it through etils.epath (gcsfs, s3fs). JAX's
  cache is safe to share between concurrent processes (every entry is written whole, under
  a key that hashes the program, the compiler options and the devices).

  XLA's GPU autotuning results go beside the executables (`XLA_AUTOTUNE`) where this JAX
  has `jax_persistent_cache_enable_xla_caches`. XLA writes them through local files only,
  so for a URL they live in a local mirror (`autotune_mirror`), filled from the bucket now;
  `run` puts the new ones to the bucket when the entry point ends (`put_autotune_results`).

  `POSENC_COMPILATION_CACHE=0` (or `setting` False) turns the cache off. A URL, or a
  directory given as `setting`, that cannot be used is one line and exit status 2, nothing
  written; a default directory that cannot be written is one warning line, and the run goes
  on uncached.

  Returns:
    The directory in use, or None.
  """
  if setting is False or os.environ.get(CACHE_SWITCH, '1').lower() in ('0', 'false', 'no', 'off'):
    jax.config.update('jax_enable_compilation_cache', False)
    return None
  try:
    config_lib.check_compilation_cache(setting)
  except config_lib.ConfigError as e:
    fail(e)
  if isinstance(setting, str):
    directory, source, strict = setting.strip(), 'compilation_cache', True
  else:
    directory = os.environ.get('JAX_COMPILATION_CACHE_DIR') or os.path.join(
      os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'posenc', 'jax'
    )
    source, strict = 'JAX_COMPILATION_CACHE_DIR', store.is_url(directory)
  if store.is_url(directory):
    directory = directory.rstrip('/')
    try:
      store.check_writable(directory)
    except store.StoreError as e:
      fail(f'{source}={e}; the compilation cache is {config_lib.COMPILATION_CACHE_CHOICES}')
  else:
    try:
      os.makedirs(directory, exist_ok=True)
      with tempfile.TemporaryFile(dir=directory):
        pass
    except OSError as e:
      if strict:
        fail(
          f'{source}={directory} cannot be created or written ({e.strerror or e}); the '
          f'compilation cache is {config_lib.COMPILATION_CACHE_CHOICES}'
        )
      print(
        f'warning: the compilation cache {directory} cannot be written '
        f'({e.strerror or e}); compiling without it',
        file=sys.stderr,
      )
      jax.config.update('jax_enable_compilation_cache', False)
      return None
  jax.config.update('jax_enable_compilation_cache', True)
  jax.config.update('jax_compilation_cache_dir', directory)
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  # -1: no minimum entry size, and no override by the file system's preference.
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)
  _xla_caches(directory)
  return directory


def _xla_caches(directory: str) -> None:
  """XLA's GPU autotuning results beside the executables: in `directory` itself when it is
  local (JAX points XLA there), else in a local mirror of the bucket's copy (XLA_FLAGS)."""
  local = not store.is_url(directory)
  try:
    # JAX's own switch: the subdirectory for a local cache; none for a URL, whose path
    # XLA's C++ file layer cannot open (it has no gs:// or s3:// scheme).
    jax.config.update('jax_persistent_cache_enable_xla_caches', XLA_AUTOTUNE if local else 'none')
  except AttributeError:  # a JAX without XLA caches: the executables alone
    return
  if local:
    return
  flags_now = os.environ.get('XLA_FLAGS', '')
  if f'--{XLA_AUTOTUNE}' in flags_now:  # the user's own choice stands
    return
  mirror = autotune_mirror(f'{directory}/{XLA_AUTOTUNE}')
  # XLA reads XLA_FLAGS once, when JAX's backend starts: after this, as no device is in use.
  os.environ['XLA_FLAGS'] = f'{flags_now} --{XLA_AUTOTUNE}={mirror}'.strip()


def autotune_mirror(url: str, local: str | None = None) -> str:
  """A local directory holding the objects under `url` (XLA's autotuning results of a shared
  cache); `put_autotune_results` puts its new files back when the entry point ends.

  Returns:
    The local directory: `local`, by default `mirror_directory(url)`.
  """
  local = local or mirror_directory(url)
  os.makedirs(local, exist_ok=True)
  try:
    for name in sorted(set(store.files_under(url)) - set(os.listdir(local))):
      io.write_bytes_atomic(os.path.join(local, name), store.read_bytes(f'{url}/{name}'))
  except (store.StoreError, OSError) as e:
    print(f'warning: XLA autotuning results not read from {url}: {e}', file=sys.stderr)
  return local


def mirror_directory(url: str) -> str:
  """$XDG_CACHE_HOME/posenc/xla_autotune/BUCKET/PATH (~/.cache/...) of a store URL."""
  cache_home = os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache')
  return os.path.join(cache_home, 'posenc', 'xla_autotune', url.split('://', 1)[1])


def put_autotune_results() -> list[str]:
  """Puts the autotuning results this process added to its mirror (`autotune_mirror`) to
  the cache's bucket, if the cache is a URL mirrored so; returns the names put."""
  directory = jax.config.jax_compilation_cache_dir
  if not (jax.config.jax_enable_compilation_cache and directory and store.is_url(directory)):
    return []
  url = f'{directory}/{XLA_AUTOTUNE}'
  local = mirror_directory(url)
  if f'--{XLA_AUTOTUNE}={local}' not in os.environ.get('XLA_FLAGS', ''):
    return []
  try:
    shared = frozenset(store.files_under(url))
  except store.StoreError as e:
    print(f'warning: XLA autotuning results not put to {url}: {e}', file=sys.stderr)
    return []
  return put_new_files(local, url, shared)


def put_new_files(local: str, url: str, known: frozenset[str] = frozenset()) -> list[str]:
  """Puts each file of the local directory `local` not in `known` to `url`, unless another
  host put it first; returns the names put. Each autotuning result is a file named by a hash
  of its fusion and device, written once, so a put is a conditional create (`store.create`).
  A store that fails is one warning line: the results only save tuning time, and the run's
  own outputs are written already."""
  put = []
  try:
    for name in sorted(set(os.listdir(local)) - known):
      path = os.path.join(local, name)
      if os.path.isfile(path) and not name.startswith('.'):
        with open(path, 'rb') as f:
          if store.create(f'{url}/{name}', f.read()):
            put.append(name)
  except (store.StoreError, OSError) as e:
    print(f'warning: XLA autotuning results not put to {url}: {e}', file=sys.stderr)
  return put
