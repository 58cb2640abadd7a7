"""The conformance check of an encoding: a first pass over its own outputs, then the
invariants every built-in encoding passes::

  outputs      the first pass, in seconds at the smallest size, before any model is built:
               each part's outputs have the shapes and dtypes its kind declares and finite
               values, each failure in the encoding's terms ('bias is NaN at head 0, query
               3, key 1'; 'rotation returned 3 channels for head_dim 4, expected at least
               4') (`outputs`)
  backends     every attention backend equals the readable one (`reference`) in values and
               gradients, on a padded batch, in each form the encoding runs in
  padded       a model's outputs on a sequence padded wider equal those on the sequence
  causal       a decoder's outputs at a position do not depend on later tokens
  step         one decoding step against the cache equals the whole sequence's row
  generation   greedy generation with the KV cache equals re-decoding without it
  gradients    the training loss has finite gradients
  export       the training step lowers for CUDA and TPU (jax.export, no accelerator needed)
  training     a tiny training run trains and evaluates through the one loop

When the first pass fails, the invariants are not run (each is listed as skipped): they
would fail on the same defect, later and in JAX's words. Every invariant requires its
outputs (outputs, logits, gradients, losses, the score) to be finite before it compares
them; a failure is one line naming what differed: the first non-finite output (which
array, which index, its value, how many more), or the two arrays compared, the index of
their largest difference, both values and the tolerance (`compare`). What an encoding
cannot run follows from its record, the same for built-ins and outside encodings
(`invariants`).

`conformance(name)` runs them and returns one `Check` per check; `check_encoding(name)` is
the pytest helper (an AssertionError listing the failures); `launch.check_encoding` the
command. `name` is anything `--config.encoding` takes, an outside encoding included
(`my_pkg.my_module:ENCODING`). A few tiny models: under a minute on a 2-core CPU
(docs/benchmark.md). Every built-in passes it.

Example:
  >>> for check in conformance('alibi'):                    # doctest: +SKIP
  ...   print(check.line())
  outputs      pass  bias: declared shapes and dtypes, finite values (bidirectional and ...
  backends     pass  max |difference| 9.5e-07 (values), 3.8e-06 (gradients, relative) ...
  ...
  >>> print(conformance('my_pkg:NAN_BIAS')[0].line())      # doctest: +SKIP
  outputs      FAIL  bias (bidirectional) is NaN at head 0, query 0, key 0 (and 161 more)
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Callable
import warnings

import jax

from posenc import encodings
from posenc.testing.compare import Check, Violation
from posenc.testing.outputs import check_outputs
from posenc.testing.invariants import (
  check_backends,
  check_causal,
  check_export,
  check_generation,
  check_gradients,
  check_padded,
  check_step,
  check_training,
)

CHECKS: dict[str, Callable[[str], Check]] = {
  'outputs': check_outputs,
  'backends': check_backends,
  'padded': check_padded,
  'causal': check_causal,
  'step': check_step,
  'generation': check_generation,
  'gradients': check_gradients,
  'export': check_export,
  'training': check_training,
}
# The first pass: when it fails, the invariants after it are skipped.
FIRST = 'outputs'
# The checks that train or lower a whole run: most of the check's time.
EXPENSIVE = ('export', 'training')


def _error(e: Exception) -> str:
  """One line for an exception inside an invariant: its type and message, and where it was
  raised when the message is empty (a bare `assert`)."""
  message = ' '.join(str(e).split())
  if not message:
    frames = traceback.extract_tb(e.__traceback__)
    if frames:
      frame = frames[-1]
      where = (
        os.path.relpath(frame.filename)
        if frame.filename.startswith(os.getcwd())
        else frame.filename
      )
      message = f'(no message) at {where}:{frame.lineno}' + (
        f': {frame.line.strip()}' if frame.line else ''
      )
  return f'error: {type(e).__name__}: {message}'[:400]


@contextlib.contextmanager
def few_optimizations():
  """XLA's optimizations off while the check compiles (`jax_disable_most_optimizations`, as
  flax's example tests run): each of its programs runs once or a few times on tiny shapes,
  so compiling is most of its time, and the optimizations would take about a third more;
  every comparison is between programs compiled alike. The previous setting is restored."""
  before = jax.config.read('jax_disable_most_optimizations')
  jax.config.update('jax_disable_most_optimizations', True)
  try:
    yield
  finally:
    jax.config.update('jax_disable_most_optimizations', before)


def conformance(
  name: str,
  checks: tuple[str, ...] | None = None,
  report: Callable[[Check], None] = lambda check: None,
) -> list[Check]:
  """Every check (or those named in `checks`, in that order) of encoding `name`, each a
  `Check` with the seconds it took (an exception inside one is its failure, named in one
  line); `report` is called as each finishes. When the first pass (`outputs`) runs and
  fails, the checks after it are skipped. Warnings raised inside a check (numpy's on NaN,
  say) are not printed: its line says what went wrong.

  Raises:
    ValueError: `name` is not an encoding (one line), or `checks` names an unknown check.
  """
  encodings.get(name)
  unknown = sorted(set(checks or ()) - set(CHECKS))
  if unknown:
    raise ValueError(f'unknown checks {unknown}; valid: {", ".join(CHECKS)}')
  out = []
  gate = False
  for check_name in checks or tuple(CHECKS):
    if gate:
      check = Check(check_name, False, f'not run: the first pass ({FIRST}) failed', skipped=True)
      report(check)
      out.append(check)
      continue
    start = time.perf_counter()
    with warnings.catch_warnings(), few_optimizations():
      warnings.simplefilter('ignore')
      try:
        check = CHECKS[check_name](name)
      except Exception as e:  # pylint: disable=broad-except  (a failing invariant, reported)
        check = Check(check_name, False, _error(e))
    check = Check(**{**check.__dict__, 'seconds': time.perf_counter() - start})
    gate = check_name == FIRST and not check.passed
    report(check)
    out.append(check)
  return out


def check_encoding(name: str, checks: tuple[str, ...] | None = None) -> list[Check]:
  """The pytest helper: `conformance(name, checks)`, raising AssertionError naming every
  failed invariant, one line each.

  Example (in a test of one's own package):
    def test_my_encoding_conforms():
      posenc.testing.check_encoding('my_pkg.my_module:MY_ENCODING')
  """
  results = conformance(name, checks)
  failed = [c for c in results if not c.passed and not c.skipped]
  if failed:
    raise AssertionError(
      f'encoding {name!r} fails {len(failed)} check(s):\n' + '\n'.join(c.line() for c in failed)
    )
  return results


__all__ = [
  'CHECKS',
  'Check',
  'EXPENSIVE',
  'FIRST',
  'Violation',
  'check_backends',
  'check_causal',
  'check_encoding',
  'check_export',
  'check_generation',
  'check_gradients',
  'check_outputs',
  'check_padded',
  'check_step',
  'check_training',
  'conformance',
]
