"""Frozen evaluation sets (posenc/training/frozen.py, launch.export_eval_set): for one task
of each protocol, evaluating from the exported files gives the in-process results; a
changed file or another config is one line."""

import json
import os
import tempfile

import pytest

from experiments import abacus_arithmetic
from experiments import extrapolation_lm
from experiments import rpe_table1
from experiments import sorting_hints
from posenc import config as config_lib
from posenc.training import protocol as protocol_lib
from posenc.training import state as state_lib
from posenc.training import train
from posenc import setup
from posenc.training import frozen

CONFIGS = {
  'range': lambda: rpe_table1.get_config('task=reverse_string,tiny'),
  'grid': lambda: config_lib.cell_config(
    abacus_arithmetic.get_config('tiny'), {'eval.grid_max': 3, 'eval.samples_per_cell': 4}
  ),
  'lengths': lambda: sorting_hints.get_config('tiny'),
  'perplexity': lambda: extrapolation_lm.get_config('tiny'),
}


def export(config, out):
  run = setup.build(config)
  protocol = run.protocol
  return frozen.write(
    str(out), config, protocol.name, protocol.examples(run), protocol.example_fields
  )


def evaluation(config):
  """The protocol's evaluation record of the population at initialisation."""
  run = setup.build(config)
  state = state_lib.init_state(run)
  with tempfile.TemporaryDirectory() as scratch:
    return run.protocol.evaluate(run, state, protocol_lib.EvalContext(scratch, lambda line: None))


# The grid and lengths protocols read their files through the same code as range: slow.
@pytest.mark.parametrize(
  'protocol',
  [p if p in ('range', 'perplexity') else pytest.param(p, marks=pytest.mark.slow) for p in CONFIGS],
)
def test_evaluating_from_files_gives_the_in_process_results(protocol, tmp_path):
  config = CONFIGS[protocol]()
  manifest = export(config, tmp_path / 'set')
  assert manifest['protocol'] == protocol and manifest['cells']
  from_files = config_lib.cell_config(config, {'eval.from_files': str(tmp_path / 'set')})
  setup.build(from_files)
  # Everything but the measured time of the language models' windows.
  measured = lambda c: {k: v for k, v in evaluation(c).to_json().items() if k != 'eval_seconds'}
  assert measured(from_files) == measured(config)


def test_a_changed_file_fails_its_checksum(tmp_path):
  config = CONFIGS['range']()
  manifest = export(config, tmp_path / 'set')
  path = tmp_path / 'set' / manifest['cells'][0]['file']
  data = bytearray(path.read_bytes())
  data[-10] ^= 1
  path.write_bytes(bytes(data))
  from_files = config_lib.cell_config(config, {'eval.from_files': str(tmp_path / 'set')})
  with pytest.raises(config_lib.ConfigError) as e:
    setup.build(from_files)
  assert f'{path} has changed: sha256' in str(e.value) and '\n' not in str(e.value)


def test_another_config_is_named(tmp_path):
  export(CONFIGS['range'](), tmp_path / 'set')
  other = config_lib.cell_config(
    CONFIGS['range'](), {'eval.seed': 5, 'eval.from_files': str(tmp_path / 'set')}
  )
  with pytest.raises(config_lib.ConfigError, match='eval.seed is 1 there but 5 in the config'):
    setup.build(other)
  missing = config_lib.cell_config(CONFIGS['range'](), {'eval.from_files': str(tmp_path / 'no')})
  with pytest.raises(config_lib.ConfigError, match='holds no readable manifest.json'):
    setup.build(missing)


def test_export_from_the_command_line(cli, tmp_path):
  spec = '--config=experiments/rpe_table1.py:task=parity_check,tiny'
  # A disk that fills up at the third cell: one line; the rerun completes the set.
  full = cli.run(
    ['launch.export_eval_set', spec, f'--out={tmp_path / "set"}'],
    env={'POSENC_NO_SPACE_AT': 'length_3.npz'},
  )
  assert full.returncode == 2 and full.stderr.startswith(
    f'error: no space left on device writing {tmp_path / "set" / "length_3.npz"}: '
  ), full.stderr
  assert sorted(os.listdir(tmp_path / 'set')) == ['length_1.npz', 'length_2.npz']
  proc = cli.run(['launch.export_eval_set', spec, f'--out={tmp_path / "set"}'])
  assert proc.returncode == 0, proc.stderr
  manifest = json.loads((tmp_path / 'set' / 'manifest.json').read_text())
  assert manifest['fields']['task'] == 'parity_check'
  assert len(manifest['cells']) == len(os.listdir(tmp_path / 'set')) - 1
  again = cli.run(['launch.export_eval_set', spec, f'--out={tmp_path / "set"}'])
  assert again.returncode == 2 and 'already holds an evaluation set' in again.stderr
  bad = cli.run(
    ['launch.export_eval_set', spec, '--config.task=bogus', f'--out={tmp_path / "bad"}']
  )
  assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
  assert not (tmp_path / 'bad').exists()
