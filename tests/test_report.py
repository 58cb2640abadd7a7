"""Tests of posenc.report and launch.report on fabricated run directories."""

import errno
import io
import json
import os
import pathlib
import subprocess
import sys

from matplotlib import colors as mpl_colors
from matplotlib import image as mpl_image
import pytest

from launch import report as launch_report
from posenc import encoding_names
from posenc import encodings
from posenc.sections import plots
from posenc import report
from posenc import results
from posenc.kinds.grid import regions as grid_regions
from posenc.kinds.grid import section as grid_section
from posenc.kinds.range import section as range_section
from posenc.kinds.range import tables as range_tables
from posenc.sections import core as report_core
from posenc.sections import load as report_load
from posenc.sections import tables as report_tables
from posenc.kinds.range import record as range_record
from posenc.kinds.grid import record as grid_record
import tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
N = 4  # Fabricated training length; evaluation lengths are 1..10.


def write_run(
  directory: pathlib.Path,
  task: str,
  encoding: str,
  members: list[tuple[int, float, float | None]],
  *,
  train_steps: int = 100,
  eval_lengths=tuple(range(1, 11)),
  config_steps: int | None = None,
  options: dict | None = None,
  exact_match: float | None = None,
  family: str | None = None,
) -> pathlib.Path:
  """Writes a results.json; members are (seed, learning_rate, score or None if diverged).

  A member's accuracy is 1 on lengths <= N and its score above, so the score is its mean
  accuracy over the evaluated lengths above N, as the engine computes it. `options` is the
  run's `encoding_options`; None leaves the record out, as older results.json files do. With
  `exact_match`, each member's exact match is that factor times its accuracy at every length
  (so its exact-match score is the factor times its score); None leaves the exact-match fields
  out, as older results.json files do. `family` is the run's model family; None leaves it out.
  """
  directory.mkdir(parents=True, exist_ok=True)
  results = {
    'task': task,
    'encoding': encoding,
    'num_params': 1234,
    'train_steps': train_steps,
    'train_length': N,
    'eval_lengths': list(eval_lengths),
    'versions': {'jax': '0', 'flax': '0', 'device_kind': 'cpu'},
    'members': [
      {
        'seed': seed,
        'learning_rate': lr,
        'diverged': score is None,
        'score': score,
        'accuracy_by_length': {str(n): (1.0 if n <= N else (score or 0.0)) for n in eval_lengths},
      }
      for seed, lr, score in members
    ],
    'config': {'train': {'steps': config_steps or train_steps}},
  }
  if options is not None:
    results['encoding_options'] = options
  if exact_match is not None:
    for member in results['members']:
      member['exact_match_score'] = (
        None if member['score'] is None else exact_match * member['score']
      )
      member['exact_match_by_length'] = {
        n: exact_match * accuracy for n, accuracy in member['accuracy_by_length'].items()
      }
  if family is not None:
    results['family'] = family
  (directory / 'results.json').write_text(json.dumps(results))
  return directory


@pytest.fixture(name='workdirs')
def fixture_workdirs(tmp_path: pathlib.Path) -> list[pathlib.Path]:
  """A sweep-style tree of three cells plus one standalone run directory.

  reverse_string/none: 3 seeds × 2 rates, one diverged member; reverse_string/
  randomized_relative: the same with another best rate; even_pairs/none: all diverged;
  bucket_sort/relative (standalone): one member. Every other combination is missing.
  """
  sweep = tmp_path / 'sweep'
  write_run(
    sweep / 'cells' / 'reverse_string__none',
    'reverse_string',
    'none',
    [
      (0, 1e-4, 0.50),
      (1, 1e-4, 0.52),
      (2, 1e-4, 0.54),
      (0, 3e-4, 0.60),
      (1, 3e-4, 0.40),
      (2, 3e-4, None),
    ],
  )
  write_run(
    sweep / 'cells' / 'reverse_string__randomized_relative',
    'reverse_string',
    'randomized_relative',
    [
      (0, 1e-4, 0.90),
      (1, 1e-4, 0.80),
      (2, 1e-4, 0.70),
      (0, 3e-4, 0.95),
      (1, 3e-4, 0.93),
      (2, 3e-4, None),
    ],
  )
  write_run(
    sweep / 'cells' / 'even_pairs__none', 'even_pairs', 'none', [(0, 1e-4, None), (1, 1e-4, None)]
  )
  (sweep / 'index.json').write_text('{}')  # Sweep bookkeeping: not a run, ignored.
  single = write_run(tmp_path / 'run_bucket', 'bucket_sort', 'relative', [(0, 5e-4, 0.333)])
  return [sweep, single]


def grid(markdown: str, index: int = 0) -> dict[tuple[str, str], str]:
  """The `index`-th markdown grid of a table file as {(task, encoding): entry}."""
  blocks, current = [], []
  for line in markdown.splitlines() + ['']:
    if line.startswith('|'):
      current.append([c.strip() for c in line.strip('|').split('|')])
    elif current:
      blocks.append(current)
      current = []
  header, _, *rows = blocks[index]
  return {(row[1], encoding): entry for row in rows for encoding, entry in zip(header[2:], row[2:])}


def test_table1_is_max_over_members(workdirs):
  runs, skipped = report.load_runs(workdirs)
  assert not skipped
  entries = grid(range_tables.table1(range_tables.collect_cells(runs)))
  assert entries == {
    ('even_pairs', 'none'): 'div',
    ('even_pairs', 'relative'): '–',
    ('even_pairs', 'randomized_relative'): '–',
    ('reverse_string', 'none'): '60.0',
    ('reverse_string', 'relative'): '–',
    ('reverse_string', 'randomized_relative'): '95.0',
    ('bucket_sort', 'none'): '–',
    ('bucket_sort', 'relative'): '33.3',
    ('bucket_sort', 'randomized_relative'): '–',
  }


def test_table4_is_mean_and_sd_at_best_rate(workdirs):
  cells = range_tables.collect_cells(report.load_runs(workdirs)[0])
  text = range_tables.table4(cells)
  entries = grid(text)
  # none: rate 1e-4 has mean 52 (sample sd sqrt(8/2) = 2.0); 3e-4 has mean 50 over its 2 survivors.
  assert entries['reverse_string', 'none'] == '52.0 ± 2.0'
  # randomized_relative: 3e-4 wins with mean 94, sd 1.4, but 1 of its 3 members diverged.
  assert entries['reverse_string', 'randomized_relative'] == '94.0 ± 1.4 (2/3)'
  assert entries['bucket_sort', 'relative'] == '33.3'
  assert entries['even_pairs', 'none'] == 'div'
  assert entries['even_pairs', 'randomized_relative'] == '–'
  rates = grid(text, 1)
  assert rates['reverse_string', 'none'] == '0.0001'
  assert rates['reverse_string', 'randomized_relative'] == '0.0003'
  assert rates['bucket_sort', 'relative'] == '0.0005'


