"""The programs a run compiles: which ones (the plan, chosen by cost); compiling them at once
is `compiling.py`'s, the devices' figures the plan reads `devices.py`'s.

Batches are drawn at *data widths*: the padded input lengths the config's bucket size
defines (`train.bucket_size`, `eval.bucket_size`). The random data of a length depend on
its data width and on nothing here. A *program width* is the padded input length of a
compiled program; a program serves every data width up to its own, each batch drawn at its
data width and padded with zeros (the padding convention of `tasks.base`). So the data do
not depend on the plan, and neither does the function computed: padded positions are
masked, and only the float rounding of sums over them can differ. Where the plan does not
change, the programs do not, and results repeat bit for bit.

The plan of a stage (`train.programs`, `eval.programs`) is one of `MODES`:

  'auto'      the program widths that minimise the estimated seconds to compile and run;
  'buckets'   one program per data width (the finest plan);
  'one'       one program at the widest data width;
  'W1,W2,..'  these program widths; the widest must hold the widest data width.

'auto' estimates, for a set W of program widths,

  compile(W) = |W| * lower_s + ceil(|W| / threads) * compile_s
  run(W)     = sum over data widths d of  calls(d) * seconds(w(d))
  seconds(w) = dispatch_s / K + repeats * (step_s + flops(w) / flops_per_s)

where w(d) is the narrowest program width >= d, calls(d) the calls expected at data width
d (training: the steps whose curriculum length falls in d; evaluation: one per length), K
the steps per call, and flops(w) the work of one run of the program's body: XLA's cost
analysis of the widest program lowered for the run's platform (that lowering is then
compiled, not redone), scaled to narrower widths by a transformer's work over their tokens
(`Stage.work`: the one FLOPs formula, `training.settings.ModelSettings.flops`); `repeats` counts the loop trips the analysis counts once (members
under a map, sub-batches, micro-batches). Lowering is Python (one program at a time);
compiling runs in `threads` threads (`compiling.compile_all`). The platforms' figures are
the device table's (`devices`, measured: docs/speed.md, docs/gpu.md). Where compiling a program costs more than the steps it saves,
programs merge: a short run gets one or two; a run of millions of steps keeps its buckets
wherever a step's cost grows with its width (on this CPU and, by the first GPU
measurements, on a GPU too). The plan is a function of the config, the platform, the
compile threads and XLA's analysis, never of a timing, and a run records it (plan.json in
its work directory) and keeps it when resumed.

Example:
  >>> plan = choose_widths((8, 16), calls=(1000, 1000), seconds=lambda w: 1e-3 * w,
  ...                      compile_s=lambda n: 5.0 * n)
  >>> plan   # two programs: their 1000 steps at 8 save 8 s, more than a program's 5 s
  (8, 16)
  >>> choose_widths((8, 16), (100, 100), lambda w: 1e-3 * w, lambda n: 5.0 * n)
  (16,)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from posenc import config as config_lib
from posenc.programs import devices

ConfigError = config_lib.ConfigError

MODES = ('auto', 'buckets', 'one')


# ---------------------------------------------------------------------------------------
# Data widths inside a program.


def round_up(x: Any, size: int) -> Any:
  """`x` rounded up to a multiple of `size` (an int, or traced in a program).

  Example: round_up(13, 10) == 20; round_up(20, 10) == 20.
  """
  return -(-x // size) * size


def data_width(length: Any, max_length: int, bucket_size: int) -> Any:
  """The data width of `length` (an int, or traced in a program): its bucket, the next
  multiple of `bucket_size`, at most `max_length`.

  Example: data_width(13, 40, 10) == 20; data_width(38, 40, 16) == 40.
  """
  up = round_up(length, bucket_size)
  return min(up, max_length) if isinstance(length, int) else jnp.minimum(up, max_length)


def data_widths(max_length: int, bucket_size: int) -> list[int]:
  """The data widths of lengths 1..max_length, ascending.

  Example: data_widths(40, 16) == [16, 32, 40].
  """
  return sorted({data_width(n, max_length, bucket_size) for n in range(1, max_length + 1)})


def data_of(data: Sequence[int], length: int) -> int:
  """The data width of `data` (ascending) that a call of real length `length` is drawn at:
  the narrowest holding it.

  Example: data_of((8, 16), 9) == 16.
  """
  return next(d for d in data if d >= length)


def data_index(length: Any, bucket_size: int, count: int) -> Any:
  """The index among the `count` data widths of `data_widths` of a traced `length`."""
  return jnp.minimum((length + bucket_size - 1) // bucket_size, count) - 1


def widened(
  width: int,
  data: tuple[int, ...],
  draw: Callable[[int], Any],
  widen: Callable[[Any, int], Any],
  at: Any,
) -> Any:
  """In a program of `width` serving the data widths `data`: `draw(d)` at the data width
  `at` (traced) of the call, padded to `width` by `widen(batch, width)`. A program serving
  only its own width draws there directly, as the finest plan's programs do."""
  if data == (width,):
    return draw(width)
  branches = [lambda d=d: widen(draw(d), width) for d in data]
  if len(branches) == 1:
    return branches[0]()
  return jax.lax.switch(jnp.sum(jnp.asarray(data[:-1]) < at), branches)


