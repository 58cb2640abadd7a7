"""What every measurement of `launch.speed` opens and closes with: its flags `--out` (the
JSON it writes, speed_NAME.json by default) and, for those that time one of the study's
cells, `--cell`; the check that no positional argument was given and that `--out` can be
written, before anything runs; the cell's config built, or refused in one line; the JSON
written at the end.

Example (launch/speed/eval.py):

  _OPENING = opening.Opening('eval', cell='rpe_table1 arg of the cell to time.')

  def main(argv):
    common.run(_main, argv)

  def _main(argv):
    config = _OPENING.start(argv)  # one line and exit status 2 on a bad flag or cell
    ...
    _OPENING.finish({'cell': _OPENING.cell, 'rows': rows})  # writes --out, says so
"""

from __future__ import annotations

from typing import Any

from absl import flags

from launch import cli
from launch import common
from posenc import config as config_lib
from posenc.storage import io

# The cell the measurements time by default (an rpe_table1 arg).
STUDY_CELL = 'task=reverse_string,encoding=randomized_relative'


class Opening:
  """The flags `--out` and (with `cell`, its help) `--cell` of the measurement `name`,
  defined when the measurement's module is imported."""

  def __init__(self, name: str, cell: str | None = None):
    self._out = flags.DEFINE_string('out', f'speed_{name}.json', 'Where to write the figures.')
    self._cell = None if cell is None else flags.DEFINE_string('cell', STUDY_CELL, cell)

  @property
  def out(self) -> str:
    return self._out.value

  @property
  def cell(self) -> str:
    return self._cell.value

  def start(self, argv: list[str]) -> Any:
    """Refuses positional arguments and an `--out` that cannot be written (one line, exit
    status 2), and returns `--cell`'s validated config (None without `--cell`)."""
    cli.flags_only(argv)
    common.check_output_file(self.out, '--out')
    return None if self._cell is None else common.cell_config(self.cell)

  def finish(self, figures: Any) -> None:
    """Writes `figures` as the JSON of `--out`, whole or not at all, and says where."""
    io.write_json_atomic(self.out, figures)
    print(f'wrote {self.out}')


def build(config: Any, what: str = '') -> Any:
  """`setup.build(config)`, or one line (`what: ` and the config's error), exit status 2."""
  from posenc import setup  # pylint: disable=g-import-not-at-top  (as common.cell_config)

  try:
    return setup.build(config)
  except config_lib.ConfigError as e:
    common.fail(f'{what}: {e}' if what else e)


def with_members(config: Any, size: int) -> Any:
  """`config` with `size` members: seeds x its first learning rates, the fewest seeds that
  fit its rates (8 of 6 rates: 2 seeds x 4 rates).

  Example:
    >>> from launch.speed.opening import with_members
    >>> from posenc import config as config_lib
    >>> c = config_lib.base_config()
    >>> c.learning_rates = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4]
    >>> c = with_members(c, 8)
    >>> c.seeds, c.learning_rates
    ([0, 1], [0.0001, 0.0002, 0.0003, 0.0004])
  """
  rates = len(config.learning_rates)
  seeds = next(s for s in range(1, size + 1) if size % s == 0 and size // s <= rates)
  config.seeds = list(range(seeds))
  config.learning_rates = list(config.learning_rates)[: size // seeds]
  return config
