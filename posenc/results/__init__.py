"""results.json as typed records: what a finished run writes and every reader reads back.

A run's results are one `Results`: the header every kind of evaluation shares (task,
encoding, model family, parameters, training, versions, compile counts, timing, devices,
config) and one evaluation record, its kind's (`posenc.kinds`: `RangeResults`,
`GridResults`, `LengthsResults`, `PerplexityResults`, each in its kind's folder, subclasses
of `Evaluation` with members subclassing `Member`). Each record has `to_json()` and
`from_json(data, where)`; `Results.from_json` picks the evaluation record by results.json's
`evaluation` from the kinds' registry (`posenc.kinds.record`), which loads only the records:
a reader (the report) imports neither the protocols nor JAX. The records also choose the
metric a member is read in (`Evaluation.metric_of`, `score_of`, `curve`): every reader reads
members through them.

Versions (`schema_version`, the first field of the file):
  1  files without the field: everything posenc wrote before the field existed. Read by
     `upgrade_v1`, which fills what older files left out: `evaluation` 'range', the
     protocol's model family (`default_family`: range runs were encoders), no recorded
     encoding options or architecture; a member's optional fields may be missing
     (`Member.missing`).
  2  the current layout: the same fields as version 1's newest files, every header field
     present, and `schema_version`.
A version this module does not know (a file of a newer posenc) is a one-line `SchemaError`
naming it.

JSON keys are strings; the records key lengths and cells by integers: a range member's
{'41': 0.9} reads as {41: 0.9}, a grid member's {'3,5': 1.0} as {(3, 5): 1.0}.

Example:
  >>> record = read('runs/rs/results.json')  # doctest: +SKIP
  >>> from experiments import benchmarks     # a stored run: the tiny suite's rotary baseline
  >>> from posenc import benchmark
  >>> data = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']['tasks']['even_pairs']
  >>> record = Results.from_json(data)
  >>> record.task, record.evaluation.members[0].exact_match_by_length[12]
  ('even_pairs', 0.5625)
  >>> record.to_json()['schema_version']
  2
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping, Sequence

from posenc import kinds as kinds_lib
from posenc import store
from posenc.results.evaluations import METRICS, Evaluation
from posenc.results.members import (
  Member,
  SchemaError,
  by_length_of,
  finite_curve,
  ints,
  length_keys,
  nested_by_length,
  number_or_none,
  read_members,
  require,
)

__all__ = [
  'SCHEMA_VERSION',
  'VERSIONS',
  'METRICS',
  'SchemaError',
  'require',
  'number_or_none',
  'ints',
  'by_length_of',
  'nested_by_length',
  'length_keys',
  'finite_curve',
  'read_members',
  'Member',
  'Evaluation',
  'Results',
  'record_of',
  'upgrade_v1',
  'read',
  'best_score',
]

SCHEMA_VERSION = 2
VERSIONS = (1, 2)


def record_of(evaluation: Any, where: str = 'results.json') -> type:
  """The record class of results.json's `evaluation` (`posenc.kinds.record`), or a one-line
  SchemaError naming the kinds there are."""
  if evaluation not in kinds_lib.KINDS:
    names = [repr(name) for name in kinds_lib.KINDS]
    raise SchemaError(
      f'{where}: evaluation is {evaluation!r}, expected {", ".join(names[:-1])} or {names[-1]}'
    )
  return kinds_lib.record(evaluation)


# ---------------------------------------------------------------------------------------------
# The whole file.

# The header in the file's order; the evaluation's fields come after `train_length`.
_HEAD = (
  'task',
  'encoding',
  'family',
  'encoding_options',
  'num_params',
  'architecture',
  'train_steps',
  'train_length',
)
_TAIL = ('versions', 'compiled_programs', 'timing', 'devices', 'config')


@dataclasses.dataclass(frozen=True)
class Results:
  """One run's results.json.

  `family` is the model family ('encoder' or 'decoder'); `encoding_options` every option
  the encoding takes with its value (None in version 1 files that predate it);
  `architecture` 'standard', 'standard_ii' or 'looped LxR'; `evaluation` the protocol's
  record; `config` the run's config as JSON (`config.as_json`).
  """

  task: str
  encoding: str
  family: str
  encoding_options: Mapping[str, Any] | None
  num_params: int | None
  architecture: str | None
  train_steps: int
  train_length: int
  evaluation: Any
  versions: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  compiled_programs: Mapping[str, Any] | None = None
  timing: Mapping[str, Any] | None = None
  devices: Mapping[str, Any] | None = None
  config: Mapping[str, Any] | None = None
  schema_version: int = SCHEMA_VERSION

  @property
  def members(self) -> tuple[Member, ...]:
    return self.evaluation.members

  def to_json(self) -> dict[str, Any]:
    """The file's JSON object, in the order the engine writes it."""
    return {
      'schema_version': self.schema_version,
      **{k: getattr(self, k) for k in _HEAD},
      **self.evaluation.to_json(),
      **{k: getattr(self, k) for k in _TAIL},
    }

  @classmethod
  def from_json(cls, data: Any, where: str = 'results.json') -> Results:
    """Reads any version (`upgrade_v1` for files without `schema_version`).

    Raises:
      SchemaError: an unknown version or evaluation, or a missing or mistyped field, naming
        `where` and the field.
    """
    if not isinstance(data, dict):
      raise SchemaError(f'{where}: expected a JSON object')
    version = data.get('schema_version', 1)
    if version not in VERSIONS or isinstance(version, bool):
      raise SchemaError(
        f'{where}: schema_version {version!r} is not one this posenc reads '
        f'({", ".join(map(str, VERSIONS))}); it was written by a newer posenc: upgrade'
      )
    if version == 1:
      data = upgrade_v1(data, where)
    kind = record_of(data.get('evaluation'), where)
    task = require(data, 'task', str, where)
    encoding = require(data, 'encoding', str, where)
    if not task or not encoding:
      raise SchemaError(f'{where}: empty task or encoding name')
    family = require(data, 'family', str, where)
    if not family:
      raise SchemaError(f"{where}: family is '', expected a model family name")
    options = data['encoding_options']
    if options is not None and not isinstance(options, dict):
      raise SchemaError(f'{where}: encoding_options is {options!r}, expected an object')
    architecture = data['architecture']
    if architecture is not None and not isinstance(architecture, str):
      raise SchemaError(f'{where}: architecture is {architecture!r}, expected a string')
    num_params = data.get('num_params')
    optional = lambda key: data.get(key) if isinstance(data.get(key), dict) else None
    return cls(
      task=task,
      encoding=encoding,
      family=family,
      encoding_options=options,
      num_params=num_params if isinstance(num_params, int) else None,
      architecture=architecture,
      train_steps=require(data, 'train_steps', int, where),
      train_length=require(data, 'train_length', int, where),
      evaluation=kind.from_json(data, where),
      versions=optional('versions') or {},
      compiled_programs=optional('compiled_programs'),
      timing=optional('timing'),
      devices=optional('devices'),
      config=optional('config'),
      schema_version=SCHEMA_VERSION,
    )