def test_rows_follow_the_study_and_columns_the_grid(workdirs):
  cells = range_tables.collect_cells(report.load_runs(workdirs)[0])
  text = range_tables.table1(cells)
  header = text.splitlines()[2]
  assert header == '| level | task | none | relative | randomized_relative |'
  rows = [line.split('|')[1:3] for line in text.splitlines()[4:7]]
  assert [(a.strip(), b.strip()) for a, b in rows] == [
    ('R', 'even_pairs'),
    ('DCF', 'reverse_string'),
    ('CS', 'bucket_sort'),
  ]


def test_full_grid_and_unknown_names(workdirs, tmp_path):
  write_run(tmp_path / 'odd', 'my_task', 'my_encoding', [(0, 1e-3, 0.7)])
  cells = range_tables.collect_cells(report.load_runs(workdirs + [tmp_path / 'odd'])[0])
  tasks, encodings = range_tables.grid_axes(cells, full_grid=True)
  assert tasks == list(report.TASKS) + ['my_task']
  assert encodings == list(report.ENCODINGS) + ['my_encoding']
  entries = grid(range_tables.table1(cells, full_grid=True))
  assert len(entries) == 16 * 14
  assert entries['my_task', 'my_encoding'] == '70.0'
  assert entries['compute_sqrt', 'geometric'] == '–'
  assert '| ? | my_task |' in range_tables.table1(cells)


def test_merged_cell_counts_identical_members_once(tmp_path):
  members = [(0, 1e-4, 0.5), (1, 1e-4, 0.7)]
  write_run(tmp_path / 'a', 'parity_check', 'alibi', members)
  write_run(tmp_path / 'b', 'parity_check', 'alibi', members[1:] + [(2, 1e-4, 0.6), (0, 1e-4, 0.9)])
  cells = range_tables.collect_cells(report.load_runs([tmp_path])[0])
  cell = cells['parity_check', 'alibi']
  # (1, 1e-4, 0.7) is in both runs and counts once; (0, 1e-4) has two different trainings.
  assert len(cell.runs) == 2 and len(cell.members) == 4
  assert grid(range_tables.table1(cells))['parity_check', 'alibi'] == '90.0'
  text = range_tables.table4(cells)
  assert grid(text)['parity_check', 'alibi'] == '67.5 ± 17.1'
  assert 'parity_check/alibi merges the members of 2 runs' in text
  assert '(0, 0.0001)' in text


def test_notes_describe_lengths_members_and_training(tmp_path):
  write_run(
    tmp_path / 'strided',
    'odds_first',
    'rotary',
    [(0, 1e-4, 0.5), (1, 1e-4, 0.6)],
    eval_lengths=range(1, 31, 3),
    train_steps=50,
    config_steps=80,
  )
  write_run(
    tmp_path / 'full', 'odds_first', 'none', [(0, 1e-4, 0.5), (1, 1e-4, 0.6)], train_steps=2_000_000
  )
  text = range_tables.table1(range_tables.collect_cells(report.load_runs([tmp_path])[0]))
  assert (
    'N = 4, lengths 5..10 (every length, 6 lengths) in odds_first/none; N = 4, lengths '
    '7, 10, …, 28 (every 3rd length, 8 lengths), a subset of 5..28 in odds_first/rotary.' in text
  )
  assert 'Members per cell: 2 (2 seeds × learning rates {0.0001}) in all 2 cells.' in text
  assert 'Not fully trained: stopped at 50 of 80 configured steps: odds_first/rotary.' in text
  assert 'Trained 2,000,000 steps: odds_first/none.' in text


def test_describe_lengths():
  assert report_tables.describe_lengths(range(41, 501)) == '41..500 (every length, 460 lengths)'
  assert report_tables.describe_lengths(range(41, 501, 10)) == (
    '41, 51, …, 491 (every 10th length, 46 lengths)'
  )
  assert report_tables.describe_lengths([41, 45, 100]) == '41..100 (3 lengths, irregularly spaced)'


def test_malformed_runs_are_skipped_and_named(workdirs, tmp_path):
  bad = tmp_path / 'sweep' / 'cells' / 'broken'
  bad.mkdir()
  (bad / 'results.json').write_text('{"task": "reverse_string"')
  nomembers = tmp_path / 'sweep' / 'cells' / 'nomembers'
  write_run(nomembers, 'even_pairs', 'alibi', [(0, 1e-4, 0.5)])
  data = json.loads((nomembers / 'results.json').read_text())
  del data['members'][0]['accuracy_by_length']
  (nomembers / 'results.json').write_text(json.dumps(data))
  write_run(
    tmp_path / 'sweep' / 'cells' / 'seen_only',
    'even_pairs',
    'alibi',
    [(0, 1e-4, 0.5)],
    eval_lengths=range(1, N + 1),
  )
  nan = tmp_path / 'sweep' / 'cells' / 'unscored'
  write_run(nan, 'even_pairs', 'rotary', [(0, 1e-4, float('nan'))])
  runs, skipped = report.load_runs(workdirs)
  assert len(runs) == 4 and len(skipped) == 4
  assert 'broken/results.json: cannot read JSON' in skipped[0]
  assert "members[0] (seed 0, learning rate 0.0001): missing 'accuracy_by_length'" in skipped[1]
  assert (
    'seen_only/results.json: no evaluated length above the training length N = 4' in (skipped[2])
  )
  assert (
    'unscored/results.json: members[0] (seed 0, learning rate 0.0001): not diverged but '
    'its score is nan' in skipped[3]
  )
  assert 'Skipped 4 malformed runs' in range_tables.table1(
    range_tables.collect_cells(runs), skipped=skipped
  )


def test_bad_paths_raise(tmp_path):
  with pytest.raises(report.ReportError, match='no such file or directory'):
    report.find_results([tmp_path / 'nope'])
  (tmp_path / 'empty' / 'deep').mkdir(parents=True)
  with pytest.raises(report.ReportError, match='no results.json in .*empty'):
    report.find_results([tmp_path / 'empty'])


def test_figures_are_valid_pngs(workdirs):
  built = report.build_report(workdirs)
  assert sorted(built.files) == [
    'figure4_bucket_sort.png',
    'figure4_even_pairs.png',
    'figure4_reverse_string.png',
    'table1.md',
    'table4.md',
  ]
  for name, data in built.files.items():
    if name.endswith('.png'):
      assert data.startswith(PNG_SIGNATURE)
      pixels = mpl_image.imread(io.BytesIO(data), format='png')
      assert pixels.shape == (500, 1000, 4)


def lines_by_label(figure) -> dict[str, object]:
  """A Figure 4's lines keyed by their column label (the legend text before ': score')."""
  return {line.get_label().split(': ')[0]: line for line in figure.axes[0].get_lines()}


