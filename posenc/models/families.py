"""The model families, as the facts the rest of posenc asks of them.

  encoder  the study's: bidirectional, its outputs read off empty query tokens in one pass,
           judged by per-token accuracy
  decoder  causal, its outputs written as tokens after the inputs and judged by greedy
           generation: per-token accuracy and exact match of the whole answer

Every question a module asks about the family (`model.family`) is a field here; no other
module compares the family's name.

Example:
  >>> of('decoder').causal, of('encoder').metric
  (True, 'accuracy')
"""

from __future__ import annotations

import dataclasses

from posenc import suggest


@dataclasses.dataclass(frozen=True)
class Family:
  """A model family.

  Attributes:
    name: `model.family`.
    causal: keys right of a query are masked (encodings causal by definition need it).
    generates: outputs are tokens it writes (greedy generation, exact match of the answer,
      tied embeddings possible); otherwise classes read off the model's outputs.
    metric: what its scores and curves on the study's tasks are judged by.
  """

  name: str
  causal: bool
  generates: bool
  metric: str


ENCODER = Family('encoder', causal=False, generates=False, metric='accuracy')
DECODER = Family('decoder', causal=True, generates=True, metric='exact match')
FAMILIES: dict[str, Family] = {f.name: f for f in (ENCODER, DECODER)}
NAMES = tuple(FAMILIES)


def of(name: str) -> Family:
  """The family `name`; ValueError (one line) listing the families otherwise."""
  if name not in FAMILIES:
    raise ValueError(
      f'unknown model.family {name!r}{suggest.did_you_mean(name, FAMILIES)}; valid: {", ".join(FAMILIES)}'
    )
  return FAMILIES[name]