# ---------------------------------------------------------------------------------------
# Plans.


def parse(value: Any, field: str) -> str | tuple[int, ...]:
  """A plan field's value: a mode of `MODES`, or ascending program widths.

  Raises ConfigError (one line) naming the value and the valid choices.

  Example: parse('auto', 'train.programs') == 'auto'; parse('20, 40', ...) == (20, 40).
  """
  if isinstance(value, str) and value.strip() in MODES:
    return value.strip()
  items = value if isinstance(value, (list, tuple)) else str(value).split(',')
  try:
    widths = tuple(sorted({int(str(w).strip()) for w in items if str(w).strip()}))
  except ValueError:
    widths = ()
  if not widths or widths[0] < 1:
    raise ConfigError(
      f'{field}={value!r} is not a plan; valid: {", ".join(MODES)}, or program widths '
      'such as "20,40" (positive integers)'
    )
  return widths


def choose_widths(
  data: Sequence[int],
  calls: Sequence[float],
  seconds: Callable[[int], float],
  compile_s: Callable[[int], float],
) -> tuple[int, ...]:
  """The program widths, a subset of `data` holding its widest, with the least estimated
  `compile_s(number of programs) + sum_d calls(d) * seconds(w(d))`; ties go to fewer
  programs.

  Exact by dynamic programming over the number of programs: for each n the cheapest split
  of the ascending data widths into n runs, each served by its widest.
  """
  k = len(data)
  t = np.array([seconds(w) for w in data], float)
  c = np.concatenate([[0.0], np.cumsum(np.asarray(calls, float))])
  # run[i, j]: data widths i..j served by width j (inf where i > j).
  i, j = np.meshgrid(np.arange(k), np.arange(k), indexing='ij')
  run = np.where(i <= j, (c[j + 1] - c[i]) * t[j], np.inf)
  best = run[0].copy()  # best[j]: widths 0..j in n programs, the last j
  choice: list[np.ndarray] = [np.zeros(k, int)]
  totals = [best[-1] + compile_s(1)]
  for n in range(2, k + 1):
    # A run i..j after the best split of 0..i-1 into n - 1 programs.
    candidates = np.full((k, k), np.inf)
    candidates[1:, :] = best[:-1, None] + run[1:, :]
    start = np.argmin(candidates, axis=0)
    best = candidates[start, np.arange(k)]
    choice.append(start)
    totals.append(best[-1] + compile_s(n))
  n = int(np.argmin(np.round(totals, 9))) + 1  # the first minimum: the fewest programs
  widths, end = [], k - 1
  for m in range(n - 1, -1, -1):
    widths.append(data[end])
    end = int(choice[m][end]) - 1
  return tuple(sorted(widths))