def test_figure4_curves_clear_the_frame_and_pairs_differ(tmp_path):
  write_run(tmp_path / 'rr', 'reverse_string', 'randomized_rotary', [(0, 1e-4, 1.0)])
  write_run(tmp_path / 'r', 'reverse_string', 'rotary', [(0, 1e-4, 0.5)])
  write_run(tmp_path / 'n', 'reverse_string', 'none', [(0, 1e-4, 0.0)])
  cells = range_tables.collect_cells(report.load_runs([tmp_path])[0])
  figure = range_section.figure4(cells, 'reverse_string')
  ax = figure.axes[0]
  lines = lines_by_label(figure)
  bottom, top = ax.get_ylim()
  # A curve at exactly 100% (or 0%) lies inside the axes, not on the frame.
  assert max(lines['randomized_rotary'].get_ydata()) == 1.0 < top
  assert min(lines['none'].get_ydata()) == 0.0 > bottom
  assert list(ax.get_yticks()) == [0, 0.2, 0.4, 0.6, 0.8, 1]
  colors = {name: mpl_colors.to_hex(line.get_color()) for name, line in lines.items()}
  assert colors['rotary'] != colors['randomized_rotary']
  assert len(set(colors.values())) == len(colors)  # The training-length line's too.
  assert lines['rotary'].get_linestyle() != lines['randomized_rotary'].get_linestyle()
  # The legend is right of the axes, inside the figure.
  legend = ax.get_legend().get_window_extent()
  assert legend.x0 > ax.get_window_extent().x1
  assert legend.x1 <= figure.bbox.x1 and legend.y0 >= 0 and legend.y1 <= figure.bbox.y1


def test_encoding_variants_are_separate_columns(tmp_path):
  reference = {'max_time': 10000.0, 'relative_mode': 'reference', 'randomize_both_sides': False}
  symmetric = dict(reference, relative_mode='symmetric')
  write_run(
    tmp_path / 'ref', 'reverse_string', 'randomized_relative', [(0, 1e-4, 0.6)], options=reference
  )
  write_run(
    tmp_path / 'sym', 'reverse_string', 'randomized_relative', [(0, 1e-4, 0.9)], options=symmetric
  )
  write_run(
    tmp_path / 'ep_ref', 'even_pairs', 'randomized_relative', [(0, 1e-4, 0.7)], options=reference
  )
  # An encoding without options: an old run without the record joins a new one.
  write_run(tmp_path / 'none_new', 'reverse_string', 'none', [(0, 1e-4, 0.5)], options={})
  write_run(tmp_path / 'none_old', 'reverse_string', 'none', [(1, 1e-4, 0.4)])
  # Runs that share their options are one plain column.
  write_run(
    tmp_path / 'rot0', 'reverse_string', 'rotary', [(0, 1e-4, 0.3)], options={'max_time': 10000.0}
  )
  write_run(
    tmp_path / 'rot1', 'reverse_string', 'rotary', [(1, 1e-4, 0.2)], options={'max_time': 10000.0}
  )
  cells = range_tables.collect_cells(report.load_runs([tmp_path])[0])
  ref, sym = (
    'randomized_relative (relative_mode=reference)',
    'randomized_relative (relative_mode=symmetric)',
  )
  assert range_tables.grid_axes(cells) == (
    ['even_pairs', 'reverse_string'],
    ['none', 'rotary', ref, sym],
  )
  assert range_tables.grid_axes(cells, full_grid=True)[1] == [
    'none',
    'sin_cos',
    'relative',
    'alibi',
    'rotary',
    'learned',
    'randomized_sin_cos',
    ref,
    sym,
    'randomized_alibi',
    'randomized_rotary',
    'randomized_learned',
    'geometric',
    'geometric_directional',
  ]
  assert len(cells['reverse_string', 'none'].members) == 2
  assert len(cells['reverse_string', 'rotary'].runs) == 2
  text = range_tables.table1(cells)
  assert grid(text) == {
    ('even_pairs', 'none'): '–',
    ('even_pairs', 'rotary'): '–',
    ('even_pairs', ref): '70.0',
    ('even_pairs', sym): '–',
    ('reverse_string', 'none'): '50.0',
    ('reverse_string', 'rotary'): '30.0',
    ('reverse_string', ref): '60.0',
    ('reverse_string', sym): '90.0',
  }
  assert (
    f'randomized_relative is split by encoding options into 2 columns ({ref}; {sym}); '
    'their runs are never merged; options shared by every run that records them: '
    'max_time=10000.0, randomize_both_sides=false.'
  ) in text
  assert f'reverse_string/{sym} merges' not in text
  assert f'| length | none | rotary | {ref} | {sym} |' in range_section.per_length_table(
    cells, 'reverse_string'
  )
  figure = range_section.figure4(cells, 'reverse_string')
  lines = lines_by_label(figure)
  assert lines[ref].get_label() == f'{ref}: 60.0'
  assert mpl_colors.to_hex(lines[ref].get_color()) != mpl_colors.to_hex(lines[sym].get_color())
  assert lines[ref].get_marker() != lines[sym].get_marker()
  # A variant has one style in every task's figure, present there or not.
  other = lines_by_label(range_section.figure4(cells, 'even_pairs'))
  assert other[ref].get_color() == lines[ref].get_color()


def make_run(encoding: str, options: dict | None, family: str = 'encoder') -> report.RunFile:
  member = range_record.RangeMember(
    seed=0, learning_rate=1e-4, diverged=False, score=0.5, accuracy_by_length={N + 1: 0.5}
  )
  record = results.Results(
    task='parity_check',
    encoding=encoding,
    family=family,
    encoding_options=options,
    num_params=None,
    architecture=None,
    train_steps=1,
    train_length=N,
    evaluation=range_record.RangeResults((N + 1,), (N + 1, N + 1), (member,)),
  )
  return report.RunFile(pathlib.Path('run/results.json'), record)


def test_column_labels_name_the_options_that_differ():
  runs = [
    make_run('randomized_alibi', {'randomize_both_sides': True}),
    make_run('randomized_alibi', None),
    make_run('randomized_alibi', {'randomize_both_sides': True}),
    make_run('randomized_relative', {'max_time': 100.0, 'relative_mode': 'reference'}),
    make_run('randomized_relative', {'max_time': 10.0}),
    make_run('rotary', None),
    make_run('rotary', None),
    make_run('none', None),
    make_run('none', {}),
  ]
  assert report.column_labels(runs) == [
    'randomized_alibi (randomize_both_sides=true)',
    'randomized_alibi (options not recorded)',
    'randomized_alibi (randomize_both_sides=true)',
    'randomized_relative (max_time=100.0, relative_mode=reference)',
    'randomized_relative (max_time=10.0, relative_mode=?)',
    'rotary',
    'rotary',
    'none',
    'none',
  ]


def test_malformed_encoding_options_are_skipped(tmp_path):
  write_run(tmp_path / 'bad', 'even_pairs', 'alibi', [(0, 1e-4, 0.5)], options=['alibi'])
  write_run(tmp_path / 'good', 'even_pairs', 'none', [(0, 1e-4, 0.5)])
  runs, skipped = report.load_runs([tmp_path])
  assert [r.record.encoding for r in runs] == ['none']
  assert runs[0].record.encoding_options is None
  assert skipped == [
    f"{tmp_path / 'bad' / 'results.json'}: encoding_options is ['alibi'], expected an object"
  ]


