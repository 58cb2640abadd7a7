"""Language models that extrapolate (Qin et al. 2023) and language models without positions
(Haviv et al. 2022): a causal byte-level decoder trained on the Python standard library's
source at length m, its perplexity measured at lengths m..k·m.

  python -m launch.train --config=experiments/extrapolation_lm.py:encoding=type1 \\
      --workdir=runs/lm__type1
  python -m launch.sweep --config=experiments/extrapolation_lm.py:cpu --workdir=runs/lm_cpu

Qin et al.'s WikiText-103 protocol, as far as it carries over: 6 decoder layers of width
512 (8 heads, feed-forward 2048), trained at length 512 with batch 128 for 50,000 updates,
Adam (0.9, 0.98) with weight decay 0.01 at 5e-4, tested at lengths 512..9216. Differences:
bytes instead of BPE tokens, the Python standard library instead of WikiText-103 (no
download), and a trapezoid schedule with 8% warm-up (their inverse square root with 4,000
warm-up steps is not implemented). Perplexity is per byte.

Args: encoding=NAME (any of posenc.encodings; `none` is Haviv et al.'s NoPos),
family=decoder|encoder (a causal language model, or a bidirectional masked one: 15% of the
bytes masked, scored by the perplexity of the masked bytes; Haviv et al.'s Table 4), and the bare
flags `cpu` (minutes on a CPU: a 2-layer decoder of width 64 trained at length 64 for 1,500
steps, tested at 64..512; its grid compares the bias families, their divergent controls,
sin/cos, learned positions, none and two randomized encodings; docs/lm.md has the measured
table) and `tiny` (seconds; what the
tests run).
"""

from ml_collections import config_dict

from posenc import config as config_lib

CPU_ENCODINGS = (
  'none',
  'learned',
  'sin_cos',
  'alibi',
  'kerple_log',
  'type1',
  'type2',
  'inverse_n',
  'inverse_n_log_n',
  'randomized_sin_cos',
  'randomized_type1',
)
PAPER_LENGTHS = (512, 768, 1024, 1280, 1536, 1792, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216)


def _arg(arg):
  parsed = config_lib.parse_arg(arg, encoding='type1', family='decoder', cpu=False, tiny=False)
  if parsed.family not in ('decoder', 'encoder'):
    raise config_lib.ConfigError(
      f'unknown family {parsed.family!r}; valid: decoder (a causal '
      'language model), encoder (a masked language model)'
    )
  return parsed


def get_config(arg=None):
  parsed = _arg(arg)
  c = config_lib.base_config()
  c.task = 'python_stdlib'
  c.encoding = parsed.encoding
  # The bias families' options (posenc.encodings.families), settable from the command line.
  c.encoding_options.update(
    {
      'bias_two_sided': False,
      'bias_r': config_dict.placeholder(float),
      'bias_k': config_dict.placeholder(float),
      'kerple_r_min': 0.01,
      'bias_window': 128,
      'sandwich_dim': 0,
      't5_buckets': 32,
      't5_max_distance': 128,
    }
  )
  c.task_options.valid_percent = 10
  c.task_options.max_train_bytes = 4_000_000
  c.task_options.max_valid_bytes = 400_000
  # decoder: a causal LM; encoder: a bidirectional masked LM (Haviv et al.'s Table 4 shape).
  c.model.family = parsed.family
  c.model.d_model, c.model.num_heads, c.model.ffn_size, c.model.num_layers = 512, 8, 2048, 6
  c.model.norm, c.model.dropout = 'pre', 0.1
  c.model.max_position = 10_240  # learned and randomized tables: the longest test length
  c.train.loss_on = 'all'
  c.train.optimizer, c.train.weight_decay = 'adamw', 0.01
  c.train.schedule, c.train.warmup, c.train.cooldown = 'trapezoid', 0.08, 0.0
  c.seeds, c.learning_rates = [0], [5e-4]
  c.train.steps, c.train.batch_size, c.train.max_length = 50_000, 128, 512
  c.train.log_every, c.checkpoint_every = 100, 1000
  c.eval.lengths = list(PAPER_LENGTHS)
  c.eval.max_length = max(PAPER_LENGTHS)
  c.eval.batch_size = 4
  c.eval.lm_tokens, c.eval.sliding_stride = 65_536, 256
  if parsed.cpu:
    c.model.d_model, c.model.num_heads, c.model.ffn_size, c.model.num_layers = 64, 4, 256, 2
    c.model.max_position = 512
    c.task_options.max_train_bytes = 1_000_000
    c.seeds, c.learning_rates = [0], [3e-3]
    c.train.steps, c.train.batch_size, c.train.max_length = 1500, 32, 64
    c.train.log_every, c.checkpoint_every = 100, 500
    c.eval.lengths, c.eval.batch_size = [64, 128, 256, 512], 8
    c.eval.max_length = 512
    c.eval.lm_tokens, c.eval.sliding_stride = 8192, 32
  if parsed.tiny:
    c.model.d_model, c.model.num_heads, c.model.ffn_size, c.model.num_layers = 16, 2, 32, 1
    c.model.max_position = 64
    c.task_options.max_train_bytes, c.task_options.max_valid_bytes = 65_536, 8192
    c.seeds, c.learning_rates = [0, 1], [3e-3]
    c.train.steps, c.train.batch_size, c.train.max_length = 10, 4, 16
    c.train.log_every, c.checkpoint_every = 5, 5
    c.eval.lengths, c.eval.batch_size = [16, 32], 4
    c.eval.max_length = 32
    c.eval.lm_tokens, c.eval.sliding_stride = 256, 8
  return c


def grid(arg=None):
  """Cells as config overrides: one encoding each (the CPU grid, or the paper's seven).
  With family=encoder: Haviv et al.'s masked-LM comparison (none, learned, sin/cos, ALiBi)."""
  parsed = _arg(arg)
  if parsed.family == 'encoder':
    return [
      {'task': 'python_stdlib', 'encoding': name, 'model.family': 'encoder'}
      for name in ('none', 'learned', 'sin_cos', 'alibi')
    ]
  names = (
    CPU_ENCODINGS
    if parsed.cpu or parsed.tiny
    else (
      'sin_cos',
      'alibi',
      'kerple_log',
      'kerple_power',
      'sandwich',
      'type1',
      'type2',
      'inverse_n',
      'inverse_n_log_n',
      'none',
      'learned',
      'randomized_sin_cos',
      'randomized_alibi',
      'randomized_kerple_log',
      'randomized_type1',
      'randomized_type2',
    )
  )
  return [{'task': 'python_stdlib', 'encoding': name} for name in names]
