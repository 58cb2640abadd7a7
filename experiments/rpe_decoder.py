"""The study's tasks in decoder form: does a causal decoder generalize to longer inputs?

Each task becomes `inputs ⊕ SEP ⊕ answer ⊕ EOS`: a causal decoder is trained by teacher
forcing on the answer (lengths 1..N) and judged by greedy generation from `inputs ⊕ SEP`
with a KV cache, on every length 1..M: per-token accuracy (the score, as in Table 1) and
exact match of the whole answer (results.json: `exact_match_by_length`; `launch.report
--metric=exact_match`). Same protocol, bucketing, results files, resume, sweep and report
as rpe_table1.py.

  python -m launch.train \\
      --config=experiments/rpe_decoder.py:task=reverse_string,encoding=randomized_rotary \\
      --workdir=runs/decoder_reverse_string__randomized_rotary
  python -m launch.sweep --config=experiments/rpe_decoder.py:cpu --workdir=runs/rpe_decoder

Args: task=NAME, encoding=NAME, relative_mode=reference|symmetric (as rpe_table1), and the
bare flags `cpu` (the quickstart's scale; its grid: even_pairs and reverse_string with no
positional encoding, RoPE and randomized RoPE; docs/decoder.md has the measured result) and
`tiny` (seconds; what the tests run).
"""

from experiments import rpe_table1
from posenc import config as config_lib

CPU_TASKS = ('even_pairs', 'reverse_string')
CPU_ENCODINGS = ('none', 'rotary', 'randomized_rotary')


def _arg(arg):
  return config_lib.parse_arg(
    arg,
    task='reverse_string',
    encoding='randomized_rotary',
    relative_mode='reference',
    cpu=False,
    tiny=False,
  )


def get_config(arg=None):
  parsed = _arg(arg)
  config = rpe_table1.get_config(
    f'task={parsed.task},encoding={parsed.encoding},relative_mode={parsed.relative_mode}'
  )
  config.model.family = 'decoder'
  if parsed.cpu:
    config_lib.scale(config, 'cpu')
  if parsed.tiny:
    config_lib.shrink_to_tiny(config)
  return config


def grid(arg=None):
  """The cells of `launch.sweep`: the study's 15 x 13, or with `cpu` the small grid."""
  parsed = _arg(arg)
  if parsed.cpu:
    return [{'task': t, 'encoding': e} for t in CPU_TASKS for e in CPU_ENCODINGS]
  return rpe_table1.grid()
