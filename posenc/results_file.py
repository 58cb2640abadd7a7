"""results.json of any kind of evaluation, read back: the kind's record found by the file's
`evaluation` in the kinds' registry (`posenc.kinds.record`, which loads the records alone),
the header and the versions checked by `posenc.results`. A reader (the report, the cards,
the leaderboard) imports neither the protocols nor JAX.

Example:
  >>> record = read('runs/rs/results.json')  # doctest: +SKIP
  >>> from experiments import benchmarks     # a stored run: the tiny suite's rotary baseline
  >>> from posenc import benchmark
  >>> data = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']['tasks']['even_pairs']
  >>> record = from_json(data)
  >>> record.evaluation.evaluation, record.evaluation.members[0].exact_match_by_length[12]
  ('range', 0.5625)
"""

from __future__ import annotations

import json
import os
from typing import Any

from posenc import kinds
from posenc import results
from posenc import store


def record_of(evaluation: Any, where: str = 'results.json') -> type:
  """The record class of results.json's `evaluation` (`posenc.kinds.record`), or a one-line
  SchemaError naming the kinds there are."""
  if evaluation not in kinds.KINDS:
    names = [repr(name) for name in kinds.KINDS]
    raise results.SchemaError(
      f'{where}: evaluation is {evaluation!r}, expected {", ".join(names[:-1])} or {names[-1]}'
    )
  return kinds.record(evaluation)


def from_json(data: Any, where: str = 'results.json') -> results.Results:
  """The Results of a results.json object of any version and kind (a file without
  `schema_version` is version 1, whose runs were all 'range' runs).

  Raises:
    SchemaError: an unknown version or evaluation, or a missing or mistyped field, naming
      `where` and the field.
  """
  version = results.check_version(data, where)
  evaluation = data.get('evaluation', 'range' if version == 1 else None)
  return results.Results.from_json(data, record_of(evaluation, where), where)


def read(path: str | os.PathLike[str]) -> results.Results:
  """The Results of the results.json at `path`, a file or a store URL (`from_json`).

  Raises:
    SchemaError: unreadable JSON, or what `from_json` raises, naming `path`.
  """
  try:
    if store.is_url(path):
      data = json.loads(store.read_bytes(os.fspath(path)))
    else:
      with open(path) as f:
        data = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise results.SchemaError(f'{path}: cannot read JSON ({e})') from None
  return from_json(data, str(path))
