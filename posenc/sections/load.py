"""Finding results.json files, and labelling the runs they hold as a report's columns.

A run is where its results.json lies and its `posenc.results.Results` record (`RunFile`):
sections read the records as they are, a member's score and curve through the record's own
`score_of` and `curve`. Each kind's section groups its runs its own way (the range kind into
cells, `posenc.kinds.range.tables.collect_cells`; the grid kind into entries).

Example:
  >>> runs = [RunFile(p, kinds.read(p)) for p in find_results(['sweep'])]  # doctest: +SKIP
  >>> column_labels([r.record for r in runs])  # encodings, with options that differ  # doctest: +SKIP
  ['none', 'randomized_relative (relative_mode=reference)']
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
from typing import Any, Callable, Mapping, NamedTuple, NoReturn, Sequence

from posenc import results as results_lib
from posenc.storage import store
from posenc.sections import core


class RunFile(NamedTuple):
  """A run as a report reads it: its results.json's path and the record it holds."""

  path: pathlib.Path
  record: results_lib.Results


# ---------------------------------------------------------------------------------------------
# Finding.


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
    path = store.as_path(given)
    remote = store.is_url(given)
    try:
      is_file, is_dir = path.is_file(), path.is_dir()
    except OSError as e:  # Not a missing path (that is False): e.g. a parent without access.
      raise core.ReportError(f'cannot read {str(given)!r}: {e.strerror or e}') from None
    if is_file:
      candidates = [path]
    elif is_dir:
      candidates = []
      # os.walk skips what it cannot read unless told otherwise; a run directory left out
      # would read as "no results.json".
      walk = store.walk(str(path)) if remote else os.walk(path, onerror=_unreadable_directory)
      for root, dirs, files in walk:
        if core.RESULTS_FILE in files:
          candidates.append(store.as_path(root) / core.RESULTS_FILE)
          dirs.clear()
        dirs.sort()
    else:
      raise core.ReportError(f'no such file or directory: {str(given)!r}')
    if not candidates:
      raise core.ReportError(f'no {core.RESULTS_FILE} in {str(given)!r} or any directory below it')
    for candidate in sorted(candidates):
      key = str(candidate) if remote else candidate.resolve()
      if key not in seen:
        seen.add(key)
        found.append(candidate)
  return found


def _unreadable_directory(error: OSError) -> NoReturn:
  """os.walk's `onerror`: a directory it cannot list is an error of the report's input."""
  raise core.ReportError(
    f'cannot read directory {str(error.filename)!r}: {error.strerror or error}'
  )


# ---------------------------------------------------------------------------------------------
# What a run's record says, for its columns and notes.


def planned_steps(record: results_lib.Results) -> int:
  """The steps the run was configured for (its config's `train.steps`; else `train_steps`),
  so that a run that stopped early can be told from one planned short."""
  train = record.config.get('train') if record.config else None
  steps = train.get('steps') if isinstance(train, dict) else None
  if not isinstance(steps, int) or isinstance(steps, bool):
    return record.train_steps
  return steps


# What the study's encodings take, for results.json files that do not record
# `encoding_options`: everything written before that record, when the study's 13 were the
# only encodings. Each option in the registry's order, and its default, as the encodings
# registry resolves them (tests/test_report.py checks).
_OPTION_DEFAULTS = {
  'max_time': 10_000.0,
  'relative_mode': 'symmetric',
  'randomize_both_sides': False,
  'alibi_reference_form': False,
  'geometric_normalize': False,
}
_STUDY_OPTIONS: dict[str, tuple[str, ...]] = {
  'none': (),
  'sin_cos': ('max_time',),
  'relative': ('max_time',),
  'alibi': ('alibi_reference_form',),
  'rotary': ('max_time',),
  'learned': (),
  'randomized_sin_cos': ('max_time',),
  'randomized_relative': ('max_time', 'relative_mode', 'randomize_both_sides'),
  'randomized_alibi': ('randomize_both_sides', 'alibi_reference_form'),
  'randomized_rotary': ('max_time',),
  'randomized_learned': (),
  'geometric': ('geometric_normalize',),
  'geometric_directional': ('geometric_normalize',),
}