def upgrade_v1(data: Mapping[str, Any], where: str) -> dict[str, Any]:
  """A version 1 object in version 2's layout: `evaluation` 'range' when absent (the
  study's runs came first), the evaluation's default family, null encoding options and
  architecture where the file predates them."""
  data = dict(data)
  data.setdefault('evaluation', 'range')
  if data.get('family') is None and data['evaluation'] in kinds_lib.KINDS:
    data['family'] = kinds_lib.record(data['evaluation']).default_family
  elif 'family' in data and not isinstance(data['family'], str):
    raise SchemaError(f'{where}: family is {data["family"]!r}, expected a model family name')
  data.setdefault('encoding_options', None)
  data.setdefault('architecture', None)
  return data


def read(path: str | os.PathLike[str]) -> Results:
  """The Results of the results.json at `path` (`Results.from_json`).

  Raises:
    SchemaError: unreadable JSON, or what `Results.from_json` raises, naming `path`.
  """
  try:
    if store.is_url(path):
      data = json.loads(store.read_bytes(os.fspath(path)))
    else:
      with open(path) as f:
        data = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise SchemaError(f'{path}: cannot read JSON ({e})') from None
  return Results.from_json(data, str(path))


def best_score(members: Sequence[Member], best=max) -> float | None:
  """The best score among the members that have one (None when none has)."""
  scores = [m.score for m in members if m.score is not None]
  return best(scores) if scores else None
