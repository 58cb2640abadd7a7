"""Loading results.json files into records (`records`), skipping malformed ones with a
message, and grouping runs into columns and cells."""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import pathlib
import re
from typing import Any, Iterable, Mapping, NoReturn, Sequence


from posenc import encodings as encodings_lib
from posenc.report import lengths as lengths_section
from posenc.report import records


# ---------------------------------------------------------------------------------------------
# Loading.


def find_results(paths: Sequence[str | os.PathLike[str]]) -> list[pathlib.Path]:
  """The results.json files under `paths`, each path a run directory, a tree of them or a file.

  A directory that holds results.json is a run directory and is not searched further (its
  checkpoints hold no runs). Files reached twice count once. Order: sorted per given path.

  Example:
    >>> find_results(['sweep'])  # doctest: +SKIP
    [PosixPath('sweep/cells/reverse_string__none/results.json'), ...]

  Raises:
    ReportError: a path does not exist, cannot be read, or holds no results.json anywhere.
  """
  found, seen = [], set()
  for given in paths:
    path = pathlib.Path(given)
    try:
      is_file, is_dir = path.is_file(), path.is_dir()
    except OSError as e:  # Not a missing path (that is False): e.g. a parent without access.
      raise records.ReportError(f'cannot read {str(given)!r}: {e.strerror or e}') from None
    if is_file:
      candidates = [path]
    elif is_dir:
      candidates = []
      # os.walk skips what it cannot read unless told otherwise; a run directory left out
      # would read as "no results.json".
      for root, dirs, files in os.walk(path, onerror=_unreadable_directory):
        if records.RESULTS_FILE in files:
          candidates.append(pathlib.Path(root) / records.RESULTS_FILE)
          dirs.clear()
        dirs.sort()
    else:
      raise records.ReportError(f'no such file or directory: {str(given)!r}')
    if not candidates:
      raise records.ReportError(
          f'no {records.RESULTS_FILE} in {str(given)!r} or any directory below it')
    for candidate in sorted(candidates):
      key = candidate.resolve()
      if key not in seen:
        seen.add(key)
        found.append(candidate)
  return found


def _unreadable_directory(error: OSError) -> NoReturn:
  """os.walk's `onerror`: a directory it cannot list is an error of the report's input."""
  raise records.ReportError(
      f'cannot read directory {str(error.filename)!r}: {error.strerror or error}')


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
  if key not in data:
    raise records.MalformedRunError(f'{where}: missing {key!r}')
  value = data[key]
  # bool is an int subclass; a count or a length that is True/False is a schema error.
  if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
    raise records.MalformedRunError(f'{where}: {key!r} is {value!r}, expected {_kind_name(kind)}')
  return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
  return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
  return ' or '.join(k.__name__ for k in _kinds(kind))


def _parse_member(data: Any, where: str, metric: str) -> records.Member:
  """One member, its score and curve those of `metric` (see METRICS)."""
  _, score_key, curve_key = records.metric_fields(metric)
  if not isinstance(data, dict):
    raise records.MalformedRunError(f'{where}: expected an object, got {data!r}')
  seed = _require(data, 'seed', int, where)
  learning_rate = float(_require(data, 'learning_rate', (int, float), where))
  where = f'{where} (seed {seed}, learning rate {learning_rate:g})'
  diverged = _require(data, 'diverged', bool, where)
  if metric != 'accuracy' and score_key not in data:
    # The engine writes the exact-match fields for every member, diverged or not; without
    # them the file predates that metric. (A diverged member's accuracy score may be absent.)
    raise records.MalformedRunError(f'{where}: missing {score_key!r}')
  score = data.get(score_key)
  if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
    raise records.MalformedRunError(f'{where}: {score_key} is {score!r}, expected a number or null')
  if diverged:
    score = None  # Whatever a diverged member scored does not count.
  elif score is None or not math.isfinite(score):
    raise records.MalformedRunError(f'{where}: not diverged but its {score_key} is {score}')
  raw = _require(data, curve_key, dict, where)
  try:
    accuracy = {int(k): float(v) for k, v in raw.items()}
  except (TypeError, ValueError) as e:
    raise records.MalformedRunError(f'{where}: bad {curve_key} entry ({e})') from None
  return records.Member(seed, learning_rate, diverged, None if score is None else float(score),
                dict(sorted(accuracy.items())))


