"""Analyses of a trained run: its attention rows, empirical receptive fields, attention
maps and a PCA of its activations.

    >>> run = load_run('runs/parity_check__type1')  # config, task, model, params  # doctest: +SKIP
    >>> rows = attention_rows(run, length=64, examples=8)  # per layer [B,H,T,T]  # doctest: +SKIP
    >>> erf_summary(rows, eps=(0.1, 0.01))  # per layer and head  # doctest: +SKIP

The weights are those of the readable attention definition (`posenc.attention.reference`),
recorded with `sow` by each layer's attention when the 'intermediates' collection is
mutable. Inputs are drawn from the run's task at one length; a sequence task (arithmetic)
draws the cell (length, length).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import config as config_lib
from posenc.analysis import receptive
from posenc.training import run as run_lib
from posenc import setup
from posenc.training import settings
from tasks import base as task_base


class AnalysisError(ValueError):
  """A run that cannot be analysed (no config, no checkpoint, a looped model)."""


@dataclasses.dataclass
class Run:
  """One member of a saved run: the run's objects (`posenc.run_lib.Run`, its model on the
  readable attention backend), that member's parameters, its row and the step."""

  built: run_lib.Run
  params: Any  # one member's parameters
  member: dict[str, Any]
  step: int

  @property
  def config(self) -> ml_collections.ConfigDict:
    return self.built.config

  @property
  def task(self) -> Any:
    return self.built.task

  @property
  def model(self) -> Any:
    return self.built.model


def load_run(
  workdir: str, member: int = 0, progress: Callable[[str], None] = logging.warning
) -> Run:
  """The run in `workdir` at its newest checkpoint that restores (`progress` hears of any
  damaged one), member `member` (seeds × learning rates order), with a model on the
  reference attention backend."""
  try:
    config = setup.read_config(workdir)
    model = settings.ModelSettings.of(config)
    if model.recurrences > 1 or model.loop:
      raise AnalysisError(
        f'{workdir} holds a looped model; attention rows are recorded for plain stacks only'
      )
    members = config_lib.members(config)
    if not 0 <= member < len(members):
      raise AnalysisError(f'--member={member} is not a member of {workdir} (0..{len(members) - 1})')
    built, state, step = setup.restore(workdir, progress=progress)
  except setup.RunError as e:
    raise AnalysisError(str(e)) from None
  params = jax.tree.map(lambda x: np.asarray(x)[member], jax.device_get(state.params))
  return Run(built.with_model(attention_impl='reference'), params, members[member], step)


def _inputs(run: Run, length: int, examples: int, key: jax.Array):
  """(tokens [B, T], lengths, causal) of `examples` inputs at `length` (as training draws)."""
  return run.built.training.inputs(run.built, key, examples, length)


# What `attention_rows` may hold by default: the weights of every layer stay in memory.
MAX_BYTES = 8 * 2**30


def check_inputs(run: Run, length: int, examples: int = 1, max_bytes: float | None = None) -> int:
  """The number of tokens T of an input at `length`, after checking that the run's encoding
  can encode it and (with `max_bytes`) that the attention weights of `examples` inputs fit.

  The weights recorded are float32 [B, H, T, T] per layer, and the forward pass holds about
  two more layers' worth of scores while it runs.

  Raises:
    AnalysisError: T exceeds a bounded encoding's max_position (a learned table, randomized
      positions), or the weights would take more than `max_bytes`.
  """
  tokens = jax.eval_shape(lambda key: _inputs(run, length, 1, key)[0], jax.random.key(0))
  t = int(tokens.shape[1])
  limit = run.model.max_position
  if run.built.encoding.bounded and t > limit:
    raise AnalysisError(
      f'--length={length} gives inputs of {t} tokens, beyond '
      f'model.max_position={limit} of the run\'s encoding '
      f'{run.config.encoding!r} (its positions stop there); use a shorter '
      '--length'
    )
  need = 4.0 * examples * run.model.num_heads * t * t * (run.model.num_layers + 2)
  if max_bytes is not None and need > max_bytes:
    raise AnalysisError(
      f'--length={length} with --examples={examples} needs about {need / 2**30:.1f} GiB '
      f'for the attention weights ({run.model.num_layers} layers x {examples} x '
      f'{run.model.num_heads} heads x {t}^2 float32), above --max_memory_gb='
      f'{max_bytes / 2**30:g}; lower --examples or --length, or raise --max_memory_gb'
    )
  return t


