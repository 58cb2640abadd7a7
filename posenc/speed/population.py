"""A population's throughput under candidate settings, measured side by side.

A setting is a few config fields of how a population trains: the population loop ('map'
or 'vmap', `train.population_loop`), where the optimizer steps run ('member' or 'batched',
`train.optimizer_loop`), the CPU devices it is sharded over (`cpu_devices`),
training steps per dispatch (`train.steps_per_dispatch`) and the attention backend
(`model.attention_impl`). Each (setting, population size) is a run built by `setup.build`
from one cell's config; its programs are compiled first (and counted), then every setting
is timed in rounds that alternate them, so that a shared machine whose speed moves by 2x
from minute to minute slows each setting alike; the median over the rounds is the figure.

Example (`launch.speed population`: the cpu-v1 suite's even_pairs cell, 8 members):
  >>> settings = [parse_setting('default'), parse_setting('devices=2')]
  >>> configs = [setting_config(config, s, 8) for s in settings]  # doctest: +SKIP
  >>> trainers = [Trainer(setup.build(c)) for c in configs]  # doctest: +SKIP
  >>> [t.compiled for t in trainers]      # one training program per length bucket  # doctest: +SKIP
  [2, 2]
  >>> rates = [t.model_updates_per_s(100) for t in trainers]   # one round  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from posenc import attention
from posenc import config as config_lib
from posenc.training import population as population_lib
from posenc.training import run as run_lib
from posenc import programs
from posenc.training import state as state_lib
from posenc.training import update
from posenc.kinds.range import protocol as range_protocol

# A setting's keys: the config field each sets and the values it takes.
KEYS = {
  'loop': ('train.population_loop', population_lib.POPULATION_LOOPS),
  'optimizer': ('train.optimizer_loop', population_lib.OPTIMIZER_LOOPS),
  'devices': ('cpu_devices', 'a positive integer'),
  'dispatch': ('train.steps_per_dispatch', 'a positive integer'),
  'attention': ('model.attention_impl', attention.IMPLS),
}


def parse_setting(text: str) -> dict[str, Any]:
  """The config overrides of a setting: 'default', or KEY=VALUE pairs joined by '+'.

  A setting that does not name its devices runs on one, whatever the process has.

  Example: parse_setting('loop=vmap+devices=2') -> {'train.population_loop': 'vmap',
    'cpu_devices': 2}; parse_setting('default') -> {'cpu_devices': 1}.

  Raises:
    ValueError: an unknown key or a bad value (one line naming the valid ones).
  """
  out: dict[str, Any] = {'cpu_devices': 1}
  if text == 'default':
    return out
  for item in text.split('+'):
    key, _, value = item.partition('=')
    if key not in KEYS:
      raise ValueError(
        f'setting {text!r}: unknown key {key!r}; valid: default, or KEY=VALUE joined by "+" '
        f'with KEY one of {", ".join(KEYS)}'
      )
    field, valid = KEYS[key]
    if isinstance(valid, tuple):
      if value not in valid:
        raise ValueError(f'setting {text!r}: {key}={value!r}; valid: {", ".join(valid)}')
      out[field] = value
    elif not value.isdigit() or int(value) < 1:
      raise ValueError(f'setting {text!r}: {key}={value!r} must be {valid}')
    else:
      out[field] = int(value)
  return out


def setting_config(
  config: ml_collections.ConfigDict, overrides: dict[str, Any], size: int
) -> ml_collections.ConfigDict:
  """The cell's `config` with a setting's `overrides` and `size` members: seeds 0..size-1,
  the cell's first learning rate and first data seed.

  Example: a cell of seeds [0, 1, 2], size 8 -> seeds [0, ..., 7].
  """
  config = config_lib.cell_config(config, overrides)
  config.seeds = list(range(size))
  config.learning_rates = list(config.learning_rates)[:1]
  if config.get('data_seeds'):
    config.data_seeds = list(config.data_seeds)[:1]
  return config


class Trainer:
  """A run's training, compiled and then timed chunk by chunk along its curriculum.

  Attributes:
    run: the run.
    compiled: the training programs traced (one per length bucket, or one with
      `train.steps_per_dispatch` > 1).
    compile_s: seconds of the first call of each program (compile and one step).
  """

  def __init__(self, run: run_lib.Run):
    self.run = run
    population = run.population
    self._members = (population.learning_rates, population.train_keys)
    self._traces: collections.Counter = collections.Counter()
    self._state = state_lib.init_state(run.config, run.model, population)
    self._step = 0
    k = programs.steps_per_dispatch(run.config, run.platform)
    start = time.perf_counter()
    if k > 1:
      self._multi = update.make_multi_step_fn(run, self._traces)
      self._state = self._multi(self._state, jnp.int32(k), *self._members)
      self._step += k
    else:
      self._fns = {
        b: update.make_update_fn(run, b, self._traces) for b in run.training.buckets(run)
      }
      for b, fn in self._fns.items():
        self._state, _ = fn(self._state, jnp.int32(b), *self._members)
        self._step += 1
    jax.block_until_ready(self._state)
    self.compile_s = time.perf_counter() - start
    self.compiled = self._traces['train']

  @property
  def params(self) -> Any:
    """The members' parameters [P, ...] as trained so far."""
    return self._state.params

  def model_updates_per_s(self, steps: int) -> float:
    """Trains the next `steps` steps of the curriculum; the population's model-updates/s."""
    config = self.run.config
    k = programs.steps_per_dispatch(config, self.run.platform)
    start = time.perf_counter()
    if k > 1:
      for done in range(0, steps, k):
        self._state = self._multi(self._state, jnp.int32(min(k, steps - done)), *self._members)
    else:
      lengths = np.asarray(
        update.curriculum_lengths(
          self.run.curriculum_key, jnp.int32(self._step), steps, self.run.train_settings.max_length
        )
      )
      for length in lengths:
        fn = self._fns[update.bucket_of(self.run, int(length))]
        self._state, _ = fn(self._state, jnp.int32(length), *self._members)
    jax.block_until_ready(self._state)
    seconds = time.perf_counter() - start
    self._step += steps
    if self._traces['train'] != self.compiled:
      raise RuntimeError(f'training recompiled: {self._traces["train"]} programs traced')
    return steps * self.run.population.size / seconds


