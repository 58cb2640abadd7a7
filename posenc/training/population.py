"""A population of models trained as one, apart from the loop that trains it.

A population of P members (every seed x learning rate of the config) lives on the local
devices: the member axis is sharded over the mesh axis `POP` and vmapped (or mapped)
inside a `shard_map`, so P = 1 on one CPU and P = 30 on eight devices are the same code
path. Members share each step's data (or, with `data_seeds`, that of their data seed);
each has its own initialisation, dropout and position-noise keys and its own learning rate.

RNG, one story: every draw comes from `jax.random.key`s derived here, split per purpose
(the tags below) and folded with the step (or length and sub-batch) on the device:
  data_seed  -> curriculum key (step -> length)  and  batch key (step -> batch)
  data_seeds -> one batch key per data seed (each as data_seed's would be)
  seed       -> init key, train key (step -> dropout, noise), eval key (length, j -> ...)
  eval.seed  -> evaluation data key (length, j -> batch), the same for every run.

Example (the study's cell: 30 members; `abstract` gives the shapes without computing):
  >>> from posenc import config as config_lib, setup
  >>> config = config_lib.base_config()
  >>> population = Population(config)          # members, keys, mesh
  >>> population.size
  30
  >>> state = setup.build(config).abstract_state
  >>> jax.tree.leaves(state.params)[0].shape[0] == population.padded_size
  True
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import config as config_lib

P = jax.sharding.PartitionSpec
POP = 'pop'  # The mesh axis the population is sharded over.

# Purpose tags folded into root keys so that streams never coincide, e.g. when
# data_seed == seed.
DATA, MEMBER, EVAL_DATA = 0, 1, 2
# Folded into a member's step key for the progressive loss's draws.
PROGRESSIVE = 3
# Folded into the data seed's key for a fixed training set.
DATASET = 4


def check(config: ml_collections.ConfigDict) -> None:
  """ConfigError (one line) for what is wrong with the population: its seeds, data seeds,
  learning rates and CPU devices."""
  seeds, rates = list(config.seeds), list(config.learning_rates)
  if not seeds:
    raise config_lib.ConfigError(
      "seeds is empty; give at least one seed, e.g. --config.seeds='[0]'"
    )
  config_lib.check_ints(seeds, 'seeds')
  config_lib.check_ints(
    list(config.get('data_seeds') or []), 'data_seeds', what=' (or empty: one data seed)'
  )
  bad = [lr for lr in rates if not config_lib.is_number(lr) or not 0 < lr < math.inf]
  if not rates or bad:
    why = f': {bad[0]!r} is not a positive finite number' if bad else ' is empty'
    raise config_lib.ConfigError(
      f'learning_rates {rates}{why}; learning_rates must be a non-empty list of positive numbers'
    )
  if len(set(rates)) != len(rates):
    raise config_lib.ConfigError(f'learning_rates {rates} has duplicates; each rate must be unique')
  cpu_devices = config.get('cpu_devices', 0)
  if not config_lib.is_int(cpu_devices) or not 0 <= cpu_devices <= config_lib.MAX_CPU_DEVICES:
    raise config_lib.ConfigError(
      f'cpu_devices={cpu_devices!r} must be an integer in 0..{config_lib.MAX_CPU_DEVICES} (0: '
      "JAX's CPU devices, one unless forced; N: the population sharded over N CPU devices)"
    )


def local_devices(config: ml_collections.ConfigDict) -> list[Any]:
  """The devices a population of `config` is laid out on: every local device, or on CPU
  the first `cpu_devices` of them (as many as the process has, if fewer: the launchers
  start JAX's CPU backend with `cpu_devices` devices, `launch.common.cpu_devices`).

  Example: cpu_devices 2 in a process started with 8 CPU devices -> the first 2.
  """
  devices = jax.local_devices()
  wanted = config.get('cpu_devices', 0)
  if wanted and devices[0].platform == 'cpu':
    return devices[:wanted]
  return devices


class Population:
  """The member table, its keys, and how it is laid out on the local devices.

  P members are padded to a multiple of the device count with copies of member 0;
  padding members train like the others and are dropped from every output.
  """

  def __init__(self, config: ml_collections.ConfigDict, devices: list[Any] | None = None):
    self.members = config_lib.members(config)
    self.size = len(self.members)
    devices = list(devices or local_devices(config))
    self.platform = devices[0].platform
    self.mesh = jax.sharding.Mesh(np.array(devices), (POP,))
    self.padded_size = math.ceil(self.size / len(devices)) * len(devices)
    table = self.members + [self.members[0]] * (self.padded_size - self.size)
    self.sharded = jax.sharding.NamedSharding(self.mesh, P(POP))
    self.replicated = jax.sharding.NamedSharding(self.mesh, P())
    keys = jax.vmap(lambda s: jax.random.split(jax.random.fold_in(jax.random.key(s), MEMBER), 3))(
      jnp.array([m['seed'] for m in table], jnp.uint32)
    )
    self.init_keys, self.train_keys, self.eval_keys = (
      jax.device_put(keys[:, i], self.sharded) for i in range(3)
    )
    self.learning_rates = jax.device_put(
      jnp.array([m['learning_rate'] for m in table], jnp.float32), self.sharded
    )
    # Each member's data seed as an index into `data_seeds(config)` (one batch stream each).
    seeds = data_seeds(config)
    self.data_index = np.array([seeds.index(m.get('data_seed', seeds[0])) for m in table], np.int32)

  @property
  def num_devices(self) -> int:
    return self.mesh.devices.size

  def shard_map(self, f: Callable[..., Any], in_specs: Any, out_specs: Any) -> Callable:
    return jax.shard_map(f, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs)

  def state_sharding(self, state: Any) -> Any:
    return jax.tree.map(lambda x: self.sharded if x.ndim else self.replicated, state)


def dataset_key(config: ml_collections.ConfigDict) -> jax.Array:
  """The key of a fixed training set (`train.dataset_size` > 0): example i of task t is drawn
  from fold_in(fold_in(key, t), i)."""
  return jax.random.fold_in(jax.random.key(config.data_seed), DATASET)


def data_seeds(config: ml_collections.ConfigDict) -> list[int]:
  """The data seeds of the population's members: `data_seeds`, or [data_seed]."""
  return [int(d) for d in (config.get('data_seeds') or [config.data_seed])]


def data_keys(config: ml_collections.ConfigDict) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(curriculum key, training batch keys [D], evaluation data key).

  The curriculum (step -> length) is `data_seed`'s, shared by every member so that a step
  is one program; batch key d is data seed d's (`data_seeds`), made as a run with
  data_seed = d makes its one: the members of the data seed equal to `data_seed` train
  bit for bit as they would in a run without `data_seeds`.
  """
  curriculum, _ = jax.random.split(jax.random.fold_in(jax.random.key(config.data_seed), DATA))
  batches = jnp.stack(
    [jax.random.split(jax.random.fold_in(jax.random.key(d), DATA))[1] for d in data_seeds(config)]
  )
  evaluation = jax.random.fold_in(jax.random.key(config.eval.seed), EVAL_DATA)
  return curriculum, batches, evaluation
