"""Table helpers every section of a report may share: names in their canonical order,
percentages, numbered notes, descriptions of length sets and of a population's members.

Example:
  >>> percent_text(0.9531)
  '95.3'
  >>> describe_lengths(range(41, 501, 10))
  '41, 51, …, 491 (every 10th length, 46 lengths)'
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def ordered_names(present: Iterable[str], canonical: Sequence[str], full_grid: bool) -> list[str]:
  """Canonical names (all of them, or those present), then unknown names sorted."""
  present = set(present)
  known = [n for n in canonical if full_grid or n in present]
  return known + sorted(present - set(canonical))


def percent_text(x: float) -> str:
  return f'{100 * x:.1f}'


def mean_sd_text(mean: float, sd: float | None, counted: int, total: int) -> str:
  """A table's entry of a mean over members: 'mean ± sd' in %, and how many of the members
  it counts when not all. Example: mean_sd_text(0.5, 0.1, 2, 3) == '50.0 ± 10.0 (2/3)'."""
  text = percent_text(mean) + ('' if sd is None else f' ± {percent_text(sd)}')
  return text + (f' ({counted}/{total})' if counted < total else '')


def format_notes(notes: Sequence[str]) -> list[str]:
  return ['Notes:', ''] + [f'{i}. {note}' for i, note in enumerate(notes, 1)]


def describe_lengths(lengths: Sequence[int]) -> str:
  """A short description of a sorted set of lengths.

  Example:
    >>> describe_lengths(range(41, 501))
    '41..500 (every length, 460 lengths)'
    >>> describe_lengths(range(41, 501, 10))
    '41, 51, …, 491 (every 10th length, 46 lengths)'
  """
  lengths = sorted(set(lengths))
  if not lengths:
    return 'no lengths'
  if len(lengths) == 1:
    return f'{lengths[0]} (1 length)'
  steps = {b - a for a, b in zip(lengths, lengths[1:])}
  if steps == {1}:
    return f'{lengths[0]}..{lengths[-1]} (every length, {len(lengths)} lengths)'
  if len(steps) == 1 and len(lengths) > 2:
    (step,) = steps
    return (
      f'{lengths[0]}, {lengths[1]}, …, {lengths[-1]} '
      f'(every {_ordinal(step)} length, {len(lengths)} lengths)'
    )
  return f'{lengths[0]}..{lengths[-1]} ({len(lengths)} lengths, irregularly spaced)'


def _ordinal(n: int) -> str:
  suffix = 'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')
  return f'{n}{suffix}'


def members_text(members: Sequence[Any]) -> str:
  """'N', or 'N (S seeds × learning rates {...})' when the members are a full product.

  Example: seeds 0, 1 at 1e-3 -> '2 (2 seeds × learning rates {0.001})'.
  """
  seeds = {m.seed for m in members}
  rates = sorted({m.learning_rate for m in members})
  text = str(len(members))
  if len(seeds) * len(rates) == len(members):
    text += (
      f' ({len(seeds)} seed{"s" * (len(seeds) != 1)} × learning rates '
      f'{{{", ".join(f"{r:g}" for r in rates)}}})'
    )
  return text
