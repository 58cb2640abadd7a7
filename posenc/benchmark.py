"""A versioned benchmark of positional encodings: fixed suites, frozen evaluation sets,
stored baselines, and the card that ranks a candidate against them.

A `Suite` is a fixed list of cells, one per task: the model family, the budget, the lengths
and the members (seeds x data orders) of `config(task, encoding)`; its directory ships
with posenc (`experiments/benchmarks/<suite>/`) and holds

  checksums.json        the sha256 of every frozen evaluation file, per task
  baselines/<enc>.json  a stored baseline: the results.json of each task's run of a
                        built-in encoding, with the command, versions and machine that made it
  baselines.md          their table

A candidate's run (`launch.benchmark`) evaluates every task on the suite's frozen sets,
regenerated deterministically and verified against `checksums.json`, and its card puts
the candidate's scorecard next to the stored baselines': per task the mean with its
interval, the success rate with its interval, the longest length generalized, its rank by
mean and the pairwise tests against every baseline (`posenc.report.scorecard`), one figure
and a JSON that names the suite and its version, posenc's version, the package versions
and the machine.

Example:
  >>> card = make_card(suite, 'my_pkg.mod:ENC', candidate_results, read_baselines(suite))
  >>> card['tasks']['even_pairs']['rank']                   # doctest: +SKIP
  2
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

from matplotlib import figure as mpl_figure
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc import plots
from posenc import setup
from posenc import results as results_lib
from posenc.evaluate import frozen
from posenc.report import scorecard as scorecard_lib

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
  """

  name: str
  version: int
  tasks: Mapping[str, str]
  baselines: tuple[str, ...]
  config: Callable[[str, str], ml_collections.ConfigDict]
  directory: str
  summary: str
  measured: bool = True

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
    with open(path) as f:
      return json.load(f)
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
  """{file: sha256} of a frozen set's manifest (`posenc.evaluate.frozen`)."""
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
  if os.path.exists(manifest_path):
    manifest = read_json(manifest_path, 'manifest')
  else:
    run = setup.build(config)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f'.{task}-', dir=os.path.dirname(path))
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
    entry = read_json(path, 'baseline file')
    if not isinstance(entry, dict) or entry.get('schema_version') != SCHEMA_VERSION:
      raise BenchmarkError(
        f'baseline file {path} is not a benchmark entry of schema version {SCHEMA_VERSION}'
      )
    stored = entry.get('suite', {})
    if stored.get('name') != suite.name or stored.get('version') != suite.version:
      raise BenchmarkError(
        f'baseline file {path} is of suite {stored.get("name")!r} version '
        f'{stored.get("version")!r}, not {suite.name} version '
        f'{suite.version}; rerun its command for this version'
      )
    out[entry['encoding']] = entry
  return out


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


def _record(data: Mapping[str, Any], where: str) -> Any:
  return results_lib.Results.from_json(dict(data), where)


def make_card(
  suite: Suite,
  entry: Mapping[str, Any],
  baselines: Mapping[str, Mapping[str, Any]],
  thresholds: scorecard_lib.Thresholds = scorecard_lib.Thresholds(),
) -> dict[str, Any]:
  """The card of `entry` (the candidate) against `baselines` ({encoding: entry}): per task
  the scorecard row of every encoding, the candidate's rank by mean score (1 = best) and
  its comparisons with each baseline; with the suite, its version and the environment. A
  baseline of the candidate's own name is left out (its stored run is not a rival)."""
  candidate = entry['encoding']
  rivals = {name: e for name, e in baselines.items() if name != candidate}
  tasks = {}
  for task in suite.tasks:
    records = [(f'candidate/{task}', _record(entry['tasks'][task], f'{candidate} {task}'))]
    records += [
      (f'baseline/{name}/{task}', _record(e['tasks'][task], f'{name} {task}'))
      for name, e in sorted(rivals.items())
      if task in e['tasks']
    ]
    card = scorecard_lib.scorecard(records, thresholds)
    rows = {r['column']: r for r in card['rows']}
    order = sorted(rows, key=lambda c: _sort_key(rows[c]))
    comparisons = [c for c in card['comparisons'] if candidate in (c['a'], c['b'])]
    for c in comparisons:  # Candidate first: A - B is candidate - baseline.
      if c['b'] == candidate:
        c.update(
          a=candidate,
          b=c['a'],
          mean_difference=-c['mean_difference'],
          ci=None if c['ci'] is None else [-c['ci'][1], -c['ci'][0]],
          u=None if c['u'] is None else c['u_max'] - c['u'],
        )
    tasks[task] = {
      'reason': suite.tasks[task],
      'rank': _ranks([rows[c] for c in order])[candidate],
      'of': len(order),
      'order': order,
      'rows': [rows[c] for c in order],
      'comparisons': comparisons,
    }
  ranks = [t['rank'] for t in tasks.values()]
  return {
    'schema_version': SCHEMA_VERSION,
    'kind': 'posenc benchmark card',
    'suite': {
      'name': suite.name,
      'version': suite.version,
      'summary': suite.summary,
      'tasks': dict(suite.tasks),
    },
    'candidate': candidate,
    'baselines': sorted(rivals),
    # Baselines the suite names but does not store yet: the rank is among the stored ones.
    'missing_baselines': [n for n in suite.baselines if n not in baselines and n != candidate],
    'mean_rank': float(np.mean(ranks)) if ranks else None,
    'thresholds': dataclasses.asdict(thresholds),
    'run': {
      k: entry.get(k) for k in ('command', 'seconds', 'posenc_version', 'packages', 'machine')
    },
    'tasks': tasks,
  }


