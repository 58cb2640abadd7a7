"""The devices' figures: what compiling and running a program costs on each platform, for
the plan of a run's programs (`posenc.programs.plan`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Platform:
  """What compiling and running a program costs on one platform, for the plan.

  Attributes:
    lower_s: Python seconds to trace and lower one program (the study's model).
    compile_s: XLA seconds to compile one program, by stage ('train', 'eval').
    dispatch_s: host seconds of one call.
    step_s: fixed device seconds of one run of a program's body (one member's step, one
      sub-batch): kernel launches, loop overhead, small operations.
    flops_per_s: the rate the body's dense work runs at, as measured for this model size.
    steps_per_dispatch: training steps per call when `train.steps_per_dispatch` is 0.
  """

  lower_s: float
  compile_s: dict[str, float]
  dispatch_s: float
  step_s: float
  flops_per_s: float
  steps_per_dispatch: int


# cpu: this 2-core x86 VM (docs/speed.md): a training program of the study's model
# compiles in 4-6 s and an evaluation program in ~2 s; its step takes 0.09 s at bucket 5
# and 0.87 s at bucket 40 on a loaded machine, about half that idle (4e10 FLOP/s, 3 ms
# fixed); evaluation runs at 2-3e10 FLOP/s. gpu: the first run on one H200 (docs/gpu.md):
# a training program compiles in ~20 s, an evaluation program in ~10 s; the evaluation at
# lengths 41-500 ran 0.023-0.43 s, 2.2e12 FLOP/s with ~1.2 ms per sub-batch; the main job's
# steps took 1.3-3.7 ms. tpu: nothing measured yet; the GPU's figures.
_GPU = Platform(
  lower_s=1.0,
  compile_s={'train': 20.0, 'eval': 10.0},
  dispatch_s=3e-4,
  step_s=1.2e-3,
  flops_per_s=2.2e12,
  steps_per_dispatch=8,
)
PLATFORMS: dict[str, Platform] = {
  'cpu': Platform(
    lower_s=1.0,
    compile_s={'train': 5.0, 'eval': 2.0},
    dispatch_s=2e-4,
    step_s=3e-3,
    flops_per_s=4e10,
    steps_per_dispatch=1,
  ),
  'gpu': _GPU,
  'tpu': _GPU,
}


def platform(name: str) -> Platform:
  """The figures of platform `name` (an unknown one is costed as a GPU)."""
  return PLATFORMS.get(name, PLATFORMS['gpu'])