def load_run(results_path: str | os.PathLike[str], *, metric: str = 'accuracy'
             ) -> records.Run | records.GridRun:
  """Reads and checks one results.json (the engine's schema, docs/design.md).

  A range run (`evaluation` 'range', or no `evaluation`: older files) gives a Run whose
  members' scores and curves are those of `metric`: 'accuracy' reads `score` and
  `accuracy_by_length`, 'exact_match' reads `exact_match_score` and `exact_match_by_length`. A
  grid run (`evaluation` 'grid', the arithmetic study) gives a GridRun (`load_grid_run`), whose
  exact-match regions and cells do not depend on `metric`.

  Example:
    >>> run = load_run('runs/rs_rr/results.json', metric='exact_match')  # doctest: +SKIP
    >>> run.task, run.encoding, run.family, len(run.members)
    ('reverse_string', 'randomized_relative', 'decoder', 30)
    >>> run.members[0].score  # Its exact_match_score.
    0.87
    >>> load_run('runs/addition__abacus__looped/results.json').architecture  # doctest: +SKIP
    'looped 8x2'

  Raises:
    MalformedRunError: unreadable JSON or a missing/mistyped field, naming the file and field.
    ReportError: `metric` is not one of METRICS.
  """
  records.metric_fields(metric)  # An unknown metric is the caller's error, not the file's.
  path = pathlib.Path(results_path)
  data = _read_results(path)
  # Each protocol's results are read by its parser; files without the field are range runs.
  parsers = {'range': lambda: _parse_range_run(data, path, metric),
             'grid': lambda: _parse_grid_run(data, path),
             'perplexity': lambda: _parse_perplexity_run(data, path),
             'lengths': lambda: _parse_lengths_run(data, path)}
  evaluation = data.get('evaluation') or 'range'
  if evaluation not in parsers:
    names = [repr(name) for name in parsers]
    raise records.MalformedRunError(f'{path}: evaluation is {evaluation!r}, expected '
                                    f'{", ".join(names[:-1])} or {names[-1]}')
  return parsers[evaluation]()


def _parse_lengths_run(data: Mapping[str, Any], path: pathlib.Path) -> Any:
  try:
    return lengths_section.parse_run(data, str(path))
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise records.MalformedRunError(
        f'{path}: not a task-hinting run ({type(e).__name__}: {e})') from None


def load_grid_run(results_path: str | os.PathLike[str]) -> records.GridRun:
  """Reads and checks one grid run's results.json (`evaluation` 'grid').

  Example:
    >>> run = load_grid_run('runs/addition__abacus__looped/results.json')  # doctest: +SKIP
    >>> run.architecture, run.train_length, run.grid_max, run.members[0].regions['ood']
    ('looped 8x2', 20, 100, 0.929)

  Raises:
    MalformedRunError: unreadable JSON, not a grid run, or a missing/mistyped field, naming the
      file and field.
  """
  path = pathlib.Path(results_path)
  data = _read_results(path)
  if data.get('evaluation') != 'grid':
    raise records.MalformedRunError(
        f"{path}: evaluation is {data.get('evaluation')!r}, expected 'grid'")
  return _parse_grid_run(data, path)


def _read_results(path: pathlib.Path) -> dict[str, Any]:
  """A results.json's top-level object."""
  try:
    data = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise records.MalformedRunError(f'{path}: cannot read JSON ({e})') from None
  if not isinstance(data, dict):
    raise records.MalformedRunError(f'{path}: expected a JSON object')
  return data


def _parse_header(data: Mapping[str, Any], where: str, default_family: str
                  ) -> tuple[str, str, str]:
  """(task, encoding, family) of a results.json; `default_family` when it records none."""
  task = _require(data, 'task', str, where)
  encoding = _require(data, 'encoding', str, where)
  if not task or not encoding:
    raise records.MalformedRunError(f'{where}: empty task or encoding name')
  family = data.get('family')
  if family is None:
    family = default_family
  elif not isinstance(family, str) or not family:
    raise records.MalformedRunError(f'{where}: family is {family!r}, expected a model family name')
  return task, encoding, family


