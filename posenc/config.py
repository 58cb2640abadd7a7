"""Experiment configuration: the config surface, arg-string parsing and validation.

Experiment files (`experiments/*.py`) build their `ml_collections.ConfigDict` from
`base_config()` (the study's protocol), shrink it to a scale (`SCALES`: 'cpu' runs in minutes
on a CPU, 'tiny' in seconds; `scale`) and parse their arg string with `parse_arg`. `validate` turns an
impossible config into a `ConfigError` whose one-line message names the bad value and
the valid choices; the launchers print it and exit with status 2.

Example:
  >>> arg = parse_arg('task=parity_check,tiny', task='reverse_string', tiny=False)
  >>> arg.task, arg.tiny
  ('parity_check', True)
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping

import ml_collections

from posenc import suggest


class ConfigError(ValueError):
  """An impossible or malformed config; the message is one line."""


# Sizes past these cannot finish or fit: step counters are int32, and a billion steps take
# 12 days at 1,000 steps/s; one head's attention weights at 2^20 tokens are 4 TiB in float32.
MAX_STEPS = 10**9
MAX_LENGTH = 2**20
# `cpu_devices` past this is a typo: a device per core of the largest CPU hosts.
MAX_CPU_DEVICES = 1024


def base_config() -> ml_collections.ConfigDict:
  """The study's protocol (Ruoss et al. 2023, Appendix A) as a ConfigDict."""
  c = ml_collections.ConfigDict()
  c.task = 'reverse_string'
  c.encoding = 'randomized_relative'
  # Options of the encoding itself, e.g. relative_mode for randomized_relative.
  c.encoding_options = ml_collections.ConfigDict({'relative_mode': 'symmetric'})
  # Options of the task (`tasks.get(name, options)`), e.g. pad_probability for arithmetic.
  c.task_options = ml_collections.ConfigDict()
  # Task hinting (Awasthi & Gupta 2023; posenc/training/multitask.py): auxiliary tasks trained on the
  # same backbone, each with its own output head (head 0 is the main task's).
  c.hints = []
  # The population: every (seed, learning rate) pair is one member. A seed fixes the
  # member's initialisation, dropout and position noise (the study's model_init_seed).
  c.seeds = list(range(10))
  c.learning_rates = [1e-4, 3e-4, 5e-4]
  # All members share the training batches, as the reference's runs share `seed`.
  c.data_seed = 0
  # Data order as a population axis: with a list, every (seed, data seed, learning rate)
  # is one member, and each data seed draws its own training batches (the order of the
  # examples; the length schedule and a fixed training set stay data_seed's). Empty: one
  # shared data seed, data_seed.
  c.data_seeds = []
  c.checkpoint_every = 10_000  # steps; a final checkpoint is always written.
  # JAX's persistent compilation cache: reruns and resumes load their programs. True: the
  # directory $JAX_COMPILATION_CACHE_DIR, else ~/.cache/posenc/jax; False: off; or a
  # directory, local or a gs://BUCKET/PATH or s3://BUCKET/PATH URL a pod's hosts share
  # (launch/common.py, docs/scaling.md). Either type: a reference typed `object`.
  c.compilation_cache = ml_collections.FieldReference(True, field_type=object)
  # Threads compiling a run's programs at once before its loop; 0: one per CPU core.
  c.compile_threads = 0
  # TensorBoard event files under workdir/tensorboard (the `tensorboard` extra).
  c.tensorboard = False
  # On CPU, N > 0 splits the host into N JAX devices (the launchers start JAX's CPU backend
  # so) and shards the population over them, so members train on every core at once; 0
  # keeps JAX's devices (one CPU device). Agrees with one device to float rounding, not bit
  # for bit (docs/speed.md). Accelerators ignore it.
  c.cpu_devices = 0

  c.train = _train_config()
  c.eval = _eval_config()
  c.model = _model_config()
  return c


