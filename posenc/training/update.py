"""The update step of a population: one compiled program per width, or K steps in one.

A member's gradients (`_member_gradients`, with the progressive loss of looped models) and
its optimizer step (`_member_apply`: clipping, Adam(W), its scheduled learning rate, frozen
when its loss is not finite); a device's members in one step (`_local_update`, over the
population loop); the jitted update of one program width (`make_update_fn`) and of K steps
(`make_multi_step_fn`); the curriculum of lengths the steps draw (`curriculum_lengths`).
`posenc.training.train` plans which widths are compiled (`posenc.programs`) and runs the loop.

Example:
  >>> update = make_update_fn(run, 40)            # batches padded to 40  # doctest: +SKIP
  >>> state, metrics = update(state, jnp.int32(37), population.learning_rates,
  ...                         population.train_keys)  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from posenc.training import population as population_lib
from posenc import programs
from posenc.training import run as run_lib
from posenc.training import state as state_lib

P = population_lib.P
POP = population_lib.POP


# ---------------------------------------------------------------------------------------
# The curriculum.


def curriculum_length(key: jax.Array, step: jax.Array, max_length: int) -> jax.Array:
  """The length ~ U{1..max_length} of `step`: the curriculum, a function of the step alone."""
  return jax.random.randint(jax.random.fold_in(key, step), (), 1, max_length + 1)


@functools.partial(jax.jit, static_argnames=('count', 'max_length'))
def curriculum_lengths(key: jax.Array, start: jax.Array, count: int, max_length: int) -> jax.Array:
  """`curriculum_length` of steps start..start+count-1, drawn on the device: the host reads
  them only to pick the compiled program of each step's length bucket (`train.Dispatch`)."""
  steps = start + jnp.arange(count)
  return jax.vmap(lambda s: curriculum_length(key, s, max_length))(steps)


# ---------------------------------------------------------------------------------------
# The update step.


