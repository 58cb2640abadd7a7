"""results.json as typed records: what a finished run writes and every reader reads back.

A run's results are one `Results`: the header every kind of evaluation shares (task,
encoding, model family, parameters, training, versions, compile counts, timing, devices,
config) and one evaluation record, its kind's (`posenc.kinds`: `RangeResults`,
`GridResults`, `LengthsResults`, `PerplexityResults`, each in its kind's folder, subclasses
of `Evaluation` with members subclassing `Member`). Each record has `to_json()` and
`from_json(data, where)`; the whole file is written by `Results.to_json` and read by
`posenc.kinds`, which picks the evaluation record by results.json's `evaluation`
from the kinds' registry and checks the header (`Results.from_json` with the record's
class). This package sits below the kinds: it names none. The records also choose the
metric a member is read in (`Evaluation.metric_of`, `score_of`, `curve`): every reader reads
members through them.

Versions (`schema_version`, the first field of the file):
  1  files without the field: everything posenc wrote before the field existed. Read by
     `upgrade_v1`, which fills what older files left out: `evaluation` 'range', the
     protocol's model family (the record's `default_family`: range runs were encoders), no
     recorded encoding options or architecture; a member's optional fields may be missing
     (`Member.missing`).
  2  the current layout: the same fields as version 1's newest files, every header field
     present, and `schema_version`.
A version this module does not know (a file of a newer posenc) is a one-line `SchemaError`
naming it (`check_version`).

JSON keys are strings; the records key lengths and cells by integers: a range member's
{'41': 0.9} reads as {41: 0.9}, a grid member's {'3,5': 1.0} as {(3, 5): 1.0}.

Example:
  >>> from experiments import benchmarks     # a stored run: the tiny suite's rotary baseline
  >>> from posenc import benchmark
  >>> from posenc.kinds.range import record as range_record
  >>> data = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']['tasks']['even_pairs']
  >>> record = Results.from_json(data, range_record.RangeResults)
  >>> record.task, record.evaluation.members[0].exact_match_by_length[12]
  ('even_pairs', 0.5625)
  >>> record.to_json()['schema_version']
  2
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

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
  'check_version',
  'upgrade_v1',
  'best_score',
]

SCHEMA_VERSION = 2
VERSIONS = (1, 2)


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
  def from_json(cls, data: Any, record: type, where: str = 'results.json') -> Results:
    """Reads any version (`upgrade_v1` for files without `schema_version`), its evaluation
    by `record`, the class of its kind's record (`posenc.kinds.from_json` picks it
    by `evaluation`).

    Raises:
      SchemaError: an unknown version, another kind's evaluation, or a missing or mistyped
        field, naming `where` and the field.
    """
    version = check_version(data, where)
    if version == 1:
      data = upgrade_v1(data, record.default_family, where)
    if data.get('evaluation') != record.evaluation:
      raise SchemaError(
        f'{where}: evaluation is {data.get("evaluation")!r}, expected {record.evaluation!r}'
      )
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
      evaluation=record.from_json(data, where),
      versions=optional('versions') or {},
      compiled_programs=optional('compiled_programs'),
      timing=optional('timing'),
      devices=optional('devices'),
      config=optional('config'),
      schema_version=SCHEMA_VERSION,
    )


def check_version(data: Any, where: str) -> int:
  """results.json's `schema_version` (1 when absent), or a one-line SchemaError for an object
  that is not one or a version this posenc does not read."""
  if not isinstance(data, dict):
    raise SchemaError(f'{where}: expected a JSON object')
  version = data.get('schema_version', 1)
  if version not in VERSIONS or isinstance(version, bool):
    raise SchemaError(
      f'{where}: schema_version {version!r} is not one this posenc reads '
      f'({", ".join(map(str, VERSIONS))}); it was written by a newer posenc: upgrade'
    )
  return version


def upgrade_v1(data: Mapping[str, Any], default_family: str | None, where: str) -> dict[str, Any]:
  """A version 1 object in version 2's layout: `evaluation` 'range' when absent (the
  study's runs came first), the evaluation's `default_family` (its record's; None for an
  evaluation no kind records), null encoding options and architecture where the file
  predates them."""
  data = dict(data)
  data.setdefault('evaluation', 'range')
  if data.get('family') is None and default_family is not None:
    data['family'] = default_family
  elif 'family' in data and not isinstance(data['family'], str):
    raise SchemaError(f'{where}: family is {data["family"]!r}, expected a model family name')
  data.setdefault('encoding_options', None)
  data.setdefault('architecture', None)
  return data


def best_score(members: Sequence[Member], best=max) -> float | None:
  """The best score among the members that have one (None when none has)."""
  scores = [m.score for m in members if m.score is not None]
  return best(scores) if scores else None