def _parse_extras(data: Mapping[str, Any], where: str, encoding: str, train_steps: int
                  ) -> dict[str, Any]:
  """The fields both kinds of run share past their evaluation, as keyword arguments."""
  config = data.get('config')
  train = config.get('train') if isinstance(config, dict) else None
  planned_steps = train.get('steps') if isinstance(train, dict) else None
  if not isinstance(planned_steps, int) or isinstance(planned_steps, bool):
    planned_steps = train_steps
  num_params = data.get('num_params')
  versions = data.get('versions')
  options = data.get('encoding_options')
  if options is not None and not isinstance(options, dict):
    raise records.MalformedRunError(f'{where}: encoding_options is {options!r}, expected an object')
  if options is None:
    options = _options_from_config(encoding, config)
  return {'planned_steps': planned_steps,
          'num_params': num_params if isinstance(num_params, int) else None,
          'versions': versions if isinstance(versions, dict) else {},
          'encoding_options': options}


def _parse_range_run(data: Mapping[str, Any], path: pathlib.Path, metric: str) -> records.Run:
  where = str(path)
  # Written before the engine had other model families: an encoder.
  task, encoding, family = _parse_header(data, where, 'encoder')
  train_steps = _require(data, 'train_steps', int, where)
  train_length = _require(data, 'train_length', int, where)
  eval_lengths = _require(data, 'eval_lengths', list, where)
  if not all(isinstance(n, int) and not isinstance(n, bool) for n in eval_lengths):
    raise records.MalformedRunError(f'{where}: eval_lengths must be a list of integers')
  if not any(n > train_length for n in eval_lengths):
    # The engine's score is then null for every member: there is nothing to report.
    raise records.MalformedRunError(f'{where}: no evaluated length above the training length '
                            f'N = {train_length}, so no score')
  raw_members = _require(data, 'members', list, where)
  if not raw_members:
    raise records.MalformedRunError(f'{where}: members is empty')
  members = tuple(_parse_member(m, f'{where}: members[{i}]', metric)
                  for i, m in enumerate(raw_members))
  return records.Run(
      path=path.parent, task=task, encoding=encoding, train_steps=train_steps,
      train_length=train_length, eval_lengths=tuple(sorted(set(eval_lengths))),
      members=members, family=family, **_parse_extras(data, where, encoding, train_steps))


def _parse_grid_run(data: Mapping[str, Any], path: pathlib.Path) -> records.GridRun:
  where = str(path)
  # Only decoders generate answers, so a grid run without a family is a decoder's.
  task, encoding, family = _parse_header(data, where, 'decoder')
  architecture = _require(data, 'architecture', str, where)
  if not architecture:
    raise records.MalformedRunError(f'{where}: empty architecture name')
  train_steps = _require(data, 'train_steps', int, where)
  train_length = _require(data, 'train_length', int, where)
  axes = _require(data, 'axes', list, where)
  if len(axes) != 2 or not all(isinstance(a, str) and a for a in axes):
    raise records.MalformedRunError(f'{where}: axes is {axes!r}, expected two axis names')
  grid = _require(data, 'grid', dict, where)
  grid_where = f'{where}: grid'
  grid_max = _require(grid, 'max', int, grid_where)
  stride = _require(grid, 'stride', int, grid_where)
  beyond = _require(grid, 'beyond', list, grid_where)
  if not all(isinstance(x, int) and not isinstance(x, bool) for x in beyond):
    raise records.MalformedRunError(f'{grid_where}: beyond must be a list of integers')
  samples = _require(grid, 'samples_per_cell', int, grid_where)
  raw_members = _require(data, 'members', list, where)
  if not raw_members:
    raise records.MalformedRunError(f'{where}: members is empty')
  members = tuple(_parse_grid_member(m, f'{where}: members[{i}]')
                  for i, m in enumerate(raw_members))
  return records.GridRun(
      path=path.parent, task=task, encoding=encoding, architecture=architecture,
      train_steps=train_steps, train_length=train_length, axes=(axes[0], axes[1]),
      grid_max=grid_max, grid_stride=stride, beyond=tuple(sorted(set(beyond))),
      samples_per_cell=samples, members=members, family=family,
      **_parse_extras(data, where, encoding, train_steps))


