"""Test-time interventions on a trained run: change how positions are read at evaluation,
keep the weights, and measure the metric by length before and after.

  position_interpolation  RoPE positions p -> p / scale (Chen et al. 2023)
  ntk                     RoPE base b -> b scale^(K/(K-2)) ("NTK-aware" scaling)
  yarn                    RoPE frequencies by parts and logits x (0.1 ln scale + 1)^2
                          (Peng et al. 2023), against the original length L, as the
                          authors' code and LM libraries compute it (a ramp over the
                          dimension index)
  yarn_paper              the same with the ramp over turns of the paper's equation
  scalable_softmax        each query's logits x s ln n, n the keys it attends (Nakanishi
                          2025; the attention temperature of `model.temperature`)
  ordered_positions       a randomized encoding read at the positions 0..T-1 instead of a
                          random draw (Ruoss et al.'s reference keeps drawing at test time)
  slope_scale             ALiBi's slopes, or a bias family's whole bias, x scale

Each is a config change that only evaluation sees: an encoding's test-time options
(`Encoding.test_options`; the math is one small function in `posenc/encodings`), the
model's temperature, or the randomized encoding's standard twin, which has the same
parameters. Each is the identity at its neutral setting: scale 1; for scalable_softmax
s = 1 / ln N, so that s ln n = 1 at the training length N (an encoder at length N, whose
queries all attend N keys, is then unchanged). Defaults, when a parameter is not given:
scale = M / N (the longest evaluated length over the training length; slope_scale N / M),
L = N, s = 1 / ln N.

Example:
  >>> config = config_lib.base_config()
  >>> config.encoding = 'rotary'
  >>> spec = parse('yarn:scale=4')
  >>> spec
  ('yarn', {'scale': 4.0})
  >>> after = apply(setup.build(config), *spec)   # the config evaluation runs with
  >>> after.encoding_options.rope_scaling
  'yarn'
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from typing import Any, Callable, Mapping

import jax
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc import encodings
from posenc.training import protocol as protocol_lib
from posenc.training import run as run_lib
from posenc import setup
from posenc import suggest


class InterventionError(ValueError):
  """A bad intervention name or parameter, or one that does not apply to the run."""


@dataclasses.dataclass(frozen=True)
class Intervention:
  """One intervention: its parameters and their defaults (a function of the run), which
  runs it applies to (`applies`: run -> None, or why not), and the config change."""

  doc: str
  defaults: Callable[[run_lib.Run], dict[str, float]]
  applies: Callable[[run_lib.Run], str | None]
  change: Callable[[run_lib.Run, Mapping[str, float]], dict[str, Any]]


def _ratio(run: run_lib.Run) -> float:
  """M / N: the longest evaluated length (the protocol's) over the training length."""
  n = run.train_settings.max_length
  return max(run.protocol.longest_length(run), n) / n


def _takes(option: str) -> Callable[[run_lib.Run], str | None]:
  def applies(run):
    if option in run.encoding.test_options:
      return None
    takers = [n for n, e in encodings.ENCODINGS.items() if option in e.test_options]
    return f'encoding {run.config.encoding!r} has no {option}; it applies to {", ".join(takers)}'

  return applies


def _rope(kind: str) -> Callable[..., dict[str, Any]]:
  def change(run, p):
    del run
    return {
      'encoding_options.rope_scaling': kind,
      'encoding_options.rope_factor': p['scale'],
      'encoding_options.rope_original_length': int(p.get('original_length', 0)),
    }

  return change


def _twin(name: str) -> str:
  return name.removeprefix('randomized_')


def _randomized(run: run_lib.Run) -> str | None:
  if run.encoding.randomized and _twin(run.config.encoding) in encodings.ENCODINGS:
    return None
  names = [n for n, e in encodings.ENCODINGS.items() if e.randomized]
  return (
    f'encoding {run.config.encoding!r} is not randomized; ordered_positions applies to '
    + ', '.join(names)
  )


def _ordered(run: run_lib.Run, p: Mapping[str, float]) -> dict[str, Any]:
  del p
  twin = encodings.get(_twin(run.config.encoding))
  taken = set(twin.attention_options + twin.embedding_options + twin.test_options)
  options = {k: v for k, v in run.config.encoding_options.to_dict().items() if k in taken}
  return {'encoding': _twin(run.config.encoding), 'encoding_options': options}


def _no_temperature(run: run_lib.Run) -> str | None:
  temperature = run.model_settings.temperature
  if temperature not in (None, 'none'):
    return (
      f'the run already has an attention temperature (model.temperature={temperature}); '
      'scalable_softmax replaces none'
    )
  return None


def _lengths(run: run_lib.Run) -> dict[str, float]:
  return {'scale': _ratio(run), 'original_length': float(run.train_settings.max_length)}


INTERVENTIONS: dict[str, Intervention] = {
  'position_interpolation': Intervention(
    'RoPE positions p -> p / scale',
    lambda r: {'scale': _ratio(r)},
    _takes('rope_scaling'),
    _rope('pi'),
  ),
  'ntk': Intervention(
    'RoPE base b -> b scale^(K/(K-2))',
    lambda r: {'scale': _ratio(r)},
    _takes('rope_scaling'),
    _rope('ntk'),
  ),
  'yarn': Intervention(
    'RoPE frequencies by parts (a ramp over the dimension index, as the authors\' code) '
    'against length L, logits x (0.1 ln scale + 1)^2',
    _lengths,
    _takes('rope_scaling'),
    _rope('yarn'),
  ),
  'yarn_paper': Intervention(
    "YaRN with the paper's ramp over the turns r = L f / 2π",
    _lengths,
    _takes('rope_scaling'),
    _rope('yarn_paper'),
  ),
  'scalable_softmax': Intervention(
    'logits x s ln n (n the keys a query attends)',
    lambda r: {'s': 1 / math.log(max(r.train_settings.max_length, 2))},
    _no_temperature,
    lambda c, p: {'model.temperature': 'fixed', 'model.temperature_beta': p['s']},
  ),
  'ordered_positions': Intervention(
    'a randomized encoding at positions 0..T-1 (its standard twin, same weights)',
    lambda r: {},
    _randomized,
    _ordered,
  ),
  'slope_scale': Intervention(
    "ALiBi's slopes or a bias family's bias x scale",
    lambda r: {'scale': 1 / _ratio(r)},
    _takes('slope_scale'),
    lambda c, p: {'encoding_options.slope_scale': p['scale']},
  ),
}


def parse(text: str) -> tuple[str, dict[str, float]]:
  """'NAME[:k=v,...]' -> (name, {k: float(v)}).

  Raises:
    InterventionError: an unknown name, a malformed or non-numeric parameter.
  """
  name, _, rest = text.partition(':')
  if name not in INTERVENTIONS:
    raise InterventionError(
      f'unknown intervention {name!r}{suggest.did_you_mean(name, INTERVENTIONS)}; valid: {", ".join(INTERVENTIONS)}'
    )
  params = {}
  for item in filter(None, rest.split(',')):
    key, eq, value = item.partition('=')
    if not eq:
      raise InterventionError(f'intervention parameter {item!r} is not key=value')
    try:
      params[key.strip()] = float(value)
    except ValueError:
      raise InterventionError(f'intervention parameter {key}={value!r} is not a number') from None
  return name, params


def resolve(run: run_lib.Run, name: str, params: Mapping[str, float]) -> dict[str, float]:
  """The intervention's parameters for `run`: its defaults, overridden by `params`.

  Raises:
    InterventionError: it does not apply to the run, or a parameter is unknown or out of
      range (every parameter is a positive number; original_length an integer >= 2).
  """
  intervention = INTERVENTIONS[name]
  why = intervention.applies(run)
  if why:
    raise InterventionError(why)
  out = intervention.defaults(run)
  unknown = sorted(set(params) - set(out))
  if unknown:
    raise InterventionError(
      f'unknown parameter {unknown[0]!r} of {name}; valid: {", ".join(out) or "none"}'
    )
  out.update(params)
  for key, value in out.items():
    if not (math.isfinite(value) and value > 0):
      raise InterventionError(f'{name} {key}={value:g} must be a positive number')
  if 'original_length' in out and (
    out['original_length'] < 2 or out['original_length'] != int(out['original_length'])
  ):
    raise InterventionError(
      f'{name} original_length={out["original_length"]:g} must be an integer >= 2'
    )
  return out


def apply(run: run_lib.Run, name: str, params: Mapping[str, float]) -> ml_collections.ConfigDict:
  """The config evaluation runs with: the run's config changed by the intervention
  (resolved)."""
  change = INTERVENTIONS[name].change(run, resolve(run, name, params))
  out = config_lib.cell_config(
    run.config, {k: v for k, v in change.items() if k != 'encoding_options'}
  )
  if 'encoding_options' in change:
    out.encoding_options = ml_collections.ConfigDict(change['encoding_options'])
  return out


# ---------------------------------------------------------------------------------------------
# Before and after, on a saved run.


def evaluate_with(
  run: run_lib.Run, state: Any, progress: Callable[[str], None] = lambda line: None
) -> Any:
  """The protocol's evaluation record of the population `state` under `run` (in a scratch
  directory: nothing of the saved run is touched)."""
  state = state.replace(params=jax.device_put(state.params, run.population.sharded))
  with tempfile.TemporaryDirectory() as scratch:
    return run.protocol.evaluate(run, state, protocol_lib.EvalContext(scratch, progress))


def intervene(
  workdir: str,
  name: str,
  params: Mapping[str, float],
  progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
  """The run's metric by length before and after the intervention, per member and as the
  mean over the members that did not diverge.

  Raises:
    InterventionError: no run, no checkpoint, or a bad intervention for this run.
  """
  try:
    run, state, step = setup.restore(workdir, progress=progress)
  except setup.RunError as e:
    raise InterventionError(str(e)) from None
  config = run.config
  resolved = resolve(run, name, params)
  try:
    changed = setup.build(apply(run, name, params))
  except config_lib.ConfigError as e:
    raise InterventionError(f'{name} cannot run on {workdir}: {e}') from None
  before = evaluate_with(run, state, progress)
  after = evaluate_with(changed, state, progress)
  family = run.family.name
  curves = lambda record: [record.curve(m, family) for m in record.members]
  mean = lambda record: _mean_curve(record, family)
  return {
    'workdir': workdir,
    'step': step,
    'intervention': name,
    'params': resolved,
    'task': config.task,
    'encoding': config.encoding,
    'metric': before.metric_of(family),
    'train_length': run.train_settings.max_length,
    'members': [
      {k: getattr(m, k) for k in ('seed', 'data_seed', 'learning_rate', 'diverged')}
      for m in before.members
    ],
    'before': {'mean': mean(before), 'members': _json_curves(curves(before))},
    'after': {'mean': mean(after), 'members': _json_curves(curves(after))},
  }


def _mean_curve(record: Any, family: str) -> dict[str, float | None]:
  live = [record.curve(m, family) for m in record.members if not m.diverged]
  lengths = sorted({n for c in live for n in c})
  return {
    str(n): (float(np.nanmean([c.get(n, np.nan) for c in live])) if live else None) for n in lengths
  }


def _json_curves(curves: list[dict[int, float]]) -> list[dict[str, float | None]]:
  return [{str(n): None if not math.isfinite(v) else v for n, v in c.items()} for c in curves]


def past_training(result: Mapping[str, Any]) -> dict[str, Any] | None:
  """Before and after over the lengths past training: each member's mean over them, then
  their mean and sample sd over the members that did not diverge (None without such a
  length or member)."""
  lengths = sorted(int(n) for n in result['before']['mean'] if int(n) > result['train_length'])
  alive = [i for i, m in enumerate(result['members']) if not m['diverged']]
  if not lengths or not alive:
    return None

  def stats_of(side):
    scores = [np.mean([side['members'][i][str(n)] for n in lengths]) for i in alive]
    return {
      'mean': float(np.mean(scores)),
      'sd': float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0,
    }

  return {
    'lengths': lengths,
    'members': len(alive),
    'before': stats_of(result['before']),
    'after': stats_of(result['after']),
  }


def markdown(result: Mapping[str, Any]) -> str:
  """Before and after by length (mean over the members that did not diverge)."""
  params = ', '.join(f'{k}={v:g}' for k, v in result['params'].items()) or 'no parameters'
  higher = result['metric'] != 'perplexity'
  scale, digits = (100, 1) if higher else (1, 3)
  lines = [
    f'# {result["intervention"]} ({params}) on {result["task"]} / {result["encoding"]}',
    '',
    f'{result["metric"]}{" (%)" if higher else ""} by length, mean over the '
    f'members that did not diverge; trained up to length {result["train_length"]}.',
    '',
  ]
  summary = past_training(result)
  if summary:
    text = lambda s: f'{s["mean"] * scale:.{digits}f} ± {s["sd"] * scale:.{digits}f}'
    lines += [
      f'Past training (lengths {summary["lengths"][0]}–{summary["lengths"][-1]}, each '
      f'member\'s mean, then mean ± sd over {summary["members"]} members): before '
      f'{text(summary["before"])}, after {text(summary["after"])}.',
      '',
    ]
  lines += ['| length | before | after | change |', '|---|---|---|---|']
  for n, b in result['before']['mean'].items():
    a = result['after']['mean'].get(n)
    if b is None or a is None:
      continue
    mark = '*' if int(n) > result['train_length'] else ''
    lines.append(
      f'| {n}{mark} | {b * scale:.{digits}f} | {a * scale:.{digits}f} | '
      f'{(a - b) * scale:+.{digits}f} |'
    )
  lines += ['', '* past the training length.', '']
  return '\n'.join(lines)