@pytest.fixture(name='unreadable')
def fixture_unreadable(monkeypatch):
  """Makes os.scandir, which os.walk lists with, deny access to the directories added."""
  blocked, real_scandir = set(), os.scandir

  def scandir(path='.'):
    if pathlib.Path(path) in blocked:
      raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
    return real_scandir(path)

  monkeypatch.setattr(os, 'scandir', scandir)
  return blocked


@pytest.mark.parametrize('depth', [0, 1])
def test_unreadable_directory_raises(workdirs, unreadable, depth):
  sweep = workdirs[0]
  blocked = sweep if depth == 0 else sweep / 'cells'
  unreadable.add(blocked)
  with pytest.raises(
    report.ReportError, match=f"^cannot read directory '{blocked}': Permission denied$"
  ):
    report.find_results(workdirs)


def test_unreadable_path_raises(tmp_path, monkeypatch):
  real_is_file = pathlib.Path.is_file

  def is_file(path):
    if path.name == 'locked':
      raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    return real_is_file(path)

  monkeypatch.setattr(pathlib.Path, 'is_file', is_file)
  with pytest.raises(
    report.ReportError, match=f"^cannot read '{tmp_path / 'locked'}': Permission denied$"
  ):
    report.find_results([tmp_path / 'locked'])


def test_cli_unreadable_directory_is_one_line(workdirs, unreadable, tmp_path, capsys):
  unreadable.add(workdirs[0])
  out = tmp_path / 'out'
  with pytest.raises(SystemExit) as exit_info:
    launch_report.main([*map(str, workdirs), f'--out={out}'])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == (
    f"error: cannot read directory '{workdirs[0]}': Permission denied\n"
  )
  assert not out.exists()


def test_names_come_from_the_registries():
  assert report.TASKS == tasks.NAMES and len(report.TASKS) == 15
  # The report reads the encodings' names from the one module that holds them (no Flax),
  # the registry's names in its order.
  assert report.ENCODINGS is encoding_names.STUDY and len(report.ENCODINGS) == 13
  assert report_core.GRID_ENCODINGS is encoding_names.ALL
  assert tuple(encodings.ENCODINGS) == encoding_names.ALL
  assert report_core.ARITHMETIC_TASKS == tuple(tasks.ARITHMETIC)
  assert list(report.TASK_LEVELS) == list(tasks.NAMES + tasks.LATER)
  labels = {'regular': 'R', 'dcf': 'DCF', 'cs': 'CS', 'later': 'later'}
  assert report.TASK_LEVELS == {
    name: labels[tasks.get(name).level] for name in tasks.NAMES + tasks.LATER
  }
  assert (
    report.TASK_LEVELS['parity_check'],
    report.TASK_LEVELS['reverse_string'],
    report.TASK_LEVELS['bucket_sort'],
  ) == ('R', 'DCF', 'CS')


def run_cli(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND='Agg')
  return subprocess.run(
    [sys.executable, '-m', 'launch.report', *map(str, args)],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )


def test_cli_writes_the_report(workdirs, tmp_path):
  result = run_cli(*workdirs, cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  out = tmp_path / 'report'  # The default output directory.
  assert sorted(p.name for p in out.iterdir()) == [
    'figure4_bucket_sort.png',
    'figure4_even_pairs.png',
    'figure4_reverse_string.png',
    'table1.md',
    'table4.md',
  ]
  assert (out / 'table1.md').read_text() in result.stdout
  assert (out / 'table4.md').read_text() in result.stdout
  assert (out / 'figure4_even_pairs.png').read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize('bad', ['missing', 'empty', 'malformed'])
def test_cli_bad_input_is_one_line_and_writes_nothing(workdirs, tmp_path, bad):
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'malformed').mkdir()
  (tmp_path / 'malformed' / 'results.json').write_text('[]')
  if bad == 'malformed':  # Only malformed runs: nothing to report.
    workdirs = []
  out = tmp_path / 'out'
  result = run_cli(*workdirs[:1], tmp_path / bad, f'--out={out}', cwd=tmp_path)
  assert result.returncode == 2
  assert len(result.stderr.strip().splitlines()) == 1
  assert result.stderr.startswith('error: ') and str(tmp_path / bad) in result.stderr
  assert not out.exists()


def test_options_of_older_results_come_from_their_config(tmp_path):
  # results.json files without `encoding_options` still record the config they ran.
  for mode in ('reference', 'symmetric'):
    path = write_run(tmp_path / mode, 'even_pairs', 'randomized_relative', [(0, 1e-3, 0.8)])
    results = json.loads((path / 'results.json').read_text())
    results['config']['encoding_options'] = {'relative_mode': mode}
    (path / 'results.json').write_text(json.dumps(results))
  runs = report.load_runs([tmp_path])[0]
  assert sorted(report_load.encoding_options(r.record)['relative_mode'] for r in runs) == [
    'reference',
    'symmetric',
  ]
  assert range_tables.grid_axes(range_tables.collect_cells(runs))[1] == [
    'randomized_relative (relative_mode=reference)',
    'randomized_relative (relative_mode=symmetric)',
  ]


@pytest.mark.parametrize(
  'given',
  [
    {},
    {'relative_mode': 'reference'},
    {
      'max_time': 100.0,
      'randomize_both_sides': True,
      'alibi_reference_form': True,
      'geometric_normalize': True,
      'relative_mode': 'symmetric',
    },
  ],
)
def test_options_from_older_configs_are_the_registry_s(given):
  # What the report reads from the config of a results.json without `encoding_options`:
  # the options each study encoding takes, resolved as the encodings registry resolves them.
  for name in encodings.NAMES:
    attention, embedding = encodings.resolve_options(name, given)
    options = report_load.options_from_config(name, {'encoding_options': given})
    assert json.dumps(options) == json.dumps({**attention, **embedding}), name
  assert report_load.options_from_config('abacus', {'encoding_options': given}) is None


