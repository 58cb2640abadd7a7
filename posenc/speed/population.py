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

from posenc import attention
from posenc import config as config_lib
from posenc.training import run as run_lib
from posenc import programs
from posenc.training import state as state_lib
from posenc.training import settings
from posenc.training import train
from posenc.kinds.range import protocol as range_protocol

# A setting's keys: the config field each sets and the values it takes.
KEYS = {
  'loop': ('train.population_loop', settings.POPULATION_LOOPS),
  'optimizer': ('train.optimizer_loop', settings.OPTIMIZER_LOOPS),
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
  """A run's training, compiled and then timed chunk by chunk along its curriculum, one
  program per length bucket (or one of K steps), dispatched as the loop dispatches
  (`train.Dispatch`).

  Attributes:
    run: the run.
    compiled: the training programs traced (one per length bucket, or one with
      `train.steps_per_dispatch` > 1).
    compile_s: seconds to compile them and call each once.
  """

  def __init__(self, run: run_lib.Run):
    self.run = run
    traces: collections.Counter = collections.Counter()
    stage = train.training_stage(run, traces)
    plan = programs.Plan('train', 'buckets', stage.data, stage.data)
    start = time.perf_counter()
    todo = train.training_programs(run, stage, plan, traces)
    fns = train.compile_stages(run, todo, {}, traces, lambda line: None)['train']
    self._dispatch = train.Dispatch(run, plan, fns)
    self._state, self._step = self._dispatch.warm_up(state_lib.init_state(run), 0)
    jax.block_until_ready(self._state)
    self.compile_s = time.perf_counter() - start
    self.compiled, self._traces = traces['train'], traces

  @property
  def params(self) -> Any:
    """The members' parameters [P, ...] as trained so far."""
    return self._state.params

  def model_updates_per_s(self, steps: int) -> float:
    """Trains the next `steps` steps of the curriculum; the population's model-updates/s."""
    start, stop = time.perf_counter(), self._step + steps
    while self._step < stop:
      self._state, self._step = self._dispatch(self._state, self._step, stop)
    jax.block_until_ready(self._state)
    seconds = time.perf_counter() - start
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
    bucket = lambda n: programs.data_width(
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
