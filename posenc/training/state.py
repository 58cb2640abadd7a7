"""The training state of a population, typed, and the optimizer that advances it.

`TrainState` holds every array training carries from step to step, each member's with a
leading member axis [P] (P the population's padded size); `init_state` makes it (or its
abstract value, which the run keeps: `run.abstract_state`), `optimizer` and
`learning_rate_scale` are the update's optimizer and schedule, `check` their config fields'
checks. A checkpoint holds the state's real members as a plain dict of host arrays
(`saved`, `from_saved`), the layout `LAYOUT` names: layout 1 is the dict the state was
before it was typed, so every checkpoint written since restores, on any number of devices.

Example (two members; the run's abstract state gives the shapes without computing):
  >>> from posenc import config as config_lib, setup
  >>> config = config_lib.base_config()
  >>> config.seeds, config.learning_rates = [0, 1], [1e-4]
  >>> state = setup.build(config).abstract_state
  >>> state.diverged.shape, state.step.shape
  ((2,), ())
  >>> saved_shapes(state, 2)['sums'].keys()
  dict_keys(['accuracy', 'loss'])
"""

from __future__ import annotations

import math
from typing import Any

import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from posenc import config as config_lib
from posenc import suggest
from posenc.training import settings

# The checkpoint layout of the state (`saved`): written next to each checkpoint, and the
# only one `from_saved` reads. A checkpoint that names none is of layout 1.
LAYOUT = 1


@flax.struct.dataclass
class Sums:
  """The metric sums of the current log interval, per member [P]."""

  accuracy: jax.Array
  loss: jax.Array


# The fields are in the sorted order of the layout's keys, so that the state's leaves come in
# the order they came in as a dict: the compiled programs take their arguments in that order.
@flax.struct.dataclass
class TrainState:
  """The population's training state.

  Attributes:
    count: steps summed into `sums` since the last log line, a scalar.
    diverged: [P] bool, a member whose loss was not finite (frozen since).
    opt: the optimizer's state (`optimizer`), every leaf [P, ...].
    params: the model's parameters, every leaf [P, ...].
    step: the steps taken, a scalar.
    sums: the metric sums of the current log interval (`Sums`), each [P].
  """

  count: jax.Array
  diverged: jax.Array
  opt: Any
  params: Any
  step: jax.Array
  sums: Sums


class LayoutError(config_lib.ConfigError):
  """A checkpoint of a state layout this version cannot read; the message is one line."""


def _as_dict(state: TrainState) -> dict[str, Any]:
  """The state as the plain dict of layout 1: {'count', 'diverged', 'opt', 'params', 'step',
  'sums': {'accuracy', 'loss'}}."""
  sums = {'accuracy': state.sums.accuracy, 'loss': state.sums.loss}
  return {
    **{k: getattr(state, k) for k in ('count', 'diverged', 'opt', 'params', 'step')},
    'sums': sums,
  }


def saved(state: TrainState, size: int) -> dict[str, Any]:
  """The state as a checkpoint holds it (layout `LAYOUT`): host copies of the first `size`
  members (the population's real ones; the padding members are dropped, so that it restores
  on any number of devices), as a plain dict.

  Example: {'count', 'diverged', 'opt', 'params', 'step', 'sums': {'accuracy', 'loss'}}.
  """
  return jax.tree.map(
    lambda x: np.asarray(x)[:size] if np.ndim(x) else np.asarray(x), jax.device_get(_as_dict(state))
  )


def saved_shapes(abstract: TrainState, size: int) -> dict[str, Any]:
  """Zeros of what `saved` writes of a state like `abstract`: what a checkpoint is restored
  into."""
  return jax.tree.map(
    lambda s: np.zeros((size, *s.shape[1:]) if s.ndim else (), s.dtype), _as_dict(abstract)
  )


def from_saved(
  tree: dict[str, Any], abstract: TrainState, layout: int = LAYOUT, where: str = 'checkpoint'
) -> TrainState:
  """`saved`'s inverse for a checkpoint of state layout `layout`: the members padded to the
  population's size with copies of member 0 (they train like the others and are dropped
  from every output), placed like `abstract`.

  Raises:
    LayoutError: a layout other than `LAYOUT` (one line naming `where` and its layout).
  """
  check_layout(layout, where)

  def place(x, s):
    if np.ndim(x):
      x = np.concatenate([x] + [x[:1]] * (s.shape[0] - x.shape[0]))
    return jax.device_put(x.astype(s.dtype), s.sharding)

  padded = jax.tree.map(place, tree, _as_dict(abstract))
  sums = padded.pop('sums')
  return TrainState(**padded, sums=Sums(accuracy=sums['accuracy'], loss=sums['loss']))


