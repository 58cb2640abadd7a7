"""The benchmark card: a candidate's runs of a suite (`posenc.benchmark`) ranked against the
suite's stored baselines, with intervals whose coverage is measured and verdicts whose error
is controlled; and the suite's baselines.md.

Per task the card has every encoding's mean with its 95% interval (`posenc.statistics.intervals`:
the members and the examples behind each score both counted, the dispersion floored by the
pool of the suite's stored baselines), its success rate with its interval, its longest
length generalized and its rank; and per baseline a verdict, better / worse / not separated,
from one procedure over the whole card (`posenc.statistics.verdicts`: a permutation test of the
difference of means per baseline and task, Holm over all of them), with the difference's
interval at the level Holm decided it at, so that the interval excludes 0 exactly when the
verdict separates. Each task prints the minimum detectable difference: what "not separated"
can still hide.

Example:
  >>> from experiments import benchmarks
  >>> suite = benchmarks.get('tiny')
  >>> baselines = benchmark.read_baselines(suite)
  >>> card = make_card(suite, baselines['rotary'], baselines)   # rotary against the others
  >>> card['baselines'], card['tasks']['even_pairs']['rank']
  (['none'], 2)
  >>> card['tasks']['even_pairs']['comparisons'][0]['verdict']  # 2 members against 2
  'not separated'
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Sequence

from matplotlib import figure as mpl_figure
import numpy as np

from posenc import benchmark
from posenc.sections import plots
from posenc import kinds
from posenc.statistics import intervals
from posenc.report import scorecard as scorecard_lib
from posenc.statistics import verdicts

# The card's layout; the entries and baselines it reads keep benchmark.SCHEMA_VERSION.
CARD_SCHEMA_VERSION = 2


def record_of(data: Mapping[str, Any], where: str) -> Any:
  return kinds.from_json(dict(data), where)


def member_scores(row: Mapping[str, Any]) -> list[float]:
  return [m['score'] for m in row['member_scores'] if m['score'] is not None]


def baseline_cells(
  suite: benchmark.Suite, baselines: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, list[float], int | None]]:
  """[('encoding/task', member scores, examples per score)] of every stored cell whose
  metric is a [0, 1] score (higher is better)."""
  cells = []
  for name, entry in sorted(baselines.items()):
    for task in suite.tasks:
      if task in entry['tasks']:
        record = record_of(entry['tasks'][task], f'{name} {task}')
        evaluation = record.evaluation
        if evaluation.higher_is_better:
          scores = [evaluation.score_of(m, record.family) for m in evaluation.members]
          cells.append(
            (
              f'{name}/{task}',
              [x for x in scores if x is not None],
              evaluation.examples_per_score(record.config),
            )
          )
  return cells


def task_chances(
  suite: benchmark.Suite, baselines: Mapping[str, Mapping[str, Any]]
) -> dict[str, float]:
  """{task: the score of a member that learned nothing} (`Evaluation.chance`), read from the
  stored baselines' records: where the intervals put a sample's unseen failures."""
  out = {}
  for name, entry in sorted(baselines.items()):
    for task in suite.tasks:
      if task in entry['tasks'] and task not in out:
        record = record_of(entry['tasks'][task], f'{name} {task}')
        out[task] = record.evaluation.chance(task, record.family)
  return out


def suite_pool(
  suite: benchmark.Suite, baselines: Mapping[str, Mapping[str, Any]]
) -> intervals.Pool | None:
  """The dispersion prior of the suite's stored baselines: every (encoding, task) cell."""
  return intervals.pool([(s, e) for _, s, e in baseline_cells(suite, baselines)])