def encoding_options(record: results_lib.Results) -> Mapping[str, Any] | None:
  """The options the run's encoding took: as recorded, or for a file that predates the
  record, from its config (`options_from_config`); None when neither tells.

  Example: a randomized_relative run whose config gave {'relative_mode': 'reference'}
  -> {'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}.
  """
  if record.encoding_options is not None:
    return record.encoding_options
  return options_from_config(record.encoding, record.config)


def options_from_config(encoding: str, config: Any) -> dict[str, Any] | None:
  """The options a study encoding takes, from a results.json's config, each the config's
  value or its default; None for another encoding or a config without options."""
  given = config.get('encoding_options') if isinstance(config, dict) else None
  if not isinstance(given, dict) or encoding not in _STUDY_OPTIONS:
    return None
  return {key: given.get(key, _OPTION_DEFAULTS[key]) for key in _STUDY_OPTIONS[encoding]}


def member_where(where: str, i: int, member: results_lib.Member) -> str:
  """How messages name member i of the file `where`."""
  data = '' if member.data_seed is None else f'data seed {member.data_seed}, '
  return f'{where}: members[{i}] (seed {member.seed}, {data}learning rate {member.learning_rate:g})'


def json_text(value: Any) -> str:
  """A value as compact, canonical JSON text: equal values give equal text."""
  return json.dumps(value, sort_keys=True)


def option_text(value: Any) -> str:
  """An option's value in a column label: strings bare, anything else as JSON (false, 1e-05)."""
  return value if isinstance(value, str) else json_text(value)


# ---------------------------------------------------------------------------------------------
# Columns and cells.


def column_labels(
  runs: Sequence[tuple[Any, results_lib.Results]],
  options: Callable[[results_lib.Results], Mapping[str, Any] | None] = (encoding_options),
) -> list[str]:
  """Each run's column label: its encoding, plus its model family and the options that set it
  apart if need be.

  `runs` are (path, record) pairs (`RunFile`s); `options` reads a record's encoding options
  (by default `encoding_options`: for files that predate the record, from their config). An
  encoding whose runs all share one set of options is labelled by its name. One with several
  sets gets a column per set, labelled by the encoding and the options whose values differ
  among the sets (an option a set lacks shows as '?'); runs that do not record their options
  are 'options not recorded', unless the encoding's recorded sets are all empty (there is
  nothing to tell them apart by). When `runs` hold more than one model family, every label
  names its run's family first, so that no column mixes families, or hides its own.

  Example:
    >>> [(r.family, r.encoding_options) for _, r in runs]  # doctest: +SKIP
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
  records = [record for _, record in runs]
  given = [options(record) for record in records]
  keys = [(record.family, None if o is None else json_text(o)) for record, o in zip(records, given)]
  # Family-wide rather than per encoding: in a report of both families, a column of an encoding
  # that only one family ran must still say which.
  name_family = len({record.family for record in records}) > 1
  # encoding -> {(family, options as text (None: not recorded)): options}, in order of
  # appearance.
  variants: dict[str, dict[tuple[str, str | None], Mapping[str, Any]]] = collections.defaultdict(
    dict
  )
  for record, key, o in zip(records, keys, given):
    variants[record.encoding][key] = o or {}
  labels = {}
  for encoding, sets in variants.items():
    names = list(dict.fromkeys(name for options in sets.values() for name in options))
    differing = [
      name
      for name in names
      if len({json_text(options[name]) if name in options else None for options in sets.values()})
      > 1
    ]
    for (family, options_key), options in sets.items():
      parts = [family] if name_family else []
      if differing and options_key is None:
        parts.append('options not recorded')
      elif differing:
        parts += [
          f'{name}={option_text(options[name]) if name in options else "?"}' for name in differing
        ]
      labels[encoding, family, options_key] = (
        f'{encoding} ({", ".join(parts)})' if parts else encoding
      )
  return [labels[(record.encoding, *key)] for record, key in zip(records, keys)]
