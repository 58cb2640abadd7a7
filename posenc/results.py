"""results.json as typed records: what a finished run writes and every reader reads back.

A run's results are one `Results`: the header every protocol shares (task, encoding, model
family, parameters, training, versions, compile counts, timing, devices, config) and one
evaluation record, the protocol's (`RangeResults`, `GridResults`, `LengthsResults`,
`PerplexityResults`; a protocol names its record as `Protocol.results`). Each record has
`to_json()` and `from_json(data, where)`; `Results.from_json` picks the evaluation record by
results.json's `evaluation` from the `kinds` it is given ({name: record class}, from the
protocol registry), so this module knows no protocol by name.

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
  >>> record = read('runs/rs/results.json', {'range': RangeResults})  # doctest: +SKIP
  >>> record.task, record.evaluation.members[0].accuracy_by_length[41]
  ('reverse_string', 0.93)
  >>> record.to_json()['schema_version']
  2
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Any, ClassVar, Mapping, Sequence

SCHEMA_VERSION = 2
VERSIONS = (1, 2)


class SchemaError(ValueError):
  """A results.json that does not follow the schema; the message names the file and field."""


# ---------------------------------------------------------------------------------------------
# Field checks, shared by the records.


def require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
  """data[key], which must be of `kind` (a bool is not an int unless `kind` says so)."""
  if key not in data:
    raise SchemaError(f'{where}: missing {key!r}')
  value = data[key]
  kinds = kind if isinstance(kind, tuple) else (kind,)
  if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
    names = ' or '.join(k.__name__ for k in kinds)
    raise SchemaError(f'{where}: {key!r} is {value!r}, expected {names}')
  return value


def _number_or_none(value: Any, name: str, where: str) -> float | None:
  if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
    raise SchemaError(f'{where}: {name} is {value!r}, expected a number or null')
  return None if value is None else float(value)


def _ints(values: Any, name: str, where: str) -> tuple[int, ...]:
  if not isinstance(values, list) or not all(
      isinstance(n, int) and not isinstance(n, bool) for n in values):
    raise SchemaError(f'{where}: {name} must be a list of integers')
  return tuple(values)


def _by_length(raw: Any, name: str, where: str) -> dict[int, float | None]:
  """{'41': 0.9} -> {41: 0.9}, in the file's order."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  try:
    return {int(k): None if v is None else float(v) for k, v in raw.items()}
  except (TypeError, ValueError) as e:
    raise SchemaError(f'{where}: bad {name} entry ({e})') from None