def _member_gradients(run: run_lib.Run, objective: Any) -> Callable[..., Any]:
  """One member's loss and gradients on one batch.

  member_gradients(params, key, batch, step) -> (grads, loss, accuracy): the step's keys
  are folded from the member's key and the step; with `train.progressive_alpha` > 0 the
  loss of a looped model is (partly) the progressive loss of McLeish et al.
  """
  r, alpha = run.model_settings.recurrences, run.train_settings.progressive_alpha

  def member_gradients(params, key, batch, step):
    member_step = jax.random.fold_in(key, step)
    dropout, noise = jax.random.split(member_step)
    rngs = {'dropout': dropout, 'noise': noise}

    def loss_fn(p):
      if alpha == 0:
        return objective.loss(p, batch, rngs)
      # The progressive loss: n recurrences without gradient, then k with.
      k_n, k_k = jax.random.split(jax.random.fold_in(member_step, population_lib.PROGRESSIVE))
      n = jax.random.randint(k_n, (), 0, r)
      k = jax.random.randint(k_k, (), 1, jnp.maximum(1, jnp.minimum(r - n, r // 2)) + 1)
      loss, accuracy = objective.loss(p, batch, rngs, window=(n, n + k))
      if alpha < 1:
        full, accuracy = objective.loss(p, batch, rngs)
        loss = (1 - alpha) * full + alpha * loss
      return loss, accuracy

    (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    if run.train_settings.scale_block_gradients and 'block' in grads:
      grads = {**grads, 'block': jax.tree.map(lambda g: g / r, grads['block'])}
    return grads, loss, accuracy

  return member_gradients


def _member_apply(run: run_lib.Run) -> Callable[..., Any]:
  """One member's optimizer step.

  member_apply(params, opt, diverged, learning_rate, grads, loss, step) -> (params, opt,
  diverged): clipping, Adam(W) and the member's scheduled learning rate; a member whose
  loss is not finite is frozen and marked.
  """
  tx = state_lib.optimizer(run.train_settings)

  def member_apply(params, opt, diverged, learning_rate, grads, loss, step):
    updates, new_opt = tx.update(grads, opt, params)
    rate = learning_rate * state_lib.learning_rate_scale(run.train_settings, step)
    new_params = jax.tree.map(lambda p, u: (p - rate * u).astype(p.dtype), params, updates)
    # A member whose loss is not finite is frozen and marked; the others go on.
    diverged = diverged | ~jnp.isfinite(loss)
    keep = lambda new, old: jnp.where(diverged, old, new)
    return jax.tree.map(keep, new_params, params), jax.tree.map(keep, new_opt, opt), diverged

  return member_apply


def _local_update(
  run: run_lib.Run, bucket: int, data: tuple[int, ...] | None = None
) -> Callable[..., Any]:
  """One step of a device's members on a batch padded to `bucket` input tokens.

  The program serves the steps of the data widths `data` (default: `bucket` alone): each
  batch is drawn at its step's data width (its `train.bucket_size` bucket, which decides
  the examples) and padded to `bucket` (`posenc.programs`).

  local_update(state, length, learning_rates [p], train_keys [p]) -> (state, {loss,
  accuracy} [p]), for the p members on this device; `length` is the step's real length
  (traced) and the batch is sampled from the step's key on the device. The run's batch key
  is one key, or one per data seed [D] (`data_seeds`): then the step draws D batches and
  each member trains on its data seed's.

  The members' gradients run in the population loop (`train.population_loop`: 'map', one
  member after another, or 'vmap'). Their optimizer steps run in the same loop, or with
  `train.optimizer_loop` 'batched' (and always under 'vmap') batched over the members after
  it: the optimizer is small elementwise work on every parameter leaf (with the loop's
  slicing and stacking of the state, more operations than a member's forward and backward
  pass at cpu-v1's scale, though a tenth of the time: docs/speed.md); batched, they are
  dispatched once per step instead of once per member. Batched and per member agree to
  float rounding, not bit for bit: XLA rewrites the division by Adam's bias corrections (a
  scalar per member, a [p] vector batched) differently.
  """
  data = (bucket,) if data is None else tuple(data)
  member_gradients = _member_gradients(
    run, run.training.objective(run, run.training.shape(run, bucket))
  )
  gradients_of = _gradients_of(run, _draw(run, bucket, data), member_gradients)
  loop = run.train_settings.population_loop
  batched = loop == 'vmap' or run.train_settings.optimizer_loop == 'batched'
  step_members = _step_members(loop, batched, _member_apply(run))

  def local_update(state, length, learning_rates, keys):
    members, gradients = gradients_of(state, length, learning_rates, keys)
    params, opt, diverged, loss, accuracy = step_members(state, members, gradients, learning_rates)
    sums = state_lib.Sums(loss=state.sums.loss + loss, accuracy=state.sums.accuracy + accuracy)
    new_state = state_lib.TrainState(
      count=state.count + 1,
      diverged=diverged,
      opt=opt,
      params=params,
      step=state.step + 1,
      sums=sums,
    )
    return new_state, {'loss': loss, 'accuracy': accuracy}

  return local_update


def _draw(run: run_lib.Run, bucket: int, data: tuple[int, ...]) -> Callable[..., Any]:
  """draw(key, step, length) -> the batch of a step of real length `length`: drawn at its
  data width (one of `data`) from the key folded with the step, padded to `bucket`."""
  training = run.training

  def draw(key, step, length):
    key = jax.random.fold_in(key, step)
    return programs.widened(
      bucket,
      data,
      lambda d: training.batch(run, key, step, length, training.shape(run, d)),
      lambda batch, width: training.widen(run, batch, training.shape(run, width)),
      programs.data_width(length, run.train_settings.max_length, run.train_settings.bucket_size),
    )

  return draw


def _gradients_of(
  run: run_lib.Run, draw: Callable[..., Any], member_gradients: Callable[..., Any]
) -> Callable[..., Any]:
  """gradients_of(state, length, learning_rates [p], keys [p]) -> (members, gradients): the
  step's batch (one, or one per data seed), the members of this device (params, key[, data
  seed index]) and gradients(member) -> (grads, loss, accuracy) on its data seed's batch."""
  data_index = run.population.data_index
  keys_per_seed = run.batch_key.reshape(-1)

  def gradients_of(state, length, learning_rates, keys):
    step = state.step
    members = (state.params, keys)
    if len(keys_per_seed) == 1:
      batch = draw(keys_per_seed[0], step, length)
      return members, lambda m: member_gradients(*m, batch, step)
    batches = jax.vmap(draw, in_axes=(0, None, None))(keys_per_seed, step, length)
    # This device's members are rows axis_index * p ... of the population.
    p = learning_rates.shape[0]
    rows = jax.lax.axis_index(POP) * p + jnp.arange(p)
    members += (jnp.asarray(data_index)[rows],)
    gradients = lambda m: member_gradients(*m[:-1], jax.tree.map(lambda x: x[m[-1]], batches), step)
    return members, gradients

  return gradients_of


def _step_members(loop: str, batched: bool, member_apply: Callable[..., Any]) -> Callable[..., Any]:
  """step_members(state, members, gradients, learning_rates) -> (params, opt, diverged, loss,
  accuracy) of this device's members: their gradients in the population loop (`loop`), their
  optimizer steps in it or, `batched`, batched over the members after it."""

  def step_members(state, members, gradients, learning_rates):
    step = state.step
    optimizer = (state.opt, state.diverged, learning_rates)
    if batched:
      grads, loss, accuracy = (
        jax.lax.map(gradients, members) if loop == 'map' else jax.vmap(gradients)(members)
      )
      params, opt, diverged = jax.vmap(member_apply, in_axes=(0, 0, 0, 0, 0, 0, None))(
        state.params, *optimizer, grads, loss, step
      )
      return params, opt, diverged, loss, accuracy

    def member_step(m):
      member, (opt, diverged, learning_rate) = m
      grads, loss, accuracy = gradients(member)
      params = member[0]
      return (
        *member_apply(params, opt, diverged, learning_rate, grads, loss, step),
        loss,
        accuracy,
      )

    return jax.lax.map(member_step, (members, optimizer))

  return step_members


def _jitted(
  run: run_lib.Run, local: Callable[..., Any], traces: collections.Counter | None, out: Any
) -> Callable[..., Any]:
  """`local` (a device's members) over the population's mesh, jitted with the state donated:
  the members' leaves split over the devices, the scalars replicated; `traces['train']`
  counts its tracings (= compilations)."""

  def counted(*args):
    if traces is not None:
      traces['train'] += 1
    return local(*args)

  state = jax.tree.map(lambda s: P(POP) if s.ndim else P(), run.abstract_state)
  out_specs = state if out is None else (state, out)
  update = run.population.shard_map(
    counted, in_specs=(state, P(), P(POP), P(POP)), out_specs=out_specs
  )
  return jax.jit(update, donate_argnums=0)


def make_update_fn(
  run: run_lib.Run,
  bucket: int,
  traces: collections.Counter | None = None,
  data: tuple[int, ...] | None = None,
) -> Callable[..., Any]:
  """The jitted update for batches padded to `bucket` input tokens, serving the steps of
  the data widths `data` (default: `bucket` alone).

  update(state, length, learning_rates [P], train_keys [P]) -> (state, {loss, accuracy} [P])
  `length` is the step's real length (traced); the batch is sampled inside the program
  from the step's key, so no data crosses from the host. `traces['train']` counts how
  often it is traced (= compiled).
  """
  return _jitted(run, _local_update(run, bucket, data), traces, P(POP))


def make_multi_step_fn(
  run: run_lib.Run, traces: collections.Counter | None, plan: programs.Plan
) -> Callable[..., Any]:
  """The jitted update of up to K = `train.steps_per_dispatch` consecutive steps.

  update(state, num_steps, learning_rates [P], train_keys [P]) -> state after min(K,
  num_steps) steps (num_steps traced). A `lax.scan` over K steps draws each step's length
  on the device and runs the update of its program width (`lax.switch` over the widths of
  `plan`), so one program serves every chunk of steps and the host dispatches once per K
  steps. Step for step the same computation as `make_update_fn`'s programs of the plan.
  """
  curriculum_key, train = run.curriculum_key, run.train_settings
  k, n, size = train.steps_per_dispatch, train.max_length, train.bucket_size
  widths = plan.widths
  branches = [_local_update(run, w, plan.serves(w)) for w in widths]
  # The branch of each data width, as the index of its data width.
  branch_of = jnp.asarray([widths.index(plan.program_of(d)) for d in plan.data])

  def local_multi(state, num_steps, learning_rates, keys):
    def one_step(state, i):
      length = curriculum_length(curriculum_key, state.step, n)
      index = branch_of[programs.data_index(length, size, len(plan.data))]
      step = lambda s: jax.lax.switch(
        index, [lambda s, b=b: b(s, length, learning_rates, keys)[0] for b in branches], s
      )
      return jax.lax.cond(i < num_steps, step, lambda s: s, state), None

    return jax.lax.scan(one_step, state, jnp.arange(k))[0]

  return _jitted(run, local_multi, traces, None)
