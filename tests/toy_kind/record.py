"""The toy kind's record in results.json: the two lengths and the members (the shared fields
only: `posenc.results.Member`)."""

import dataclasses
from typing import Any, ClassVar

from posenc import results


@dataclasses.dataclass(frozen=True)
class ToyResults(results.Evaluation):
  evaluation: ClassVar[str] = 'toy'
  default_family: ClassVar[str] = 'encoder'
  toy_lengths: tuple[int, ...]
  members: tuple[results.Member, ...]

  def to_json(self) -> dict[str, Any]:
    return {
      'evaluation': self.evaluation,
      'toy_lengths': list(self.toy_lengths),
      'members': [m.to_json() for m in self.members],
    }

  def score_basis(self) -> dict[str, Any]:
    return {'what': 'the worse of two lengths', 'lengths': list(self.toy_lengths)}

  def curve(self, member: results.Member, family: str = 'encoder', metric=None):
    return {}

  @classmethod
  def from_json(cls, data: Any, where: str) -> 'ToyResults':
    lengths = results.ints(results.require(data, 'toy_lengths', list, where), 'toy_lengths', where)
    return cls(lengths, results.read_members(data, results.Member, where))


RECORD = ToyResults