def _nested_by_length(raw: Any, name: str, where: str) -> dict[str, dict[int, float | None]]:
  """{'uniform': {'10': 0.5}} -> {'uniform': {10: 0.5}}."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  return {str(k): _by_length(v, f'{name}.{k}', where) for k, v in raw.items()}


def _length_keys(values: Mapping[int, Any]) -> dict[str, Any]:
  return {str(k): v for k, v in values.items()}


# ---------------------------------------------------------------------------------------------
# Members.


@dataclasses.dataclass(frozen=True)
class Member:
  """One trained model: its seed and learning rate, whether it diverged, its score (None
  when it has none: diverged, or no length past training).

  `missing` names the optional fields its (version 1) file did not record; `to_json` leaves
  them out again. `data_seed` is the member's data seed when the population varies it
  (`config.data_seeds`), else None and not written.
  """
  seed: int
  learning_rate: float
  diverged: bool
  score: float | None
  missing: tuple[str, ...] = ()
  data_seed: int | None = None

  def _head(self) -> dict[str, Any]:
    head = {'seed': self.seed, 'data_seed': self.data_seed,
            'learning_rate': self.learning_rate, 'diverged': self.diverged, 'score': self.score}
    return {k: v for k, v in head.items()
            if k not in self.missing and (k != 'data_seed' or v is not None)}

  @staticmethod
  def _read_head(data: Any, where: str) -> tuple[dict[str, Any], str]:
    """The shared fields as keyword arguments, and `where` naming the member."""
    if not isinstance(data, dict):
      raise SchemaError(f'{where}: expected an object, got {data!r}')
    seed = require(data, 'seed', int, where)
    data_seed = require(data, 'data_seed', int, where) if 'data_seed' in data else None
    learning_rate = float(require(data, 'learning_rate', (int, float), where))
    where = (f'{where} (seed {seed}, ' + ('' if data_seed is None else f'data seed {data_seed}, ')
             + f'learning rate {learning_rate:g})')
    diverged = require(data, 'diverged', bool, where)
    score = _number_or_none(data.get('score'), 'score', where)
    missing = () if 'score' in data else ('score',)
    return {'seed': seed, 'learning_rate': learning_rate, 'diverged': diverged,
            'score': score, 'missing': missing, 'data_seed': data_seed}, where


@dataclasses.dataclass(frozen=True)
class RangeMember(Member):
  """Per-length accuracy and exact match ({length: value}); the scores are their means over
  the lengths past training."""
  accuracy_by_length: Mapping[int, float | None] = dataclasses.field(default_factory=dict)
  exact_match_score: float | None = None
  exact_match_by_length: Mapping[int, float | None] | None = None

  def to_json(self) -> dict[str, Any]:
    out = {**self._head(), 'accuracy_by_length': _length_keys(self.accuracy_by_length),
           'exact_match_score': self.exact_match_score,
           'exact_match_by_length': (None if self.exact_match_by_length is None
                                     else _length_keys(self.exact_match_by_length))}
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> RangeMember:
    head, where = cls._read_head(data, where)
    accuracy = _by_length(require(data, 'accuracy_by_length', dict, where),
                          'accuracy_by_length', where)
    # Files written before the exact-match metric have neither field.
    missing = head.pop('missing') + tuple(
        k for k in ('exact_match_score', 'exact_match_by_length') if k not in data)
    exact = data.get('exact_match_by_length')
    if exact is not None:
      exact = _by_length(exact, 'exact_match_by_length', where)
    return cls(**head, missing=missing, accuracy_by_length=accuracy,
               exact_match_score=_number_or_none(data.get('exact_match_score'),
                                                 'exact_match_score', where),
               exact_match_by_length=exact)


_CELL = re.compile(r'\s*(\d+)\s*,\s*(\d+)\s*')


def _by_cell(raw: Any, name: str, where: str) -> dict[tuple[int, int], float | None]:
  """{'3,5': 1.0} -> {(3, 5): 1.0}."""
  if not isinstance(raw, dict):
    raise SchemaError(f'{where}: {name!r} is {raw!r}, expected dict')
  cells = {}
  for key, value in raw.items():
    match = _CELL.fullmatch(key)
    if not match:
      raise SchemaError(f"{where}: {name} key {key!r} is not 'a,b'")
    cells[int(match[1]), int(match[2])] = _number_or_none(value, f'{name}[{key!r}]', where)
  return cells


@dataclasses.dataclass(frozen=True)
class GridMember(Member):
  """Exact match per region ('ood', 'beyond', 'id'; None for an empty region) and per cell
  (a, b); token accuracy likewise. The score is the OOD region's exact match."""
  REGIONS: ClassVar[tuple[str, ...]] = ('ood', 'beyond', 'id')
  regions: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
  token_accuracy_regions: Mapping[str, float | None] | None = None
  exact_match_by_cell: Mapping[tuple[int, int], float | None] = dataclasses.field(
      default_factory=dict)
  accuracy_by_cell: Mapping[tuple[int, int], float | None] | None = None

  def to_json(self) -> dict[str, Any]:
    cells = lambda by: None if by is None else {f'{a},{b}': v for (a, b), v in by.items()}
    out = {**self._head(), 'regions': dict(self.regions),
           'token_accuracy_regions': (None if self.token_accuracy_regions is None
                                      else dict(self.token_accuracy_regions)),
           'exact_match_by_cell': cells(self.exact_match_by_cell),
           'accuracy_by_cell': cells(self.accuracy_by_cell)}
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> GridMember:
    head, where = cls._read_head(data, where)
    raw = require(data, 'regions', dict, where)
    for name in cls.REGIONS:
      if name not in raw:
        raise SchemaError(f'{where}: regions has no {name!r}')
    regions = {}
    for name in raw:  # In the file's order.
      regions[name] = _number_or_none(raw[name], f'regions.{name}', where)
      if regions[name] is not None and not head['diverged'] and not math.isfinite(regions[name]):
        raise SchemaError(f'{where}: not diverged but its regions.{name} is {regions[name]}')
    tokens = data.get('token_accuracy_regions')
    if tokens is not None:
      tokens = {str(k): _number_or_none(v, f'token_accuracy_regions.{k}', where)
                for k, v in require(data, 'token_accuracy_regions', dict, where).items()}
    accuracy = data.get('accuracy_by_cell')
    missing = head.pop('missing') + tuple(
        k for k in ('token_accuracy_regions', 'accuracy_by_cell') if k not in data)
    return cls(**head, missing=missing, regions=regions, token_accuracy_regions=tokens,
               exact_match_by_cell=_by_cell(require(data, 'exact_match_by_cell', dict, where),
                                            'exact_match_by_cell', where),
               accuracy_by_cell=(None if accuracy is None
                                 else _by_cell(accuracy, 'accuracy_by_cell', where)))