def attention_rows(
  run: Run, length: int, examples: int = 8, seed: int = 0, max_bytes: float | None = MAX_BYTES
) -> dict[str, Any]:
  """Every layer's attention weights on `examples` inputs at `length`.

  Returns {'weights': [per layer float32 [B, H, T, T]], 'hidden': [per layer the layer's
  output [B, T, D]], 'lengths': int [B] (real tokens), 'causal': bool}.

  Raises:
    AnalysisError: see `check_inputs` (`max_bytes=None`: no memory check).
  """
  check_inputs(run, length, examples, max_bytes)
  data_key, noise = jax.random.split(jax.random.key(seed))
  tokens, lengths, causal = _inputs(run, length, examples, data_key)
  _, state = run.model.apply(
    {'params': run.params},
    tokens,
    lengths,
    deterministic=True,
    rngs={'noise': noise, 'dropout': noise},
    mutable=['intermediates'],
  )
  found = {'weights': {}, 'output': {}}
  for path, leaf in jax.tree_util.tree_flatten_with_path(state['intermediates'])[0]:
    names = [str(getattr(p, 'key', getattr(p, 'name', ''))) for p in path]
    layer = next((n for n in names if n.startswith('layer_')), None)
    kind = next((n for n in names if n in found), None)
    if layer is not None and kind is not None:
      found[kind][int(layer[len('layer_') :])] = np.asarray(leaf)
  lengths = np.broadcast_to(np.asarray(lengths), (tokens.shape[0],))
  return {
    'weights': [found['weights'][i] for i in sorted(found['weights'])],
    'hidden': [found['output'][i] for i in sorted(found['output'])],
    'lengths': lengths,
    'causal': causal,
  }


def erf_summary(
  rows: dict[str, Any],
  eps: Sequence[float] = (0.1, 0.01),
  quantiles: Sequence[float] = (0.1, 0.5, 0.9),
) -> dict[str, Any]:
  """The empirical receptive field of every real query, per layer and head: its mean and
  quantiles over queries (and examples), in keys and as a share of the length attended
  (i + 1 keys for query i of a causal model, the real length otherwise).

  Returns {'eps': {str(ε): {'layers': [[{'mean', 'mean_share', 'q10', ...} per head] per
  layer], 'mean_share': float}}}.
  """
  lengths = rows['lengths']
  per_layer = [
    receptive.erf(w, list(eps), rows['causal']).astype(np.float64) for w in rows['weights']
  ]  # [E, B, H, Q] each
  out = {}
  for k, e in enumerate(eps):
    layers = []
    for fields_all in per_layer:
      fields = fields_all[k]
      b, h, q = fields.shape
      real = np.arange(q)[None, :] < lengths[:, None]  # [B, Q]
      span = (
        np.arange(q)[None, :] + 1.0
        if rows['causal']
        else np.broadcast_to(lengths[:, None], (b, q)).astype(np.float64)
      )
      heads = []
      for head in range(h):
        j, share = fields[:, head][real], (fields[:, head] / span)[real]
        heads.append(
          {
            'mean': float(j.mean()),
            'mean_share': float(share.mean()),
            **{f'q{round(100 * p)}': float(np.quantile(j, p)) for p in quantiles},
          }
        )
      layers.append(heads)
    share = float(np.mean([hd['mean_share'] for layer in layers for hd in layer]))
    out[str(e)] = {'layers': layers, 'mean_share': share}
  return {'eps': out}