def test_exact_match_report_reads_its_fields_and_names_it(tmp_path):
  write_run(
    tmp_path / 'n', 'reverse_string', 'none', [(0, 1e-4, 0.6), (1, 1e-4, 0.4)], exact_match=0.5
  )
  write_run(
    tmp_path / 'rr',
    'reverse_string',
    'randomized_rotary',
    [(0, 1e-4, 0.9), (1, 1e-4, None)],
    exact_match=0.25,
  )
  exact = report.build_report([tmp_path], per_length=True, metric='exact_match')
  assert not exact.skipped
  table1, table4 = exact.texts['table1'], exact.texts['table4']
  assert table1.splitlines()[0] == (
    '# Table 1: exact match (%) on unseen lengths, max over members'
  )
  assert table4.splitlines()[0] == (
    '# Table 4: exact match (%) on unseen lengths, mean ± sd over seeds at the best learning rate'
  )
  assert grid(table1) == {
    ('reverse_string', 'none'): '30.0',
    ('reverse_string', 'randomized_rotary'): '22.5',
  }
  assert grid(table4)['reverse_string', 'none'] == '25.0 ± 7.1'
  assert 'Scores average the exact match over the evaluated lengths' in table1
  lengths = exact.files['lengths_reverse_string.md'].decode()
  assert lengths == exact.texts['lengths_reverse_string']
  assert lengths.startswith('reverse_string: exact match (%) by length, best member')
  assert f'| {N + 1} | 30.0 | 22.5 |' in lengths and f'| {N}* | 50.0 | 25.0 |' in lengths
  for text in (table1, table4, lengths):
    assert 'accuracy' not in text
  cells = range_tables.collect_cells(
    report.load_runs([tmp_path], metric='exact_match')[0], metric='exact_match'
  )
  figure = range_section.figure4(cells, 'reverse_string', metric='exact_match')
  assert figure.axes[0].get_ylabel() == 'exact match'
  assert lines_by_label(figure)['none'].get_label() == 'none: 30.0'
  # The default report of the same runs is the accuracy one.
  default = report.build_report([tmp_path], figures=False)
  assert default.texts['table1'].splitlines()[0] == (
    '# Table 1: accuracy (%) on unseen lengths, max over members'
  )
  assert grid(default.texts['table1'])['reverse_string', 'none'] == '60.0'
  with pytest.raises(report.ReportError, match="unknown metric 'bogus'"):
    report.build_report([tmp_path], metric='bogus')


def test_runs_without_exact_match_are_malformed_only_under_it(tmp_path):
  write_run(tmp_path / 'new', 'even_pairs', 'none', [(0, 1e-4, 0.5)], exact_match=0.5)
  old = write_run(tmp_path / 'old', 'even_pairs', 'alibi', [(0, 1e-4, None), (1, 1e-4, 0.7)])
  curve = write_run(tmp_path / 'curve', 'even_pairs', 'rotary', [(0, 1e-4, 0.5)], exact_match=0.5)
  results = json.loads((curve / 'results.json').read_text())
  del results['members'][0]['exact_match_by_length']
  (curve / 'results.json').write_text(json.dumps(results))
  runs, skipped = report.load_runs([tmp_path])
  assert sorted(r.record.encoding for r in runs) == ['alibi', 'none', 'rotary'] and not skipped
  runs, skipped = report.load_runs([tmp_path], metric='exact_match')
  assert [r.record.encoding for r in runs] == ['none']
  assert skipped == [
    f"{curve / 'results.json'}: members[0] (seed 0, learning rate 0.0001): missing "
    "'exact_match_by_length'",
    # Even a diverged member: the file predates the metric.
    f"{old / 'results.json'}: members[0] (seed 0, learning rate 0.0001): missing "
    "'exact_match_score'",
  ]
  assert (
    'Skipped 2 malformed runs'
    in report.build_report([tmp_path], figures=False, metric='exact_match').texts['table1']
  )
  with pytest.raises(report.ReportError, match='no well-formed run among 1 results.json'):
    report.build_report([old], metric='exact_match')


def test_model_families_are_separate_columns(tmp_path):
  write_run(
    tmp_path / 'enc', 'reverse_string', 'randomized_rotary', [(0, 1e-4, 0.9)], family='encoder'
  )
  # Written before results recorded the family: an encoder run, merged with the one above.
  write_run(tmp_path / 'enc_old', 'reverse_string', 'randomized_rotary', [(1, 1e-4, 0.8)])
  write_run(
    tmp_path / 'dec', 'reverse_string', 'randomized_rotary', [(0, 1e-4, 0.6)], family='decoder'
  )
  write_run(tmp_path / 'dec_none', 'reverse_string', 'none', [(0, 1e-4, 0.2)], family='decoder')
  runs = report.load_runs([tmp_path])[0]
  assert sorted(r.record.family for r in runs) == ['decoder', 'decoder', 'encoder', 'encoder']
  cells = range_tables.collect_cells(runs)
  assert range_tables.grid_axes(cells)[1] == [
    'none (decoder)',
    'randomized_rotary (decoder)',
    'randomized_rotary (encoder)',
  ]
  assert len(cells['reverse_string', 'randomized_rotary (encoder)'].runs) == 2
  assert cells['reverse_string', 'randomized_rotary (decoder)'].family == 'decoder'
  text = range_tables.table1(cells)
  assert grid(text) == {
    ('reverse_string', 'none (decoder)'): '20.0',
    ('reverse_string', 'randomized_rotary (decoder)'): '60.0',
    ('reverse_string', 'randomized_rotary (encoder)'): '90.0',
  }
  assert (
    'Runs of 2 model families (decoder, encoder): each column names its family; runs of '
    'different families are never merged.'
  ) in text
  assert 'split by encoding options' not in text
  lines = lines_by_label(range_section.figure4(cells, 'reverse_string'))
  assert mpl_colors.to_hex(lines['randomized_rotary (decoder)'].get_color()) != mpl_colors.to_hex(
    lines['randomized_rotary (encoder)'].get_color()
  )
  # One family, decoder or not: the labels are the encodings'.
  decoder_only = range_tables.collect_cells([r for r in runs if r.record.family == 'decoder'])
  assert range_tables.grid_axes(decoder_only)[1] == ['none', 'randomized_rotary']
  assert 'model families' not in range_tables.table1(decoder_only)


def test_column_labels_name_the_family_and_the_options_that_differ():
  runs = [
    make_run('randomized_relative', {'relative_mode': 'reference'}),
    make_run('randomized_relative', {'relative_mode': 'symmetric'}),
    make_run('randomized_relative', {'relative_mode': 'reference'}, family='decoder'),
    make_run('none', None, family='decoder'),
  ]
  assert report.column_labels(runs) == [
    'randomized_relative (encoder, relative_mode=reference)',
    'randomized_relative (encoder, relative_mode=symmetric)',
    'randomized_relative (decoder, relative_mode=reference)',
    'none (decoder)',
  ]
  cells = range_tables.collect_cells(runs)
  text = range_tables.table1(cells)
  assert (
    'randomized_relative is split by encoding options into 3 columns '
    '(randomized_relative (decoder, relative_mode=reference); '
    'randomized_relative (encoder, relative_mode=reference); '
    'randomized_relative (encoder, relative_mode=symmetric))'
  ) in text


def test_malformed_family_is_skipped(tmp_path):
  path = write_run(tmp_path / 'bad', 'even_pairs', 'alibi', [(0, 1e-4, 0.5)])
  results = json.loads((path / 'results.json').read_text())
  results['family'] = 3
  (path / 'results.json').write_text(json.dumps(results))
  assert report.load_runs([tmp_path])[1] == [
    f"{path / 'results.json'}: family is 3, expected a model family name"
  ]