def _train_config() -> ml_collections.ConfigDict:
  """`base_config().train`: the study's training."""
  c = ml_collections.ConfigDict()
  c.steps = 2_000_000
  c.batch_size = 128
  c.max_length = 40  # N: lengths ~ U{1..N}.
  c.log_every = 100
  # Lengths are padded up to a multiple of bucket_size: at most ceil(N / bucket_size)
  # compiled training programs, with less padding waste than one N-sized program.
  c.bucket_size = 5
  c.masked_loss = False  # The reference trains on the zeros after the terminator.
  c.max_grad_norm = 1.0
  # 'adam' (the study's) or 'adamw' with decoupled weight decay; the learning rate follows
  # a 'constant' or a 'trapezoid' schedule (linear warm-up and cool-down fractions), or
  # 'cosine' (one cycle: linear warm-up from 0, then cosine decay to 0).
  c.optimizer = 'adam'
  c.weight_decay = 0.0
  c.schedule = 'constant'
  c.warmup = 0.0
  c.cooldown = 0.0
  # How a device runs its members: 'map' one after another (faster than 'vmap' on CPU, with
  # one member's activations in cache at a time), 'vmap' batched (fills an accelerator),
  # or 'auto': map on CPU, vmap on GPU and TPU.
  c.population_loop = 'auto'
  # Where the optimizer steps run: 'member' in the population loop, each after its member's
  # gradients, or 'batched': after the loop, batched over the members, so its few hundred
  # small elementwise operations are dispatched once per step rather than once per member
  # (faster on CPU, docs/speed.md). Agrees with 'member' to float rounding, not bit for bit;
  # under 'vmap' the optimizer is batched either way.
  c.optimizer_loop = 'member'
  # Training steps per compiled call: K > 1 runs K steps in one program on the device (a
  # scan over steps with a switch over the program widths), so an accelerator is not held
  # back by one Python dispatch per step; equal to K = 1 bit for bit. 0: by platform (1 on
  # CPU, 8 on GPU and TPU: posenc.programs.devices.PLATFORMS).
  c.steps_per_dispatch = 0
  # The training programs (posenc/programs/__init__.py): 'auto' (the widths with the least estimated
  # compile and run time), 'buckets' (one per length bucket), 'one' (one at N), or program
  # widths such as '20,40'. Batches are drawn at their bucket's width whatever the plan, so
  # the data are the same; a plan changes the programs, and with them the float rounding.
  # A run keeps the plan it started with (plan.json in its work directory).
  c.programs = 'auto'
  # Looped models: the progressive loss (1 - α) loss(R) + α loss(n + k) (Bansal et al.
  # 2022): n ~ U{0..R-1} recurrences without gradient, then k ~ U{1..max(1, min(R - n,
  # R // 2))} with gradient. 0 trains on loss(R) only.
  c.progressive_alpha = 0.0
  c.scale_block_gradients = False  # divide the looped block's gradients by R
  c.loss_on = 'answer'  # decoder: 'answer' (and its EOS) or 'all' tokens
  # With hints: 'alternate' steps between the tasks, or 'mixed' batches of every task.
  c.hint_schedule = 'alternate'
  # Hinting tasks: 0 draws a fresh example every time; D > 0 a fixed training set of D
  # examples, split equally between the tasks, drawn with replacement.
  c.dataset_size = 0
  return c


def _eval_config() -> ml_collections.ConfigDict:
  """`base_config().eval`: the study's evaluation, and every kind's settings."""
  c = ml_collections.ConfigDict()
  c.max_length = 500  # M.
  c.examples_per_length = 512
  c.batch_size = 64  # Sub-batch: positions are redrawn per sub-batch.
  c.lengths = []  # Empty: every length 1..M.
  c.stride = 1  # >1 evaluates a budget subset; see `eval_lengths`.
  # Examples of a length are drawn padded to its bucket of bucket_size (the frozen sets'
  # widths); the evaluation's programs are eval.programs' (as train.programs).
  c.bucket_size = 32
  c.programs = 'auto'
  # The reference keeps dropout active at evaluation; posenc evaluates deterministically
  # unless this is set.
  c.eval_dropout = False
  c.seed = 1  # Evaluation data: identical for every model and every run.
  # A frozen evaluation set (launch.export_eval_set): read the examples from this
  # directory instead of sampling them ('': sample).
  c.from_files = ''
  # Sequence tasks (arithmetic): exact match per cell (a, b) of [1..grid_max]^2 (every
  # grid_stride-th value and grid_max), samples_per_cell examples each, plus the equal
  # lengths of `beyond` past grid_max; cells padded to multiples of eval.bucket_size.
  c.grid_max = 100
  c.grid_stride = 1
  c.samples_per_cell = 100
  c.beyond = []
  # Language modelling (a text corpus): perplexity at eval.lengths of the first lm_tokens
  # validation bytes, in non-overlapping windows and in windows sliding by sliding_stride.
  c.lm_tokens = 16_384
  c.sliding_stride = 64
  # Hinting tasks: full-sequence accuracy and edit distance at each of eval.lengths (every
  # example exactly that long) under each test distribution of the main task.
  c.distributions = ['uniform']
  return c


