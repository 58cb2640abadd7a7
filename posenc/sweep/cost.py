"""What a grid would cost on the current devices, from measured throughput, and on an
accelerator that is not here, from XLA's cost analysis.

The first cell is measured on this machine, then every cell is predicted by a FLOP model.
How a cell is measured and scaled differs by kind of evaluation, so each kind says it in
its folder (`posenc.kinds`, cost.py: a `posenc.training.cost_model.Cost`, made of the cost model's
shared parts); this module finds the kind of the grid's runs (`of`), names its cells and
totals them.

Example:
  >>> print(format_estimate(estimate(config, cells, steps=20)))  # doctest: +SKIP
"""

from __future__ import annotations

import collections
from typing import Any, Sequence

import jax
import ml_collections

from posenc import config as config_lib
from posenc.programs import devices
from posenc.training import cost_model
from posenc import kinds
from posenc.training import run as run_lib
from posenc import setup
from posenc import suggest
from posenc import sweep as sweep_lib


def of(run: run_lib.Run) -> cost_model.Cost:
  """The cost of the run's kind of evaluation; ConfigError (one line) for a kind without one."""
  found = kinds.cost(run.protocol.name)
  if found is None:
    with_cost = [k for k in kinds.KINDS if kinds.cost(k) is not None]
    raise config_lib.ConfigError(
      f'task {run.config.task!r}: its {run.protocol.name!r} evaluation has no cost model; '
      f'the kinds with one: {", ".join(with_cost)}'
    )
  return found


# ---------------------------------------------------------------------------------------
# The estimate of a grid.


def estimate(
  base: ml_collections.ConfigDict, cells: Sequence[dict[str, Any]], steps: int = 20
) -> dict[str, Any]:
  """Measures the first cell, then predicts every cell of `cells` on this machine (its kind's
  `Cost.estimate`).

  Raises:
    ConfigError: a cell cannot run, or its kind of evaluation has no cost model.
  """
  runs = [setup.build(config_lib.cell_config(base, c)) for c in cells]
  names = [sweep_lib.cell_name(c) for c in cells]
  kind_cost = of(runs[0])
  measured, rows = kind_cost.estimate(runs, names, steps)
  devices = jax.local_devices()
  wall = sum(r['train_s'] + r['eval_s'] for r in rows)
  return {
    'measured_cell': names[0],
    'measured': measured,
    'measured_text': kind_cost.describe(measured),
    'per_member': kind_cost.per_member,
    'devices': len(devices),
    'device_kind': devices[0].device_kind,
    'cells': rows,
    'wall_clock_s': wall,
    'device_hours': wall * len(devices) / 3600,
    'members_per_cell': runs[0].population.size,
    'train_steps': runs[0].train_settings.steps,
  }


def _by_task(cells: Sequence[dict[str, Any]]) -> list[str]:
  """One line per task: its cells and their summed training and evaluation hours."""
  by_task = collections.defaultdict(lambda: [0.0, 0.0, 0])
  for row in cells:
    task = row['cell'].split('__')[0]
    by_task[task][0] += row['train_s']
    by_task[task][1] += row['eval_s']
    by_task[task][2] += 1
  return [
    f'  {task:28s} {k:2d} cells  train {t / 3600:10.1f} h  eval {e / 3600:8.1f} h'
    for task, (t, e, k) in by_task.items()
  ]


def format_estimate(est: dict[str, Any]) -> str:
  lines = [
    f'measured on {est["devices"]} x {est["device_kind"]}: cell {est["measured_cell"]}, '
    f'{est["measured_text"]}',
    f'grid: {len(est["cells"])} cells x {est["members_per_cell"]} members x '
    f'{est["train_steps"]:,} steps, run one cell after another on all devices:',
  ]
  if est['per_member']:  # Few, expensive cells: each one, per member (one model).
    members = est['members_per_cell']
    lines += [
      f'  {r["cell"]:48s} one model: train {r["train_s"] / members / 3600:8.1f} h  '
      f'eval {r["eval_s"] / members / 3600:8.1f} h'
      for r in est['cells']
    ]
  else:
    lines += _by_task(est['cells'])
  wall = est['wall_clock_s']
  lines.append(
    f'total: wall-clock {wall / 3600:,.1f} h ({wall / 86400:,.1f} days), '
    f'{est["device_hours"]:,.1f} device-hours'
  )
  return '\n'.join(lines)


# ---------------------------------------------------------------------------------------
# A roofline estimate for accelerators that are not here.


def roofline(
  base: ml_collections.ConfigDict,
  cells: Sequence[dict[str, Any]],
  device: str,
  progress: Any = lambda line: None,
) -> dict[str, Any]:
  """Each cell's time on `device` from XLA's cost analysis (its kind's `Cost.roofline`):
  max(FLOPs / peak, bytes / bandwidth) per program, summed over the cell's training steps
  and evaluation for every member (one chip runs one member's work at a time; a slice of C
  chips divides the total by C).

  Raises:
    ConfigError: an unknown device, or a cell its kind cannot estimate.
  """
  valid = [name for name, d in devices.DEVICES.items() if d.peak_flops]
  if device not in valid:
    raise config_lib.ConfigError(
      f'unknown --device {device!r}{suggest.did_you_mean(device, valid)}; valid devices: '
      f'{", ".join(valid)}'
    )
  spec = devices.DEVICES[device]
  runs = [setup.build(config_lib.cell_config(base, c)) for c in cells]
  kind_cost = of(runs[0])
  if kind_cost.roofline is None:
    with_roofline = [k for k in kinds.KINDS if getattr(kinds.cost(k), 'roofline', None)]
    raise config_lib.ConfigError(
      f'--device: the {runs[0].protocol.name!r} evaluation has no roofline estimate; the '
      f'kinds with one: {", ".join(with_roofline)}'
    )
  rows = kind_cost.roofline(runs, [sweep_lib.cell_name(c) for c in cells], spec, progress)
  total = sum(r['train_s'] + r['eval_s'] for r in rows)
  return {
    'device': device,
    'device_name': spec.name,
    'peak_flops': spec.peak_flops,
    'bandwidth': spec.bandwidth,
    'cells': rows,
    'chip_hours': total / 3600,
    'members_per_cell': runs[0].population.size,
    'train_steps': runs[0].train_settings.steps,
    'dtype': runs[0].model_settings.dtype,
  }


def format_roofline(est: dict[str, Any], chips: int = 1) -> str:
  dtype = est['dtype']
  lines = [
    f'roofline on {est["device_name"]}: {est["peak_flops"][dtype] / 1e12:,.1f} TFLOP/s '
    f'({dtype} matmuls as XLA runs them by default), {est["bandwidth"] / 1e12:.2f} TB/s',
    'assumptions: each program runs at max(FLOPs / peak, bytes / bandwidth), the FLOPs and '
    'bytes of XLA\'s cost analysis of the accelerator program (xla_fused attention) as this '
    "machine's XLA compiles it; no launch overheads, no idle time; chips fully packed. Small "
    'models like this one run far below peak on real hardware: a lower bound, not a promise.',
    f'grid: {len(est["cells"])} cells x {est["members_per_cell"]} members x '
    f'{est["train_steps"]:,} steps:',
  ]
  lines += _by_task(est['cells'])
  hours = est['chip_hours']
  lines.append(
    f'total: {hours:,.1f} chip-hours; on {chips} chip{"s" * (chips > 1)}: '
    f'{hours / chips:,.1f} h wall-clock'
  )
  return '\n'.join(lines)