def _parse_grid_member(data: Any, where: str) -> records.GridMember:
  if not isinstance(data, dict):
    raise records.MalformedRunError(f'{where}: expected an object, got {data!r}')
  seed = _require(data, 'seed', int, where)
  learning_rate = float(_require(data, 'learning_rate', (int, float), where))
  where = f'{where} (seed {seed}, learning rate {learning_rate:g})'
  diverged = _require(data, 'diverged', bool, where)
  raw_regions = _require(data, 'regions', dict, where)
  regions = {}
  for name in records.GRID_REGIONS:
    if name not in raw_regions:
      raise records.MalformedRunError(f'{where}: regions has no {name!r}')
    value = raw_regions[name]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
      raise records.MalformedRunError(
          f'{where}: regions.{name} is {value!r}, expected a number or null')
    if value is not None and not diverged and not math.isfinite(value):
      raise records.MalformedRunError(f'{where}: not diverged but its regions.{name} is {value}')
    # Whatever a diverged member scored does not count.
    regions[name] = None if diverged or value is None else float(value)
  raw_cells = _require(data, 'exact_match_by_cell', dict, where)
  cells = {}
  for key, value in raw_cells.items():
    match = re.fullmatch(r'\s*(\d+)\s*,\s*(\d+)\s*', key)
    if not match:
      raise records.MalformedRunError(f"{where}: exact_match_by_cell key {key!r} is not 'a,b'")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
      raise records.MalformedRunError(
          f'{where}: exact_match_by_cell[{key!r}] is {value!r}, expected a '
                              'number or null')
    cells[int(match[1]), int(match[2])] = math.nan if value is None else float(value)
  return records.GridMember(seed, learning_rate, diverged, regions, dict(sorted(cells.items())))


def _options_from_config(encoding: str, config: Any) -> dict[str, Any] | None:
  """The options `encoding` takes, from a results.json's config: for files written before
  results recorded `encoding_options`. None when the config does not tell."""
  given = config.get('encoding_options') if isinstance(config, dict) else None
  if not isinstance(given, dict):
    return None
  try:
    attention, embedding = encodings_lib.resolve_options(encoding, given)
  except ValueError:
    return None
  return {**attention, **embedding}


def _parse_perplexity_run(data: Mapping[str, Any], path: pathlib.Path) -> records.PerplexityRun:
  where = str(path)
  try:
    lengths = tuple(int(l) for l in data['eval_lengths'])
    members = []
    for m in data['members']:
      if m.get('diverged'):
        members.append(None)
        continue
      members.append({mode: {int(l): float(v) for l, v in by.items()}
                      for mode, by in m['perplexity_by_length'].items()})
    return records.PerplexityRun(str(data['task']), str(data['encoding']),
                                 int(data['train_length']), lengths, tuple(members), where,
                                 str(data.get('family', 'decoder')))
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise records.MalformedRunError(
        f'{where}: not a perplexity run ({type(e).__name__}: {e})') from None


@dataclasses.dataclass(frozen=True)
class LoadedRuns:
  """Every results.json under some paths: range runs, grid runs, language-model runs, and
  one message per file skipped as malformed."""
  runs: tuple[records.Run, ...]
  grid_runs: tuple[records.GridRun, ...]
  problems: tuple[str, ...]
  lm_runs: tuple[records.PerplexityRun, ...] = ()
  hint_runs: tuple[lengths_section.HintRun, ...] = ()


def load_all_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
                  ) -> LoadedRuns:
  """Loads every run under `paths` (`load_run`), range and grid runs apart; malformed ones are
  skipped and described.

  Example:
    >>> loaded = load_all_runs(['sweep', 'runs/arithmetic'])  # doctest: +SKIP
    >>> len(loaded.runs), len(loaded.grid_runs), loaded.problems
    (30, 6, ())

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  runs, grid_runs, lm_runs, hint_runs, problems = [], [], [], [], []
  for results_path in find_results(paths):
    try:
      run = load_run(results_path, metric=metric)
    except records.MalformedRunError as e:
      problems.append(str(e))
    else:
      if isinstance(run, records.PerplexityRun):
        lm_runs.append(run)
      elif isinstance(run, lengths_section.HintRun):
        hint_runs.append(run)
      else:
        (grid_runs if isinstance(run, records.GridRun) else runs).append(run)
  return LoadedRuns(tuple(runs), tuple(grid_runs), tuple(problems), tuple(lm_runs),
                    tuple(hint_runs))


def load_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
              ) -> tuple[list[records.Run], list[str]]:
  """Loads every range run under `paths` for `metric` (`load_run`); malformed ones are skipped
  and described. Grid runs load without a problem but are not among the runs: `load_all_runs`
  returns them too.

  Example:
    >>> runs, problems = load_runs(['sweep', 'extra_run'])  # doctest: +SKIP
    >>> problems
    ['sweep/cells/x__y/results.json: missing \\'members\\'']

  Returns:
    (runs, problems): the range runs that loaded and one message per skipped results.json.

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  loaded = load_all_runs(paths, metric=metric)
  return list(loaded.runs), list(loaded.problems)


