"""Frozen evaluation sets: the exact examples a run is evaluated on, written to files and
read back instead of sampling (`eval.from_files`).

`launch.export_eval_set` writes, for a config, one `.npz` per evaluated cell (a length, a
grid cell, a distribution and length, a window length; the protocol's `examples`) and
`manifest.json`: the task and its options, the protocol, the config fields that decide the
examples (`Protocol.example_fields`) with their values, and per file its name, cell and
sha256. Every array is the protocol's own draw (the same keys, the same padding), so
evaluating from the files gives the results of sampling in the process, and another
framework can score the same examples (each array's leading axes are sub-batch and
example; `length` holds the real lengths).

Reading checks the manifest's layout (an object with `fields` and a list of `cells`, each
naming its own file and its sha256), the manifest against the config (one line naming the
first field that differs), every file against its checksum, and every file's arrays
against those the protocol draws for its cell (`Protocol.example_specs`: names, shapes and
dtypes), so a file replaced or edited under an updated checksum is one line naming it too.

Example:
  >>> write('sets/parity', config, 'range', protocol.examples(config, task, key),
  ...       protocol.example_fields)                     # doctest: +SKIP
  >>> load(config_with_from_files, 'length_41')['inputs'].shape   # doctest: +SKIP
  (8, 64, 48)
"""

from __future__ import annotations

import hashlib
import io as io_buffer
import json
import os
import re
import zipfile
from typing import Any, Iterable, Mapping

import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc.storage import io

SCHEMA_VERSION = 1
MANIFEST = 'manifest.json'

# What a protocol's `example_specs` gives per cell: {array name: (shape, dtype name)}.
Spec = Mapping[str, tuple[tuple[int, ...], str]]


def _value(config: ml_collections.ConfigDict, key: str) -> Any:
  node: Any = config
  for part in key.split('.'):
    node = node[part]
  return json.loads(json.dumps(node.to_dict() if hasattr(node, 'to_dict') else node, default=list))


def manifest_fields(config: ml_collections.ConfigDict, fields: Iterable[str]) -> dict[str, Any]:
  """What decides the examples: the task, its options, and `fields` with their values."""
  return {
    'task': config.task,
    'task_options': _value(config, 'task_options'),
    **{key: _value(config, key) for key in fields},
  }


def write(
  out: str,
  config: ml_collections.ConfigDict,
  protocol: str,
  cells: Iterable[tuple[str, Mapping[str, np.ndarray]]],
  fields: Iterable[str],
) -> dict[str, Any]:
  """Writes every cell's arrays as `out/<cell>.npz` and the manifest (last, so a set
  without one is incomplete); returns the manifest."""
  io.makedirs(out)
  entries = []
  for name, arrays in cells:
    buffer = io_buffer.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    data = buffer.getvalue()
    file = f'{name}.npz'
    io.write_bytes_atomic(os.path.join(out, file), data)
    first = next(iter(arrays.values()))
    entries.append(
      {
        'cell': name,
        'file': file,
        'sha256': hashlib.sha256(data).hexdigest(),
        'arrays': {k: list(np.shape(v)) for k, v in arrays.items()},
        'leading_shape': list(np.shape(first))[:2],
      }
    )
  manifest = {
    'schema_version': SCHEMA_VERSION,
    'protocol': protocol,
    'fields': manifest_fields(config, fields),
    'cells': entries,
  }
  io.write_json_atomic(os.path.join(out, MANIFEST), manifest)
  return manifest


def read_manifest(
  config: ml_collections.ConfigDict, protocol: str, fields: Iterable[str]
) -> dict[str, Any]:
  """The manifest of `eval.from_files`, checked against `config`.

  Raises:
    ConfigError: no manifest, another schema version or protocol, or a field whose value
      differs from the config's (named, with both values).
  """
  directory = config.eval.from_files
  path = os.path.join(directory, MANIFEST)
  try:
    manifest = io.read_json(path)
  except (OSError, ValueError) as e:
    raise config_lib.ConfigError(
      f'eval.from_files={directory!r} holds no readable {MANIFEST} '
      f'({getattr(e, "strerror", None) or e}); write one with launch.export_eval_set'
    ) from None
  _check_layout(manifest, path)
  if manifest.get('protocol') != protocol:
    raise config_lib.ConfigError(
      f'{path} holds {manifest.get("protocol")!r} examples; task '
      f'{config.task!r} is evaluated by the {protocol!r} protocol'
    )
  wanted = manifest_fields(config, fields)
  for key, value in wanted.items():
    have = manifest['fields'].get(key, '(absent)')
    if have != value:
      raise config_lib.ConfigError(
        f'{path}: {key} is {json.dumps(have)} there but {json.dumps(value)} in the config; '
        'export the set for this config'
      )
  return manifest