class Evaluator:
  """A run's range evaluation (every evaluated length, sampled as its frozen sets are),
  compiled and then timed pass by pass.

  The programs are compiled for `params`' shapes and placement; the training's donated
  buffers are gone after each step, so every pass takes the members' parameters anew.

  Attributes:
    compiled: the evaluation programs traced (one per evaluation bucket).
    compile_s: seconds to compile them.
  """

  def __init__(self, run: run_lib.Run, params: Any):
    config = run.config
    self.run = run
    self._traces: collections.Counter = collections.Counter()
    self._lengths = config_lib.eval_lengths(config)
    bucket = lambda n: config_lib.bucket_of(
      n, run.eval_settings.max_length, run.eval_settings.bucket_size
    )
    keys = run.population.eval_keys
    start = time.perf_counter()
    self._fns = {}
    for length in self._lengths:
      if bucket(length) not in self._fns:
        fn = range_protocol.make_eval_fn(run, bucket(length), self._traces)
        self._fns[bucket(length)] = fn.lower(params, jnp.int32(length), keys).compile()
    self.compile_s = time.perf_counter() - start
    self.compiled = self._traces['eval']
    self._bucket = bucket

  def seconds(self, params: Any) -> float:
    """Seconds of one pass of the members `params` [P, ...] over every evaluated length."""
    keys = self.run.population.eval_keys
    start = time.perf_counter()
    for length in self._lengths:
      out = self._fns[self._bucket(length)](params, jnp.int32(length), keys)
    jax.block_until_ready(out)
    return time.perf_counter() - start