def check_layout(layout: Any, where: str = 'checkpoint') -> None:
  """LayoutError (one line) unless `layout` is `LAYOUT`.

  Example: check_layout(2, 'run/checkpoints/40') -> "run/checkpoints/40 holds training
  state layout 2; this version of posenc reads layout 1 only: ..."
  """
  if layout != LAYOUT:
    raise LayoutError(
      f'{where} holds training state layout {layout!r}; this version of posenc reads layout '
      f'{LAYOUT} only: resume it with the version that wrote it, or train in a new workdir'
    )


OPTIMIZERS = ('adam', 'adamw')
SCHEDULES = ('constant', 'trapezoid', 'cosine')


def check(config: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for what is wrong with the optimizer and its schedule."""
  t = config.train
  for key, value, valid in (
    ('train.optimizer', t.optimizer, OPTIMIZERS),
    ('train.schedule', t.schedule, SCHEDULES),
  ):
    if value not in valid:
      raise config_lib.ConfigError(
        f'unknown {key} {value!r}{suggest.did_you_mean(value, valid)}; valid: {", ".join(valid)}'
      )
  for key, value in (('train.warmup', t.warmup), ('train.cooldown', t.cooldown)):
    if not config_lib.is_number(value) or not 0 <= value <= 1:
      raise config_lib.ConfigError(f'{key}={value!r} must be a fraction of the steps in [0, 1]')
  if t.warmup + t.cooldown > 1:
    raise config_lib.ConfigError(
      f'train.warmup + train.cooldown = {t.warmup + t.cooldown} exceeds 1'
    )
  if not config_lib.is_number(t.weight_decay) or not 0 <= t.weight_decay < math.inf:
    raise config_lib.ConfigError(
      f'train.weight_decay={t.weight_decay!r} must be a finite number >= 0'
    )
  if not config_lib.is_number(t.max_grad_norm) or not 0 < t.max_grad_norm < math.inf:
    raise config_lib.ConfigError(
      f'train.max_grad_norm={t.max_grad_norm!r} must be a positive '
      'finite number (the global norm gradients are clipped to)'
    )


def optimizer(train: settings.TrainSettings) -> optax.GradientTransformation:
  """Adam (the study's) or AdamW (decoupled weight decay) after global-norm clipping, without
  the learning rate (applied per member, times `learning_rate_scale`)."""
  parts = [optax.clip_by_global_norm(train.max_grad_norm), optax.scale_by_adam()]
  if train.optimizer == 'adamw':
    parts.append(optax.add_decayed_weights(train.weight_decay))
  return optax.chain(*parts)


def learning_rate_scale(train: settings.TrainSettings, step: jax.Array) -> jax.Array:
  """The schedule's factor on each member's learning rate at `step`: 1 ('constant'), a
  trapezoid (Zhai et al. 2022): linear warm-up over `warmup` of the steps, constant, linear
  cool-down to 0 over the last `cooldown`; or 'cosine' (Awasthi & Gupta's one-cycle cosine):
  linear warm-up from 0 over `warmup` of the steps, then cosine decay to 0 at the last step.

  Example: 100 steps, warmup 0.1, cooldown 0.2: step 0 -> 0.1, 5 -> 0.6, 50 -> 1, 90 -> 0.5.
  """
  if train.schedule == 'constant':
    return jnp.float32(1.0)
  total = train.steps
  if train.schedule == 'cosine':
    return optax.warmup_cosine_decay_schedule(0.0, 1.0, round(train.warmup * total), total)(
      step
    ).astype(jnp.float32)
  warmup = max(1, round(train.warmup * total))
  cooldown = max(1, round(train.cooldown * total))
  t = step.astype(jnp.float32)
  up = (t + 1) / warmup
  down = (total - t) / cooldown
  return jnp.clip(jnp.minimum(up, down), 0.0, 1.0)


def init_state(run: Any, abstract: bool = False) -> TrainState:
  """The training state of the run's population for its model (`posenc.training.run.Run`):
  each member's parameters from its init key, the optimizer's state, nothing diverged, the
  sums and counters at 0; placed on the population's mesh (members sharded, scalars
  replicated), or with `abstract` its `jax.ShapeDtypeStruct`s so placed (the run keeps
  those: `run.abstract_state`).
  """
  model, population, tx = run.model, run.population, optimizer(run.train_settings)

  def init_one(key):
    tokens = jnp.zeros((1, 4), jnp.int32)
    params = model.init(
      {'params': key, 'noise': key, 'dropout': key}, tokens, jnp.int32(4), deterministic=True
    )['params']
    return params, tx.init(params)

  def init(keys):
    params, opt = jax.vmap(init_one)(keys)
    zeros = jnp.zeros(keys.shape, jnp.float32)
    return TrainState(
      count=jnp.int32(0),
      diverged=jnp.zeros(keys.shape, bool),
      opt=opt,
      params=params,
      step=jnp.int32(0),
      sums=Sums(accuracy=zeros, loss=zeros),
    )

  shapes = jax.eval_shape(init, population.init_keys)
  sharding = population.state_sharding(shapes)
  if abstract:
    return jax.tree.map(
      lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, sharding
    )
  return jax.jit(init, out_shardings=sharding)(population.init_keys)