def json_text(value: Any) -> str:
  """A value as compact, canonical JSON text: equal values give equal text."""
  return json.dumps(value, sort_keys=True)


def option_text(value: Any) -> str:
  """An option's value in a column label: strings bare, anything else as JSON (false, 1e-05)."""
  return value if isinstance(value, str) else json_text(value)


def column_labels(runs: Sequence[records.Run | records.GridRun]) -> list[str]:
  """Each run's column label: its encoding, plus its model family and the options that set it
  apart if need be.

  An encoding whose runs all share one set of `encoding_options` is labelled by its name. One
  with several sets gets a column per set, labelled by the encoding and the options whose
  values differ among the sets (an option a set lacks shows as '?'); runs that do not record
  their options are 'options not recorded', unless the encoding's recorded sets are all empty
  (there is nothing to tell them apart by). When `runs` hold more than one model family, every
  label names its run's family first, so that no column mixes families, or hides its own.

  Example:
    >>> [(run.family, run.encoding_options) for run in runs]  # doctest: +SKIP
    [('encoder', {'max_time': 10000.0, 'relative_mode': 'reference'}),
     ('encoder', {'max_time': 10000.0, 'relative_mode': 'symmetric'}), ('encoder', {})]
    >>> column_labels(runs)  # doctest: +SKIP
    ['randomized_relative (relative_mode=reference)',
     'randomized_relative (relative_mode=symmetric)', 'none']
    >>> column_labels(runs + [decoder_run_of_none])  # doctest: +SKIP
    ['randomized_relative (encoder, relative_mode=reference)',
     'randomized_relative (encoder, relative_mode=symmetric)', 'none (encoder)',
     'none (decoder)']
  """
  def key(run: records.Run | records.GridRun) -> tuple[str, str | None]:
    options = run.encoding_options
    return run.family, None if options is None else json_text(options)

  # Family-wide rather than per encoding: in a report of both families, a column of an encoding
  # that only one family ran must still say which.
  name_family = len({run.family for run in runs}) > 1
  # encoding -> {(family, options as text (None: not recorded)): options}, in order of
  # appearance.
  variants: dict[str, dict[tuple[str, str | None], Mapping[str, Any]]] = (
      collections.defaultdict(dict))
  for run in runs:
    variants[run.encoding][key(run)] = run.encoding_options or {}
  labels = {}
  for encoding, sets in variants.items():
    names = list(dict.fromkeys(name for options in sets.values() for name in options))
    differing = [name for name in names if len({
        json_text(options[name]) if name in options else None for options in sets.values()}) > 1]
    for (family, options_key), options in sets.items():
      parts = [family] if name_family else []
      if differing and options_key is None:
        parts.append('options not recorded')
      elif differing:
        parts += [f'{name}={option_text(options[name]) if name in options else "?"}'
                  for name in differing]
      labels[encoding, family, options_key] = (
          f'{encoding} ({", ".join(parts)})' if parts else encoding)
  return [labels[(run.encoding, *key(run))] for run in runs]


def collect_cells(runs: Iterable[records.Run]) -> dict[tuple[str, str], records.Cell]:
  """Groups runs by (task, column label), merging the members of runs of the same cell.

  The label is the encoding unless its runs differ in their options or the runs hold several
  model families (`column_labels`). Identical members (a copy of the same training in two runs)
  count once; see the module docstring.

  Example:
    >>> cells = collect_cells(runs)  # doctest: +SKIP
    >>> cells['reverse_string', 'relative'].members  # 30 members
  """
  runs = list(runs)
  grouped: dict[tuple[str, str], list[records.Run]] = collections.defaultdict(list)
  for run, label in zip(runs, column_labels(runs)):
    grouped[run.task, label].append(run)
  cells = {}
  for (task, label), cell_runs in grouped.items():
    members, seen = [], set()
    for run in cell_runs:
      for member in run.members:
        # repr, so that the NaN accuracies of a diverged member compare equal to their copy.
        key = (member.seed, member.learning_rate, member.diverged, member.score,
               repr(tuple(member.accuracy_by_length.items())))
        if key not in seen:
          seen.add(key)
          members.append(member)
    cells[task, label] = records.Cell(task, cell_runs[0].encoding, tuple(cell_runs), tuple(members),
                              label)
  return cells
