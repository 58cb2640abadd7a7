"""Test-wide settings: fast compiles, a shared compilation cache, the same for subprocesses.

Both are set in the environment so that `python -m launch.*` subprocesses the tests start
(and pytest-xdist workers) inherit them.
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
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

jax.config.update(
  'jax_disable_most_optimizations', os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] == 'true'
)


import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def kill_after_checkpoint():
  """kill(cmd, workdir, step): runs the `launch.train` command `cmd` from the project root,
  which kills itself with SIGKILL right after writing the checkpoint of `step`
  (POSENC_KILL_AFTER_CHECKPOINT): a crash at a known point, without a race."""

  def kill(cmd, workdir, step, timeout=300):
    env = dict(os.environ, POSENC_KILL_AFTER_CHECKPOINT=str(step))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert os.path.exists(os.path.join(workdir, 'checkpoints', str(step)))
    assert not os.path.exists(os.path.join(workdir, 'results.json'))

  return kill


class CliServer:
  """`python -m MODULE ARGS` for many commands, each forked from one process that has the
  libraries imported (tests/scripts/cli_server.py): the same exit status and output as the
  command line, without paying for JAX's import in every command."""

  def __init__(self):
    self.proc = subprocess.Popen(
      [sys.executable, os.path.join(ROOT, 'tests', 'scripts', 'cli_server.py')],
      cwd=ROOT,
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
    )

  def run(self, argv, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    """Runs `python -m argv[0] argv[1:]` in `cwd`, with `env` added to the environment."""
    self.proc.stdin.write(
      json.dumps({'argv': list(argv), 'cwd': str(cwd), 'env': dict(env or {})}) + '\n'
    )
    self.proc.stdin.flush()
    reply = json.loads(self.proc.stdout.readline())
    return subprocess.CompletedProcess(
      ['python', '-m', *argv], reply['returncode'], reply['stdout'], reply['stderr']
    )

  def close(self):
    self.proc.stdin.close()
    self.proc.wait(timeout=60)


@pytest.fixture(scope='session')
def cli():
  server = CliServer()
  yield server
  server.close()


# Checks that repeat one invariant over every encoding: the default suite runs them on one
# encoding of each kind (and every method with code of its own), `-m slow` on all of them.
REPRESENTATIVES = {
  'none',
  'sin_cos',
  'relative',
  'rotary',
  'randomized_rotary',
  'alibi',
  'kerple_log',
  'fire',
  'geometric_directional',
  'dape',
  'cope',
  'forgetting',
  'stick_breaking',
  'pope',
  'sin_cos+alibi',
  'abacus+fire',
}
# One encoding of each kind of model input: content only, an embedding drawn per sequence, a
# rotation, the study's relative bias (distances drawn), a replacement of the softmax, one
# that caches features of the keys (causal only), one that reads digits (and a combination).
ONE_PER_KIND = {
  'none',
  'randomized_sin_cos',
  'rotary',
  'randomized_relative',
  'geometric_directional',
  'forgetting',
  'abacus+fire',
}
# Lowering for CUDA and TPU differs by the attention's kind, not by the encoding within it.
EXPORTED = {'none', 'rotary', 'alibi', 'geometric_directional', 'dape', 'cope', 'stick_breaking'}
EVERY_ENCODING = {
  'test_conformance.py::test_a_builtin_s_backends_equal_the_reference': REPRESENTATIVES,
  'test_conformance.py::test_a_builtin_keeps_the_model_invariants': ONE_PER_KIND,
  'test_attention.py::test_one_decoding_step_equals_the_whole_sequence': REPRESENTATIVES,
  'test_model.py::test_blocked_attention_equals_whole': REPRESENTATIVES,
  'test_export.py::test_accelerator_programs_take_the_fused_path': EXPORTED,
  'test_export.py::test_decoder_training_and_generation_export_on_the_fused_path': EXPORTED,
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    sample = EVERY_ENCODING.get(f'{item.path.name}::{item.originalname}')
    params = getattr(item, 'callspec', None)
    if sample is not None and params is not None and params.params.get('name') not in sample:
      item.add_marker(pytest.mark.slow)