def check_alpha(
  suite: benchmark.Suite,
  baselines: Mapping[str, Mapping[str, Any]],
  candidate: str,
  members: int,
  alpha: float,
) -> None:
  """Raises BenchmarkError (one line) when no comparison of a card of `candidate` (its
  `members` per cell) can be separated at family-wise `alpha`: each baseline's smallest
  p-value is above Holm's first step."""
  counts = [
    len(scores)
    for name, entry in baselines.items()
    if name != candidate
    for scores in baseline_scores(suite, {name: entry})[name].values()
    if scores
  ]
  if not counts:
    return
  first = alpha / len(counts)
  smallest = min(2 / verdicts.splits_count(members, n) for n in counts)
  if smallest > first:
    raise benchmark.BenchmarkError(
      f'--alpha={alpha:g} cannot be reached on suite {suite.name}: {members} members against '
      f'{max(counts)} give p >= {smallest:.2g}, and Holm over {len(counts)} comparisons needs '
      f'p <= {first:.2g}; leave --alpha out for a card that says so, or use a suite with '
      'more members per cell'
    )


def make_card(
  suite: benchmark.Suite,
  entry: Mapping[str, Any],
  baselines: Mapping[str, Mapping[str, Any]],
  thresholds: scorecard_lib.Thresholds = scorecard_lib.Thresholds(),
  alpha: float = verdicts.ALPHA,
) -> dict[str, Any]:
  """The card of `entry` (the candidate) against `baselines` ({encoding: entry}): per task
  the scorecard row of every encoding, the candidate's rank by mean score (1 = best), its
  verdict against each baseline and the minimum detectable difference; with the suite, its
  version and the environment. A baseline of the candidate's own name is left out (its
  stored run is not a rival)."""
  candidate = entry['encoding']
  rivals = {name: e for name, e in baselines.items() if name != candidate}
  prior = suite_pool(suite, rivals)
  tasks, tests, keys = {}, [], []
  for task in suite.tasks:
    records = [(f'candidate/{task}', record_of(entry['tasks'][task], f'{candidate} {task}'))]
    records += [
      (f'baseline/{name}/{task}', record_of(e['tasks'][task], f'{name} {task}'))
      for name, e in sorted(rivals.items())
      if task in e['tasks']
    ]
    card = scorecard_lib.scorecard(records, thresholds, prior=prior, comparisons=False)
    rows = {r['column']: r for r in card['rows']}
    order = sorted(rows, key=lambda c: sort_key(rows[c]))
    mine = member_scores(rows[candidate])
    for name in order:
      if name != candidate and mine and member_scores(rows[name]):
        keys.append((task, name))
        tests.append(verdicts.shift_test(mine, member_scores(rows[name])))
    tasks[task] = {
      'reason': suite.tasks[task],
      'rank': ranks([rows[c] for c in order])[candidate],
      'of': len(order),
      'order': order,
      'rows': [rows[c] for c in order],
    }
  bounds = [(-1.0, 1.0) if tasks[t]['rows'][0]['higher_is_better'] else None for t, _ in keys]
  decided = verdicts.decide(tests, alpha, bounds)
  first_level = alpha / len(tests) if tests else None
  for task, t in tasks.items():
    higher = t['rows'][0]['higher_is_better']
    t['comparisons'] = [
      {
        'a': candidate,
        'b': name,
        **d,
        'verdict': _verdict(d['sign'], higher, d['undecided']),
      }
      for (where, name), d in zip(keys, decided)
      if where == task
    ]
    t['detectable'] = _detectable(t, candidate, first_level)
  task_ranks = [t['rank'] for t in tasks.values()]
  return {
    'schema_version': CARD_SCHEMA_VERSION,
    'kind': 'posenc benchmark card',
    'suite': {
      'name': suite.name,
      'version': suite.version,
      'summary': suite.summary,
      'tasks': dict(suite.tasks),
      'superseded_by': suite.superseded_by,
    },
    'candidate': candidate,
    'baselines': sorted(rivals),
    # Baselines the suite names but does not store yet: the rank is among the stored ones.
    'missing_baselines': [n for n in suite.baselines if n not in baselines and n != candidate],
    'mean_rank': float(np.mean(task_ranks)) if task_ranks else None,
    'thresholds': dataclasses.asdict(thresholds),
    'statistics': _statistics(prior, alpha, tests, decided, first_level),
    'run': {
      k: entry.get(k) for k in ('command', 'seconds', 'posenc_version', 'packages', 'machine')
    },
    'tasks': tasks,
  }


