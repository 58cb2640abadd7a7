"""A versioned benchmark of positional encodings: fixed suites, frozen evaluation sets,
stored baselines, and the card that ranks a candidate against them.

A `Suite` is a fixed list of cells, one per task: the model family, the budget, the lengths
and the members (seeds x data orders) of `config(task, encoding)`; its directory ships
with posenc (`experiments/benchmarks/<suite>/`) and holds::

  checksums.json        the sha256 of every frozen evaluation file, per task
  baselines/<enc>.json  a stored baseline: the results.json of each task's run of a
                        built-in encoding, with the command, versions and machine that made it
  baselines.md          their table

A candidate's run (`launch.benchmark`) evaluates every task on the suite's frozen sets,
regenerated deterministically and verified against `checksums.json`, and keeps an entry
(`make_entry`); its card (`posenc.benchmark.card`) ranks it against the stored baselines, with a JSON
that names the suite and its version, posenc's version, the package versions and the
machine. A suite that a newer version supersedes says so (`Suite.superseded_by`), and so
does every card and baselines.md of it.

Example:
  >>> from experiments import benchmarks
  >>> suite = benchmarks.get('tiny')
  >>> baselines = read_baselines(suite)                     # {encoding: stored entry}
  >>> sorted(baselines), baselines['rotary']['suite']
  (['none', 'rotary'], {'name': 'tiny', 'version': 1})
  >>> entry = make_entry(suite, 'mine', results, command, seconds)   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
from typing import Any, Callable, Mapping, Sequence

import ml_collections

from posenc import config as config_lib
from posenc.storage import io
from posenc import setup
from posenc.storage import store
from posenc.training import frozen

SCHEMA_VERSION = 1
CHECKSUMS = 'checksums.json'
BASELINES = 'baselines'
CARD_JSON, CARD_MD, CARD_PNG = 'card.json', 'card.md', 'card.png'
# Config fields that name where this machine keeps things, not what is run.
LOCAL_FIELDS = ('eval.from_files', 'compilation_cache', 'tensorboard')


class BenchmarkError(ValueError):
  """A bad suite, a tampered or foreign file, a baseline of another suite version (one line)."""


@dataclasses.dataclass(frozen=True)
class Suite:
  """One version of a benchmark.

  Attributes:
    name: e.g. 'cpu-v1'.
    version: bumped whenever a cell changes (a baseline of another version is refused).
    tasks: the tasks, in the card's order, and why each is in ({task: reason}).
    baselines: the built-in encodings whose results ship with the suite.
    config: (task, encoding) -> the cell's config.
    directory: where checksums.json and baselines/ live.
    summary: one line on what the suite measures.
    measured: False for a suite defined on paper (no checksums or baselines yet).
    superseded_by: the name of the version that replaces this one (its cards and
      baselines.md then say they are of an old version); None for a current version.
  """

  name: str
  version: int
  tasks: Mapping[str, str]
  baselines: tuple[str, ...]
  config: Callable[[str, str], ml_collections.ConfigDict]
  directory: str
  summary: str
  measured: bool = True
  superseded_by: str | None = None

  def cell_config(self, task: str, encoding: str) -> ml_collections.ConfigDict:
    config = self.config(task, encoding)
    config.task, config.encoding = task, encoding
    return config


def recorded_config(config: Mapping[str, Any] | ml_collections.ConfigDict) -> dict[str, Any]:
  """A config as results.json records it, without the fields that name local paths: what
  two runs of one cell share on any machine."""
  data = (
    config_lib.as_json(config)
    if isinstance(config, ml_collections.ConfigDict)
    else (json.loads(json.dumps(config)))
  )
  for key in LOCAL_FIELDS:
    node = data
    *path, leaf = key.split('.')
    for part in path:
      node = node.get(part, {})
    node.pop(leaf, None)
  return data


# ---------------------------------------------------------------------------------------------
# The suite's files.


def read_json(path: str, what: str) -> Any:
  try:
    return json.loads(io.read_text(path))
  except FileNotFoundError:
    raise BenchmarkError(f'{what} {path} is missing') from None
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise BenchmarkError(f'{what} {path} does not read as JSON ({e})') from None


def checksums(suite: Suite) -> dict[str, dict[str, str]]:
  """{task: {cell file: sha256}} of the suite's frozen evaluation sets."""
  data = read_json(os.path.join(suite.directory, CHECKSUMS), f'suite {suite.name} checksums')
  if (
    not isinstance(data, dict)
    or data.get('suite') != suite.name
    or data.get('version') != suite.version
    or not isinstance(data.get('tasks'), dict)
  ):
    raise BenchmarkError(
      f'{os.path.join(suite.directory, CHECKSUMS)} is not the checksums of '
      f'suite {suite.name} version {suite.version}'
    )
  return data['tasks']


