"""How often the intervals posenc prints cover what they estimate, measured by simulation.

The mean of a cell is simulated as a suite produces it: n members, each with a true rate p
drawn from a between-member distribution, each scored on N examples (its score a binomial
mean, k / N with k ~ Binomial(N, p)); the interval should cover E[p]. The truths:

  normal           member scores N(0.5, 0.1^2), no examples level (the textbook case)
  near 100, near 0, middle
                   Beta rates of mean 97%, 3% and 50% with the pooled between-member
                   dispersion of the stored baselines (skewed and bounded near 0 and 100)
  stored cells     one truth per stored cell of a suite (its mean; its dispersion moderated
                   towards the pool, the estimate of its spread that 3 members support)
  stored cells, own members
                   each stored cell's own members as the population: n of its member
                   scores drawn with replacement, the truth their mean, judged by the pool
                   of the other cells (as a candidate's cells are): the discrete low members
                   of the cells near 100 (dape's even_pairs: eleven at 97-100%, one at 79%)
  failure mixtures a fraction f = 5, 10, 20% of members at the task's chance level (a run
                   that failed), the rest near 100 (rates Beta of mean 99%, sd 1%)
  stored cells, as measured (stress)
                   the same cells with each cell's own dispersion taken as the truth: the
                   most skewed (two members at 100%, one at 87%) has a tail of failures that
                   n members often miss entirely, which no interval built from them covers

For each truth and n, `draws` samples are drawn (seeded: the table is reproducible) and every
method's interval computed on the same samples. The chosen method must cover THRESHOLD on
every truth but the stress ones and the two families of failures at every n, and
FAILURE_THRESHOLD on those two at every n from FAILURE_FROM (they are drawn at n = 3..16).
Success rates are binomial counts of n members, so their coverage is computed exactly over a
grid of rates instead.

Example (three stored cells, (name, member scores, N); `launch.benchmark --coverage` draws
4000 per truth and n):
  >>> cells = [('even_pairs', [0.9, 0.85, 0.95], 416), ('parity_check', [0.5, 0.52, 0.49], 416),
  ...          ('reverse_string', [1.0, 1.0, 0.97], 416)]
  >>> truths, prior = truths_of(cells, 416, chance={'even_pairs': 0.5, 'parity_check': 0.5})
  >>> result = simulate(truths, prior, ns=[3], draws=200, examples=416)
  >>> summary(result)['near 100'][CHOSEN]['3']['coverage']
  1.0
  >>> print(markdown(result))
  200 draws per truth and n (seed 0); members scored on 416 examples; pooled dispersion ...
  ...
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from posenc.statistics import intervals

CHOSEN = 'Korn-Graubard, floors and unseen failures'
BEFORE = 'Korn-Graubard, pooled and level floors'
THRESHOLD = 0.93  # what the chosen method must reach on every truth but the stress ones
# ... and on the families of failures, at every n from FAILURE_FROM.
FAILURE_THRESHOLD, FAILURE_FROM = 0.90, 6
OWN_MEMBERS, MIXTURES = 'stored cells, own members', 'failure mixtures'
FAILURE_FAMILIES = (OWN_MEMBERS, MIXTURES)
FAILURE_NS = range(3, 17)  # the n the failure families are drawn at
FAILURE_RATES = (0.05, 0.1, 0.2)


@dataclasses.dataclass(frozen=True)
class Truth:
  """A between-member distribution: `family` groups truths in the table (its rows);
  `rates` draws member rates ([draws, n], in [0, 1]), which are scored on `examples`
  examples, or with `scored` are the member scores themselves (`examples` then what the
  methods are told: None, the table's N)."""

  family: str
  name: str
  mean: float
  rates: Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
  examples: float | None  # None: the rates are the scores, the methods told the table's N
  stress: bool = False
  prior: intervals.Pool | None = None  # the pool its samples are judged by; None: the table's
  chance: float = 0.0  # its task's chance level: where unseen failures score
  scored: bool = False  # the rates are the scores (drawn members), not scored again
  ns: tuple[int, ...] | None = None  # the n it is drawn at (None: every n of the table)


def beta_truth(family: str, name: str, mean: float, phi: float, examples: float, **kw) -> Truth:
  """Member rates ~ Beta of `mean` whose beta-binomial score over `examples` examples has
  total dispersion `phi` (between-member rho = (phi - 1/N) / (1 - 1/N); rho <= 0: every
  member's rate is `mean`)."""
  rho = (phi - 1 / examples) / (1 - 1 / examples)
  if rho <= 1e-9:
    rates = lambda rng, shape: np.full(shape, mean)
  else:
    a, b = mean * (1 / rho - 1), (1 - mean) * (1 / rho - 1)
    rates = lambda rng, shape: rng.beta(a, b, shape)
  return Truth(family, name, mean, rates, examples, **kw)


def own_members_truth(name: str, scores: Sequence[float], examples: float, **kw) -> Truth:
  """The cell's own member scores as the population: n drawn with replacement."""
  x = np.asarray(scores, np.float64)
  rates = lambda rng, shape: rng.choice(x, shape)
  return Truth(OWN_MEMBERS, name, float(x.mean()), rates, examples, scored=True, **kw)


def mixture_truth(fraction: float, chance: float, examples: float, **kw) -> Truth:
  """A `fraction` of members at rate `chance` (runs that failed), the rest at rates Beta of
  mean 99% and sd 1% (a+b = 98)."""
  success = 0.99
  a, b = success * 98, (1 - success) * 98

  def rates(rng, shape):
    failed = rng.random(shape) < fraction
    return np.where(failed, chance, rng.beta(a, b, shape))

  mean = (1 - fraction) * success + fraction * chance
  name = f'{100 * fraction:g}% at chance {100 * chance:g}%'
  return Truth(MIXTURES, name, mean, rates, examples, chance=chance, **kw)


def _task(cell_name: str) -> str:
  """The task of a stored cell's name ('encoding/task', or the task alone)."""
  return cell_name.rsplit('/', 1)[-1]


def truths_of(
  cells: Sequence[tuple[str, Sequence[float], float]],
  examples: float,
  leave_one_out: bool = False,
  chance: Mapping[str, float] | None = None,
) -> tuple[list[Truth], intervals.Pool]:
  """The truths of the table from a suite's stored cells ([(name, member scores, examples)],
  names 'encoding/task') and its pool; `examples` the N of the stylized truths and the
  mixtures; `chance` the chance level of each task ({task: level}; 0 for a task it does not
  name): where a cell's unseen failures score, and the mixtures' failures. With
  `leave_one_out` each stored cell's samples are judged by the pool of the other cells, as a
  candidate's are (its own cell is not among the baselines); else by the pool of all (as
  baselines.md's are). The own-members truths are always judged by the other cells' pool."""
  chance = dict(chance or {})
  prior = intervals.pool([(s, e) for _, s, e in cells])
  if prior is None:
    raise ValueError('the coverage table needs 3 or more stored cells of 2 or more members')
  others = lambda i: intervals.pool([(s, e) for j, (_, s, e) in enumerate(cells) if j != i])
  level_of = lambda name: chance.get(_task(name), 0.0)
  levels = sorted({level_of(name) for name, _, _ in cells})
  # The generic truths' unseen failures at the lowest chance level of the suite's tasks.
  lowest = levels[0]
  normal = lambda rng, s: rng.normal(0.5, 0.1, s)
  out = [Truth('normal 50 ± 10', 'normal', 0.5, normal, None, chance=lowest)]
  for family, mean in (('near 100', 0.97), ('near 0', 0.03), ('middle', 0.5)):
    out.append(beta_truth(family, family, mean, prior.dispersion, examples, chance=lowest))
  own = []
  for i, (name, scores, n_examples) in enumerate(cells):
    judged_by = others(i) if leave_one_out else None
    x = np.asarray(scores, np.float64)
    total = len(x) * n_examples
    mean = float((total * x.mean() + 2) / (total + 4))
    phi = float(intervals.dispersion(x[None], n_examples)[0])
    # The cell's spread as its 2 degrees of freedom and the pool's prior support it
    # (Smyth's posterior dispersion): one outlying member moves it only part of the way.
    d0 = prior.prior_df
    moderated = (
      prior.dispersion
      if np.isinf(d0)
      else (d0 * prior.dispersion + (len(x) - 1) * phi) / (d0 + len(x) - 1)
    )
    kw = dict(prior=judged_by, chance=level_of(name))
    out.append(beta_truth('stored cells', name, mean, moderated, n_examples, **kw))
    out.append(
      beta_truth(
        'stored cells, as measured (stress)', name, mean, phi, n_examples, stress=True, **kw
      )
    )
    own.append(
      own_members_truth(
        name, x, n_examples, prior=others(i), chance=level_of(name), ns=tuple(FAILURE_NS)
      )
    )
  out += own
  for level in levels:
    for fraction in FAILURE_RATES:
      out.append(mixture_truth(fraction, level, examples, ns=tuple(FAILURE_NS)))
  return out, prior


# ---------------------------------------------------------------------------------------------
# The methods: (scores [draws, n], examples, pool, chance) -> (low, high), each [draws].


def _bootstrap(x, examples, prior, chance, resamples=1000):
  del examples, prior, chance
  low, high = np.empty(len(x)), np.empty(len(x))
  for start in range(0, len(x), 250):  # bounded memory: 250 x resamples x n at a time
    part = x[start : start + 250]
    spread = part.std(-1) > 0
    low[start : start + 250] = high[start : start + 250] = part.mean(-1)
    if spread.any():
      ci = stats.bootstrap(
        (part[spread],),
        np.mean,
        axis=-1,
        n_resamples=resamples,
        method='percentile',
        rng=np.random.default_rng(0),
      ).confidence_interval
      low[start : start + 250][spread], high[start : start + 250][spread] = ci.low, ci.high
  return low, high


def _t(x, examples, prior, chance):
  del examples, prior, chance
  return intervals.t_interval(x)


def _t_floor(x, examples, prior, chance):
  del prior, chance
  n = x.shape[-1]
  total = n * examples
  p = (total * x.mean(-1) + 2) / (total + 4)
  se = np.sqrt(np.maximum(x.var(-1, ddof=1), p * (1 - p) / examples) / n)
  half = stats.t.ppf(0.975, n - 1) * se
  return np.clip(x.mean(-1) - half, 0, 1), np.clip(x.mean(-1) + half, 0, 1)


def _kg(x, examples, prior, chance):
  del prior, chance
  phi = intervals.dispersion(x, examples)
  return intervals.effective_clopper_pearson(x.mean(-1), phi, x.shape[-1])


def _pooled(x, examples, prior, chance):
  del chance
  phi = intervals.floored(intervals.dispersion(x, examples), x.shape[-1], prior)
  return intervals.effective_clopper_pearson(x.mean(-1), phi, x.shape[-1])


def _before(x, examples, prior, chance):
  del chance
  return intervals.floored_interval(x, examples, prior, None)


def _pooled_failures(x, examples, prior, chance):
  low, high = _pooled(x, examples, prior, chance)
  return intervals.with_failures(low, x.shape[-1], chance), high


def _chosen(x, examples, prior, chance):
  # The card's own function, as it is called for a row.
  return intervals.floored_interval(x, examples, prior, chance)


METHODS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
  'percentile bootstrap (before)': _bootstrap,
  "Student's t": _t,
  "Student's t, binomial floor": _t_floor,
  'Korn-Graubard': _kg,
  'Korn-Graubard, pooled floor': _pooled,
  BEFORE: _before,
  'Korn-Graubard, pooled floor and unseen failures': _pooled_failures,
  CHOSEN: _chosen,
}
# The bootstrap costs resamples x n per draw: measured on the normal and stylized truths only.
BOOTSTRAP_FAMILIES = ('normal 50 ± 10', 'near 100', 'near 0', 'middle')