def _statistics(prior, alpha: float, tests, decided, first_level: float | None) -> dict[str, Any]:
  """The card's statistics: the intervals, the pool, the tests and Holm's correction over
  the candidate's comparisons (`tests`, `decided`)."""
  return {
    'interval': intervals.MEAN_METHOD,
    'success_interval': intervals.SUCCESS_METHOD,
    'level': intervals.LEVEL,
    'pool': None if prior is None else prior.to_json(),
    'test': verdicts.TEST_NAME,
    'correction': 'Holm',
    'alpha': alpha,
    'comparisons': len(tests),
    'first_level': first_level,
    'smallest_p': min((t.smallest_p() for t in tests), default=None),
    # Whether any comparison can be separated at all: its smallest p within Holm's first
    # step.
    'decidable': any(t.smallest_p() <= first_level for t in tests),
    # Every comparison over every split; else the Monte-Carlo ones within this many
    # standard errors of deciding otherwise are undecided.
    'exact': all(t.exact for t in tests),
    'undecided_margin': verdicts.SE_MARGIN,
    'undecided': sum(d['undecided'] for d in decided),
  }


def _verdict(sign: str | None, higher_is_better: bool, undecided: bool = False) -> str:
  if undecided:
    return 'undecided'
  if sign is None:
    return 'not separated'
  return 'better' if (sign == 'higher') == higher_is_better else 'worse'


def _detectable(
  task: Mapping[str, Any], candidate: str, level: float | None
) -> dict[str, Any] | None:
  """The task's minimum detectable difference (`verdicts.minimum_detectable_difference`):
  the candidate's members against the baselines' typical (median) number, at Holm's first
  level, with the baselines' pooled within-encoding sd."""
  rows = [r for r in task['rows'] if r['column'] != candidate]
  groups = [member_scores(r) for r in rows]
  mine = [r for r in task['rows'] if r['column'] == candidate]
  if level is None or not mine or not any(groups):
    return None
  n_a = len(member_scores(mine[0]))
  n_b = int(np.median([len(g) for g in groups if g]))
  sd = verdicts.pooled_sd(groups)
  return {
    'difference': None
    if sd is None
    else verdicts.minimum_detectable_difference(sd, n_a, n_b, level),
    'pooled_sd': sd,
    'baselines': len(rows),
    'n_candidate': n_a,
    'n_baseline': n_b,
    'level': level,
    'power': verdicts.POWER,
    'smallest_p': 2 / verdicts.splits_count(n_a, n_b),
  }


def sort_key(row: Mapping[str, Any]) -> tuple[float, float, str]:
  s = row['score']
  sign = 1 if row['higher_is_better'] else -1
  if s is None:
    return (np.inf, np.inf, row['column'])
  # Means equal up to float rounding (members summed in another order) are ties, broken by
  # the median and then by name, not by the last bit.
  return (-sign * round(s['mean'], 9), -sign * round(s['median'], 9), row['column'])


