"""results.json's schema (`posenc.results`, read back by `posenc.kinds`): files of the
previous layout (no schema_version, tests/data/results_v1: real runs of each protocol written
before the schema module) load, keep their layout when written back, and give the same
report byte for byte; an unknown version is one line."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from posenc import kinds
from posenc import report
from posenc import results
from posenc import setup
from posenc.training import train

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / 'tests' / 'data' / 'results_v1'
# `launch.report tests/data/results_v1` as the code before the schema module wrote it, but for
# the standard deviations, now sample ones (ddof 1) in every table, and the notes saying so.
EXPECTED = ROOT / 'tests' / 'data' / 'results_v1_report'
FILES = sorted(FIXTURE.rglob('results.json'))


def test_every_kind_has_its_record_protocol_section_in_its_folder():
  assert list(kinds.KINDS) == ['range', 'grid', 'perplexity', 'lengths']
  for name, package in kinds.KINDS.items():
    assert package == f'posenc.kinds.{name}'
    protocol, record = kinds.protocol(name), kinds.record(name)
    # The protocol writes the record that readers without the protocols read.
    assert protocol.name == record.evaluation == name and protocol.results is record
    assert record.default_family in protocol.families
    section = kinds.section(name)
    assert callable(section.check) and callable(section.build), name
  assert [k for k in kinds.KINDS if kinds.cost(k) is not None] == ['range', 'grid', 'lengths']


def test_the_fixture_holds_every_kind():
  found = {json.loads(p.read_text()).get('evaluation') for p in FILES}
  assert found == set(kinds.KINDS)


@pytest.mark.parametrize('path', FILES, ids=lambda p: str(p.relative_to(FIXTURE).parent))
def test_previous_layout_loads_and_writes_back_in_its_layout(path):
  data = json.loads(path.read_text())
  assert 'schema_version' not in data  # Version 1.
  record = kinds.read(path)
  assert record.schema_version == results.SCHEMA_VERSION == 2
  assert isinstance(record.evaluation, kinds.record(data['evaluation']))
  assert len(record.members) == len(data['members'])
  # Version 2 is version 1's newest layout plus the version: field for field, in order.
  assert json.dumps(record.to_json()) == json.dumps({'schema_version': 2, **data})
  assert kinds.from_json(record.to_json()) == record


def test_records_key_lengths_and_cells_by_integers():
  grid = kinds.read(next(p for p in FILES if 'grid' in p.parts))
  member = grid.members[0]
  assert all(isinstance(a, int) and isinstance(b, int) for a, b in member.exact_match_by_cell)
  assert set(member.regions) == {'ood', 'beyond', 'id'}
  range_run = kinds.read(next(p for p in FILES if 'range' in p.parts))
  first = range_run.members[0]
  assert list(first.accuracy_by_length) == list(range_run.evaluation.eval_lengths)


def test_report_of_the_previous_layout_is_byte_for_byte(cli, tmp_path):
  proc = cli.run(['launch.report', 'tests/data/results_v1', f'--out={tmp_path}'])
  assert proc.returncode == 0, proc.stderr
  expected = sorted(p.name for p in EXPECTED.iterdir())
  assert expected == ['arithmetic.md', 'hints.md', 'perplexity.md', 'table1.md', 'table4.md']
  for name in expected:
    assert (tmp_path / name).read_bytes() == (EXPECTED / name).read_bytes(), name


def test_the_report_needs_neither_flax_nor_the_protocols(tmp_path):
  """posenc.report and launch.report import no Flax and no evaluator: with both blocked, the
  report of the previous layout is the same, byte for byte."""
  code = textwrap.dedent(f"""
      import sys
      # A module set to None cannot be imported: `import flax` raises ImportError.
      sys.modules['flax'] = None
      sys.modules['posenc.training.protocol'] = None
      from launch import report
      report.main([{str(FIXTURE)!r}, {f'--out={tmp_path}'!r}])
      # The model families' records (no JAX) are the one module of posenc.models it reads.
      loaded = [m for m, module in sys.modules.items() if module is not None and (m.startswith(
          ('flax', 'posenc.training', 'posenc.encodings', 'posenc.attention', 'posenc.setup'))
          or (m.startswith('posenc.models.') and m != 'posenc.models.families')
          or m.endswith(('.protocol', '.cost')))]
      assert not loaded, loaded
      assert 'posenc.kinds.grid.section' in sys.modules  # each kind's flax-free parts only
      """)
  proc = subprocess.run(
    [sys.executable, '-c', code],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
    env=dict(os.environ, MPLBACKEND='Agg'),
  )
  assert proc.returncode == 0, proc.stderr
  for path in EXPECTED.iterdir():
    assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name
  assert any(p.name.startswith('heatmap_') for p in tmp_path.iterdir())


def test_version_1_defaults_what_older_files_left_out():
  data = json.loads(next(p for p in FILES if 'range' in p.parts).read_text())
  for key in ('evaluation', 'family', 'encoding_options', 'architecture'):
    del data[key]
  record = kinds.from_json(data)
  assert isinstance(record.evaluation, kinds.record('range'))
  assert (record.family, record.encoding_options, record.architecture) == ('encoder', None, None)
  # Version 2 files must say so.
  with pytest.raises(results.SchemaError, match="x.json: missing 'family'"):
    kinds.from_json(
      {
        **data,
        'schema_version': 2,
        'evaluation': 'range',
        'encoding_options': None,
        'architecture': None,
      },
      'x.json',
    )


@pytest.mark.parametrize('version', [3, '2', None, True])
def test_an_unknown_version_is_one_line_naming_it(version, cli, tmp_path):
  data = json.loads(FILES[0].read_text())
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'results.json').write_text(json.dumps({'schema_version': version, **data}))
  with pytest.raises(results.SchemaError) as e:
    kinds.read(run / 'results.json')
  assert f'schema_version {version!r} is not one this posenc reads (1, 2)' in str(e.value)
  assert '\n' not in str(e.value)
  proc = cli.run(['launch.report', str(run), f'--out={tmp_path / "out"}'])
  assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
  assert f'schema_version {version!r}' in proc.stderr
  assert not os.path.exists(tmp_path / 'out')


def test_a_new_run_writes_the_current_version(tmp_path):
  from experiments import rpe_table1

  config = rpe_table1.get_config('task=parity_check,tiny')
  config.train.steps, config.seeds, config.learning_rates = 2, [0], [1e-3]
  config.eval.max_length = config.train.max_length + 1
  written = train.train_and_evaluate(setup.build(config), str(tmp_path))
  on_disk = json.loads((tmp_path / 'results.json').read_text())
  assert on_disk == json.loads(json.dumps(written))
  assert list(on_disk)[:3] == ['schema_version', 'task', 'encoding']
  assert on_disk['schema_version'] == results.SCHEMA_VERSION
  record = kinds.read(tmp_path / 'results.json')
  assert record.to_json() == on_disk


def test_a_copy_of_the_fixture_reads_the_same(tmp_path):
  """Reading does not depend on where the files are."""
  shutil.copytree(FIXTURE, tmp_path / 'copy')
  for path in FILES:
    moved = tmp_path / 'copy' / path.relative_to(FIXTURE)
    assert kinds.read(moved) == kinds.read(path)