def test_cli_metric(tmp_path, capsys):
  write_run(tmp_path / 'runs' / 'n', 'reverse_string', 'none', [(0, 1e-4, 0.6)], exact_match=0.5)
  out = tmp_path / 'out'
  launch_report.main([str(tmp_path / 'runs'), f'--out={out}', '--metric=exact_match'])
  printed = capsys.readouterr()
  assert printed.err == ''
  assert printed.out.startswith('# Table 1: exact match (%) on unseen lengths')
  assert (out / 'table1.md').read_text() in printed.out
  assert (
    grid((out / 'table4.md').read_text())['reverse_string', 'none'] == '30.0'
  )  # One seed: no sd.
  with pytest.raises(SystemExit) as exit_info:
    launch_report.main([str(tmp_path / 'runs'), f'--out={tmp_path / "bogus"}', '--metric=bogus'])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert len(err.splitlines()) == 1 and err.endswith('\n')
  assert err.startswith('error: flag --metric=bogus: value should be one of <accuracy|exact_match>')
  assert not (tmp_path / 'bogus').exists()


# ---------------------------------------------------------------------------------------------
# Grid runs (the arithmetic study).

GRID_N, GRID_M = 3, 6  # Fabricated training size and grid side; beyond: 8 and 9.


def grid_region(a: int, b: int) -> str:
  if a <= GRID_N and b <= GRID_N:
    return 'id'
  return 'ood' if a <= GRID_M and b <= GRID_M else 'beyond'


def write_grid_run(
  directory: pathlib.Path,
  task: str,
  encoding: str,
  architecture: str,
  members: list[tuple[int, float, tuple[float, float, float] | None]],
  *,
  stride: int = 1,
  beyond=(8, 9),
  train_steps: int = 100,
  options: dict | None = None,
) -> pathlib.Path:
  """Writes a grid run's results.json; members are (seed, learning_rate, (id, ood, beyond)
  exact match, or None if diverged).

  Every cell of a region holds the member's value for that region, so each region value is the
  mean over the region's cells, as the engine computes it. A diverged member's regions and
  cells are NaN. The grid's cells are 1..GRID_M at `stride` (and GRID_M), plus (x, x) for x in
  `beyond`.
  """
  axis = sorted(set(range(1, GRID_M + 1, stride)) | {GRID_M})
  cells = [(a, b) for a in axis for b in axis] + [(x, x) for x in beyond]
  results_members = []
  for seed, lr, values in members:
    regions = dict(zip(('id', 'ood', 'beyond'), values or (float('nan'),) * 3))
    if not beyond:
      regions['beyond'] = None
    by_cell = {f'{a},{b}': regions[grid_region(a, b)] for a, b in cells}
    results_members.append(
      {
        'seed': seed,
        'learning_rate': lr,
        'diverged': values is None,
        'score': None if values is None else regions['ood'],
        'regions': regions,
        'token_accuracy_regions': regions,
        'exact_match_by_cell': by_cell,
        'accuracy_by_cell': by_cell,
      }
    )
  results = {
    'task': task,
    'encoding': encoding,
    'family': 'decoder',
    'evaluation': 'grid',
    'architecture': architecture,
    'encoding_options': options or {},
    'num_params': 1234,
    'train_steps': train_steps,
    'train_length': GRID_N,
    'axes': ['digits_a', 'digits_b'],
    'grid': {'max': GRID_M, 'stride': stride, 'beyond': list(beyond), 'samples_per_cell': 4},
    'versions': {'jax': '0', 'flax': '0', 'device_kind': 'cpu'},
    'members': results_members,
    'config': {'train': {'steps': train_steps}},
  }
  directory.mkdir(parents=True, exist_ok=True)
  (directory / 'results.json').write_text(json.dumps(results))
  return directory


def region_grids(markdown: str) -> dict[tuple[str, str], dict[tuple[str, str], str]]:
  """The region table's sub-tables as {(task, region): {(architecture, column): entry}}."""
  tables: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
  task = region = header = None
  for line in markdown.splitlines():
    if line.startswith('## '):
      task = line[3:]
    elif line.startswith('### '):
      region, header = line[4:].split(':')[0], None
    elif line.startswith('|') and not line.startswith('|---'):
      row = [c.strip() for c in line.strip('|').split('|')]
      if header is None:
        header = row
        tables[task, region] = {}
      else:
        tables[task, region].update(
          {(row[0], column): entry for column, entry in zip(header[1:], row[1:])}
        )
  return tables


@pytest.fixture(name='grid_dir')
def fixture_grid_dir(tmp_path: pathlib.Path) -> pathlib.Path:
  """Grid runs of addition: abacus and none in a standard and a looped 8x2 model.

  addition/standard/abacus: 3 members, one diverged; addition/looped 8x2/abacus: 2 members;
  addition/standard/none: every member diverged; no looped/none run.
  """
  root = tmp_path / 'grid'
  write_grid_run(
    root / 'std_abacus',
    'addition',
    'abacus',
    'standard',
    [(0, 1e-4, (1.0, 0.9, 0.3)), (1, 1e-4, (1.0, 0.8, 0.1)), (2, 1e-4, None)],
  )
  write_grid_run(
    root / 'loop_abacus',
    'addition',
    'abacus',
    'looped 8x2',
    [(0, 1e-4, (1.0, 0.95, 0.6)), (1, 1e-4, (0.98, 0.91, 0.5))],
  )
  write_grid_run(root / 'std_none', 'addition', 'none', 'standard', [(0, 1e-4, None)])
  return root


def test_grid_runs_load_apart_from_range_runs(workdirs, grid_dir):
  loaded = report.load_all_runs(workdirs + [grid_dir])
  assert len(loaded.of('range')) == 4 and len(loaded.of('grid')) == 3 and not loaded.problems
  assert len(loaded.runs) == 7
  runs, skipped = report.load_runs(workdirs + [grid_dir])
  assert len(runs) == 4 and not skipped  # Grid runs are no problem, only not range runs.
  run = report.load_run(grid_dir / 'std_abacus' / 'results.json')
  record, evaluation = run.record, run.record.evaluation
  assert isinstance(evaluation, grid_record.GridResults)
  assert (record.task, record.encoding, record.architecture, record.family) == (
    'addition',
    'abacus',
    'standard',
    'decoder',
  )
  assert (
    record.train_length,
    evaluation.grid_max,
    evaluation.grid_stride,
    evaluation.beyond,
    evaluation.axes,
  ) == (GRID_N, GRID_M, 1, (8, 9), ('digits_a', 'digits_b'))
  assert record.members[0].regions == {'ood': 0.9, 'beyond': 0.3, 'id': 1.0}
  assert record.members[0].exact_match_by_cell[GRID_M, 1] == 0.9
  assert record.members[2].diverged
  assert len(record.members[0].exact_match_by_cell) == GRID_M**2 + 2
  with pytest.raises(report.MalformedRunError, match='not a grid run'):
    report.load_run(workdirs[1] / 'results.json', evaluation='grid')


