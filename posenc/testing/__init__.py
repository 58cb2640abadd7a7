"""The conformance check of an encoding: the invariants every built-in encoding passes::

  backends     every attention backend equals the readable one (`reference`) in values and
               gradients, on a padded batch, in each form the encoding runs in
  padded       a model's outputs on a sequence padded wider equal those on the sequence
  causal       a decoder's outputs at a position do not depend on later tokens
  step         one decoding step against the cache equals the whole sequence's row
  generation   greedy generation with the KV cache equals re-decoding without it
  gradients    the training loss has finite gradients
  export       the training step lowers for CUDA and TPU (jax.export, no accelerator needed)
  training     a tiny training run trains and evaluates through the one loop

Every invariant requires its outputs (outputs, logits, gradients, losses, the score) to be
finite before it compares them; a failure is one line naming what differed: the first
non-finite output (which array, which index, its value, how many more), or the two arrays
compared, the index of their largest difference, both values and the tolerance
(`compare`). What an encoding cannot run follows from its record, the same for built-ins
and outside encodings (`invariants`).

`conformance(name)` runs them and returns one `Check` per invariant; `check_encoding(name)`
is the pytest helper (an AssertionError listing the failures); `launch.check_encoding` the
command. `name` is anything `--config.encoding` takes, an outside encoding included
(`my_pkg.my_module:ENCODING`). A few tiny models: about a minute on a 2-core CPU. Every
built-in passes it (docs/benchmark.md).

Example:
  >>> for check in conformance('alibi'):                    # doctest: +SKIP
  ...   print(check.line())
  backends     pass  max |difference| 9.5e-07 (values), 3.8e-06 (gradients, relative) ...
  ...
  >>> print(conformance('my_pkg:NAN_BIAS', ('step',))[0].line())  # doctest: +SKIP
  step         FAIL  decoder logits of the whole sequence not finite: nan at [0, 0, 0] (and
  125 more)
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Callable
import warnings

from posenc import encodings
from posenc.testing.compare import Check, Violation
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
  'backends': check_backends,
  'padded': check_padded,
  'causal': check_causal,
  'step': check_step,
  'generation': check_generation,
  'gradients': check_gradients,
  'export': check_export,
  'training': check_training,
}
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


def conformance(
  name: str,
  checks: tuple[str, ...] | None = None,
  report: Callable[[Check], None] = lambda check: None,
) -> list[Check]:
  """Every invariant (or those named in `checks`) of encoding `name`, each a `Check` with
  the seconds it took (an exception inside one is its failure, named in one line); `report`
  is called as each finishes. Warnings raised inside an invariant (numpy's on NaN, say) are
  not printed: its line says what went wrong.

  Raises:
    ValueError: `name` is not an encoding (one line), or `checks` names an unknown check.
  """
  encodings.get(name)
  unknown = sorted(set(checks or ()) - set(CHECKS))
  if unknown:
    raise ValueError(f'unknown checks {unknown}; valid: {", ".join(CHECKS)}')
  out = []
  for check_name in checks or tuple(CHECKS):
    start = time.perf_counter()
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      try:
        check = CHECKS[check_name](name)
      except Exception as e:  # pylint: disable=broad-except  (a failing invariant, reported)
        check = Check(check_name, False, _error(e))
    check = Check(**{**check.__dict__, 'seconds': time.perf_counter() - start})
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
  failed = [c for c in results if not c.passed]
  if failed:
    raise AssertionError(
      f'encoding {name!r} breaks {len(failed)} invariant(s):\n'
      + '\n'.join(c.line() for c in failed)
    )
  return results


__all__ = [
  'CHECKS',
  'Check',
  'EXPENSIVE',
  'Violation',
  'check_backends',
  'check_causal',
  'check_encoding',
  'check_export',
  'check_generation',
  'check_gradients',
  'check_padded',
  'check_step',
  'check_training',
  'conformance',
]