def manifest_checksums(manifest: Mapping[str, Any]) -> dict[str, str]:
  """{file: sha256} of a frozen set's manifest (`posenc.training.frozen`)."""
  return {cell['file']: cell['sha256'] for cell in manifest['cells']}


def verify_eval_set(
  suite: Suite, task: str, manifest: Mapping[str, Any], expected: Mapping[str, Mapping[str, str]]
) -> None:
  """Raises BenchmarkError naming the first file whose checksum is not the suite's."""
  want = expected.get(task)
  if want is None:
    raise BenchmarkError(f'suite {suite.name} stores no checksums for task {task!r}')
  got = manifest_checksums(manifest)
  for file in sorted(set(want) | set(got)):
    if want.get(file) != got.get(file):
      raise BenchmarkError(
        f'the frozen evaluation set of {task} does not match suite {suite.name}: {file} '
        f'has sha256 {str(got.get(file))[:12]}, the suite stores {str(want.get(file))[:12]} '
        '(a file changed, or this machine draws other examples)'
      )


def prepare_eval_set(
  suite: Suite,
  task: str,
  config: ml_collections.ConfigDict,
  expected: Mapping[str, Mapping[str, str]] | None,
  directory: str,
) -> tuple[str, dict[str, Any]]:
  """`directory`/eval_sets/<task>, written once (into a temporary directory, checked against the
  suite's checksums unless `expected` is None, then moved in place) and checked again on
  every rerun; returns its path and manifest."""
  path = os.path.join(directory, 'eval_sets', task)
  manifest_path = os.path.join(path, frozen.MANIFEST)
  if io.exists(manifest_path):
    manifest = read_json(manifest_path, 'manifest')
  else:
    run = setup.build(config)
    remote = store.is_url(path)
    io.makedirs(os.path.dirname(path))
    staging = tempfile.mkdtemp(prefix=f'.{task}-', dir=None if remote else os.path.dirname(path))
    try:
      manifest = frozen.write(
        staging,
        config,
        run.protocol.name,
        run.protocol.examples(run),
        run.protocol.example_fields,
      )
      if expected is not None:
        verify_eval_set(suite, task, manifest, expected)
      if remote:
        # A store has no rename: the cells first, the manifest (a set's mark of whole) last.
        for name in sorted(os.listdir(staging), key=lambda n: n == frozen.MANIFEST):
          io.write_bytes_atomic(f'{path}/{name}', io.read_bytes(os.path.join(staging, name)))
      else:
        os.replace(staging, path)
    finally:
      shutil.rmtree(staging, ignore_errors=True)
  if expected is not None:
    verify_eval_set(suite, task, manifest, expected)
  return path, manifest


def baseline_path(suite: Suite, encoding: str) -> str:
  return os.path.join(suite.directory, BASELINES, f'{encoding}.json')


def read_baselines(suite: Suite) -> dict[str, dict[str, Any]]:
  """{encoding: its stored entry} of every baseline file of the suite, each checked to be of
  this suite and version."""
  out = {}
  directory = os.path.join(suite.directory, BASELINES)
  names = (
    sorted(f for f in os.listdir(directory) if f.endswith('.json'))
    if os.path.isdir(directory)
    else []
  )
  for file in names:
    path = os.path.join(directory, file)
    entry = check_entry(suite, read_json(path, 'baseline file'), f'baseline file {path}')
    out[entry['encoding']] = entry
  return out


