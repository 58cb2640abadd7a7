"""The one device table (`DEVICES`): what compiling and running a program costs on a device,
as measured (`Costs`, for the plan of a run's programs: `posenc.programs.plan`), and an
accelerator's datasheet peaks (for a roofline estimate of a grid: `posenc.sweep.cost`).

Example:
  >>> platform('cpu').steps_per_dispatch, platform('tpu') is platform('gpu')
  (1, True)
  >>> [name for name in DEVICES if DEVICES[name].peak_flops]   # the roofline's devices
  ['H100', 'A100', 'v4', 'v5e']
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Costs:
  """What compiling and running a program costs on one device, measured, for the plan.

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


@dataclasses.dataclass(frozen=True)
class Device:
  """One device: its platform ('cpu', 'gpu', 'tpu'), what programs cost on it where posenc
  has measured them, and its datasheet's dense matrix throughput (FLOP/s, by the dtype of
  a model: TF32 on NVIDIA tensor cores for float32, one bfloat16 pass on TPU MXUs) and memory
  bandwidth (bytes/s) where a roofline may estimate it."""

  name: str
  platform: str
  measured: Costs | None = None
  peak_flops: dict[str, float] | None = None
  bandwidth: float | None = None


# cpu: this 2-core x86 VM (docs/speed.md): a training program of the study's model
# compiles in 4-6 s and an evaluation program in ~2 s; its step takes 0.09 s at bucket 5
# and 0.87 s at bucket 40 on a loaded machine, about half that idle (4e10 FLOP/s, 3 ms
# fixed); evaluation runs at 2-3e10 FLOP/s. H200: the first GPU run (docs/gpu.md): a
# training program compiles in ~20 s, an evaluation program in ~10 s; the evaluation at
# lengths 41-500 ran 0.023-0.43 s, 2.2e12 FLOP/s with ~1.2 ms per sub-batch; the main job's
# steps took 1.3-3.7 ms. No TPU measured yet: it is costed as the GPU (`platform`).
DEVICES: dict[str, Device] = {
  'cpu': Device(
    'a 2-core x86 VM',
    'cpu',
    Costs(1.0, {'train': 5.0, 'eval': 2.0}, 2e-4, 3e-3, 4e10, steps_per_dispatch=1),
  ),
  'H200': Device(
    'NVIDIA H200',
    'gpu',
    Costs(1.0, {'train': 20.0, 'eval': 10.0}, 3e-4, 1.2e-3, 2.2e12, steps_per_dispatch=8),
  ),
  'H100': Device(
    'NVIDIA H100 SXM', 'gpu', None, {'float32': 494.7e12, 'bfloat16': 989.4e12}, 3.35e12
  ),
  'A100': Device(
    'NVIDIA A100 SXM 80GB', 'gpu', None, {'float32': 156e12, 'bfloat16': 312e12}, 2.039e12
  ),
  'v4': Device('TPU v4 chip', 'tpu', None, {'float32': 275e12, 'bfloat16': 275e12}, 1.2e12),
  'v5e': Device('TPU v5e chip', 'tpu', None, {'float32': 197e12, 'bfloat16': 197e12}, 0.819e12),
}
PLATFORMS = tuple(dict.fromkeys(d.platform for d in DEVICES.values()))


def platform(name: str) -> Costs:
  """The measured costs the plan uses on platform `name`: its measured device's, else (a
  platform measured nowhere yet, as the TPU) the GPU's."""
  for device in DEVICES.values():
    if device.platform == name and device.measured is not None:
      return device.measured
  return platform('gpu')
