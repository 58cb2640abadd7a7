"""The task-hinting study (Awasthi & Gupta 2023): sorting (and increment) trained with an
auxiliary hint task on the same backbone, judged by full-sequence accuracy and edit distance
at test lengths past training, on uniform and repetition-heavy (rep(i, r)) inputs.

  python -m launch.train --config=experiments/sorting_hints.py:hint=successor \\
      --workdir=runs/sorting__successor
  python -m launch.sweep --config=experiments/sorting_hints.py:cpu --workdir=runs/hints_cpu
  python -m launch.report runs/hints_cpu --out=runs/hints_cpu/report

The paper's protocol (sorting): a causal decoder of depth 2 and width 1024, Adam, 100k steps
at batch 1024, a one-cycle cosine schedule with warm-up at base rate 1e-5, values 1..100,
training lengths up to 20 (80% in 2..5), 160M training examples (split equally between the
main task and its hint), tested on 100k sequences per length, on uniform inputs and on
rep(i, r) for r = 2..5. Not in the paper, our choices: 16 heads, a feed-forward of 4 x 1024,
pre-LayerNorm (Flaxformer's), no dropout, a 10% warm-up (the paper's "10 epochs" is more than
its whole run at 160M), the test lengths 5, 10, 20, 30, ..., 100, and the positional encoding
(the paper does not name one): DEFAULT_ENCODING, the best of those measured at CPU scale
without hints (docs/hints.md). Increment (`task=increment`): depth 4, numbers of up to 10
digits (80% of at most 4), 10% ending in a run of 9s, 1M examples, the carry hint.

Args:
  task=sorting|increment
  hint=none|successor|count|fill|all (sorting), none|carry|all (increment)
  encoding=NAME (any of posenc.encodings)
  temperature=none|fixed|learned, beta=FLOAT: the attention temperature β ln(n) per layer
  dataset=N: training examples in all (0: fresh examples at every step)
  modified: the "modified" training set (10% of sorting sequences with repetitions)
  schedule=alternate|mixed: strictly alternating steps (the paper's) or mixed batches
  cpu: minutes on this CPU: a 2-layer model of width 128 (4 heads) on 4,000 steps of 64
    sequences at 1e-3, no hint against the successor hint (`grid`), 2 seeds each, fresh
    examples, tested at lengths 5..100 on 256 sequences per length and distribution
  tiny: seconds; what the tests run

`grid(arg)` lists the paper's comparisons (hints x temperature), or with `cpu` the small one.
"""

from posenc import config as config_lib
from posenc import suggest

TASKS = {'sorting': 'sorting_hinted', 'increment': 'increment'}
HINTS = {'sorting': ('successor', 'count', 'fill'), 'increment': ('carry',)}
# The paper's test distributions, and for sorting our 'distinct' (n different values), which
# separates length generalization from the handling of duplicates.
DISTRIBUTIONS = {
  'sorting': ['uniform', 'rep2', 'rep3', 'rep4', 'rep5', 'distinct'],
  'increment': ['uniform', 'nines'],
}
TEMPERATURES = ('none', 'fixed', 'learned')
# Chosen by measurement at CPU scale without hints (docs/hints.md): of none, rotary, alibi,
# t5 and fire, FIRE sorted the most length-20 inputs exactly and had the smallest edit
# distance at lengths 50 and 100.
DEFAULT_ENCODING = 'fire'


def _arg(arg):
  parsed = config_lib.parse_arg(
    arg,
    at_least={'dataset': 0},  # -1, the default: the mode's own size
    task='sorting',
    hint='none',
    encoding=DEFAULT_ENCODING,
    temperature='none',
    beta=1.0,
    dataset=-1,
    modified=False,
    schedule='alternate',
    cpu=False,
    tiny=False,
  )
  if parsed.task not in TASKS:
    raise config_lib.ConfigError(
      f'unknown task {parsed.task!r}{suggest.did_you_mean(parsed.task, TASKS)} for this study; valid: {", ".join(TASKS)}'
    )
  valid = ('none', *HINTS[parsed.task], 'all')
  if parsed.hint not in valid:
    raise config_lib.ConfigError(
      f'unknown hint {parsed.hint!r}{suggest.did_you_mean(parsed.hint, valid)} for task {parsed.task!r}; valid: {", ".join(valid)}'
    )
  if parsed.temperature not in TEMPERATURES:
    raise config_lib.ConfigError(
      f'unknown temperature {parsed.temperature!r}; valid: {", ".join(TEMPERATURES)}'
    )
  return parsed


