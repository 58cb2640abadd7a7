"""Test-wide settings: fast compiles, a shared compilation cache, the same for subprocesses.

Both are set in the environment so that `python -m launch.*` subprocesses the tests start
(and pytest-xdist workers) inherit them.
"""

import atexit
import os
import shutil
import tempfile

# Tiny models: XLA's optimisation passes cost more than they save (flax's lm1b tests do
# the same).
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', 'true')

# Many tests (and the kill-and-resume subprocesses) compile the same tiny programs: a
# persistent cache shared by the whole test run compiles each once. It lives in a fresh
# directory per run, so nothing carries over between runs.
if 'JAX_COMPILATION_CACHE_DIR' not in os.environ:
  _cache = tempfile.mkdtemp(prefix='posenc-test-jax-cache-')
  atexit.register(shutil.rmtree, _cache, ignore_errors=True)
  os.environ['JAX_COMPILATION_CACHE_DIR'] = _cache
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES', '0')

import jax  # noqa: E402

jax.config.update('jax_disable_most_optimizations',
                  os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] == 'true')
