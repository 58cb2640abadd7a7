"""The robustness scorecard: how a result holds across the members of a population.

Papers of the field report the best seed (Ruoss et al.'s Table 1 is the max over 10 seeds;
the mean of Even Pairs is 67.7 ± 15.2 where the max is about 90). The scorecard reports,
per row = (task, column, model family, learning rate), over the row's members (seeds, and
data orders where the population varies them, `config.data_seeds`):

- the score's mean ± sd (sample sd, ddof 1) with a 95% interval for the mean, median and
  IQR, min, and max — the published statistic, named as such (min for perplexity, where
  lower is better). The interval (`posenc.statistics.intervals`) counts both sources of error:
  the members, and the finite examples each member's score averages, so it is never
  zero-width, and its low end allows for the failed runs the members may have missed, at
  the task's chance level (three members at 100% of 416 examples: [87, 100] with cpu-v1's
  pool, [67, 100] with up to 54% of runs failing unseen at a chance of 50%);
- the success rate: the share of members that pass (a score >= `threshold`, default 0.9;
  for perplexity, within `tolerance` of the member's perplexity at the training length),
  diverged members failing, with its 95% Wilson interval with continuity correction (0 of
  12 gives [0, 30.1%]); and per length the share of members at >= `length_threshold`
  (default 0.95) of the protocol's metric (accuracy for the study's tasks, exact match for
  generated answers, a grid's length n being its cell (n, n));
- the longest length generalized: per member the largest test length up to which the
  metric stays at or above `length_threshold` (0 when the shortest fails), its median, IQR
  and range over members, and its ratio to the training length. A member that passes every
  evaluated length is censored there: its longest is at least the longest evaluated
  length, so every statistic that involves it is a lower bound, flagged `lower_bound` in
  the JSON and printed "≥ n";
- seed and data-order variance apart, when both vary in a complete design (a two-way
  decomposition: the variance of the seed means, of the data-seed means, and the rest);
- pairwise comparisons of the columns of one task, family and learning rate, decided
  together (`posenc.statistics.verdicts`): a two-sided permutation test of the difference of
  means per pair, Holm over every pair of the scorecard at family-wise level 0.05, and the
  difference's interval from the same test at the level Holm decided it at: a pair is
  "A better", "B better" or "not separated", and its interval excludes 0 exactly when it
  is separated.

The intervals of means are floored by the dispersion pooled over the scorecard's rows (a
benchmark card: over the suite's stored baselines); the permutation tests with random
splits use a generator seeded by the group sizes, so a scorecard is reproducible; with one
member there is no interval (None). The metric of each protocol is its results record's
(`curve`, `metric`, `higher_is_better` in `posenc.results`), and each row records the
lengths its score averages (`score_basis`) and how many examples (`examples_per_score`).
Standard deviations are sample ones (ddof 1), as in every table of a report.

Example:
  >>> card = scorecard(records)          # [(path, posenc.results.Results), ...]  # doctest: +SKIP
  >>> card['rows'][0]['score']['mean'], card['rows'][0]['success']['rate']  # doctest: +SKIP
  (0.71, 0.25)
  >>> print(markdown(card))              # doctest: +SKIP
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Any, Mapping, Sequence

import numpy as np

from posenc.sections import core
from posenc.statistics import intervals
from posenc.sections import load
from posenc.report import scorecard_figure
from posenc.report import statistics
from posenc.report import training
from posenc.statistics import verdicts

SCHEMA_VERSION = 3
FILE_JSON, FILE_MD = 'scorecard.json', 'scorecard.md'


@dataclasses.dataclass(frozen=True)
class Thresholds:
  """What passes: a score >= `score`; a length at >= `length` of the metric; for
  perplexity, a value <= (1 + `tolerance`) x the member's perplexity at the training
  length."""

  score: float = 0.9
  length: float = 0.95
  tolerance: float = 0.1

  def check(self) -> None:
    """Raises ValueError (one line) for a threshold outside (0, 1] / a negative tolerance."""
    for name in ('score', 'length'):
      value = getattr(self, name)
      if not (isinstance(value, (int, float)) and 0 < value <= 1):
        raise ValueError(f'scorecard {name} threshold {value!r} must be in (0, 1]')
    if not (isinstance(self.tolerance, (int, float)) and 0 <= self.tolerance < math.inf):
      raise ValueError(f'scorecard perplexity tolerance {self.tolerance!r} must be >= 0')


# ---------------------------------------------------------------------------------------------
# The scorecard of a set of runs.


def _reference(curve: Mapping[int, float], train_length: int) -> float:
  """A perplexity curve's value at the training length (the nearest evaluated length at or
  below it, else the shortest)."""
  below = [n for n in curve if n <= train_length]
  return curve[max(below)] if below else curve[min(curve)]


def _member_scores(record: Any, thresholds: Thresholds) -> list[dict[str, Any]]:
  evaluation = record.evaluation
  higher = evaluation.higher_is_better
  out = []
  for member in evaluation.members:
    curve = evaluation.curve(member, record.family)
    score = evaluation.score_of(member, record.family)
    if higher:
      passes = lambda v: math.isfinite(v) and v >= thresholds.length
      succeeds = score is not None and score >= thresholds.score
    else:
      limit = (1 + thresholds.tolerance) * _reference(curve, record.train_length)
      passes = lambda v, limit=limit: math.isfinite(v) and v <= limit
      succeeds = score is not None and score <= limit
    ok = not member.diverged and score is not None and math.isfinite(score) and bool(curve)
    longest = statistics.longest_generalized(curve, passes) if ok else None
    out.append(
      {
        'seed': member.seed,
        'data_seed': member.data_seed,
        'learning_rate': member.learning_rate,
        'diverged': member.diverged,
        'score': score if ok else None,
        'success': bool(ok and succeeds),
        'longest': longest,
        # Every evaluated length passed: the true longest lies at or past it.
        'longest_censored': bool(ok and longest == max(curve)),
        'passes_by_length': {n: bool(ok and passes(v)) for n, v in curve.items()},
      }
    )
  return out


def scorecard(
  records: Sequence[tuple[Any, Any]],
  thresholds: Thresholds = Thresholds(),
  prior: intervals.Pool | None | str = 'rows',
  comparisons: bool = True,
  alpha: float = verdicts.ALPHA,
) -> dict[str, Any]:
  """The scorecard (a JSON-able dict, `SCHEMA_VERSION`) of `records`: [(path,
  posenc.results.Results)], any protocols.

  Args:
    records: the runs.
    thresholds: what passes.
    prior: the pooled dispersion the intervals of means are floored by
      (`posenc.statistics.intervals`): 'rows' pools the scorecard's own rows, a Pool is used as
      given (a benchmark card: the suite's stored baselines), None floors by nothing.
    comparisons: whether to compare every pair of columns (a card compares its own way).
    alpha: the family-wise level of the comparisons (Holm over all of them).
  """
  thresholds.check()
  # Columns are labelled within each task, as the report's tables label them, by the options
  # each run records.
  labels = [''] * len(records)
  for task in {r.task for _, r in records}:
    index = [i for i, (_, r) in enumerate(records) if r.task == task]
    for i, label in zip(
      index, load.column_labels([records[i] for i in index], lambda r: r.encoding_options)
    ):
      labels[i] = label
  architectures = collections.defaultdict(set)
  for _, r in records:
    architectures[r.task, r.encoding].add(r.architecture)
  groups: dict[tuple[Any, ...], dict[str, Any]] = {}
  for (path, record), label in zip(records, labels):
    if len(architectures[record.task, record.encoding]) > 1:
      label = f'{label} [{record.architecture}]'
    evaluation = record.evaluation
    for member in _member_scores(record, thresholds):
      key = (record.task, label, record.family, member['learning_rate'])
      group = groups.setdefault(
        key,
        {
          'task': record.task,
          'column': label,
          'family': record.family,
          'learning_rate': member['learning_rate'],
          'evaluation': evaluation.evaluation,
          'metric': evaluation.metric_of(record.family),
          'higher_is_better': evaluation.higher_is_better,
          'train_length': record.train_length,
          'score_basis': evaluation.score_basis(),
          'examples_per_score': _examples(record),
          # Where the interval of the mean puts the failures a sample may have missed.
          'chance': evaluation.chance(record.task, record.family),
          'runs': [],
          'members': [],
        },
      )
      if str(path) not in group['runs']:
        group['runs'].append(str(path))
        # Runs of one row scored on different numbers of examples: the fewest (the larger
        # binomial error) bounds them all.
        group['examples_per_score'] = _fewest(group['examples_per_score'], _examples(record))
      group['members'].append(member)
  ordered = [
    g for _, g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3], kv[0][1]))
  ]
  if prior == 'rows':
    prior = intervals.pool(
      [(_scores(g['members']), g['examples_per_score']) for g in ordered if g['higher_is_better']]
    )
  rows = [_row(group, prior) for group in ordered]
  return {
    'schema_version': SCHEMA_VERSION,
    'thresholds': dataclasses.asdict(thresholds),
    'intervals': {
      'mean': intervals.MEAN_METHOD,
      'mean_without_examples': intervals.MEAN_METHOD_T,
      'success': intervals.SUCCESS_METHOD,
      'level': intervals.LEVEL,
      'pool': None if prior is None else prior.to_json(),
    },
    'alpha': alpha,
    'rows': rows,
    'comparisons': _comparisons(rows, alpha) if comparisons else [],
  }


def _examples(record: Any) -> int | None:
  """How many examples a member's score averages ([0, 1] metrics with a known count)."""
  if not record.evaluation.higher_is_better:
    return None
  return record.evaluation.examples_per_score(record.config)


def _fewest(a: int | None, b: int | None) -> int | None:
  return None if a is None or b is None else min(a, b)


def _scores(members: Sequence[Mapping[str, Any]]) -> list[float]:
  return [m['score'] for m in members if m['score'] is not None]


def _row(group: dict[str, Any], prior: intervals.Pool | None) -> dict[str, Any]:
  members = group['members']
  scores = _scores(members)
  examples = group['examples_per_score']
  bounded = group['higher_is_better']
  summary = statistics.summarize(scores, group['higher_is_better'])
  if summary is not None:
    summary['mean_ci'] = intervals.mean_interval(scores, examples, prior, bounded, group['chance'])
    summary['interval'] = intervals.method_of(examples)
  success = [float(m['success']) for m in members]
  lengths = sorted({n for m in members for n in m['passes_by_length']})
  measured = [m for m in members if m['longest'] is not None]
  longest_stats = statistics.longest_summary(
    [m['longest'] for m in measured],
    [m['longest_censored'] for m in measured],
    group['train_length'],
  )
  by_pair = {
    (m['seed'], m['data_seed']): m['score']
    for m in members
    if m['score'] is not None and m['data_seed'] is not None
  }
  return {
    **{k: v for k, v in group.items() if k != 'members'},
    'members': len(members),
    'diverged': sum(m['diverged'] for m in members),
    'score': summary,
    'success': {
      'rate': float(np.mean(success)),
      'successes': int(sum(success)),
      'ci': intervals.success_interval(int(sum(success)), len(success)),
      'interval': intervals.SUCCESS_METHOD,
    },
    'success_by_length': {
      str(n): float(np.mean([m['passes_by_length'].get(n, False) for m in members]))
      for n in lengths
    },
    'longest_generalized': longest_stats,
    'variance': statistics.variance_components(by_pair),
    'member_scores': [
      {
        'seed': m['seed'],
        'data_seed': m['data_seed'],
        'score': m['score'],
        'longest': m['longest'],
        'longest_censored': m['longest_censored'],
        'success': m['success'],
        # Where its training curve is: `launch.report` draws every member's there.
        'training_curve': {'file': training.file_name(group['task']), 'series': training.series(m)},
      }
      for m in members
    ],
  }


def _comparisons(rows: Sequence[dict[str, Any]], alpha: float) -> list[dict[str, Any]]:
  """Every pair of columns of one task, family and learning rate, decided together: the
  permutation test of the difference of means per pair, Holm over all of them
  (`posenc.statistics.verdicts`)."""
  pairs = []
  for i, a in enumerate(rows):
    for b in rows[i + 1 :]:
      same = (a['task'], a['family'], a['learning_rate'])
      if same == (b['task'], b['family'], b['learning_rate']):
        pairs.append((a, b))
  scored = [(a, b) for a, b in pairs if _row_scores(a) and _row_scores(b)]
  tests = [verdicts.shift_test(_row_scores(a), _row_scores(b)) for a, b in scored]
  decided = iter(verdicts.decide(tests, alpha, [_bounds(a) for a, _ in scored]))
  out = []
  for a, b in pairs:
    head = {
      'task': a['task'],
      'family': a['family'],
      'learning_rate': a['learning_rate'],
      'a': a['column'],
      'b': b['column'],
      'n_a': len(_row_scores(a)),
      'n_b': len(_row_scores(b)),
    }
    if not (_row_scores(a) and _row_scores(b)):
      out.append({**head, 'mean_difference': None, 'verdict': None})
      continue
    d = next(decided)
    better = d['sign'] == ('higher' if a['higher_is_better'] else 'lower')
    verdict = (
      'undecided'
      if d['undecided']
      else 'not separated'
      if not d['rejected']
      else f'{a["column"] if better else b["column"]} better'
    )
    out.append({**head, **d, 'verdict': verdict})
  return out


def _row_scores(row: Mapping[str, Any]) -> list[float]:
  return [m['score'] for m in row['member_scores'] if m['score'] is not None]


def _bounds(row: Mapping[str, Any]) -> tuple[float, float] | None:
  """The differences of means a metric allows: [-1, 1] for a [0, 1] metric."""
  return (-1.0, 1.0) if row['higher_is_better'] else None


# ---------------------------------------------------------------------------------------------
# Markdown and figures.


def _num(x: float | None, scale: float, digits: int = 1) -> str:
  return '–' if x is None else f'{x * scale:.{digits}f}'


def _interval(ci: list[float] | None, scale: float, digits: int = 1) -> str:
  return '' if ci is None else f' [{ci[0] * scale:.{digits}f}, {ci[1] * scale:.{digits}f}]'


def _difference(ci: Sequence[float | None], scale: float, digits: int = 1) -> str:
  """' [a, b]' of a difference interval, an unbounded end as ∞."""
  end = lambda x, sign: f'{sign}∞' if x is None else f'{x * scale:.{digits}f}'
  return f' [{end(ci[0], "-")}, {end(ci[1], "")}]'


def _lengths_text(lengths: Sequence[int], limit: int = 12) -> str:
  """'17, 19, 22, ..., 64 (17 lengths)' for a long list, else every length."""
  if len(lengths) <= limit:
    return ', '.join(map(str, lengths))
  shown = ', '.join(map(str, lengths[: limit - 2]))
  return f'{shown}, …, {lengths[-1]} ({len(lengths)} lengths)'


def _longest_text(lg: Mapping[str, Any] | None) -> str:
  """'29 [22, ≥ 64] (1.81×)', '≥ 64 (every evaluated length)' when every member passed
  every length; '≥' marks a lower bound."""
  if lg is None:
    return '–'
  at = lambda key: f'{"≥ " if lg["lower_bound"][key] else ""}{lg[key]:g}'
  if lg['censored'] == lg['n']:
    return f'≥ {lg["min"]:g} (every evaluated length)'
  bound = '≥ ' if lg['lower_bound']['median'] else ''
  return (
    f'{at("median")} [{at("q25")}, {at("q75")}] ({bound}'
    f'{lg["ratio_to_train_length"]:.2f}×); {lg["censored"]}/{lg["n"]} pass every '
    'evaluated length'
  )


def markdown(card: Mapping[str, Any], max_lengths: int = 12) -> str:
  """The scorecard as markdown: per task, a row per column (and family, learning rate), its
  pairwise comparisons, and the share of members passing by length."""
  lines = _preamble(card)
  for task in sorted({r['task'] for r in card['rows']}):
    rows = [r for r in card['rows'] if r['task'] == task]
    lower = not rows[0]['higher_is_better']
    scale, digits = (1, 3) if lower else (100, 1)
    lines += _score_table(task, rows, lower, scale, digits)
    lines += _row_notes(task, rows, lower, scale)
    pairs = [c for c in card['comparisons'] if c['task'] == task]
    lines += _comparison_table(pairs, scale, digits)
    lines += _length_table(rows, max_lengths)
  return '\n'.join(lines)


def _preamble(card: Mapping[str, Any]) -> list[str]:
  """What every table of the scorecard shows: statistics, intervals, thresholds, tests."""
  t = card['thresholds']
  pool = card['intervals']['pool']
  return [
    '# Robustness scorecard',
    '',
    f'Per row, over its members (seeds and data orders): scores in % (perplexity as '
    f'is); sd is the sample standard deviation (ddof 1). Intervals of means [in brackets] '
    f'are 95%: {card["intervals"]["mean"]}'
    + (
      ''
      if pool is None
      else f' (pooled over {pool["cells"]} rows: dispersion {pool["dispersion"]:.4f})'
    )
    + f', where a score is a mean over a known number of examples; else '
    f'{card["intervals"]["mean_without_examples"]}. Intervals of success rates: 95% '
    f'{card["intervals"]["success"]}. "max (published)" is the '
    f'statistic papers report. Success: score >= {t["score"] * 100:g}% (perplexity: '
    f'within {t["tolerance"] * 100:g}% of the training length\'s); longest '
    f'generalized: the largest test length up to which the metric stays >= '
    f'{t["length"] * 100:g}% (perplexity: within the tolerance), with its ratio to the '
    'training length; "≥ n" is a lower bound: members that pass every evaluated '
    'length are counted at the longest one. Comparisons: a two-sided permutation test of '
    'the difference of means per pair, Holm over every pair of the scorecard at '
    f'family-wise level {card["alpha"]:g}; each difference\'s interval inverts the same '
    'test at the level Holm decided it at, so it excludes 0 exactly when the pair is '
    'separated.',
    '',
  ]


def _score_table(
  task: str, rows: Sequence[Mapping[str, Any]], lower: bool, scale: float, digits: int
) -> list[str]:
  """A task's heading, what its scores average, and its table of rows' statistics."""
  lines = [
    f'## {task} ({rows[0]["metric"]}, trained up to length {max(r["train_length"] for r in rows)})',
    '',
  ]
  bases = {(r['score_basis']['what'], tuple(r['score_basis']['lengths'])) for r in rows}
  for what, lengths in sorted(bases):
    lines.append(
      f'Score: {what}, lengths {_lengths_text(lengths)}.'
      + (
        ''
        if len(bases) == 1
        else ' Columns: '
        + ', '.join(
          r['column']
          for r in rows
          if (r['score_basis']['what'], tuple(r['score_basis']['lengths'])) == (what, lengths)
        )
        + '.'
      )
    )
  lines += [
    '',
    '| column | family | lr | members | mean ± sd [95% CI] | median [IQR] | '
    f'{"min" if lower else "max"} (published) | {"max" if lower else "min"} | '
    'success [95% CI] | longest generalized: median [IQR] (× train) |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ]
  for r in rows:
    s = r['score']
    if s is None:
      stats_cells = ['all diverged'] + ['–'] * 3
    else:
      sd = '' if s['sd'] is None else f' ± {_num(s["sd"], scale, digits)}'
      mean_ci = _interval(s['mean_ci'], scale, digits)
      stats_cells = [
        f'{_num(s["mean"], scale, digits)}{sd}{mean_ci}',
        f'{_num(s["median"], scale, digits)} [{_num(s["q25"], scale, digits)}, '
        f'{_num(s["q75"], scale, digits)}]',
        _num(s['published'], scale, digits),
        _num(s['max'] if lower else s['min'], scale, digits),
      ]
    success = r['success']
    lines.append(
      f'| {r["column"]} | {r["family"]} | {r["learning_rate"]:g} | '
      f'{r["members"] - r["diverged"]}/{r["members"]} | '
      + ' | '.join(stats_cells)
      + f' | {_num(success["rate"], 100)}% ({success["successes"]}/{r["members"]})'
      f'{_interval(success["ci"], 100)} | {_longest_text(r["longest_generalized"])} |'
    )
  lines.append('')
  return lines


def _row_notes(
  task: str, rows: Sequence[Mapping[str, Any]], lower: bool, scale: float
) -> list[str]:
  """Under a task's table: each row's variance components, and the members that failed."""
  lines = []
  for r in rows:
    v = r['variance']
    if v:
      lines.append(
        f'- {r["column"]} ({r["family"]}, lr {r["learning_rate"]:g}): variance '
        f'of the seed means {v["seed_variance"] * scale**2:.2f}, of the '
        f'data-order means {v["data_order_variance"] * scale**2:.2f}, residual '
        f'{v["residual_variance"] * scale**2:.2f} ({v["seeds"]} seeds × '
        f'{v["data_seeds"]} data orders{", in %²" if not lower else ""}).'
      )
  failing = []
  for r in rows:
    names = [m['training_curve']['series'] for m in r['member_scores'] if not m['success']]
    if names:
      every = len(names) == len(r['member_scores']) and len(names) > 1
      failing.append(
        f'{r["column"]}: ' + (f'all {len(names)}' if every else ', '.join(f'({n})' for n in names))
      )
  if failing:
    lines.append(
      f'- Members that did not succeed: {"; ".join(failing)}; their training curves are in '
      f'{training.file_name(task)} (with the report\'s figures).'
    )
  return lines


def _comparison_table(pairs: Sequence[Mapping[str, Any]], scale: float, digits: int) -> list[str]:
  """A task's pairwise comparisons (none: no table)."""
  if not pairs:
    return []
  lines = [
    '',
    '| A | B | family | lr | mean A − B [interval at its Holm level] | verdict | p | '
    'Holm-adjusted p | test |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  for c in pairs:
    if c['verdict'] is None:
      lines.append(
        f'| {c["a"]} | {c["b"]} | {c["family"]} | {c["learning_rate"]:g} | – |' + ' – |' * 4
      )
      continue
    lines.append(
      f'| {c["a"]} | {c["b"]} | {c["family"]} | {c["learning_rate"]:g} | '
      f'{_num(c["mean_difference"], scale, digits)}{_difference(c["ci"], scale, digits)} | '
      f'{c["verdict"]} | {c["p_value"]:.3g}'
      + (f' ± {c["p_se"]:.1g}' if c.get('p_se') else '')
      + f' | {c["adjusted_p"]:.3g} | {c["test"]} |'
    )
  return lines


def _length_table(rows: Sequence[Mapping[str, Any]], max_lengths: int) -> list[str]:
  """The share of each row's members passing at (at most `max_lengths` of) the lengths."""
  lengths = sorted({int(n) for r in rows for n in r['success_by_length']})
  if len(lengths) > max_lengths:
    picks = np.linspace(0, len(lengths) - 1, max_lengths).round().astype(int)
    lengths = sorted({lengths[i] for i in picks})
  lines = [
    '',
    f'Share of members passing, by length ({len(lengths)} of the lengths):',
    '',
    '| length | ' + ' | '.join(r['column'] for r in rows) + ' |',
    '|---|' + '---|' * len(rows),
  ]
  for n in lengths:
    mark = '*' if n > max(r['train_length'] for r in rows) else ''
    lines.append(
      f'| {n}{mark} | '
      + ' | '.join(_num(r['success_by_length'].get(str(n)), 100) for r in rows)
      + ' |'
    )
  lines += ['', '* past the training length.', '']
  return lines


def files(card: Mapping[str, Any], figures: bool = True) -> dict[str, bytes]:
  """scorecard.json, scorecard.md and one scorecard_<task>.png per task."""
  out = {FILE_JSON: (json.dumps(card, indent=1) + '\n').encode(), FILE_MD: markdown(card).encode()}
  if figures:
    for task in sorted({r['task'] for r in card['rows']}):
      out[f'scorecard_{task}.png'] = scorecard_figure.png(card, task)
  return out


def section(
  records: Sequence[tuple[Any, Any]], thresholds: Thresholds = Thresholds(), figures: bool = True
) -> core.Section:
  """The scorecard of `records` as a report's section ('scorecard': scorecard.md,
  scorecard.json and, with `figures`, scorecard_<task>.png)."""
  card = scorecard(records, thresholds)
  out = files(card, figures=figures)
  plots_made = sum(name.startswith('scorecard_') for name in out)
  return core.Section(
    {'scorecard': markdown(card)},
    out,
    tables=(FILE_MD, FILE_JSON),
    figures=(core.counted(plots_made, 'scorecard figure'),),
  )
