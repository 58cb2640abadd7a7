"""Tasks of the later literature in the study's decoder form (docs/later_tasks.md): flip-flop
(Liu et al. 2023), multi-query associative recall (Arora et al. 2023) and copying (Jelassi et
al. 2024), as `tasks/later.py` defines them.

  python -m launch.sweep --config=experiments/later_tasks.py:cpu --workdir=runs/later_tasks
  python -m launch.report runs/later_tasks --metric=exact_match --scorecard \\
      --out=runs/later_tasks/report

Args: task=NAME, encoding=NAME, steps=N (the `cpu` mode's training steps, 1,500 unless
given), the tasks' options (ignore_probability=P of flip_flop, num_keys=K and num_values=C
of associative_recall, num_symbols=S of copy; the tasks' defaults unless given), and the
bare flags `cpu` and `tiny` (seconds; what the tests run). Without `cpu` or `tiny` a cell is
`experiments/rpe_decoder.py`'s at the study's scale. An option set to another value than
its default goes into `task_options` and keeps the grid to the task that takes it:

  python -m launch.sweep --config=experiments/later_tasks.py:cpu,ignore_probability=0.98 \
      --workdir=runs/later_tasks_sparse

`cpu` is cpu-v1's cell (`experiments/benchmarks/cpu_v1.py`): `rpe_decoder.py`'s `cpu` scale
with a 2-layer decoder, trained on lengths 1..16 at batch 32 with three seeds (one data
order), judged by greedy generation on 32 examples at every fourth length up to 64. Its grid
is the three tasks × none, rotary, randomized_rotary and alibi.
"""

from experiments import rpe_decoder
from experiments.benchmarks import cpu_v1
from posenc import config as config_lib
import tasks

CPU_ENCODINGS = ('none', 'rotary', 'randomized_rotary', 'alibi')
CPU_STEPS = 1500
# Each task's options and their defaults: the arg string's typed defaults.
OPTIONS = {
  name: {option: getattr(tasks.get(name), option) for option in tasks.get(name).OPTIONS}
  for name in tasks.LATER
}


def _arg(arg):
  return config_lib.parse_arg(
    arg,
    at_least={'steps': 1},
    task=tasks.LATER[0],
    encoding='rotary',
    steps=CPU_STEPS,
    cpu=False,
    tiny=False,
    **{option: value for options in OPTIONS.values() for option, value in options.items()},
  )


def _changed(parsed) -> dict[str, dict]:
  """{task: its options set to another value than the default}, for the tasks with any."""
  changed = {
    name: {o: parsed[o] for o, default in options.items() if parsed[o] != default}
    for name, options in OPTIONS.items()
  }
  return {name: options for name, options in changed.items() if options}


def get_config(arg=None):
  parsed = _arg(arg)
  if parsed.cpu:
    config = cpu_v1.cell(parsed.task, parsed.encoding, parsed.steps)
  else:
    config = rpe_decoder.get_config(f'task={parsed.task},encoding={parsed.encoding}')
  if parsed.tiny:
    config_lib.shrink_to_tiny(config)
  for options in _changed(parsed).values():
    config.task_options.update(options)
  return config


def grid(arg=None):
  """The cells of `launch.sweep`: the three tasks × the `cpu` mode's four encodings, or only
  the tasks whose options the arg changes."""
  changed = _changed(_arg(arg))
  return [{'task': t, 'encoding': e} for t in changed or tasks.LATER for e in CPU_ENCODINGS]