def ranks(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  """{column: rank}, 1 = best, ties (equal mean and median) sharing the better rank.

  Example: means 0.9, 0.5, 0.5, 0.1 -> ranks 1, 2, 2, 4.
  """
  keys = {r['column']: sort_key(r)[:2] for r in rows}
  return {c: 1 + sum(k < keys[c] for k in keys.values()) for c in keys}


def _pct(x: float | None) -> str:
  if x is None:
    return '–'
  text = f'{100 * x:.1f}'
  return '0.0' if text == '-0.0' else text


def mean_text(sc: Mapping[str, Any] | None) -> str:
  """'59.9 ± 5.1 [41.0, 77.6]', or 'all diverged'."""
  if sc is None:
    return 'all diverged'
  return (
    _pct(sc['mean'])
    + ('' if sc['sd'] is None else f' ± {_pct(sc["sd"])}')
    + ('' if sc['mean_ci'] is None else f' [{_pct(sc["mean_ci"][0])}, {_pct(sc["mean_ci"][1])}]')
  )


def success_text(row: Mapping[str, Any]) -> str:
  ok = row['success']
  return f'{_pct(ok["rate"])}% ({ok["successes"]}/{row["members"]})' + (
    '' if ok['ci'] is None else f' [{_pct(ok["ci"][0])}, {_pct(ok["ci"][1])}]'
  )


def _difference_text(c: Mapping[str, Any]) -> str:
  """'7.7 [-100.0, 100.0]': the difference of means and its interval at its Holm level."""
  end = lambda x, sign: f'{sign}∞' if x is None else _pct(x)
  return f'{_pct(c["mean_difference"])} [{end(c["ci"][0], "-")}, {end(c["ci"][1], "")}]'


def old_version_note(suite: Mapping[str, Any]) -> list[str]:
  """The lines that say a suite is an old version, or none."""
  if not suite.get('superseded_by'):
    return []
  return [
    f'**An old version of the benchmark:** {suite["name"]} is superseded by '
    f'{suite["superseded_by"]}; compare encodings on {suite["superseded_by"]} '
    f'(`python -m launch.benchmark --suite={suite["superseded_by"]}`).',
    '',
  ]


def markdown(card: Mapping[str, Any]) -> str:
  """The card as markdown: per task the candidate among the baselines, ranked by mean, each
  baseline's verdict, and the minimum detectable difference."""
  s, candidate, st = card['suite'], card['candidate'], card['statistics']
  run = card['run']
  lines = [
    f'# Benchmark card: {candidate} on {s["name"]} (version {s["version"]})',
    '',
    *old_version_note(s),
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
    'Scores: exact match (%) averaged over the lengths past training, mean ± sd over the '
    f'members [95% interval: {st["interval"]}]; success: members with a score >= '
    f'{100 * card["thresholds"]["score"]:g}% [95% {st["success_interval"]} interval]; longest '
    'generalized: the median over members of the longest length up to which every '
    f'evaluated length stays >= {100 * card["thresholds"]["length"]:g}% ("≥": every '
    'evaluated length passed).',
    '',
    f'Verdicts: a {st["test"]} of the candidate against each baseline on each task, '
    f'{st["comparisons"]} comparisons decided together by Holm at family-wise level '
    f'{st["alpha"]:g} (the first step needs p ≤ {p_short(st["first_level"])}). "candidate − it" '
    'is the difference of means with its interval from the same test at the level Holm '
    'decided it at: it excludes 0 exactly when the verdict is better or worse. '
    + _exactness_text(st),
    '',
  ]
  if not st['decidable'] and st['comparisons']:
    lines += [
      f'**No comparison on this card can be separated.** The smallest two-sided p-value '
      f'any comparison can reach is {p_short(st["smallest_p"])}, above Holm\'s first step '
      f'({p_short(st["first_level"])}): with so few members every verdict is "not separated" '
      'and every difference interval is the whole range, whatever the scores. Only a suite '
      'with more members per cell can separate encodings (docs/benchmark.md).',
      '',
    ]
  for task, t in card['tasks'].items():
    lines += [
      f'## {task}: rank {t["rank"]} of {t["of"]}',
      '',
      f'Why it is in: {t["reason"]}',
      '',
      detectable_text(t['detectable']),
      '',
      '| rank | encoding | mean ± sd [95% CI] | success [95% CI] | longest generalized | '
      'candidate − it [interval] | verdict | p (Holm) |',
      '|---|---|---|---|---|---|---|---|',
    ]
    versus = {c['b']: c for c in t['comparisons']}
    rank_of = ranks(t['rows'])
    for row in t['rows']:
      c = versus.get(row['column'])
      name = f'**{row["column"]}** (candidate)' if row['column'] == candidate else row['column']
      compared = (
        ['', '', '']
        if c is None
        else [_difference_text(c), c['verdict'], f'{p_text(c)} ({p_short(c["adjusted_p"])})']
      )
      lines.append(
        f'| {rank_of[row["column"]]} | {name} | {mean_text(row["score"])} | '
        f'{success_text(row)} | {longest_text(row["longest_generalized"])} | '
        + ' | '.join(compared)
        + ' |'
      )
    lines.append('')
  return '\n'.join(lines)


def p_short(p: float | None) -> str:
  return '–' if p is None else f'{p:.2g}'


def p_text(c: Mapping[str, Any]) -> str:
  """A comparison's p-value: '0.0079' when exact, '0.0079 ± 0.0003' (its standard error)
  when Monte-Carlo."""
  se = c.get('p_se') or 0.0
  return p_short(c['p_value']) + (f' ± {se:.1g}' if se > 0 else '')


def _exactness_text(st: Mapping[str, Any]) -> str:
  """What the card's p-values are: exact, or Monte-Carlo with how many are undecided."""
  if st.get('exact', True):
    return 'Every p-value is exact (every split of the pooled members counted).'
  return (
    'Some p-values are Monte-Carlo (random splits), printed ± their standard error; a '
    f'verdict that another draw of splits could change (Holm with those p-values '
    f'{st["undecided_margin"]:g} standard errors lower separates it, with them that much '
    f'higher does not) is "undecided": {st["undecided"]} on this card.'
  )


def detectable_text(d: Mapping[str, Any] | None) -> str:
  if d is None:
    return 'Minimum detectable difference: – (no baseline to compare with).'
  head = (
    f'Minimum detectable difference ({d["n_candidate"]} members against '
    f'{d["n_baseline"]}, {100 * d["power"]:g}% power at Holm\'s first level '
    f'{p_short(d["level"])}, pooled sd {_pct(d["pooled_sd"])} over {d["baselines"]} baselines): '
  )
  if d['difference'] is None:
    return (
      head + f'none: the smallest two-sided p-value is {p_short(d["smallest_p"])}, so no '
      'difference, however large, is separated.'
    )
  return (
    head + f'{_pct(d["difference"])} points; a smaller true difference is often "not separated".'
  )


def longest_text(lg: Mapping[str, Any] | None) -> str:
  if lg is None:
    return '–'
  bound = '≥ ' if lg['lower_bound']['median'] else ''
  return f'{bound}{lg["median"]:g} ({bound}{lg["ratio_to_train_length"]:.2f}×)'


def figure(card: Mapping[str, Any]) -> mpl_figure.Figure:
  """One panel per task: every encoding's members (points), mean (a bar) and its 95%
  interval (a line), ranked, the candidate in bold."""
  tasks = card['tasks']
  fig = mpl_figure.Figure(
    figsize=(4.2 * len(tasks), 0.32 * max(len(t['rows']) for t in tasks.values()) + 1.8),
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
        if row['score']['mean_ci'] is not None:
          low, high = row['score']['mean_ci']
          ax.plot([100 * low, 100 * high], [y, y], color='black', linewidth=0.8, zorder=2)
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
  old = card['suite'].get('superseded_by')
  fig.suptitle(
    f'{card["suite"]["name"]}'
    + (f' (an old version: see {old})' if old else '')
    + ': lines are 95% intervals of the means (Korn-Graubard, floors and unseen failures)',
    fontsize=8,
  )
  return fig


def card_files(card: Mapping[str, Any]) -> dict[str, bytes]:
  """card.json, card.md and card.png."""
  return {
    benchmark.CARD_JSON: (json.dumps(card, indent=1) + '\n').encode(),
    benchmark.CARD_MD: (markdown(card) + '\n').encode(),
    benchmark.CARD_PNG: plots.png(figure(card), dpi=120),
  }


def baseline_scores(
  suite: benchmark.Suite, baselines: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, list[float]]]:
  """{encoding: {task: member scores}} of the stored baselines."""
  out: dict[str, dict[str, list[float]]] = {}
  for name, entry in baselines.items():
    for task in suite.tasks:
      if task in entry['tasks']:
        record = record_of(entry['tasks'][task], f'{name} {task}')
        scores = [record.evaluation.score_of(m, record.family) for m in record.members]
        out.setdefault(name, {})[task] = [s for s in scores if s is not None]
  return out