def _model_config() -> ml_collections.ConfigDict:
  """`base_config().model`: the study's encoder."""
  c = ml_collections.ConfigDict()
  # 'encoder' (the study's: outputs read off empty query tokens in one pass) or 'decoder'
  # (causal: prompt ⊕ separator ⊕ answer ⊕ EOS, judged by greedy generation).
  c.family = 'encoder'
  c.num_layers = 5  # L (the looped block's layers when recurrences > 1)
  c.d_model = 64
  c.num_heads = 8
  c.ffn_size = 256
  c.dropout = 0.1
  c.max_position = 2048  # L_max: range of randomized positions, learned table rows.
  # The attention backend (posenc.attention): 'auto' (cpu_blocked on CPU, xla_fused on GPU
  # and TPU), 'reference', 'xla_fused' or 'cpu_blocked'. Speed only: every backend computes
  # the same function.
  c.attention_impl = 'auto'
  # cpu_blocked runs sequences longer than this per head in query blocks of at most this
  # many rows (0 never splits).
  c.attention_block = 256
  # xla_fused's jax.nn.dot_product_attention: 'xla', or 'cudnn' (flash attention on NVIDIA
  # GPUs, bfloat16 only).
  c.fused_implementation = 'xla'
  # Computation and parameter dtypes: float32 or bfloat16.
  c.dtype = 'float32'
  c.param_dtype = 'float32'
  c.norm = 'post'  # 'post' (the study's) or 'pre' LayerNorm
  c.ffn = 'relu'  # 'relu' or 'gelu_glu'
  # A looped block (McLeish et al. 2024): the L layers applied R times with shared weights,
  # the embedded input injected before every 'layer' or every application of the 'block'.
  c.recurrences = 1
  c.injection = 'none'
  c.loop = False  # the looped structure even at R = 1 without injection
  c.eval_recurrences = 0  # R at evaluation; 0: the training R
  c.tie_embeddings = False  # decoder: output projection = token embedding^T
  # Attention temperature β ln(n) per layer (Awasthi & Gupta 2023): 'none', 'fixed' or
  # 'learned' (from temperature_beta).
  c.temperature = 'none'
  c.temperature_beta = 1.0
  return c


# ---------------------------------------------------------------------------------------
# The scales: the study's protocol shrunk.

# The study's protocol shrunk (`scale`), as dotted fields: 'cpu' runs in minutes on a CPU
# (the quickstart's: 3 layers, 2,000 steps at batch 64 on lengths 1..16, tested up to 64
# at every third length; 2 seeds at learning rate 1e-3); 'tiny' runs the same code path in
# seconds (the tests').
SCALES = {
  'cpu': {
    'seeds': [0, 1],
    'learning_rates': [1e-3],
    'checkpoint_every': 500,
    'train.steps': 2000,
    'train.batch_size': 64,
    'train.max_length': 16,
    'train.log_every': 100,
    'train.bucket_size': 8,
    'eval.max_length': 64,
    'eval.examples_per_length': 128,
    'eval.stride': 3,
    'eval.bucket_size': 16,
    'model.num_layers': 3,
    'model.max_position': 256,
  },
  'tiny': {
    'seeds': [0, 1],
    'learning_rates': [1e-3],
    'checkpoint_every': 10,
    'train.steps': 20,
    'train.batch_size': 8,
    'train.max_length': 8,
    'train.log_every': 5,
    'train.bucket_size': 4,
    'eval.max_length': 12,
    'eval.examples_per_length': 16,
    'eval.batch_size': 8,
    'eval.bucket_size': 6,
    'model.num_layers': 2,
    'model.d_model': 16,
    'model.num_heads': 2,
    'model.ffn_size': 32,
    'model.max_position': 64,
  },
}


