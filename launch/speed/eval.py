"""Range-evaluation speed: `python -m launch.speed eval [--lengths=41,100,250,500]`.

Seconds to evaluate one member of the study's model (reverse_string, randomized
relative) at each length with 512 examples in sub-batches of 64, split into compile
time and run time, and their total; beside each run time, the dense-product floor of the
same evaluation (`posenc.speed.floor`), the share of it the run reaches, and the run's
achieved model FLOP/s.
"""

from absl import flags

from launch import common
from launch.speed import opening
from posenc import setup
from posenc.training import state as state_lib
from posenc.speed import floor as floor_lib
from posenc.speed import timing

_LENGTHS = flags.DEFINE_list('lengths', ['41', '100', '250', '500'], 'Lengths to evaluate.')
_FLOOR = flags.DEFINE_bool('floor', True, 'Measure the dense-product floor of each length.')
_OPENING = opening.Opening('eval', cell='rpe_table1 arg of the cell to time.')


def main(argv):
  common.run(_main, argv)


def _main(argv):
  config = _OPENING.start(argv)
  lengths = common.positive_ints(_LENGTHS.value, '--lengths')
  bad = [l for l in lengths if l > config.eval.max_length]
  if bad:
    common.fail(f'--lengths {bad} exceed eval.max_length={config.eval.max_length}')
  config.seeds, config.learning_rates = [0], [1e-4]
  run = setup.build(config)
  params = state_lib.init_state(run).params
  rows = []
  for length in lengths:
    row = timing.eval_length(run, params, length)
    rows.append(row)
    line = (
      f'length {length:4d} (bucket {row["bucket"]}): compile {row["compile_s"]:5.1f} s, '
      f'run {row["run_s"]:6.1f} s for {config.eval.examples_per_length} examples'
    )
    if _FLOOR.value:
      floor = floor_lib.evaluation_floor(run, length)
      row.update(
        floor,
        fraction_of_floor=floor['floor_s'] / row['run_s'],
        achieved_gflops_per_s=floor['flops'] / row['run_s'] / 1e9,
      )
      line += (
        f'; floor {floor["floor_s"]:.2f} s ({100 * row["fraction_of_floor"]:.0f}%), '
        f'{row["achieved_gflops_per_s"]:.0f} model GFLOP/s against the dense products\' '
        f'{floor["dense_gflops_per_s"]:.0f}'
      )
    print(line, flush=True)
  total = sum(r['compile_s'] + r['run_s'] for r in rows)
  print(f'total (compile + run) for lengths {_LENGTHS.value}: {total:.1f} s')
  _OPENING.finish({'cell': _OPENING.cell, 'rows': rows, 'total_s': total})