def _draw(truth: Truth, n: int, draws: int, seed: int, index: int, examples: float):
  rng = np.random.default_rng([seed, index, n])
  rates = truth.rates(rng, (draws, n))
  if truth.examples is None:
    return rates, examples
  if truth.scored:
    return rates, truth.examples
  return rng.binomial(int(truth.examples), rates) / truth.examples, truth.examples


def simulate(
  truths: Sequence[Truth],
  prior: intervals.Pool,
  ns: Sequence[int],
  draws: int,
  examples: float,
  seed: int = 0,
  methods: Sequence[str] | None = None,
) -> dict[str, Any]:
  """Coverage and mean width of every method for every truth and n (each n >= 2).

  Returns {'draws', 'ns', 'pool', 'cells': [{'family', 'name', 'n', 'stress', 'methods':
  {method: {'coverage', 'width'}}}], 'success': `success_coverage(ns)`}; `examples` is the N
  the methods are given for the normal truth (its scores have no examples level).
  """
  methods = list(methods or METHODS)
  rows = []
  for index, truth in enumerate(truths):
    for n in ns:
      if truth.ns is not None and n not in truth.ns:
        continue
      x, n_examples = _draw(truth, n, draws, seed, index, examples)
      out = {}
      for name in methods:
        if name == 'percentile bootstrap (before)' and truth.family not in BOOTSTRAP_FAMILIES:
          continue
        low, high = METHODS[name](x, n_examples, truth.prior or prior, truth.chance)
        # Up to rounding: a mean of members all equal to the truth covers it.
        at = truth.mean + np.array([1e-12, -1e-12])
        out[name] = {
          'coverage': float(np.mean((low <= at[0]) & (at[1] <= high))),
          'width': float(np.mean(high - low)),
        }
      rows.append(
        {
          'family': truth.family,
          'name': truth.name,
          'n': n,
          'stress': truth.stress,
          'methods': out,
        }
      )
  return {
    'draws': draws,
    'seed': seed,
    'ns': list(ns),
    'examples': examples,
    'pool': prior.to_json(),
    'cells': rows,
    'success': success_coverage(ns),
  }


