"""What every kind of evaluation shares (`core`): the `Protocol` record a kind's protocol
fills in (`posenc.kinds`: each kind's protocol.py), the `EvalContext` an evaluation gets, the
one resumable loop over cells (`run_cells`), the two training variants; and the frozen
evaluation sets (`frozen`).

Example:
  >>> from posenc import kinds
  >>> protocol = kinds.protocol('grid')          # a `core.Protocol`
  >>> record = protocol.evaluate(run, state, EvalContext('runs/x'))   # doctest: +SKIP
"""

from __future__ import annotations

from posenc.evaluate import core  # pylint: disable=unused-import
from posenc.evaluate import frozen  # pylint: disable=unused-import

# Re-exported: the names a caller of the protocols uses.
from posenc.evaluate.core import EvalContext  # pylint: disable=unused-import
from posenc.evaluate.core import Protocol  # pylint: disable=unused-import
from posenc.evaluate.core import eval_micro_batch  # pylint: disable=unused-import