def check_entry(suite: Suite, entry: Any, what: str) -> dict[str, Any]:
  """`entry` (a stored baseline, a run's entry.json) if it is an entry of `suite` and its
  version; else BenchmarkError naming `what`."""
  if (
    not isinstance(entry, dict)
    or entry.get('schema_version') != SCHEMA_VERSION
    or not isinstance(entry.get('suite'), dict)
    or not isinstance(entry.get('encoding'), str)
    or not isinstance(entry.get('tasks'), dict)
  ):
    raise BenchmarkError(f'{what} is not a benchmark entry of schema version {SCHEMA_VERSION}')
  stored = entry['suite']
  if stored.get('name') != suite.name or stored.get('version') != suite.version:
    raise BenchmarkError(
      f'{what} is of suite {stored.get("name")!r} version {stored.get("version")!r}, not '
      f'{suite.name} version {suite.version}; rerun its command for this version'
    )
  return entry


# ---------------------------------------------------------------------------------------------
# Entries and cards.


def environment() -> dict[str, Any]:
  """posenc's version, the package versions and the machine."""
  packages = {}
  for name in (
    'posenc',
    'jax',
    'jaxlib',
    'flax',
    'optax',
    'orbax-checkpoint',
    'numpy',
    'scipy',
    'ml-collections',
  ):
    try:
      packages[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      packages[name] = None
  return {
    'posenc_version': packages.pop('posenc'),
    'packages': packages,
    'machine': {
      'system': platform.system(),
      'machine': platform.machine(),
      'processor': platform.processor() or None,
      'cpus': os.cpu_count(),
      'python': sys.version.split()[0],
    },
  }


def make_entry(
  suite: Suite,
  encoding: str,
  results: Mapping[str, Mapping[str, Any]],
  command: Sequence[str],
  seconds: float,
) -> dict[str, Any]:
  """What a run of the suite keeps: per task its results.json; the command, the time it
  took, the versions and the machine. A stored baseline is such an entry."""
  return {
    'schema_version': SCHEMA_VERSION,
    'suite': {'name': suite.name, 'version': suite.version},
    'encoding': encoding,
    'command': list(command),
    'seconds': seconds,
    **environment(),
    'tasks': {task: dict(results[task]) for task in suite.tasks},
  }


@dataclasses.dataclass(frozen=True)
class Expected:
  """What a card of the suite takes, from its stored baselines' runs: their wall seconds
  (sorted) and each task's median share of a run (by its training time, the part of a
  cell that grows with its steps)."""

  seconds: tuple[float, ...]
  shares: Mapping[str, float]

  def remaining(self, spent: float, ran: Sequence[str], left: Sequence[str]) -> float | None:
    """The seconds the tasks `left` will take, `spent` seconds having run the tasks `ran`:
    the time per share of `ran` times the share of `left` (None when nothing ran yet: a
    resumed run's finished tasks cost nothing this time, and say nothing of the rest)."""
    share = sum(self.shares.get(task, 0.0) for task in ran)
    if share <= 0:
      return None
    return spent / share * sum(self.shares.get(task, 0.0) for task in left)

  def median(self) -> float | None:
    return self.seconds[len(self.seconds) // 2] if self.seconds else None


def expected(suite: Suite, baselines: Mapping[str, Mapping[str, Any]]) -> Expected:
  """The stored baselines' times and each task's median share of a run (equal shares where
  the baselines record no training times).

  Example: alibi's cpu-v2 run trained even_pairs 42 s and flip_flop 56 s, shares 0.43 and
  0.57; the medians over cpu-v2's baselines, normalized, are 0.32 and 0.68."""
  per_task: dict[str, list[float]] = {task: [] for task in suite.tasks}
  for entry in baselines.values():
    times = {
      task: ((entry['tasks'].get(task) or {}).get('timing') or {}).get('train_s')
      for task in suite.tasks
    }
    if all(isinstance(t, (int, float)) and t > 0 for t in times.values()):
      total = sum(times.values())
      for task, t in times.items():
        per_task[task].append(t / total)
  if all(per_task.values()):
    medians = {task: sorted(v)[len(v) // 2] for task, v in per_task.items()}
    shares = {task: m / sum(medians.values()) for task, m in medians.items()}
  else:
    shares = {task: 1 / len(suite.tasks) for task in suite.tasks}
  return Expected(tuple(sorted(e['seconds'] for e in baselines.values())), shares)