def success_coverage(ns: Sequence[int], grid: int = 199) -> dict[str, Any]:
  """The exact coverage of the success-rate intervals: for each n and method the minimum over
  `grid` rates evenly in (0, 1) of sum_k P(k | n, rate) [rate in CI(k)], and the mean width."""
  rates = np.linspace(0.005, 0.995, grid)
  out = {}
  for name, method in (
    ('Wilson', 'wilson'),
    ('Wilson, continuity correction', 'wilsoncc'),
    ('Clopper-Pearson', 'exact'),
  ):
    per_n = {}
    for n in ns:
      cis = [stats.binomtest(k, n).proportion_ci(0.95, method=method) for k in range(n + 1)]
      low = np.array([c.low for c in cis])[:, None]
      high = np.array([c.high for c in cis])[:, None]
      p = stats.binom.pmf(np.arange(n + 1)[:, None], n, rates[None])
      per_n[str(n)] = {
        'coverage': float((p * ((low <= rates) & (rates <= high))).sum(0).min()),
        'width': float((p * (high - low)).sum(0).mean()),
      }
    out[name] = per_n
  return out


def summary(result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
  """{family: {method: {n: {'coverage': the minimum over the family's truths, 'width': the
  mean}}}}."""
  out: dict[str, Any] = {}
  for row in result['cells']:
    for method, m in row['methods'].items():
      cell = out.setdefault(row['family'], {}).setdefault(method, {}).setdefault(str(row['n']), [])
      cell.append((m['coverage'], m['width']))
  return {
    family: {
      method: {
        n: {'coverage': min(c for c, _ in v), 'width': float(np.mean([w for _, w in v]))}
        for n, v in by_n.items()
      }
      for method, by_n in methods.items()
    }
    for family, methods in out.items()
  }


def required(row: Mapping[str, Any]) -> float | None:
  """The coverage the chosen method must reach on a row of `simulate`: THRESHOLD, or
  FAILURE_THRESHOLD on the failure families from n = FAILURE_FROM; None where nothing is
  required (a stress truth, a failure family below FAILURE_FROM)."""
  if row['stress']:
    return None
  if row['family'] in FAILURE_FAMILIES:
    return FAILURE_THRESHOLD if row['n'] >= FAILURE_FROM else None
  return THRESHOLD


def failures(result: Mapping[str, Any], method: str = CHOSEN) -> list[str]:
  """The (truth, n) where `method` covers less than it must (`required`)."""
  return [
    f'{row["family"]} {row["name"]} n={row["n"]}: {row["methods"][method]["coverage"]:.3f}'
    for row in result['cells']
    if required(row) is not None and row['methods'][method]['coverage'] < required(row)
  ]


def _cell(got: Mapping[str, Mapping[str, float]], n: str) -> str:
  if n not in got:
    return '–'
  return f'{100 * got[n]["coverage"]:.1f} [{100 * got[n]["width"]:.1f}]'


def _worst(s, families: Sequence[str], method: str, ns: Sequence[str]) -> list[str]:
  """Per n the minimum coverage of `method` over `families` [its mean width]."""
  cells = []
  for n in ns:
    got = [s[f][method][n] for f in families if method in s[f] and n in s[f][method]]
    if not got:
      cells.append('–')
      continue
    cover = min(g['coverage'] for g in got)
    width = np.mean([g['width'] for g in got])
    cells.append(f'{100 * cover:.1f} [{100 * width:.1f}]')
  return cells


def markdown(result: Mapping[str, Any]) -> str:
  """The tables: per method and n the minimum coverage over every truth that is neither a
  stress one nor of the failure families, and the mean width; the same over the failure
  families; the chosen method per family; the success-rate intervals."""
  ns = [str(n) for n in result['ns']]
  head = '| | ' + ' | '.join(f'n = {n}' for n in ns) + ' |'
  rule = '|---|' + '---|' * len(ns)
  s = summary(result)
  families = list(s)
  plain = [f for f in families if not f.endswith('(stress)') and f not in FAILURE_FAMILIES]
  failing = [f for f in families if f in FAILURE_FAMILIES]
  pool = result['pool']
  prior_df = 'infinite' if pool['prior_df'] is None else f'{pool["prior_df"]:.1f}'
  lines = [
    f'{result["draws"]:,} draws per truth and n (seed {result["seed"]}); members scored on '
    f'{result["examples"]:g} examples; pooled dispersion {pool["dispersion"]:.4f} with '
    f'{prior_df} prior degrees of freedom, from {pool["cells"]} stored cells'
    + (
      '; each stored cell judged by the pool of the others (leave one out).'
      if result.get('leave_one_out')
      else '.'
    ),
    '',
    'Minimum coverage over every truth but the stress ones and the failure families [mean '
    'width, points]:',
    '',
    '| method | ' + head[4:],
    rule,
  ]
  simulated = {m for f in plain for m in s[f]}
  for method in [m for m in METHODS if m in simulated]:
    note = ' †' if method == 'percentile bootstrap (before)' else ''
    lines.append(f'| {method}{note} | ' + ' | '.join(_worst(s, plain, method, ns)) + ' |')
  lines += ['', '† on the normal and the three stylized truths only (its resamples cost the most).']
  if failing:
    lines += [
      '',
      f'Minimum coverage over the failure families ({", ".join(failing)}; drawn at n = '
      f'{min(FAILURE_NS)}..{max(FAILURE_NS)}) [mean width, points]:',
      '',
      '| method | ' + head[4:],
      rule,
    ]
    for method in [m for m in METHODS if any(m in s[f] for f in failing)]:
      lines.append(f'| {method} | ' + ' | '.join(_worst(s, failing, method, ns)) + ' |')
  lines += [
    '',
    f'{CHOSEN}, per family of truths: minimum coverage [mean width]:',
    '',
    '| truths | ' + head[4:],
    rule,
  ]
  for family in families:
    got = s[family][CHOSEN]
    lines.append(f'| {family} | ' + ' | '.join(_cell(got, n) for n in ns) + ' |')
  stress = [f for f in families if f.endswith('(stress)')]
  if stress:
    lines += [
      '',
      f'Stress truths: the best method there, {_best(s, stress[0], ns)}.',
    ]
  lines += [
    '',
    'Success rates (members passing the threshold), exact minimum coverage over rates in '
    '(0, 1) [mean width]:',
    '',
    '| method | ' + head[4:],
    rule,
  ]
  for method, per_n in result['success'].items():
    lines.append(
      f'| {method} | '
      + ' | '.join(f'{100 * per_n[n]["coverage"]:.1f} [{100 * per_n[n]["width"]:.1f}]' for n in ns)
      + ' |'
    )
  return '\n'.join(lines) + '\n'


def _best(s, family: str, ns: Sequence[str]) -> str:
  """'METHOD, whose minimum coverage is a at n = x ... ' for the method with the highest
  worst case over `ns`."""
  method = max(s[family], key=lambda m: min(s[family][m][n]['coverage'] for n in ns))
  worst = min(ns, key=lambda n: s[family][method][n]['coverage'])
  return (
    f'{method}, covers at worst {100 * s[family][method][worst]["coverage"]:.1f}% (n = {worst})'
  )