def _check_layout(manifest: Any, path: str) -> None:
  """Raises ConfigError (one line naming `path` and what is wrong) unless `manifest` is
  laid out as `write` writes it: an object with schema_version, protocol, `fields` (an
  object) and `cells` (a list of objects, each with a cell name, the file `<cell>.npz` and a
  sha256 of 64 hex digits; no cell twice).

  Example: a manifest `[]`, or a cell whose file is another cell's, is refused.
  """

  def bad(what: str) -> config_lib.ConfigError:
    return config_lib.ConfigError(f'{path}: {what}; export the set again (launch.export_eval_set)')

  if not isinstance(manifest, dict):
    raise bad(f'holds {json.dumps(manifest)[:40]}, not a JSON object')
  if manifest.get('schema_version') != SCHEMA_VERSION:
    raise bad(f'schema_version {manifest.get("schema_version")!r} is not {SCHEMA_VERSION}')
  for key, kind in (('fields', dict), ('cells', list)):
    if not isinstance(manifest.get(key), kind):
      raise bad(
        f'{key} is {json.dumps(manifest.get(key))[:40]}, not a JSON '
        f'{"object" if kind is dict else "list"}'
      )
  seen = set()
  for i, entry in enumerate(manifest['cells']):
    if not isinstance(entry, dict) or not re.fullmatch(r'\w[\w.+-]*', str(entry.get('cell'))):
      raise bad(f'cells[{i}] is not an object with a cell name (letters, digits, _ . + -)')
    name = entry['cell']
    if entry.get('file') != f'{name}.npz':
      raise bad(f'cell {name} names the file {entry.get("file")!r}, not its own {name}.npz')
    if not re.fullmatch('[0-9a-f]{64}', str(entry.get('sha256'))):
      raise bad(f'cell {name} has no sha256 (64 hex digits)')
    if name in seen:
      raise bad(f'cell {name} is listed twice')
    seen.add(name)


def _check_arrays(path: str, name: str, data: bytes, expected: Spec | None) -> None:
  """Raises ConfigError unless `data` is an .npz archive of the arrays `expected` names
  (with their shapes and dtypes; None: any arrays)."""
  try:
    with np.load(io_buffer.BytesIO(data)) as archive:
      have = {k: (tuple(archive[k].shape), str(archive[k].dtype)) for k in archive.files}
  except (OSError, ValueError, EOFError, zipfile.BadZipFile):
    raise config_lib.ConfigError(
      f'{path} is not an .npz archive of arrays; export the set again'
    ) from None
  if expected is None:
    return
  if sorted(have) != sorted(expected):
    raise config_lib.ConfigError(
      f'{path} holds the arrays {", ".join(sorted(have))}, not those '
      f'of cell {name} ({", ".join(sorted(expected))}); export the '
      'set again'
    )
  for key, (shape, dtype) in sorted(expected.items()):
    if have[key] != (tuple(shape), dtype):
      raise config_lib.ConfigError(
        f'{path}: array {key} is {have[key][1]} {list(have[key][0])}, not the {dtype} '
        f'{list(shape)} of cell {name}; export the set again'
      )


def check(
  config: ml_collections.ConfigDict,
  protocol: str,
  fields: Iterable[str],
  names: Iterable[str],
  specs: Mapping[str, Spec] | None = None,
) -> None:
  """The manifest matches the config, holds every cell of `names`, every file its checksum
  and (with `specs`, {cell: its arrays' names, shapes and dtypes}) the cell's arrays
  (`read_manifest`, `load`).

  Raises:
    ConfigError: as `read_manifest`, a missing cell, a changed file, or a file whose arrays
      are not those of its cell.
  """
  manifest = read_manifest(config, protocol, fields)
  directory = config.eval.from_files
  cells = {c['cell']: c for c in manifest['cells']}
  for name in names:
    if name not in cells:
      raise config_lib.ConfigError(
        f'eval.from_files={directory!r} has no examples for {name}; export the set for this config'
      )
    data = _read(directory, cells[name])
    _check_arrays(
      os.path.join(directory, cells[name]['file']),
      name,
      data,
      None if specs is None else specs[name],
    )


def _read(directory: str, entry: Mapping[str, Any]) -> bytes:
  path = os.path.join(directory, entry['file'])
  try:
    data = io.read_bytes(path)
  except OSError as e:
    raise config_lib.ConfigError(f'cannot read {path}: {e.strerror or e}') from None
  digest = hashlib.sha256(data).hexdigest()
  if digest != entry['sha256']:
    raise config_lib.ConfigError(
      f'{path} has changed: sha256 {digest[:12]}... is not the '
      f"manifest's {entry['sha256'][:12]}..."
    )
  return data


def load(directory: str, name: str) -> dict[str, np.ndarray]:
  """The arrays of cell `name` of the frozen set in `directory` (`eval.from_files`; its
  checksum checked)."""
  manifest = io.read_json(os.path.join(directory, MANIFEST))
  entry = next((c for c in manifest['cells'] if c['cell'] == name), None)
  if entry is None:
    raise config_lib.ConfigError(f'eval.from_files={directory!r} has no examples for {name}')
  with np.load(io_buffer.BytesIO(_read(directory, entry))) as data:
    return {k: data[k] for k in data.files}