def _sort_key(row: Mapping[str, Any]) -> tuple[float, float, str]:
  s = row['score']
  sign = 1 if row['higher_is_better'] else -1
  if s is None:
    return (np.inf, np.inf, row['column'])
  # Means equal up to float rounding (members summed in another order) are ties, broken by
  # the median and then by name, not by the last bit.
  return (-sign * round(s['mean'], 9), -sign * round(s['median'], 9), row['column'])


def _ranks(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  """{column: rank}, 1 = best, ties (equal mean and median) sharing the better rank.

  Example: means 0.9, 0.5, 0.5, 0.1 -> ranks 1, 2, 2, 4.
  """
  keys = {r['column']: _sort_key(r)[:2] for r in rows}
  return {c: 1 + sum(k < keys[c] for k in keys.values()) for c in keys}


def _pct(x: float | None) -> str:
  if x is None:
    return '–'
  text = f'{100 * x:.1f}'
  return '0.0' if text == '-0.0' else text


def markdown(card: Mapping[str, Any]) -> str:
  """The card as markdown: per task the candidate among the baselines, ranked by mean."""
  s, candidate = card['suite'], card['candidate']
  run = card['run']
  lines = [
    f'# Benchmark card: {candidate} on {s["name"]} (version {s["version"]})',
    '',
    s['summary'],
    '',
    f'Mean rank over {len(card["tasks"])} tasks: {card["mean_rank"]:.2f} '
    f'(1 = best of {1 + len(card["baselines"])}). posenc {run["posenc_version"]}, '
    f'jax {run["packages"].get("jax")}, {run["machine"]["machine"]} '
    f'({run["machine"]["cpus"]} CPUs); the run took {run["seconds"] / 60:.1f} min.',
    '',
    *(
      [
        f'Baselines not stored yet (not ranked against): {", ".join(card["missing_baselines"])}.',
        '',
      ]
      if card.get('missing_baselines')
      else []
    ),
    'Scores: exact match (%) averaged over the lengths past training, mean ± sd '
    '[95% bootstrap interval] over the members; success: members with a score >= '
    f'{100 * card["thresholds"]["score"]:g}% [95% Wilson interval]; longest '
    'generalized: the median over members of the longest length up to which every '
    f'evaluated length stays >= {100 * card["thresholds"]["length"]:g}% ("≥": every '
    'evaluated length passed); A − B: candidate minus baseline, with the two-sided '
    'Mann-Whitney U test (exact without ties, a permutation test with ties).',
    '',
  ]
  for task, t in card['tasks'].items():
    lines += [
      f'## {task}: rank {t["rank"]} of {t["of"]}',
      '',
      f'Why it is in: {t["reason"]}',
      '',
      '| rank | encoding | mean ± sd [95% CI] | success [95% CI] | longest '
      'generalized | candidate − it [95% CI] | U, p |',
      '|---|---|---|---|---|---|---|',
    ]
    versus = {c['b']: c for c in t['comparisons']}
    ranks = _ranks(t['rows'])
    for row in t['rows']:
      rank = ranks[row['column']]
      sc = row['score']
      mean = (
        'all diverged'
        if sc is None
        else (
          f'{_pct(sc["mean"])}'
          + ('' if sc['sd'] is None else f' ± {_pct(sc["sd"])}')
          + (
            ''
            if sc['mean_ci'] is None
            else f' [{_pct(sc["mean_ci"][0])}, {_pct(sc["mean_ci"][1])}]'
          )
        )
      )
      ok = row['success']
      success = f'{_pct(ok["rate"])}% ({ok["successes"]}/{row["members"]})' + (
        '' if ok['ci'] is None else f' [{_pct(ok["ci"][0])}, {_pct(ok["ci"][1])}]'
      )
      c = versus.get(row['column'])
      diff = (
        ''
        if c is None or c['mean_difference'] is None
        else (
          _pct(c['mean_difference'])
          + ('' if c['ci'] is None else f' [{_pct(c["ci"][0])}, {_pct(c["ci"][1])}]')
        )
      )
      test = (
        ''
        if c is None or c['p_value'] is None
        else (f'U = {c["u"]:g} of {c["u_max"]}, p = {c["p_value"]:.2g}')
      )
      name = f'**{row["column"]}** (candidate)' if row['column'] == candidate else row['column']
      lines.append(
        f'| {rank} | {name} | {mean} | {success} | '
        f'{_longest(row["longest_generalized"])} | {diff} | {test} |'
      )
    lines.append('')
  return '\n'.join(lines)


def _longest(lg: Mapping[str, Any] | None) -> str:
  if lg is None:
    return '–'
  bound = '≥ ' if lg['lower_bound']['median'] else ''
  return f'{bound}{lg["median"]:g} ({bound}{lg["ratio_to_train_length"]:.2f}×)'


def figure(card: Mapping[str, Any]) -> mpl_figure.Figure:
  """One panel per task: every encoding's members (points) and mean (a bar), ranked, the
  candidate in bold."""
  tasks = card['tasks']
  fig = mpl_figure.Figure(
    figsize=(4.2 * len(tasks), 0.32 * max(len(t['rows']) for t in tasks.values()) + 1.6),
    layout='constrained',
  )
  axes = fig.subplots(1, len(tasks), squeeze=False)[0]
  names = sorted({r['column'] for t in tasks.values() for r in t['rows']})
  for ax, (task, t) in zip(axes, tasks.items()):
    rows = t['rows'][::-1]  # best on top
    for y, row in enumerate(rows):
      style = plots.encoding_style(row['column'], figure=names)
      scores = [100 * m['score'] for m in row['member_scores'] if m['score'] is not None]
      mine = row['column'] == card['candidate']
      if row['score'] is not None:
        ax.barh(
          y,
          100 * row['score']['mean'],
          color=style['color'],
          alpha=0.55 if mine else 0.25,
          edgecolor='black' if mine else 'none',
        )
      ax.scatter(
        scores,
        np.full(len(scores), y),
        s=12,
        color=style['color'],
        zorder=3,
        marker=style['marker'],
      )
    ax.set_yticks(range(len(rows)), [r['column'] for r in rows], fontsize=7)
    for label, row in zip(ax.get_yticklabels(), rows):
      if row['column'] == card['candidate']:
        label.set_fontweight('bold')
    ax.axvline(100 * card['thresholds']['score'], color='grey', linestyle=':', linewidth=1)
    ax.set_xlim(0, 100)
    ax.set_xlabel(f'{rows[0]["metric"]} past training (%)', fontsize=8)
    ax.set_title(f'{task}: {card["candidate"]} ranks {t["rank"]} of {t["of"]}', fontsize=9)
  return fig


def card_files(card: Mapping[str, Any]) -> dict[str, bytes]:
  """card.json, card.md and card.png."""
  return {
    CARD_JSON: (json.dumps(card, indent=1) + '\n').encode(),
    CARD_MD: (markdown(card) + '\n').encode(),
    CARD_PNG: plots.png(figure(card), dpi=120),
  }


def baselines_table(suite: Suite, baselines: Mapping[str, Mapping[str, Any]]) -> str:
  """baselines.md: per task every stored baseline's mean [interval], success and longest
  length, ranked, with the command and versions that made them."""
  lines = [f'# Baselines of suite {suite.name} (version {suite.version})', '', suite.summary, '']
  for task, reason in suite.tasks.items():
    records = [
      (name, _record(e['tasks'][task], f'{name} {task}'))
      for name, e in sorted(baselines.items())
      if task in e['tasks']
    ]
    if not records:
      continue
    card = scorecard_lib.scorecard(records)
    rows = sorted(card['rows'], key=_sort_key)
    lines += [
      f'## {task}',
      '',
      f'Why it is in: {reason}',
      '',
      '| rank | encoding | mean ± sd [95% CI] | success [95% CI] | longest generalized |',
      '|---|---|---|---|---|',
    ]
    ranks = _ranks(rows)
    for row in rows:
      rank = ranks[row['column']]
      sc, ok = row['score'], row['success']
      mean = (
        'all diverged'
        if sc is None
        else (
          f'{_pct(sc["mean"])}'
          + ('' if sc['sd'] is None else f' ± {_pct(sc["sd"])}')
          + (
            ''
            if sc['mean_ci'] is None
            else f' [{_pct(sc["mean_ci"][0])}, {_pct(sc["mean_ci"][1])}]'
          )
        )
      )
      lines.append(
        f'| {rank} | {row["column"]} | {mean} | {_pct(ok["rate"])}% '
        f'({ok["successes"]}/{row["members"]})'
        + ('' if ok['ci'] is None else f' [{_pct(ok["ci"][0])}, {_pct(ok["ci"][1])}]')
        + f' | {_longest(row["longest_generalized"])} |'
      )
    lines.append('')
  made = sorted(
    {
      (
        ' '.join(e['command']),
        e['posenc_version'],
        e['packages'].get('jax'),
        e['machine']['machine'],
        e['machine']['cpus'],
        round(e['seconds']),
      )
      for e in baselines.values()
    },
    key=lambda m: m[0],
  )
  missing = [name for name in suite.baselines if name not in baselines]
  if missing:
    lines += [f'Not stored yet: {", ".join(missing)}.', '']
  lines += ['## How they were made', '']
  lines += [
    f'- `{cmd}`: posenc {v}, jax {jax}, {machine} ({cpus} CPUs), {secs / 60:.1f} min'
    for cmd, v, jax, machine, cpus, secs in made
  ]
  return '\n'.join(lines) + '\n'
