"""The positional methods of 2024-2025 on the study's harness (docs/encodings_2024.md).

  python -m launch.sweep --config=experiments/encodings_2024.py:cpu --workdir=runs/enc2024
  python -m launch.sweep --config=experiments/encodings_2024.py:cpu,study=arithmetic \\
      --workdir=runs/enc2024_arithmetic
  python -m launch.report runs/enc2024 --scorecard --out=runs/enc2024/report

study=tasks (default): the study's tasks in decoder form (as rpe_decoder.py: a causal
decoder trained by teacher forcing, judged by greedy generation), since CoPE, forgetting
and stick-breaking attention are causal by definition: DAPE and DAPE-V2 (over ALiBi),
CoPE, forgetting attention, stick-breaking attention and PoPE against the study's best
(randomized RoPE, randomized relative) and no positional encoding, on even_pairs,
reverse_string and missing_duplicate_string, every cell a population of seeds trained in one
compiled step.

study=arithmetic: position coupling against Abacus and no positional encoding on addition,
in the arithmetic study's CPU mode (abacus_arithmetic.py:cpu, its standard 4-layer decoder).

Args: study=tasks|arithmetic, `cpu` (minutes per cell on a CPU), `tiny` (for tests),
seeds=K. Without `cpu` or `tiny`: the study's scale (rpe_decoder.py's, or
abacus_arithmetic.py's for study=arithmetic).
"""

from experiments import abacus_arithmetic
from experiments import rpe_decoder
from posenc import config as config_lib
from posenc import suggest

STUDIES = ('tasks', 'arithmetic')
TASKS = ('even_pairs', 'reverse_string', 'missing_duplicate_string')
NEW = ('dape', 'dape_v2', 'cope', 'forgetting', 'stick_breaking', 'pope')
BASELINES = ('randomized_rotary', 'randomized_relative', 'none')
ARITHMETIC = ('position_coupling', 'abacus', 'none')

_DEFAULTS = dict(study='tasks', cpu=False, tiny=False, seeds=0)


def _arg(arg):
  parsed = config_lib.parse_arg(arg, at_least={'seeds': 1}, **_DEFAULTS)
  if parsed.study not in STUDIES:
    raise config_lib.ConfigError(
      f'unknown study {parsed.study!r}{suggest.did_you_mean(parsed.study, STUDIES)}; valid: {", ".join(STUDIES)}'
    )
  return parsed


def get_config(arg=None):
  parsed = _arg(arg)
  scale = ','.join(flag for flag in ('cpu', 'tiny') if getattr(parsed, flag))
  if parsed.study == 'arithmetic':
    config = abacus_arithmetic.get_config(
      ','.join(filter(None, ['task=addition', 'encoding=position_coupling', scale]))
    )
    # Coupled ids up to P = K + n + 1, the largest Abacus index in training (an answer of
    # n + 1 digits at its largest offset K): both tables are trained over rows 0..K + n + 1.
    config.encoding_options.coupling_max_position = (
      config.encoding_options.abacus_offset + config.train.max_length + 1
    )
  else:
    config = rpe_decoder.get_config(
      ','.join(
        filter(None, [f'task={TASKS[0]}', f'encoding={NEW[0]}', 'tiny' if parsed.tiny else ''])
      )
    )
    if parsed.cpu:
      config_lib.scale(config, 'cpu')
      # 27 cells of 3 members each: a smaller model and budget keep a cell under a minute.
      config.seeds = [0, 1, 2]
      config.model.num_layers = 2
      config.train.steps = 600
      config.train.batch_size = 32
      config.checkpoint_every = 200
      config.eval.examples_per_length = config.eval.batch_size = 32
      config.eval.stride = 4
  if parsed.seeds:
    config.seeds = list(range(parsed.seeds))
  return config


def grid(arg=None):
  """The cells: every task x (new methods + baselines), or addition x ARITHMETIC."""
  parsed = _arg(arg)
  if parsed.study == 'arithmetic':
    standard = abacus_arithmetic.grid(','.join(filter(None, ['task=addition', 'cpu'])))[0]
    return [{**standard, 'encoding': e} for e in ARITHMETIC]
  return [{'task': t, 'encoding': e} for t in TASKS for e in NEW + BASELINES]
