"""How the conformance check compares outputs: finite first, then the largest difference and
where it is, each failure one line that says what differed.

An invariant computes its outputs (arrays, or pytrees of them such as gradients), requires
each to be finite (`require_finite`), then compares them (`difference`, `require_within`).
A broken invariant raises `Violation`, whose message is its failure line; the `invariant`
decorator turns it into the invariant's failing `Check`.

  require_finite(label, tree)        Violation 'LABEL not finite: nan at [0, 3, 1] (and 47
                                     more)' at the first non-finite entry of any leaf
  difference(what, got, want)        the largest |got - want| of every leaf, where, and both
                                     values (a NaN counts as an infinite difference, so a
                                     difference with NaN never reads 0)
  require_within(diff, tolerance)    Violation naming the arrays, the index, both values and
                                     the tolerance when the difference is over it

Example:
  >>> require_finite('cpu_blocked logits', np.array([[1.0, np.nan], [np.inf, 2.0]]))
  Traceback (most recent call last):
  posenc.testing.compare.Violation: cpu_blocked logits not finite: nan at [0, 1] (and 1 more)
  >>> d = difference('cpu_blocked and reference logits', np.ones(3), np.array([1, 1, 2.0]))
  >>> d.size, d.where
  (1.0, (2,))
  >>> require_within(d, 2e-5)
  Traceback (most recent call last):
  posenc.testing.compare.Violation: cpu_blocked and reference logits differ by 1.0e+00 at [2] (1 vs 2; tolerance
  2.0e-05)

`what` names both sides, got's first ('A and B logits'); the values read in that order.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Check:
  """One check's outcome: passed, what it compared or what broke it, its largest
  difference (None where it measures none), the seconds it took (None where not timed), and
  whether it was skipped (not run, after the first pass failed).
  """

  name: str
  passed: bool
  detail: str
  difference: float | None = None
  seconds: float | None = None
  skipped: bool = False  # not run: an earlier check failed (passed is then False)

  def line(self) -> str:
    word = 'skip' if self.skipped else 'pass' if self.passed else 'FAIL'
    return f'{self.name:<12} {word}  {self.detail}'


class Violation(Exception):
  """An invariant does not hold; the message says what differed (one line)."""


def invariant(check: Callable[[str], Check]) -> Callable[[str], Check]:
  """`check_NAME(encoding) -> Check`, whose `Violation` becomes the failing Check of NAME."""
  name = check.__name__.removeprefix('check_')

  @functools.wraps(check)
  def run(encoding: str) -> Check:
    try:
      return check(encoding)
    except Violation as e:
      return Check(name, False, str(e))

  return run


def _leaves(label: str, tree: Any) -> list[tuple[str, np.ndarray]]:
  """(label, array) per leaf of `tree`: the label alone for one array, with the leaf's path
  in the tree ('gradients of params/layer_0/attention/slopes') otherwise."""
  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  out = []
  for path, leaf in flat:
    keys = '/'.join(str(getattr(k, 'key', getattr(k, 'idx', k))) for k in path)
    out.append((f'{label} of {keys}' if keys else label, np.asarray(leaf)))
  return out


def _index(where: tuple[int, ...]) -> str:
  return '[' + ', '.join(str(int(i)) for i in where) + ']'


def _value(x: Any) -> str:
  return f'{float(x):.6g}'


def not_finite(label: str, tree: Any) -> str | None:
  """None when every floating-point entry of `tree` is finite; else the line naming the
  first leaf that is not, the first such index, its value and how many more there are.

  Example: not_finite('x', np.array([np.nan, 1, np.inf])) == 'x not finite: nan at [0]
  (and 1 more)'.
  """
  for name, x in _leaves(label, tree):
    if not jnp.issubdtype(x.dtype, jnp.inexact):
      continue
    bad = ~np.isfinite(np.asarray(x, np.float64))
    count = int(bad.sum())
    if count:
      where = tuple(np.argwhere(bad)[0])
      more = f' (and {count - 1} more)' if count > 1 else ''
      at = f' at {_index(where)}' if where else ''
      return f'{name} not finite: {_value(x[where])}{at}{more}'
  return None


def require_finite(label: str, tree: Any) -> None:
  """Violation (`not_finite`'s line) unless every entry of `tree` is finite."""
  message = not_finite(label, tree)
  if message:
    raise Violation(message)


@dataclasses.dataclass(frozen=True)
class Difference:
  """The largest |got - want| of a comparison (divided by `scale` where relative), its index
  in the leaf `leaf` and the two values there."""

  what: str
  size: float
  where: tuple[int, ...] = ()
  got: float = 0.0
  want: float = 0.0
  leaf: str = ''
  scale: float = 1.0

  def describe(self) -> str:
    at = f' of {self.leaf}' if self.leaf else ''
    relative = f' relative to {self.scale:.3g}' if self.scale != 1.0 else ''
    index = f' at {_index(self.where)}' if self.where else ''
    return (
      f'{self.what}{at} differ by {self.size:.1e}{relative}{index} '
      f'({_value(self.got)} vs {_value(self.want)}'
    )


def difference(what: str, got: Any, want: Any, scale: float = 1.0) -> Difference:
  """The largest |got - want| / scale over the leaves of two pytrees of one structure.

  A NaN or an infinity on either side counts as an infinite difference (callers require
  finite outputs first; this keeps a difference with NaN from ever reading as 0). Shapes
  that differ are a Violation naming them.
  """
  got_leaves, want_leaves = _leaves('', got), _leaves('', want)
  if len(got_leaves) != len(want_leaves):
    raise Violation(f'{what}: {len(got_leaves)} arrays against {len(want_leaves)}')
  worst, first = Difference(what, 0.0, scale=scale), True
  for (leaf, a), (_, b) in zip(got_leaves, want_leaves):
    leaf = leaf.removeprefix(' of ')
    if a.shape != b.shape:
      raise Violation(f'{what}{" of " + leaf if leaf else ""}: shapes {a.shape} and {b.shape}')
    if not a.size:
      continue
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid='ignore', over='ignore'):
      gap = np.abs(a64 - b64) / scale
    gap = np.where(np.isfinite(gap), gap, np.inf)
    where = np.unravel_index(int(np.argmax(gap)), gap.shape)
    if first or gap[where] > worst.size:
      first = False
      worst = Difference(
        what,
        float(gap[where]),
        tuple(int(i) for i in where),
        float(a64[where]),
        float(b64[where]),
        leaf,
        scale,
      )
  return worst


def require_within(diff: Difference, tolerance: float) -> float:
  """diff.size when it is at most `tolerance`; else a Violation naming the comparison, the
  index, both values and the tolerance."""
  if diff.size <= tolerance:
    return diff.size
  raise Violation(f'{diff.describe()}; tolerance {tolerance:.1e})')


def largest(*sizes: float) -> float:
  """The largest of `sizes`; a NaN is the largest (Python's max would skip it)."""
  return max((np.inf if np.isnan(s) else s for s in sizes), default=0.0)
