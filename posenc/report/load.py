"""Loading results.json files (`posenc.results`) into each protocol section's view of its runs,
skipping malformed ones with a message, and grouping runs into columns and cells."""
from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import os
import pathlib
from typing import Any, Iterable, Mapping, NoReturn, Sequence

from posenc import encodings as encodings_lib
from posenc import evaluate
from posenc import results as results_lib
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


def section(evaluation: str) -> Any:
  """The report section module of the protocol named `evaluation` (`Protocol.report`)."""
  return importlib.import_module(evaluate.PROTOCOLS[evaluation].report)


def load_run(results_path: str | os.PathLike[str], *, metric: str = 'accuracy') -> Any:
  """Reads one results.json (`posenc.results`, any schema version) and returns its protocol
  section's view of it (`view`): a Run for a range run, a GridRun for a grid run, a HintRun
  or a PerplexityRun.

  A range run's members' scores and curves are those of `metric`: 'accuracy' reads `score`
  and `accuracy_by_length`, 'exact_match' reads `exact_match_score` and
  `exact_match_by_length`. The other protocols' views do not depend on `metric`.

  Example:
    >>> run = load_run('runs/rs_rr/results.json', metric='exact_match')  # doctest: +SKIP
    >>> run.task, run.encoding, run.family, len(run.members)
    ('reverse_string', 'randomized_relative', 'decoder', 30)
    >>> run.members[0].score  # Its exact_match_score.
    0.87
    >>> load_run('runs/addition__abacus__looped/results.json').architecture  # doctest: +SKIP
    'looped 8x2'

  Raises:
    MalformedRunError: unreadable JSON, an unknown schema version, a missing/mistyped field,
      or nothing the section can report, naming the file and field.
    ReportError: `metric` is not one of METRICS.
  """
  records.metric_fields(metric)  # An unknown metric is the caller's error, not the file's.
  path = pathlib.Path(results_path)
  record = results_lib.read(path, evaluate.kinds())
  return section(record.evaluation.evaluation).view(record, path, metric)


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
  run = load_run(results_path)
  if not isinstance(run, records.GridRun):
    raise records.MalformedRunError(f'{results_path}: not a grid run')
  return run


def run_extras(record: results_lib.Results) -> dict[str, Any]:
  """The fields every run view shares past its evaluation, as keyword arguments: the
  planned steps (the config's `train.steps`, else `train_steps`), parameters, versions and
  encoding options (from the config for files that predate their record)."""
  train = record.config.get('train') if record.config else None
  planned_steps = train.get('steps') if isinstance(train, dict) else None
  if not isinstance(planned_steps, int) or isinstance(planned_steps, bool):
    planned_steps = record.train_steps
  options = record.encoding_options
  if options is None:
    options = _options_from_config(record.encoding, record.config)
  return {'planned_steps': planned_steps, 'num_params': record.num_params,
          'versions': dict(record.versions), 'encoding_options': options}


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


def member_where(where: str, i: int, member: results_lib.Member) -> str:
  """How messages name member i of the file `where`."""
  data = '' if member.data_seed is None else f'data seed {member.data_seed}, '
  return f'{where}: members[{i}] (seed {member.seed}, {data}learning rate {member.learning_rate:g})'


@dataclasses.dataclass(frozen=True)
class LoadedRuns:
  """Every results.json under some paths, as each protocol's section views them
  (`views`: {protocol name: runs}, in the registry's order), and one message per file
  skipped as malformed."""
  views: Mapping[str, tuple[Any, ...]]
  problems: tuple[str, ...]
  # (path, posenc.results.Results) of every run in `views`, for the scorecard.
  records: tuple[tuple[pathlib.Path, Any], ...] = ()

  # The studies' names for their runs.
  runs = property(lambda self: self.views.get('range', ()))
  grid_runs = property(lambda self: self.views.get('grid', ()))
  lm_runs = property(lambda self: self.views.get('perplexity', ()))
  hint_runs = property(lambda self: self.views.get('lengths', ()))


def load_all_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
                  ) -> LoadedRuns:
  """Loads every run under `paths` (`load_run`), grouped by protocol; malformed ones are
  skipped and described.

  Example:
    >>> loaded = load_all_runs(['sweep', 'runs/arithmetic'])  # doctest: +SKIP
    >>> len(loaded.runs), len(loaded.grid_runs), loaded.problems
    (30, 6, ())

  Raises:
    ReportError: from `find_results`, or an unknown metric.
  """
  views: dict[str, list[Any]] = {name: [] for name in evaluate.PROTOCOLS}
  problems, loaded = [], []
  for results_path in find_results(paths):
    try:
      record = results_lib.read(results_path, evaluate.kinds())
      name = record.evaluation.evaluation
      views[name].append(section(name).view(record, results_path, metric))
    except records.MalformedRunError as e:
      problems.append(str(e))
    else:
      loaded.append((results_path, record))
  return LoadedRuns({name: tuple(v) for name, v in views.items() if v}, tuple(problems),
                    tuple(loaded))


def load_runs(paths: Sequence[str | os.PathLike[str]], *, metric: str = 'accuracy'
              ) -> tuple[list[records.Run], list[str]]:
  """Loads every range run under `paths` for `metric` (`load_run`); malformed ones are skipped
  and described. Runs of other protocols load without a problem but are not among the runs:
  `load_all_runs` returns them too.

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
        key = (member.seed, member.data_seed, member.learning_rate, member.diverged, member.score,
               repr(tuple(member.accuracy_by_length.items())))
        if key not in seen:
          seen.add(key)
          members.append(member)
    cells[task, label] = records.Cell(task, cell_runs[0].encoding, tuple(cell_runs), tuple(members),
                              label)
  return cells