@dataclasses.dataclass(frozen=True)
class LengthsMember(Member):
  """Per metric ('exact_match', 'edit_distance', 'accuracy'), {distribution: {length:
  value}}. The score is the exact match over the first distribution's lengths past training."""
  METRICS: ClassVar[tuple[str, ...]] = ('exact_match', 'edit_distance', 'accuracy')
  by_length: Mapping[str, Mapping[str, Mapping[int, float | None]]] = dataclasses.field(
      default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    return {**self._head(), **{
        f'{metric}_by_length': {d: _length_keys(by) for d, by in table.items()}
        for metric, table in self.by_length.items()}}

  @classmethod
  def from_json(cls, data: Any, where: str) -> LengthsMember:
    head, where = cls._read_head(data, where)
    tables = {}
    for metric in cls.METRICS:
      key = f'{metric}_by_length'
      # Token accuracy was added last; the report reads only the first two.
      if key in data or metric != 'accuracy':
        tables[metric] = _nested_by_length(require(data, key, dict, where), key, where)
    return cls(**head, by_length=tables)


@dataclasses.dataclass(frozen=True)
class PerplexityMember(Member):
  """Perplexity per window mode and length ({mode: {length: ppl}}); the score is the first
  mode's at the longest length, `degradation` |ppl_L - ppl_n| / ppl_n (Qin et al.)."""
  degradation: float | None = None
  perplexity_by_length: Mapping[str, Mapping[int, float | None]] = dataclasses.field(
      default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    out = {**self._head(), 'degradation': self.degradation,
           'perplexity_by_length': {mode: _length_keys(by)
                                    for mode, by in self.perplexity_by_length.items()}}
    return {k: v for k, v in out.items() if k not in self.missing}

  @classmethod
  def from_json(cls, data: Any, where: str) -> PerplexityMember:
    head, where = cls._read_head(data, where)
    missing = head.pop('missing') + (() if 'degradation' in data else ('degradation',))
    return cls(**head, missing=missing,
               degradation=_number_or_none(data.get('degradation'), 'degradation', where),
               perplexity_by_length=_nested_by_length(
                   require(data, 'perplexity_by_length', dict, where),
                   'perplexity_by_length', where))


def _finite_curve(by_length: Mapping[int, float | None]) -> dict[int, float]:
  return {n: math.nan if v is None else float(v) for n, v in sorted(by_length.items())}


def _members(data: Mapping[str, Any], member: type, where: str) -> tuple[Any, ...]:
  raw = require(data, 'members', list, where)
  if not raw:
    raise SchemaError(f'{where}: members is empty')
  return tuple(member.from_json(m, f'{where}: members[{i}]') for i, m in enumerate(raw))


# ---------------------------------------------------------------------------------------------
# The evaluations, one per protocol.


class Evaluation:
  """What every evaluation record gives the scorecard: a member's score and its curve by
  length in the record's metric (`metric_of` the model family: generated answers are judged
  by exact match), and whether higher is better."""
  metric: ClassVar[str] = 'accuracy'
  higher_is_better: ClassVar[bool] = True

  def metric_of(self, family: str) -> str:
    del family
    return self.metric

  def score_of(self, member: Member, family: str) -> float | None:
    del family
    return member.score


@dataclasses.dataclass(frozen=True)
class RangeResults(Evaluation):
  """The study's evaluation: every member's metrics at `eval_lengths`; `score_lengths` the
  first and last length past training (None when none is)."""
  evaluation: ClassVar[str] = 'range'
  default_family: ClassVar[str] = 'encoder'  # Version 1 files from before the decoder.
  # What the scorecard reads (`curve`): the study's per-token accuracy by length.
  metric: ClassVar[str] = 'accuracy'
  higher_is_better: ClassVar[bool] = True
  eval_lengths: tuple[int, ...]
  score_lengths: tuple[int, int] | None
  members: tuple[RangeMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {'evaluation': self.evaluation, 'eval_lengths': list(self.eval_lengths),
            'score_lengths': None if self.score_lengths is None else list(self.score_lengths),
            'members': [m.to_json() for m in self.members]}

  def metric_of(self, family: str) -> str:
    """A decoder generates its outputs: exact match; an encoder: per-token accuracy."""
    return 'exact match' if family == 'decoder' else 'accuracy'

  def score_of(self, member: RangeMember, family: str) -> float | None:
    return member.exact_match_score if family == 'decoder' else member.score

  def curve(self, member: RangeMember, family: str = 'encoder') -> dict[int, float]:
    """The member's `metric_of(family)` by length (NaN where none was recorded)."""
    if family == 'decoder':
      return _finite_curve(member.exact_match_by_length or {})
    return _finite_curve(member.accuracy_by_length)

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> RangeResults:
    lengths = _ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where)
    score_lengths = data.get('score_lengths')
    if score_lengths is not None:
      score_lengths = _ints(score_lengths, 'score_lengths', where)
    return cls(lengths, score_lengths, _members(data, RangeMember, where))


@dataclasses.dataclass(frozen=True)
class GridResults(Evaluation):
  """Exact match over a grid of cells (a, b) for a, b in 1..grid_max at `grid_stride` (and
  grid_max), plus (x, x) for x in `beyond`; `axes` names the two axes."""
  evaluation: ClassVar[str] = 'grid'
  default_family: ClassVar[str] = 'decoder'  # Only decoders generate answers.
  # The scorecard's length n is the cell (n, n): both operands n long.
  metric: ClassVar[str] = 'exact match'
  higher_is_better: ClassVar[bool] = True
  axes: tuple[str, str]
  grid_max: int
  grid_stride: int
  beyond: tuple[int, ...]
  samples_per_cell: int
  members: tuple[GridMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {'evaluation': self.evaluation, 'axes': list(self.axes),
            'grid': {'max': self.grid_max, 'stride': self.grid_stride,
                     'beyond': list(self.beyond), 'samples_per_cell': self.samples_per_cell},
            'members': [m.to_json() for m in self.members]}

  def curve(self, member: GridMember, family: str = 'decoder') -> dict[int, float]:
    """Exact match on the diagonal cells (n, n), by n."""
    return _finite_curve({a: v for (a, b), v in sorted(member.exact_match_by_cell.items())
                          if a == b})

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> GridResults:
    axes = require(data, 'axes', list, where)
    if len(axes) != 2 or not all(isinstance(a, str) and a for a in axes):
      raise SchemaError(f'{where}: axes is {axes!r}, expected two axis names')
    grid = require(data, 'grid', dict, where)
    at = f'{where}: grid'
    return cls((axes[0], axes[1]), require(grid, 'max', int, at),
               require(grid, 'stride', int, at),
               _ints(require(grid, 'beyond', list, at), 'beyond', at),
               require(grid, 'samples_per_cell', int, at), _members(data, GridMember, where))


@dataclasses.dataclass(frozen=True)
class LengthsResults(Evaluation):
  """The hinting study's evaluation: per test distribution and length; the score over
  `score_distribution` at `score_lengths`."""
  evaluation: ClassVar[str] = 'lengths'
  default_family: ClassVar[str] = 'decoder'
  metric: ClassVar[str] = 'exact match'
  higher_is_better: ClassVar[bool] = True
  hints: tuple[str, ...]
  hint_schedule: str
  eval_lengths: tuple[int, ...]
  distributions: tuple[str, ...]
  score_distribution: str
  score_lengths: tuple[int, ...]
  members: tuple[LengthsMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {'evaluation': self.evaluation, 'hints': list(self.hints),
            'hint_schedule': self.hint_schedule, 'eval_lengths': list(self.eval_lengths),
            'distributions': list(self.distributions),
            'score_distribution': self.score_distribution,
            'score_lengths': list(self.score_lengths),
            'members': [m.to_json() for m in self.members]}

  def curve(self, member: LengthsMember, family: str = 'decoder') -> dict[int, float]:
    """Full-sequence accuracy on the score distribution, by length."""
    return _finite_curve(member.by_length['exact_match'][self.score_distribution])

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> LengthsResults:
    distributions = tuple(str(d) for d in require(data, 'distributions', list, where))
    if not distributions:
      raise SchemaError(f'{where}: distributions is empty')
    lengths = _ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where)
    hints = require(data, 'hints', list, where) if 'hints' in data else []
    return cls(tuple(str(h) for h in hints), str(data.get('hint_schedule', 'alternate')),
               lengths, distributions, str(data.get('score_distribution', distributions[0])),
               _ints(data.get('score_lengths', []), 'score_lengths', where),
               _members(data, LengthsMember, where))


@dataclasses.dataclass(frozen=True)
class PerplexityResults(Evaluation):
  """A language model's perplexity per window length; `corpus` describes the split,
  `eval_seconds` the time per length and mode."""
  evaluation: ClassVar[str] = 'perplexity'
  default_family: ClassVar[str] = 'decoder'
  metric: ClassVar[str] = 'perplexity'
  higher_is_better: ClassVar[bool] = False
  eval_lengths: tuple[int, ...]
  corpus: Mapping[str, Any]
  eval_seconds: Mapping[str, Any]
  members: tuple[PerplexityMember, ...]

  def to_json(self) -> dict[str, Any]:
    return {'evaluation': self.evaluation, 'eval_lengths': list(self.eval_lengths),
            'corpus': dict(self.corpus), 'eval_seconds': dict(self.eval_seconds),
            'members': [m.to_json() for m in self.members]}

  def curve(self, member: PerplexityMember, family: str = 'decoder') -> dict[int, float]:
    """Perplexity by length in the first window mode (the score's)."""
    return _finite_curve(next(iter(member.perplexity_by_length.values())))

  @classmethod
  def from_json(cls, data: Mapping[str, Any], where: str) -> PerplexityResults:
    return cls(_ints(require(data, 'eval_lengths', list, where), 'eval_lengths', where),
               data.get('corpus') or {}, data.get('eval_seconds') or {},
               _members(data, PerplexityMember, where))


# ---------------------------------------------------------------------------------------------
# The whole file.

# The header in the file's order; the evaluation's fields come after `train_length`.
_HEAD = ('task', 'encoding', 'family', 'encoding_options', 'num_params', 'architecture',
         'train_steps', 'train_length')
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
    return {'schema_version': self.schema_version,
            **{k: getattr(self, k) for k in _HEAD}, **self.evaluation.to_json(),
            **{k: getattr(self, k) for k in _TAIL}}

  @classmethod
  def from_json(cls, data: Any, kinds: Mapping[str, type], where: str = 'results.json'
                ) -> Results:
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
          f'({", ".join(map(str, VERSIONS))}); it was written by a newer posenc: upgrade')
    if version == 1:
      data = upgrade_v1(data, kinds, where)
    evaluation = data.get('evaluation')
    if evaluation not in kinds:
      names = [repr(name) for name in kinds]
      raise SchemaError(f'{where}: evaluation is {evaluation!r}, expected '
                        f'{", ".join(names[:-1])} or {names[-1]}')
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
        task=task, encoding=encoding, family=family, encoding_options=options,
        num_params=num_params if isinstance(num_params, int) else None,
        architecture=architecture, train_steps=require(data, 'train_steps', int, where),
        train_length=require(data, 'train_length', int, where),
        evaluation=kinds[evaluation].from_json(data, where),
        versions=optional('versions') or {}, compiled_programs=optional('compiled_programs'),
        timing=optional('timing'), devices=optional('devices'), config=optional('config'),
        schema_version=SCHEMA_VERSION)


def upgrade_v1(data: Mapping[str, Any], kinds: Mapping[str, type], where: str
               ) -> dict[str, Any]:
  """A version 1 object in version 2's layout: `evaluation` 'range' when absent (the
  study's runs came first), the evaluation's default family, null encoding options and
  architecture where the file predates them."""
  data = dict(data)
  data.setdefault('evaluation', 'range')
  kind = kinds.get(data['evaluation'])
  if data.get('family') is None and kind is not None:
    data['family'] = kind.default_family
  elif 'family' in data and not isinstance(data['family'], str):
    raise SchemaError(f'{where}: family is {data["family"]!r}, expected a model family name')
  data.setdefault('encoding_options', None)
  data.setdefault('architecture', None)
  return data


def read(path: str | os.PathLike[str], kinds: Mapping[str, type]) -> Results:
  """The Results of the results.json at `path` (`Results.from_json`).

  Raises:
    SchemaError: unreadable JSON, or what `Results.from_json` raises, naming `path`.
  """
  try:
    with open(path) as f:
      data = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise SchemaError(f'{path}: cannot read JSON ({e})') from None
  return Results.from_json(data, kinds, str(path))


def best_score(members: Sequence[Member], best=max) -> float | None:
  """The best score among the members that have one (None when none has)."""
  scores = [m.score for m in members if m.score is not None]
  return best(scores) if scores else None