def test_region_table_is_mean_and_sd_over_members(grid_dir):
  entries = grid_regions.collect_grid_entries(report.load_all_runs([grid_dir]).of('grid'))
  text = grid_regions.region_table(entries)
  assert text.splitlines()[0] == ('# Arithmetic: exact match (%) by region, mean ± sd over members')
  tables = region_grids(text)
  assert list(tables) == [('addition', 'OOD'), ('addition', 'beyond'), ('addition', 'ID')]
  # standard/abacus: the 2 non-diverged members of 3.
  assert tables['addition', 'OOD'] == {
    ('standard', 'none'): 'div',
    ('standard', 'abacus'): '85.0 ± 7.1 (2/3)',
    ('looped 8x2', 'none'): '–',
    ('looped 8x2', 'abacus'): '93.0 ± 2.8',
  }
  assert tables['addition', 'beyond']['standard', 'abacus'] == '20.0 ± 14.1 (2/3)'
  assert tables['addition', 'beyond']['looped 8x2', 'abacus'] == '55.0 ± 7.1'
  assert tables['addition', 'ID']['looped 8x2', 'abacus'] == '99.0 ± 1.4'
  stats = grid_regions.region_stats(entries['addition', 'looped 8x2', 'abacus'], 'ood')
  assert stats == grid_regions.RegionStats(pytest.approx(0.93), pytest.approx(0.02 * 2**0.5), 2, 2)
  assert (
    'Cells measured: n = 3, M = 6, cells (digits_a, digits_b) in 1..6, beyond 8, 9, '
    '4 samples per cell in all 3 entries.'
  ) in text
  assert (
    'Members per entry: 1 (1 seed × learning rates {0.0001}) in addition/standard/none; '
    '3 (3 seeds × learning rates {0.0001}) in addition/standard/abacus; 2 (2 seeds × '
    'learning rates {0.0001}) in addition/looped 8x2/abacus.'
  ) in text
  assert (
    'Diverged members, left out of the entries: addition/standard/none (1 of 1), '
    'addition/standard/abacus (1 of 3).'
  ) in text
  assert 'Not fully trained' not in text and 'Trained 100 steps: all 3 entries.' in text


def test_region_table_orders_architectures_encodings_and_tasks(tmp_path):
  for architecture in (
    'looped 4x4',
    'custom',
    'standard_ii',
    'looped 8x2',
    'standard',
    'looped 8x1',
  ):
    for encoding in ('abacus+fire', 'fire', 'none', 'abacus'):
      write_grid_run(
        tmp_path / 'mul' / f'{architecture}_{encoding}',
        'multiplication',
        encoding,
        architecture,
        [(0, 1e-4, (1.0, 0.5, 0.1))],
      )
  write_grid_run(tmp_path / 'add', 'addition', 'fire', 'standard', [(0, 1e-4, (1.0, 0.5, 0.1))])
  entries = grid_regions.collect_grid_entries(report.load_all_runs([tmp_path]).of('grid'))
  tasks_, architectures, columns = grid_regions.grid_layout(entries)
  assert tasks_ == ['addition', 'multiplication']
  assert architectures == [
    'standard',
    'standard_ii',
    'looped 8x1',
    'looped 8x2',
    'looped 4x4',
    'custom',
  ]
  assert columns == ['none', 'abacus', 'fire', 'abacus+fire']
  text = grid_regions.region_table(entries)
  # Each task's tables hold only its own rows and columns.
  assert '## addition\n\n### OOD: some axis > n, both ≤ M\n\n| architecture | fire |\n' in text
  rows = [
    line.split('|')[1].strip()
    for line in text.split('## multiplication')[1].splitlines()
    if line.startswith('| ') and 'architecture' not in line
  ]
  assert rows[:6] == architectures


def test_grid_members_merge_and_heatmaps_are_one_per_member(grid_dir):
  # A copy of a member in a second run counts once; a distinct one with the same seed and rate
  # counts too, and its heatmap gets a name of its own.
  write_grid_run(
    grid_dir / 'more',
    'addition',
    'abacus',
    'looped 8x2',
    [(0, 1e-4, (1.0, 0.95, 0.6)), (0, 1e-4, (1.0, 0.5, 0.2))],
  )
  built = report.build_report([grid_dir])
  heatmaps = sorted(name for name in built.files if name.endswith('.png'))
  assert heatmaps == [
    'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png',
    'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001__2.png',
    'heatmap_addition__abacus__looped_8x2__seed1_lr0.0001.png',
    'heatmap_addition__abacus__standard__seed0_lr0.0001.png',
    'heatmap_addition__abacus__standard__seed1_lr0.0001.png',
    'heatmap_addition__abacus__standard__seed2_lr0.0001.png',
    'heatmap_addition__none__standard__seed0_lr0.0001.png',
  ]
  for name in heatmaps:
    data = built.files[name]
    assert data.startswith(PNG_SIGNATURE)
    assert mpl_image.imread(io.BytesIO(data), format='png').shape == (660, 800, 4)
  assert sorted(set(built.files) - set(heatmaps)) == ['arithmetic.md']
  assert list(built.texts) == ['arithmetic'] and not built.skipped
  arithmetic = built.texts['arithmetic']
  assert built.files['arithmetic.md'].decode() == arithmetic
  tables = region_grids(arithmetic)
  assert tables['addition', 'OOD']['looped 8x2', 'abacus'] == '78.7 ± 24.9'  # 95, 91 and 50.
  assert 'addition/looped 8x2/abacus merges the members of 2 runs' in arithmetic
  assert built.tables == ('arithmetic.md',) and built.figures == ('7 heatmaps',)
  assert not report.build_report([grid_dir], figures=False).files.keys() - {'arithmetic.md'}


def test_heatmap_draws_measured_cells_and_leaves_the_others_blank(tmp_path):
  path = write_grid_run(
    tmp_path / 'strided',
    'addition',
    'abacus',
    'looped 8x2',
    [(0, 1e-4, (1.0, 0.5, 0.25))],
    stride=2,
  )
  results = json.loads((path / 'results.json').read_text())
  del results['members'][0]['exact_match_by_cell']['5,1']  # Never measured.
  (path / 'results.json').write_text(json.dumps(results))
  run = report.load_run(path / 'results.json', evaluation='grid')
  figure = grid_section.grid_heatmap(run, run.record.members[0])
  heat, strip = figure.axes[:2]
  assert (heat.get_ylabel(), heat.get_xlabel()) == ('digits_a', 'digits_b')
  cells = heat.collections[0].get_array()
  assert cells.shape == (4, 4)  # Lengths 1, 3, 5 and 6 on each axis.
  assert cells.mask.sum() == 1 and cells.mask[2, 0]
  assert cells[0, 0] == 100 and cells[3, 3] == 50
  assert list(heat.get_xticks()) == [1, 3, 5, 6]
  assert strip.collections[0].get_array().ravel().tolist() == [25, 25]
  box = [p for p in heat.patches if not p.get_fill()][0]
  assert (box.get_x(), box.get_y(), box.get_width()) == (0.5, 0.5, GRID_N)
  title = figure.get_suptitle()
  assert title.startswith('addition: abacus, looped 8x2\nseed 0, learning rate 0.0001')
  assert 'ID 100.0, OOD 50.0, beyond 25.0' in title