@dataclasses.dataclass(frozen=True)
class Plan:
  """The programs of one stage: the data widths and the program widths serving them.

  Attributes:
    stage: 'train' or 'eval'.
    mode: how it was chosen ('auto', 'buckets', 'one', 'widths', or 'recorded').
    data: the data widths, ascending.
    widths: the program widths, ascending; the widest holds the widest data width.
    estimate: for 'auto', the estimated seconds {'chosen', 'buckets', 'one'}.

  Example:
    >>> plan = Plan('train', 'widths', (5, 10, 15, 20), (10, 20))
    >>> plan.program_of(15), plan.serves(20)
    (20, (15, 20))
  """

  stage: str
  mode: str
  data: tuple[int, ...]
  widths: tuple[int, ...]
  estimate: dict[str, float] | None = None

  def program_of(self, data_width: int) -> int:
    """The narrowest program width holding `data_width`."""
    return next(w for w in self.widths if w >= data_width)

  def program_for(self, length: int) -> int:
    """The program width serving a call of real length `length`: that of the narrowest data
    width holding it."""
    return self.program_of(data_of(self.data, length))

  def widths_for(self, data: Sequence[int]) -> list[int]:
    """The program widths serving the data widths `data`, ascending."""
    return sorted({self.program_of(d) for d in data})

  def serves(self, width: int) -> tuple[int, ...]:
    """The data widths program `width` serves."""
    return tuple(d for d in self.data if self.program_of(d) == width)

  def describe(self) -> str:
    """One line for the run's log, e.g. 'training: 1 program [16] for data widths [8, 16]
    (auto, estimated 41 s to compile and run; one per data width 45 s; one program 41 s)'."""
    stage = {'train': 'training', 'eval': 'evaluation'}.get(self.stage, self.stage)
    count = f'{len(self.widths)} program{"s" * (len(self.widths) != 1)}'
    text = f'{stage}: {count} {list(self.widths)} for data widths {list(self.data)} ({self.mode}'
    if self.estimate:
      e = self.estimate
      text += (
        f', estimated {e["chosen"]:,.0f} s to compile and run; one per data width '
        f'{e["buckets"]:,.0f} s; one program {e["one"]:,.0f} s'
      )
    return text + ')'

  def to_json(self) -> dict[str, Any]:
    return {
      'stage': self.stage,
      'mode': self.mode,
      'data': list(self.data),
      'widths': list(self.widths),
      'estimate': self.estimate,
    }

  @classmethod
  def from_json(cls, d: dict[str, Any]) -> Plan:
    return cls(d['stage'], d['mode'], tuple(d['data']), tuple(d['widths']), d.get('estimate'))


@dataclasses.dataclass(frozen=True)
class Stage:
  """One part of a run that compiles a program per width: training or an evaluation.

  Attributes:
    name: 'train' or 'eval' (the platform's compile figure and the log's word).
    choice: the config's plan value (`parse`d).
    data: the data widths, ascending.
    calls: the calls expected at each data width.
    work: program width -> the FLOPs of one sequence at that width (inputs and outputs): the
      shape of the work over widths.
    make: (program width, the data widths it serves, count=True) -> `compiling.Program`, its
      function and the arguments to lower it for; with count False its tracing is not
      counted as a compiled program.
    repeats: how often the widest program runs the loop bodies XLA's analysis counts once
      (members under a map, sub-batches, micro-batches), per call.
    threads: threads compiling at once (1 where the widths are branches of one program).
    steps_per_call: steps one call runs (K steps per dispatch share one call's fixed cost).
    needed: the data widths whose calls are still to come (None: every one).
  """

  name: str
  choice: str | tuple[int, ...]
  data: tuple[int, ...]
  calls: tuple[float, ...]
  work: Callable[[int], float]
  make: Callable[..., Any]
  repeats: int
  threads: int
  steps_per_call: int = 1
  needed: tuple[int, ...] | None = None