def attention_map(rows: dict[str, Any], layer: int, example: int = 0) -> np.ndarray:
  """One example's attention at `layer`, the maximum over heads (Ruoss et al. Fig. 6):
  [T, T] over its real tokens."""
  n = int(rows['lengths'][example])
  return rows['weights'][layer][example].max(axis=0)[:n, :n]


def activation_pca(
  fit: dict[str, Any], apply: Sequence[dict[str, Any]], layer: int
) -> dict[str, Any]:
  """A 2-D PCA of `layer`'s activations fitted on the real tokens of `fit` and applied to
  each rows of `apply` (Ruoss et al. Fig. 5: fitted at the training length, applied to
  longer ones). Returns {'explained': [2] variance ratios, 'points': [per entry of apply
  [N, 2]], 'positions': [per entry [N]] (each token's position)}.
  """

  def tokens(rows):
    h = rows['hidden'][layer]
    real = np.arange(h.shape[1])[None, :] < rows['lengths'][:, None]
    pos = np.broadcast_to(np.arange(h.shape[1])[None, :], real.shape)
    return h[real].astype(np.float64), pos[real]

  x, _ = tokens(fit)
  mean = x.mean(axis=0)
  _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
  explained = (s**2 / np.sum(s**2))[:2]
  points, positions = [], []
  for rows in apply:
    y, pos = tokens(rows)
    points.append((y - mean) @ vt[:2].T)
    positions.append(pos)
  return {'explained': explained.tolist(), 'points': points, 'positions': positions}


def prefix_shuffle(run: Run, length: int, examples: int = 256, seed: int = 0) -> dict[str, Any]:
  """The loss at a token when the tokens before it are shuffled (Haviv et al. App. B).

  Held-out sequences of `length` + 1 tokens: the model predicts token `length` from the
  `length` before it, once as written and once with the first `length` - 1 of them in a
  random order (the token right before the prediction stays in place). A model that uses
  the order of its context loses more with the shuffle. Decoders only.

  Returns {'loss': mean NLL as written, 'shuffled_loss', 'increase', 'length', 'examples'}.
  """
  if not run.built.family.causal:
    raise AnalysisError('prefix_shuffle needs a causal decoder (model.family=decoder)')
  data_key, perm_key, noise = jax.random.split(jax.random.key(seed), 3)
  if not isinstance(run.task, task_base.TextTask):
    raise AnalysisError(f'prefix_shuffle needs a text corpus, not task {run.config.task!r}')
  tokens = run.task.sample(data_key, examples, length, length, 1, length)['tokens']
  if run.built.encoding.bounded and length > run.model.max_position:
    raise AnalysisError(
      f'--length={length} is beyond model.max_position='
      f'{run.model.max_position} of the run\'s encoding '
      f'{run.config.encoding!r} (its positions stop there); use a shorter '
      '--length'
    )
  inputs, label = tokens[:, :length], tokens[:, length]
  order = jax.vmap(lambda k: jax.random.permutation(k, length - 1))(
    jax.random.split(perm_key, examples)
  )
  shuffled = inputs.at[:, : length - 1].set(
    jnp.take_along_axis(inputs[:, : length - 1], order, axis=1)
  )

  def loss(x):
    logits, _ = run.model.apply(
      {'params': run.params},
      x,
      jnp.full((examples,), length),
      deterministic=True,
      rngs={'noise': noise},
    )
    logp = jax.nn.log_softmax(logits[:, -1].astype(jnp.float32), -1)
    return float(-jnp.mean(jnp.take_along_axis(logp, label[:, None], -1)))

  plain, mixed = loss(inputs), loss(shuffled)
  return {
    'loss': plain,
    'shuffled_loss': mixed,
    'increase': mixed - plain,
    'length': length,
    'examples': examples,
  }