def test_heatmap_ticks_stay_legible_on_a_large_grid():
  assert grid_section._ticks(list(range(1, 19))) == list(range(1, 19))
  assert grid_section._ticks(list(range(1, 101))) == [1] + list(range(10, 101, 10))
  assert grid_section._ticks(list(range(101, 161))) == [101] + list(range(110, 161, 10))
  assert grid_regions.architecture_key('looped 16x1') < grid_regions.architecture_key('looped 8x2')
  assert grid_section.heatmap_name('addition', 'abacus', 'looped 8x2', 0, 1e-4) == (
    'heatmap_addition__abacus__looped_8x2__seed0_lr0.0001.png'
  )


@pytest.mark.parametrize(
  'change, message',
  [
    (lambda r: r.pop('architecture'), "missing 'architecture'"),
    (
      lambda r: r.update(evaluation='lattice'),
      "evaluation is 'lattice', expected 'range', 'grid', 'perplexity' or 'lengths'",
    ),
    (lambda r: r.update(axes=['digits_a']), "axes is ['digits_a'], expected two axis names"),
    (lambda r: r['grid'].pop('samples_per_cell'), "grid: missing 'samples_per_cell'"),
    (
      lambda r: r['members'][0]['regions'].pop('beyond'),
      "members[0] (seed 0, learning rate 0.0001): regions has no 'beyond'",
    ),
    (
      lambda r: r['members'][0]['regions'].update(ood=float('nan')),
      'members[0] (seed 0, learning rate 0.0001): not diverged but its regions.ood is nan',
    ),
    (
      lambda r: r['members'][0]['exact_match_by_cell'].update({'1;2': 0.5}),
      "members[0] (seed 0, learning rate 0.0001): exact_match_by_cell key '1;2' is not 'a,b'",
    ),
  ],
)
def test_malformed_grid_run_is_skipped(grid_dir, change, message):
  path = grid_dir / 'std_abacus' / 'results.json'
  results = json.loads(path.read_text())
  change(results)
  path.write_text(json.dumps(results))
  built = report.build_report([grid_dir], figures=False)
  assert built.skipped == (f'{path}: {message}',)
  assert f'Skipped 1 malformed run: {path}: {message}.' in built.texts['arithmetic']
  assert ('addition', 'OOD') in region_grids(built.texts['arithmetic'])
  with pytest.raises(report.ReportError, match='no well-formed run among 1 results.json'):
    report.build_report([path])


def test_mixed_report_writes_both_kinds(workdirs, grid_dir, tmp_path):
  range_only = report.build_report(workdirs)
  mixed = report.build_report(workdirs + [grid_dir])
  # The range tables and figures do not change with grid runs beside them.
  assert list(range_only.texts) == ['table1', 'table4']
  assert list(mixed.texts) == ['table1', 'table4', 'arithmetic']
  for name in range_only.texts:
    assert mixed.texts[name] == range_only.texts[name]
  for name, data in range_only.files.items():
    assert mixed.files[name] == data
  assert 'arithmetic.md' not in range_only.files
  assert sorted(set(mixed.files) - set(range_only.files)) == ['arithmetic.md'] + sorted(
    n for n in mixed.files if n.startswith('heatmap_')
  )
  assert len([n for n in mixed.files if n.startswith('heatmap_')]) == 6
  out = tmp_path / 'out'
  text = report.write_report(workdirs + [grid_dir], out)
  assert text == '\n'.join(mixed.texts.values())
  assert (out / 'arithmetic.md').read_text() == mixed.texts['arithmetic']
  assert (out / 'table1.md').read_text() == mixed.texts['table1']
  assert report.write_report(workdirs, tmp_path / 'range') == '\n'.join(range_only.texts.values())


def test_cli_on_grid_runs_only(grid_dir, tmp_path):
  result = run_cli(grid_dir, f'--out={tmp_path / "out"}', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  out = tmp_path / 'out'
  names = sorted(p.name for p in out.iterdir())
  assert names[0] == 'arithmetic.md' and len(names) == 7
  assert all(n.startswith('heatmap_') and n.endswith('.png') for n in names[1:])
  assert (out / 'arithmetic.md').read_text() in result.stdout
  assert result.stdout.splitlines()[-1] == f'wrote {out}/arithmetic.md and 6 heatmaps'
  assert result.stderr == ''


def test_cli_mixed_summary_counts_every_file(workdirs, grid_dir, tmp_path, capsys):
  out = tmp_path / 'out'
  launch_report.main([*map(str, workdirs), str(grid_dir), f'--out={out}'])
  printed = capsys.readouterr().out
  assert printed.splitlines()[-1] == (
    f'wrote {out}/table1.md, {out}/table4.md, {out}/arithmetic.md, 3 figures and 6 heatmaps'
  )
  assert (out / 'table1.md').read_text() in printed
  assert (out / 'arithmetic.md').read_text() in printed
  assert len(list(out.iterdir())) == 2 + 1 + 3 + 6


def test_every_encoding_of_the_study_has_a_style_of_its_own():
  styles = {name: plots.encoding_style(name) for name in encodings.NAMES}
  hues = {mpl_colors.to_hex(s['color']) for s in styles.values()}
  assert len(hues) == len(encodings.NAMES)
  assert not hues & {'#000000', '#808080'}  # the training-length and chance lines' colours
  for name in encodings.NAMES:
    if name.startswith('randomized_'):
      standard = styles[name.removeprefix('randomized_')]
      assert standard['marker'] == styles[name]['marker']  # a pair reads as a pair
      assert standard['linestyle'] != styles[name]['linestyle']
  # Encodings outside the study take hues no encoding of the figure has.
  figure = ['alibi', 'type1', 'type2', 'kerple_log']
  colors = [mpl_colors.to_hex(plots.encoding_style(e, figure=figure)['color']) for e in figure]
  assert len(set(colors)) == len(figure)
  series = [plots.series_style(i) for i in range(7)]
  assert len({(s['color'], s['marker'], str(s['linestyle'])) for s in series}) == 7


def test_figure4_draws_chance_for_per_token_accuracy_only(tmp_path):
  write_run(tmp_path / 'r', 'modular_arithmetic', 'rotary', [(0, 1e-4, 0.5)], exact_match=0.3)
  cells = range_tables.collect_cells(report.load_runs([tmp_path])[0])
  lines = lines_by_label(range_section.figure4(cells, 'modular_arithmetic'))
  assert list(lines['chance (1/C = 20.0%)'].get_ydata()) == [0.2, 0.2]
  exact = range_tables.collect_cells(
    report.load_runs([tmp_path], metric='exact_match')[0], metric='exact_match'
  )
  assert not any(
    k.startswith('chance')
    for k in lines_by_label(
      range_section.figure4(exact, 'modular_arithmetic', metric='exact_match')
    )
  )