def cost_of(lowered: Any) -> float:
  """The FLOPs of XLA's cost analysis of a lowered program (loop bodies counted once).

  Its 'bytes accessed' is not used: counted before fusion, it overstates a compiled
  program's memory traffic many times over.
  """
  analysis = lowered.cost_analysis()
  if isinstance(analysis, (list, tuple)):  # one entry per program in older JAX versions
    analysis = analysis[0]
  return float((analysis or {}).get('flops', 0.0))


def check_holds(field: str, choice: str | tuple[int, ...], data: Sequence[int]) -> None:
  """ConfigError (one line) for program widths (`choice`, the plan field `field`'s) that
  cannot hold the widest of the data widths `data` (the lengths asked for).

  Example: check_holds('train.programs', (8, 12), (8, 16)) -> 'train.programs=8,12 cannot
  hold the widest data width 16 (...)'.
  """
  if isinstance(choice, tuple) and choice[-1] < data[-1]:
    raise ConfigError(
      f'{field}={",".join(map(str, choice))} cannot hold the widest data width {data[-1]} '
      f'(the data widths: {", ".join(map(str, data))}); the widest program must be >= '
      f'{data[-1]}, or use one of {", ".join(MODES)}'
    )


def plan(stage: Stage, platform_name: str) -> tuple[Plan, dict[str, Any]]:
  """The stage's plan, and {program name: its lowering} of the widest program where 'auto'
  lowered it and the plan keeps it as a program of its own, for `compile_all` to compile
  instead of lowering it again (its tracing was not counted in the stage's trace counter).

  Raises ConfigError (one line) for program widths that cannot hold the widest data width.
  """
  data, choice = stage.data, stage.choice
  check_holds(f'{stage.name}.programs', choice, data)
  if choice == 'buckets':
    return Plan(stage.name, 'buckets', data, data), {}
  if choice == 'one':
    return Plan(stage.name, 'one', data, (data[-1],)), {}
  if isinstance(choice, tuple):
    # Widths narrower than every data width would serve nothing.
    return Plan(stage.name, 'widths', data, tuple(w for w in choice if w >= data[0])), {}
  if len(data) == 1:
    return Plan(stage.name, 'auto', data, data), {}
  figures = devices.platform(platform_name)
  # The widest program's lowering, for the caller to compile where its plan keeps that
  # program (traced uncounted: the caller counts it if it compiles it).
  top = stage.make(data[-1], (data[-1],), False).lower()
  flops = cost_of(top)
  work_top = stage.work(data[-1])

  def seconds(width: int) -> float:
    share = stage.work(width) / work_top
    body = figures.step_s + flops * share / figures.flops_per_s
    return figures.dispatch_s / stage.steps_per_call + stage.repeats * body

  per_program = figures.compile_s.get(stage.name, figures.compile_s['train'])
  compile_s = lambda n: n * figures.lower_s + math.ceil(n / max(stage.threads, 1)) * per_program

  def total(widths: tuple[int, ...]) -> float:
    w = Plan(stage.name, '', data, widths)
    return compile_s(len(widths)) + sum(
      c * seconds(w.program_of(d)) for d, c in zip(data, stage.calls)
    )

  widths = choose_widths(data, stage.calls, seconds, compile_s)
  estimate = {'chosen': total(widths), 'buckets': total(data), 'one': total((data[-1],))}
  chosen = Plan(stage.name, 'auto', data, widths, estimate)
  # K steps per call are one program of every width: its lowering is not the widest's.
  reused = chosen.serves(data[-1]) == (data[-1],) and stage.steps_per_call == 1
  return chosen, {f'{stage.name} {data[-1]}': top} if reused else {}