def scale(c: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
  """`c` with the fields of the scale `name` (`SCALES`), in place; returns `c`.

  Example:
    >>> c = scale(base_config(), 'cpu')
    >>> c.train.steps, c.model.num_layers, c.model.d_model
    (2000, 3, 64)
  """
  c.update_from_flattened_dict(copy.deepcopy(SCALES[name]))
  return c


def shrink_to_tiny(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The `tiny` mode: the same code path, small enough to run in seconds on a CPU
  (`SCALES['tiny']`)."""
  return scale(c, 'tiny')


def parse_arg(
  arg: str | None, *, at_least: Mapping[str, int] | None = None, **defaults: Any
) -> ml_collections.ConfigDict:
  """Parses an experiment file's arg string, typed by `defaults`.

  The string is comma-separated `key=value` pairs and bare flags (a bare flag sets a
  bool default to True). Values take the type of their default; bools are strict.

  Args:
    arg: e.g. 'task=reverse_string,encoding=relative,tiny', or None / ''.
    at_least: the smallest value of integer keys when the arg string gives them, e.g.
      {'seeds': 1} refuses 'seeds=0' and 'seeds=-1' (a default may be a sentinel such as 0,
      "the mode's own count", and is not checked).
    **defaults: every accepted key with its default value.

  Returns:
    A ConfigDict with every key of `defaults`.

  Raises:
    ConfigError: an unknown key, a bare non-bool key, a value of the wrong type, or an
      integer below its `at_least`.
  """
  out = dict(defaults)
  for item in filter(None, (arg or '').split(',')):
    key, eq, value = item.partition('=')
    key = key.strip()
    if key not in defaults:
      raise ConfigError(
        f'unknown config arg {key!r}{suggest.did_you_mean(key, defaults)}; valid args: '
        f'{", ".join(sorted(defaults)) or "none (this file takes no args)"}'
      )
    default = defaults[key]
    if not eq:
      if not isinstance(default, bool):
        raise ConfigError(f'config arg {key!r} needs a value ({key}=...)')
      out[key] = True
    elif isinstance(default, bool):
      if value not in ('True', 'False', 'true', 'false', '1', '0'):
        raise ConfigError(f'config arg {key}={value!r} is not a bool; use true or false')
      out[key] = value in ('True', 'true', '1')
    else:
      try:
        out[key] = type(default)(value)
      except ValueError:
        raise ConfigError(f'config arg {key}={value!r} is not a {type(default).__name__}') from None
      low = (at_least or {}).get(key)
      if low is not None and out[key] < low:
        raise ConfigError(f'config arg {key}={value} must be an integer >= {low}')
  return ml_collections.ConfigDict(out)


def cell_config(
  base: ml_collections.ConfigDict, overrides: dict[str, Any]
) -> ml_collections.ConfigDict:
  """`base` with the cell's overrides (dotted keys allowed)."""
  config = copy.deepcopy(base)
  with config.unlocked():
    for key, value in overrides.items():
      node = config
      *path, leaf = key.split('.')
      for part in path:
        node = node[part]
      node[leaf] = value
  return config


def eval_lengths(config: ml_collections.ConfigDict) -> list[int]:
  """The lengths the range evaluation runs, ascending.

  `eval.lengths` (if non-empty) wins. Otherwise every length 1..M when `eval.stride`
  is 1; with a stride s, the budget subset 1, 1+s, 1+2s, ... plus N, N+1 and M (so the
  boundary of the training range and the longest length are always measured).

  Example: N = 40, M = 500, stride 50 -> [1, 40, 41, 51, 101, ..., 451, 500].
  """
  m, n = config.eval.max_length, config.train.max_length
  if config.eval.lengths:
    return sorted(set(int(l) for l in config.eval.lengths))
  if config.eval.stride <= 1:
    return list(range(1, m + 1))
  picked = set(range(1, m + 1, config.eval.stride)) | {n, m}
  if n + 1 <= m:
    picked |= {n + 1}
  return sorted(l for l in picked if 1 <= l <= m)


def members(config: ml_collections.ConfigDict) -> list[dict[str, Any]]:
  """The population: every (seed, learning rate), seed-major; with `data_seeds`, every
  (seed, data seed, learning rate).

  Example: seeds [0, 1], learning_rates [1e-4, 3e-4] ->
    [{'seed': 0, 'learning_rate': 1e-4}, {'seed': 0, 'learning_rate': 3e-4},
     {'seed': 1, 'learning_rate': 1e-4}, {'seed': 1, 'learning_rate': 3e-4}]
  and with data_seeds [5, 6], seeds [0], learning_rates [1e-4] ->
    [{'seed': 0, 'data_seed': 5, 'learning_rate': 1e-4},
     {'seed': 0, 'data_seed': 6, 'learning_rate': 1e-4}]
  """
  if not config.get('data_seeds'):
    return [
      {'seed': int(s), 'learning_rate': float(lr)}
      for s in config.seeds
      for lr in config.learning_rates
    ]
  return [
    {'seed': int(s), 'data_seed': int(d), 'learning_rate': float(lr)}
    for s in config.seeds
    for d in config.data_seeds
    for lr in config.learning_rates
  ]


def field(config: ml_collections.ConfigDict, key: str) -> Any:
  """The value of a dotted field: field(config, 'eval.seed') is config.eval.seed."""
  for part in key.split('.'):
    config = config[part]
  return config


def setting(config: ml_collections.ConfigDict, key: str) -> Any:
  """A dotted field's value, or for a config recorded before the field existed the value
  that reproduces it (`ADDED_FIELDS`).

  Example: setting(config, 'train.programs') of a config.json without it -> 'buckets'.
  """
  try:
    return field(config, key)
  except (KeyError, AttributeError):
    if key in ADDED_FIELDS:
      return ADDED_FIELDS[key]
    raise


def is_int(x: Any) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def choices(bad: Any, name: str, valid: list[str]) -> ConfigError:
  return ConfigError(
    f'unknown {name} {bad!r}{suggest.did_you_mean(bad, valid)}; valid {name}s: {", ".join(valid)}'
  )


def check_ints(
  values: list[Any], name: str, low: int = 0, high: int = 2**32, what: str = ''
) -> None:
  """ConfigError naming the first of `values` that is not an integer in low..high-1, or a
  duplicate: seeds, data seeds.

  Example: check_ints([0, 0], 'seeds') raises 'seeds [0, 0] has duplicates; ...'.
  """
  bad = [v for v in values if not is_int(v) or not low <= v < high]
  if bad:
    raise ConfigError(
      f'{name} {values}: {bad[0]!r} is not an integer in {low}..2^32-1; '
      f'{name} must be integers in {low}..2^32-1{what}'
    )
  if len(set(values)) != len(values):
    raise ConfigError(f'{name} {values} has duplicates; each must be unique')


# The sizes every run has, each a positive integer; those with a limit name it.
POSITIVE = (
  'train.steps',
  'train.batch_size',
  'train.max_length',
  'train.log_every',
  'train.bucket_size',
  'checkpoint_every',
  'eval.max_length',
  'eval.examples_per_length',
  'eval.batch_size',
  'eval.bucket_size',
  'eval.stride',
)
LIMITS = {
  'train.steps': ('MAX_STEPS', MAX_STEPS),
  'train.max_length': ('MAX_LENGTH', MAX_LENGTH),
  'eval.max_length': ('MAX_LENGTH', MAX_LENGTH),
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError (one line) for what is wrong with the config's general fields: its
  sizes and their limits, the evaluation lengths and seeds. The fields other modules own are
  theirs to check (`posenc.setup.build` runs every check: the population's, the model's,
  the encoding's, the protocol's)."""
  for key in POSITIVE:
    value = field(config, key)
    if not is_int(value) or value < 1:
      raise ConfigError(f'{key}={value!r} must be a positive integer')
    if key in LIMITS and value > LIMITS[key][1]:
      name, limit = LIMITS[key]
      raise ConfigError(
        f'{key}={value} exceeds the limit of {limit:,} (posenc.config.{name}: '
        'past it a run cannot finish or fit)'
      )
  for key in ('data_seed', 'eval.seed'):
    value = field(config, key)
    if not is_int(value) or not 0 <= value < 2**32:
      raise ConfigError(f'{key}={value!r} must be an integer in 0..2^32-1')
  if config.eval.examples_per_length % config.eval.batch_size:
    raise ConfigError(
      f'eval.examples_per_length={config.eval.examples_per_length} is not a '
      f'multiple of eval.batch_size={config.eval.batch_size}'
    )
  m = config.eval.max_length
  bad = [l for l in config.eval.lengths if not (is_int(l) and 1 <= l <= m)]
  if bad:
    raise ConfigError(f'eval.lengths {bad} are outside 1..eval.max_length={m}')
  check_compilation_cache(config.get('compilation_cache', True))


# What `compilation_cache` may be, for its one-line errors.
COMPILATION_CACHE_CHOICES = (
  'True (the default directory), False (off), a local directory, or a gs://BUCKET/PATH or '
  's3://BUCKET/PATH URL'
)


def check_compilation_cache(value: Any) -> None:
  """Raises ConfigError unless `value` is True, False or a non-empty directory string (its
  scheme, bucket and writability are checked where the cache is opened, `launch/common.py`).

  Example: check_compilation_cache(0) -> ConfigError('compilation_cache=0 must be True, ...')
  """
  if isinstance(value, bool) or (isinstance(value, str) and value.strip()):
    return
  raise ConfigError(f'compilation_cache={value!r} must be {COMPILATION_CACHE_CHOICES}')


# ---------------------------------------------------------------------------------------
# A recorded run's config against a requested one.

# Keys a rerun may change without invalidating the run's checkpoints or results.
# The plans (train.programs, eval.programs) are read when a run starts: a rerun keeps the
# plan it recorded (plan.json), whatever they say then.
RESUMABLE_CHANGES = (
  'train.log_every',
  'checkpoint_every',
  'compilation_cache',
  'compile_threads',
  'tensorboard',
  'train.steps_per_dispatch',
  'train.programs',
  'eval.programs',
)


# Fields added to the config after runs were recorded without them, with the default that
# reproduces those runs: a recorded config that lacks one asked for its default.
ADDED_FIELDS = {
  'data_seeds': [],
  'eval.from_files': '',
  'compilation_cache': True,
  'tensorboard': False,
  'cpu_devices': 0,
  'train.optimizer_loop': 'member',
  'compile_threads': 0,
  'train.programs': 'buckets',
  'eval.programs': 'buckets',
}


class _Absent:
  """The value of a field one side of a comparison lacks (a config of another version)."""

  def __repr__(self) -> str:
    return 'absent'


ABSENT = _Absent()


def as_json(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The config as config.json records it (JSON types: tuples become lists)."""
  return json.loads(config.to_json())


def flatten(d: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """Nested dicts as one dict of dotted keys.

  Example: flatten({'train': {'steps': 10}, 'task': 'x'}) == {'train.steps': 10, 'task': 'x'}.
  """
  out = {}
  for k, v in d.items():
    if isinstance(v, Mapping):
      out.update(flatten(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = v
  return out


def config_changes(
  recorded: Mapping[str, Any], requested: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
  """The fields (dotted, sorted) in which a recorded config and a requested one differ, as
  (key, recorded value, requested value), leaving out the RESUMABLE_CHANGES; a field one
  side lacks has the value ABSENT there. Both are JSON dicts (config.json, `as_json`).

  This is the one test of whether a run directory holds the requested run: training
  refuses to resume a run that differs, and a sweep counts only an equal run as done.

  Example:
    >>> config_changes({'train': {'steps': 2000, 'log_every': 100}},
    ...                {'train': {'steps': 4000, 'log_every': 10}})
    [('train.steps', 2000, 4000)]
  """
  old, new = flatten(recorded), flatten(requested)
  value = lambda d, k: d.get(k, ADDED_FIELDS.get(k, ABSENT))
  return [
    (k, value(old, k), value(new, k))
    for k in sorted(set(old) | set(new))
    if value(old, k) != value(new, k) and k not in RESUMABLE_CHANGES
  ]


def describe_changes(changes: list[tuple[str, Any, Any]], limit: int = 4, width: int = 40) -> str:
  """`config_changes` as one short phrase: 'key old -> new' for the first `limit` fields,
  each value cut to `width` characters.

  Example:
    >>> describe_changes([('train.steps', 2000, 4000), ('seeds', [0, 1], [0])])
    'train.steps 2000 -> 4000, seeds [0, 1] -> [0]'
  """

  def text(value: Any) -> str:
    out = repr(value) if value is ABSENT else json.dumps(value, separators=(', ', ': '))
    return out if len(out) <= width else out[: width - 3] + '...'

  parts = [f'{k} {text(a)} -> {text(b)}' for k, a, b in changes[:limit]]
  if len(changes) > limit:
    parts.append(f'and {len(changes) - limit} more field{"s" * (len(changes) - limit > 1)}')
  return ', '.join(parts)