def hints_of(task, hint):
  """The hint task names of arg `hint`. Example: ('sorting', 'all') -> ['successor', 'count',
  'fill']."""
  if hint == 'none':
    return []
  return list(HINTS[task]) if hint == 'all' else [hint]


def get_config(arg=None):
  parsed = _arg(arg)
  sorting = parsed.task == 'sorting'
  c = config_lib.base_config()
  c.task = TASKS[parsed.task]
  c.hints = hints_of(parsed.task, parsed.hint)
  c.encoding = parsed.encoding
  if sorting and parsed.modified:
    c.task_options.repeat_share = 0.1
  c.model.family = 'decoder'
  c.model.num_layers = 2 if sorting else 4
  c.model.d_model, c.model.num_heads, c.model.ffn_size = 1024, 16, 4096
  c.model.norm, c.model.dropout = 'pre', 0.0
  c.model.max_position = 256  # the longest test sequence: 201 tokens (sorting at 100)
  c.model.temperature, c.model.temperature_beta = parsed.temperature, parsed.beta
  c.train.optimizer, c.train.schedule, c.train.warmup = 'adam', 'cosine', 0.1
  c.train.hint_schedule = parsed.schedule
  c.seeds, c.learning_rates = [0, 1, 2], [1e-5]
  c.train.steps, c.train.batch_size = 100_000, 1024
  c.train.max_length = 20 if sorting else 10
  default_size = 160_000_000 if sorting else 1_000_000
  c.train.dataset_size = default_size if parsed.dataset < 0 else parsed.dataset
  c.train.log_every, c.checkpoint_every = 500, 5000
  c.eval.distributions = list(DISTRIBUTIONS[parsed.task])
  c.eval.lengths = [5, 10] + list(range(20, 101, 10)) if sorting else [5, 10, 15, 20, 30, 50]
  c.eval.examples_per_length, c.eval.batch_size = 100_000, 1000
  if parsed.cpu:
    c.model.d_model, c.model.num_heads, c.model.ffn_size = 128, 4, 512
    c.seeds, c.learning_rates = [0, 1], [1e-3]
    c.train.steps, c.train.batch_size = 4000, 64
    c.train.log_every, c.checkpoint_every = 250, 1000
    c.train.steps_per_dispatch = 50  # one dispatch per 50 steps: same result, 1.5x faster here
    c.train.dataset_size = 0 if parsed.dataset < 0 else parsed.dataset
    c.eval.lengths = [5, 10, 20, 30, 50, 75, 100] if sorting else [5, 10, 20, 30, 50]
    c.eval.examples_per_length, c.eval.batch_size = 256, 128
  if parsed.tiny:
    c.model.num_layers, c.model.d_model, c.model.num_heads, c.model.ffn_size = 1, 16, 2, 32
    c.model.max_position = 64
    c.seeds, c.learning_rates = [0, 1], [1e-3]
    c.train.steps, c.train.batch_size, c.train.max_length = 20, 8, 6
    c.train.log_every, c.checkpoint_every = 5, 10
    c.train.dataset_size = 0 if parsed.dataset < 0 else parsed.dataset
    if sorting:
      c.task_options.num_values = 10
    c.eval.distributions = c.eval.distributions[:2]
    c.eval.lengths = [4, 8]
    c.eval.examples_per_length, c.eval.batch_size = 8, 4
  return c


def grid(arg=None):
  """Cells as config overrides. Paper: every hint with and without a learned temperature;
  `cpu`: no hint against the successor (or carry) hint."""
  parsed = _arg(arg)
  task = TASKS[parsed.task]
  first = HINTS[parsed.task][0]
  if parsed.cpu or parsed.tiny:
    return [{'task': task, 'encoding': parsed.encoding, 'hints': hints} for hints in ([], [first])]
  variants = [hints_of(parsed.task, h) for h in ('none', *HINTS[parsed.task], 'all')]
  return [
    {'task': task, 'encoding': parsed.encoding, 'hints': hints, 'model.temperature': temperature}
    for temperature in ('none', 'learned')
    for hints in variants
  ]
