"""Benchmark an encoding on a fixed suite against stored baselines:
`python -m launch.benchmark --encoding=NAME_OR_PATH [--suite=cpu-v2] --workdir=DIR`.

  python -m launch.benchmark --encoding=my_pkg.my_module:MY_ENCODING --workdir=runs/mine
  python -m launch.benchmark --encoding=xpos --suite=tiny --workdir=runs/xpos_tiny
  python -m launch.benchmark --encoding=alibi --cost
  python -m launch.benchmark --coverage [--draws=4000] [--leave_one_out] [--coverage_json=FILE]
  python -m launch.benchmark --suite=cpu-v1 --separated [--among=alibi,fire,...]
  python -m launch.benchmark --suite=cpu-v1 --write_baselines_md
  python -m launch.benchmark --suite=cpu-v2 --selection [--among=alibi,fire,...]
  python -m launch.benchmark --leaderboard [--suite=cpu-v2] [CARD_DIR_OR_FOLDER ...] --out=DIR

The encoding is anything `--config.encoding` takes: a built-in, an import path
`module:ENCODING`, an installed package's entry point. Every task of the suite is trained
(a sweep: DIR/runs/<task>__<encoding>, resumed when rerun) and evaluated on the suite's
frozen evaluation sets (DIR/eval_sets/<task>: regenerated deterministically and checked
against the checksums the suite stores); then DIR gets the card: card.md (per task the
candidate's mean with its interval, success rate with its interval and longest length
generalized next to every stored baseline, its rank and the pairwise tests), card.png and
card.json (versioned; it names the suite and version, posenc's version, the package
versions and the machine). docs/benchmark.md says how to read it. Rerunning the command on
a finished DIR trains nothing and writes the card again with this posenc's statistics.

  --cost            print what the run takes and exit (the stored baselines' measured times,
                    and posenc.sweep.cost's estimate for this machine)
  --save_baseline   also store the run as the suite's baseline of this encoding (for the
                    suite's maintainers: experiments/benchmarks/<suite>/baselines/)
  --write_checksums write the suite's frozen sets into DIR/eval_sets and their checksums
                    into the suite's checksums.json, and exit (for a new suite version)
  --alpha=A         the family-wise error of the card's verdicts (default 0.05). Given
                    explicitly, a level no comparison can reach with the suite's members
                    (3 against 3: p >= 0.1) is refused; by default the card says so instead
  --coverage        print the coverage table of the intervals (posenc.statistics.coverage),
                    simulated from the suite's stored baselines at every number of members
                    a suite or a scorecard study uses, and exit; --coverage_json=FILE also
                    writes it as JSON; --leave_one_out judges each stored cell by the pool
                    of the others, as a candidate's cells are
  --separated       print which pairs of the suite's stored baselines (--among: a subset)
                    it separates, Holm over every pair and task, and the minimum
                    detectable difference per task at 8, 12 and 16 members; and exit
  --selection       print the table the suite's tasks and test lengths were chosen by: per
                    task and longest test length, the pairs of stored baselines that task
                    alone separates (and those --among names), its minimum detectable
                    difference, the encodings that succeed and its training time; and exit
  --write_baselines_md  rewrite the suite's baselines.md from its stored baselines (no
                    training), and exit
  --leaderboard     write the static site of the suite's stored baselines and the cards
                    given (each a --workdir of this command, or a folder of them such as
                    experiments/benchmarks/cpu-v2/cards) into --out=DIR (posenc.benchmark.leaderboard:
                    one sortable table seen whole or per task, a figure per task, a page per
                    entry, the table and every member's score as CSV and JSON, each entry's
                    card.json, references.bib; DIR is replaced whole, and only if it is new,
                    empty or a previous leaderboard); --reference names the entry the verdicts
                    are first shown against; --docs_url and --home_url where its links go
                    (default: the documentation beside it, DIR/..), and exit.
                    launch.check_card checks a card first

Bad input (an unknown suite or encoding, a card of another suite or version or a damaged
one, an --out that holds something else or cannot be written, an import path that does not load, an object that
is not an Encoding, an encoding the suite's model family cannot run, a tampered frozen set,
a baseline file of another suite version, an --alpha outside (0, 1) or one the suite's
members cannot reach, --draws outside [10, 100,000] or not an integer, a flag of
--leaderboard without it, a --docs_url or --home_url that is not an address) is one line, exit
status 2, nothing written.
SIGTERM checkpoints the running cell and exits with status 143; rerunning resumes.

The tasks train in worker processes at once with `--jobs=N`; `--jobs=0` (the default)
chooses as `launch.sweep` does (launch/workers.py: on a CPU-only host, one per core when the
tasks train 1,000 steps or more). The card does not depend on it.
"""

import json
import os
import re
import shutil
import sys
import time
from urllib.parse import urlsplit

from absl import flags
import jax

from experiments import benchmarks
from launch import common
from launch import full_disk
from launch import suite_tables
from launch import workers
from posenc.benchmark import baselines as baselines_lib
from posenc import benchmark
from posenc.benchmark import card as card_lib
from posenc.storage import lease
from posenc import config as config_lib
from posenc import encodings
from posenc.storage import io
from posenc.storage import store
from posenc import setup
from posenc import sweep as sweep_lib

_ENCODING = flags.DEFINE_string(
  'encoding',
  None,
  'The candidate: a name, module:ATTRIBUTE, or an installed package\'s entry point.',
)
_SUITE = flags.DEFINE_string(
  'suite', benchmarks.DEFAULT, f'The suite: one of {", ".join(benchmarks.SUITES)}.'
)
_WORKDIR = flags.DEFINE_string(
  'workdir', None, 'Directory of the run and its card (created or resumed).'
)
_COST = flags.DEFINE_bool('cost', False, 'Print what the run takes and exit.')
_SAVE = flags.DEFINE_bool('save_baseline', False, "Store the run as the suite's baseline.")
_CHECKSUMS = flags.DEFINE_bool(
  'write_checksums', False, "Write the suite's checksums.json from its frozen sets, and exit."
)
_ALPHA = flags.DEFINE_float('alpha', 0.05, "The family-wise error of the card's verdicts.")
_COVERAGE = flags.DEFINE_bool('coverage', False, 'Print the coverage table of the intervals.')
_DRAWS = flags.DEFINE_integer('draws', 4000, 'Simulated draws per truth and n (--coverage).')
_COVERAGE_JSON = flags.DEFINE_string('coverage_json', None, 'Also write the table as JSON.')
_LEAVE_ONE_OUT = flags.DEFINE_bool(
  'leave_one_out', False, 'Judge each stored cell by the pool of the others (--coverage).'
)
_SEPARATED = flags.DEFINE_bool(
  'separated', False, "Print the pairs of the suite's stored baselines it separates."
)
_AMONG = flags.DEFINE_list(
  'among', None, 'The encodings --separated compares (default: all); --selection counts them too.'
)
_SELECTION = flags.DEFINE_bool(
  'selection', False, "Print the table the suite's tasks and test lengths are chosen by."
)
_BASELINES_MD = flags.DEFINE_bool(
  'write_baselines_md', False, "Rewrite the suite's baselines.md from its stored baselines."
)
_LEADERBOARD = flags.DEFINE_bool(
  'leaderboard', False, 'Write the static leaderboard site of the stored baselines and the cards.'
)
_OUT = flags.DEFINE_string('out', None, 'The directory --leaderboard writes its site into.')
_LEASE_WAIT = flags.DEFINE_float('lease_wait', None, common.LEASE_WAIT_HELP)
_JOBS = flags.DEFINE_integer(
  'jobs', 0, 'Worker processes training tasks at once on this host; 0: chosen (see --help).'
)
_TRAIN_ONLY = flags.DEFINE_list(
  'train_only', [], "A worker's share of the tasks: train these, write no card, and exit."
)
_DOCS_URL = flags.DEFINE_string(
  'docs_url',
  None,
  "The documentation site's root the leaderboard links (home, benchmark, how to submit, API "
  "reference): an http(s) address or a path relative to --out; default '..', the board "
  'hosted as leaderboard/ in the documentation site, as its build writes it.',
)
_HOME_URL = flags.DEFINE_string(
  'home_url', None, "posenc's home page the leaderboard's name links; default: the docs' home."
)
_REFERENCE = flags.DEFINE_string(
  'reference',
  None,
  'The entry the leaderboard shows verdicts against first (default: the '
  'first card given, else the best-ranked baseline).',
)
SECONDS = 'seconds.json'  # DIR's wall time so far, across resumed invocations
OWNER = 'suite.json'  # which suite, version and encoding DIR's run is of
# --draws: fewer says nothing; more holds [draws, 100] arrays of gigabytes for a table that
# 4,000 already measures to within a point.
MIN_DRAWS, MAX_DRAWS = 10, 100_000


def _check_workdir_suite(directory: str, suite: benchmark.Suite, name: str) -> None:
  """A DIR holding the run of another suite, version or encoding is refused (one line):
  its frozen sets and cells are not this card's."""
  for file in (OWNER, 'entry.json'):
    path = os.path.join(directory, file)
    if not io.exists(path):
      continue
    try:
      held = io.read_json(path)
      held = {
        'suite': held['suite'] if isinstance(held['suite'], str) else held['suite']['name'],
        'version': held['version'] if 'version' in held else held['suite']['version'],
        'encoding': held['encoding'],
      }
    except (ValueError, KeyError, TypeError) as e:
      common.fail(f'--workdir={directory}: {path} is damaged ({e}); give a new directory')
    if (held['suite'], held['version'], held['encoding']) != (suite.name, suite.version, name):
      common.fail(
        f'--workdir={directory} holds the run of {held["encoding"]!r} on suite '
        f'{held["suite"]} (version {held["version"]}), not of {name!r} on {suite.name} '
        f'(version {suite.version}); give a new directory'
      )
    return


def _cost(suite, configs, baselines):
  seconds = sorted(e['seconds'] for e in baselines.values())
  if seconds:
    made = next(iter(baselines.values()))
    print(
      f'suite {suite.name}: {len(suite.tasks)} tasks; its {len(seconds)} stored baselines '
      f'took {seconds[0] / 60:.1f} to {seconds[-1] / 60:.1f} min each (median '
      f'{seconds[len(seconds) // 2] / 60:.1f}) on {made["machine"]["machine"]} with '
      f'{made["machine"]["cpus"]} CPUs, jax {made["packages"].get("jax")}'
    )
  from posenc.sweep import cost  # Deferred: only --cost measures.

  total = 0.0
  for task, config in configs.items():
    est = cost.estimate(config, [{'task': task, 'encoding': config.encoding}], 5)
    (row,) = est['cells']
    total += est['wall_clock_s']
    print(
      f'{task}: {config.train.steps:,} steps x {est["members_per_cell"]} members: train '
      f'{row["train_s"] / 60:.1f} min, evaluation {row["eval_s"] / 60:.1f} min (measured here: '
      f'{est["measured"]["model_updates_per_s"]:.1f} model-updates/s)'
    )
  print(
    f'{config.encoding} on {suite.name}: about {total / 60:.1f} min on this machine, '
    'compilation not included (cached programs are not compiled again)'
  )


def _announce(suite, name, configs, baselines, plan, before) -> None:
  """The card's first line: what it trains, and how long the stored baselines took."""
  members = benchmarks.members_per_cell(next(iter(configs.values())))
  tasks = ', '.join(f'{task} ({config.train.steps:,} steps)' for task, config in configs.items())
  line = f'card of {name} on {suite.name}: {tasks}, {members} members each'
  if plan.seconds:
    made = next(iter(baselines.values()))['machine']
    line += (
      f'; its {len(plan.seconds)} stored baselines took {plan.seconds[0] / 60:.1f} to '
      f'{plan.seconds[-1] / 60:.1f} min (median {plan.median() / 60:.1f}) on a '
      f'{made["cpus"]}-CPU {made["machine"]}'
    )
  if before:
    line += f'; {before / 60:.1f} min spent before, resumed'
  print(line, flush=True)


def _progress(plan, done, tasks: int, elapsed: float, ran, spent: float, left) -> None:
  """After each task: the tasks done, the time so far and the card's ETA (the time the tasks
  trained by this invocation took, scaled by the shares of the stored baselines' runs)."""
  to_go = 0.0 if not left else plan.remaining(spent, ran, left)
  eta = '' if to_go is None else f' | ETA {to_go / 60:.1f} min'
  print(
    f'card: {len(done)}/{tasks} tasks done ({", ".join(done)}) | elapsed {elapsed / 60:.1f} '
    f'min{eta}',
    flush=True,
  )


def _check_numbers() -> None:
  """Every numeric flag within its range, whatever the mode (one line, exit 2)."""
  if not 0 < _ALPHA.value < 1:
    common.fail(f'--alpha={_ALPHA.value} must be in (0, 1)')
  if not MIN_DRAWS <= _DRAWS.value <= MAX_DRAWS:
    common.fail(f'--draws={_DRAWS.value} must be an integer in [{MIN_DRAWS}, {MAX_DRAWS:,}]')


def _address(flag) -> str | None:
  """--docs_url / --home_url: an http(s) address or a relative path, else one line."""
  value = flag.value
  if value is None:
    return None
  scheme = re.match(r'^([A-Za-z][A-Za-z0-9+.-]*):', value)
  if not value.strip() or (
    scheme and (scheme.group(1).lower() not in ('http', 'https') or not urlsplit(value).netloc)
  ):
    common.fail(
      f'--{flag.name}={value} is not an address; give an http(s):// address or a path '
      'relative to --out (e.g. ..)'
    )
  return value


def _leaderboard(given: list[str]) -> None:
  """Writes the leaderboard site of the suite's stored baselines and the cards `given`
  (card directories or folders of them)."""
  from posenc.benchmark import leaderboard  # Deferred: only --leaderboard draws a site.
  from posenc.benchmark.leaderboard import site

  if not _OUT.value:
    common.fail('--leaderboard needs --out=DIR, the directory to write the site into')
  common.check_out_dir(_OUT.value, '--out')
  links = site.default_links(_address(_DOCS_URL), _address(_HOME_URL))
  start = time.time()
  try:
    suite = benchmarks.get(_SUITE.value)
    card_dirs = [d for path in given for d in leaderboard.card_dirs(path)]
    baselines = benchmark.read_baselines(suite)
    entries = [leaderboard.read_card_dir(suite, d) for d in card_dirs]
    names = leaderboard.candidate_names(card_dirs, entries, list(baselines))
    board = leaderboard.leaderboard(suite, baselines, dict(zip(names, entries)), _ALPHA.value)
    known = [e['name'] for e in board['entries']]
    if _REFERENCE.value is not None and _REFERENCE.value not in known:
      common.fail(f'--reference={_REFERENCE.value} is not an entry; entries: {", ".join(known)}')
    stamp = site.stamp(common.source_commit())
    files = site.files(board, _REFERENCE.value, links, stamp)
    site.write(_OUT.value, files)
  except ValueError as e:  # BenchmarkError, a damaged record's SchemaError, LeaderboardError
    common.fail(e)
  except OSError as e:
    common.fail(f'--out={_OUT.value} cannot be written: {e.strerror or e}')
  print(
    f'wrote the leaderboard of {suite.name} ({len(baselines)} stored baselines, {len(entries)} '
    f'card{"" if len(entries) == 1 else "s"}) '
    f'to {os.path.join(_OUT.value, "index.html")} in {time.time() - start:.1f} s; '
    f'its links go to the documentation at {_docs_where(links.docs)}'
  )


def _docs_where(docs: str) -> str:
  """Where the board's documentation links lead, said so that a reader whose board has no
  documentation beside it knows (a relative address is resolved against --out)."""
  if re.match(r'^[A-Za-z][A-Za-z0-9+.-]*:', docs) or store.is_url(_OUT.value):
    return docs
  home = os.path.normpath(os.path.join(os.path.abspath(_OUT.value), docs, 'index.html'))
  if os.path.exists(home):
    return os.path.dirname(home)
  return f'{os.path.dirname(home)}, which has none yet (--docs_url=ADDRESS points them elsewhere)'


def main(argv):
  _check_numbers()
  if _LEADERBOARD.value:
    return _leaderboard(argv[1:])
  # The leaderboard's own flags say nothing to a run: a typo'd --leaderboard would
  # otherwise train.
  given = [f.name for f in (_OUT, _REFERENCE, _DOCS_URL, _HOME_URL) if f.present]
  if given:
    common.fail(f'--{given[0]} is a flag of --leaderboard; add --leaderboard, or drop it')
  if len(argv) > 1:
    common.fail(
      f'unexpected arguments {argv[1:]}; give flags only (card directories only with --leaderboard)'
    )
  if _COVERAGE.value or _SEPARATED.value or _BASELINES_MD.value or _SELECTION.value:
    return _suite_tables()
  suite, name, configs, expected, baselines = _candidate()
  workers.check(_JOBS.value, jax.default_backend)  # after _candidate's cpu_devices
  unknown = [t for t in _TRAIN_ONLY.value if t not in configs]
  if unknown:
    common.fail(f'--train_only={unknown[0]} is not a task of {suite.name}: {", ".join(configs)}')
  if _COST.value:
    return _cost(suite, configs, baselines)
  directory = _WORKDIR.value
  sets = _frozen_sets(directory, suite, name, configs, expected)
  if _CHECKSUMS.value:
    return _write_checksums(suite, directory, sets)
  _run_card(directory, suite, name, configs, sets, baselines)


def _suite_tables() -> None:
  """--coverage, --separated, --selection and --write_baselines_md: tables of the suite's
  stored baselines, nothing trained."""
  try:
    suite = benchmarks.get(_SUITE.value)
    baselines = {} if _COVERAGE.value else benchmark.read_baselines(suite)
  except ValueError as e:  # BenchmarkError
    common.fail(e)
  if _COVERAGE.value:
    return suite_tables.coverage_table(
      suite, _DRAWS.value, _LEAVE_ONE_OUT.value, _COVERAGE_JSON.value
    )
  if not baselines:
    common.fail(f'suite {suite.name} stores no baselines')
  if _SEPARATED.value:
    return suite_tables.separated(
      suite, baselines, _AMONG.value, _ALPHA.value, flags.FLAGS['alpha'].present
    )
  if _SELECTION.value:
    return suite_tables.selection_table(suite, baselines, _AMONG.value, _ALPHA.value)
  path = os.path.join(suite.directory, 'baselines.md')
  io.write_text_atomic(path, baselines_lib.baselines_table(suite, baselines, _ALPHA.value))
  print(f'wrote {path} from the {len(baselines)} stored baselines of {suite.name}')


def _candidate():
  """(suite, encoding name, {task: config}, the frozen sets' checksums, the stored
  baselines) of --encoding on --suite, every config built once (one line, exit 2, on bad
  input); the checksums and baselines are None and {} under --write_checksums."""
  if not _ENCODING.value:
    common.fail(
      '--encoding is required, e.g. --encoding=alibi or --encoding=my_pkg.my_module:MY_ENCODING'
    )
  if not _WORKDIR.value and not _COST.value:
    common.fail('--workdir is required, e.g. --workdir=runs/my_encoding')
  try:
    suite = benchmarks.get(_SUITE.value)
    name = _ENCODING.value
    encodings.get(name)
    configs = {task: suite.cell_config(task, name) for task in suite.tasks}
    common.cpu_devices(configs.values())
    for config in configs.values():
      setup.build(config)
    if not suite.measured:
      common.fail(
        f'suite {suite.name} is defined on paper: it has no checksums or baselines '
        f'yet (docs/benchmark.md gives its estimated cost); valid measured suites: '
        f'{", ".join(s.name for s in benchmarks.SUITES.values() if s.measured)}'
      )
    expected = None if _CHECKSUMS.value else benchmark.checksums(suite)
    baselines = {} if _CHECKSUMS.value else benchmark.read_baselines(suite)
    if flags.FLAGS['alpha'].present and not _CHECKSUMS.value:
      members = benchmarks.members_per_cell(next(iter(configs.values())))
      card_lib.check_alpha(suite, baselines, name, members, _ALPHA.value)
  except (ValueError, config_lib.ConfigError) as e:  # BenchmarkError, an encoding's error
    common.fail(e)
  return suite, name, configs, expected, baselines


def _frozen_sets(directory, suite, name, configs, expected) -> dict:
  """{task: (its frozen set's directory, manifest)} in DIR/eval_sets, DIR made and claimed
  for this suite and encoding. A set that is not the suite's stops the run before anything
  trains, and a DIR this call made is removed again."""
  common.check_store(directory, '--workdir')
  if not store.is_url(directory) and os.path.exists(directory) and not os.path.isdir(directory):
    common.fail(f'--workdir={directory} is a file, not a directory')
  _check_workdir_suite(directory, suite, name)
  created = not io.exists(directory)
  common.make_dir(directory, '--workdir')
  io.write_json_atomic(
    os.path.join(directory, OWNER),
    {'suite': suite.name, 'version': suite.version, 'encoding': name},
  )
  try:
    return {
      task: benchmark.prepare_eval_set(suite, task, config, expected, directory)
      for task, config in configs.items()
    }
  except benchmark.BenchmarkError as e:
    if created and store.is_url(directory):
      store.remove(directory, recursive=True)
    elif created:
      shutil.rmtree(directory, ignore_errors=True)
    common.fail(e)


def _write_checksums(suite, directory, sets) -> None:
  """--write_checksums: the suite's checksums.json from the frozen sets just written."""
  path = os.path.join(suite.directory, benchmark.CHECKSUMS)
  os.makedirs(suite.directory, exist_ok=True)
  tasks = {task: benchmark.manifest_checksums(m) for task, (_, m) in sets.items()}
  checksums = {'suite': suite.name, 'version': suite.version, 'tasks': tasks}
  io.write_text_atomic(path, json.dumps(checksums, indent=1) + '\n')
  print(f'wrote {path} from the frozen sets in {os.path.join(directory, "eval_sets")}')


def _run_card(directory, suite, name, configs, sets, baselines) -> None:
  """Trains every task not yet trained (resumed), then writes and prints the card (and
  stores the baseline under --save_baseline)."""
  preemption = common.Preemption()
  lock = common.workdir_lock(_LEASE_WAIT.value, preemption)
  preemption.install()
  start = time.time()
  seconds_path = os.path.join(directory, SECONDS)
  before = io.read_json(seconds_path)['seconds'] if io.exists(seconds_path) else 0.0
  plan = benchmark.expected(suite, baselines)
  _announce(suite, name, configs, baselines, plan, before)

  def elapsed() -> float:  # Across resumed invocations.
    return before + time.time() - start

  if _TRAIN_ONLY.value:  # a worker: its tasks, then the parent writes the card
    configs = {t: c for t, c in configs.items() if t in _TRAIN_ONLY.value}
  retry = bool(_TRAIN_ONLY.value) or not _run_workers(directory, name, configs, preemption)
  try:
    with full_disk.on_full_disk(lambda: 'the complete cells are kept; rerun to resume', directory):
      results = _train(directory, name, configs, sets, plan, elapsed, lock, preemption, retry)
      if _TRAIN_ONLY.value:
        return
      entry = benchmark.make_entry(
        suite, name, results, ['python', '-m', 'launch.benchmark'] + sys.argv[1:], elapsed()
      )
      card = card_lib.make_card(suite, entry, baselines, alpha=_ALPHA.value)
      for file, data in card_lib.card_files(card).items():
        io.write_bytes_atomic(os.path.join(directory, file), data)
      io.write_json_atomic(os.path.join(directory, 'entry.json'), entry)
      if _SAVE.value:
        path = benchmark.baseline_path(suite, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        io.write_text_atomic(path, json.dumps(entry, indent=1) + '\n')
        io.write_text_atomic(
          os.path.join(suite.directory, 'baselines.md'),
          baselines_lib.baselines_table(suite, {**baselines, name: entry}, _ALPHA.value),
        )
  except config_lib.ConfigError as e:
    common.fail(e)
  except lease.Preempted as e:
    print(f'{e}; rerun the same command to resume the benchmark', flush=True)
    raise SystemExit(common.PREEMPTED_EXIT) from None
  print(card_lib.markdown(card))
  print(
    f'card written to {os.path.join(directory, benchmark.CARD_MD)} (and card.json, '
    'card.png)'
    + (f'; baseline stored in {benchmark.baseline_path(suite, name)}' if _SAVE.value else '')
  )


def _run_workers(directory, name, configs, preemption) -> bool:
  """The tasks not yet trained, in worker processes (--jobs; launch/workers.py), each
  `--train_only` its share; False when one process is to train them. Exits 143 when SIGTERM
  stopped the workers (the rerun resumes)."""
  todo = [
    t for t in configs if not io.exists(os.path.join(_cell(directory, t, name), 'results.json'))
  ]
  jobs = _JOBS.value or workers.auto_jobs(
    jax.default_backend(),
    cores=len(os.sched_getaffinity(0)),
    steps=[configs[t].train.steps for t in todo],
    cpu_devices=max(c.get('cpu_devices', 0) for c in configs.values()),
    sharded=False,
  )
  shares = workers.split(todo, min(jobs, len(todo)))
  if len(shares) < 2:
    return False
  print(
    f'card: {len(todo)} tasks in {len(shares)} worker processes (--jobs); their lines are '
    f'marked [k/{len(shares)}]',
    flush=True,
  )
  codes = workers.run(
    [
      workers.command('launch.benchmark', sys.argv[1:], f'--train_only={",".join(s)}')
      for s in shares
    ],
    out=lambda line: print(line, flush=True),
    err=lambda line: print(line, file=sys.stderr, flush=True),
  )
  if preemption.requested or common.PREEMPTED_EXIT in codes:
    print('the workers checkpointed their tasks; rerun the same command to resume', flush=True)
    raise SystemExit(common.PREEMPTED_EXIT)
  return True


def _cell(directory, task, name) -> str:
  return os.path.join(
    directory, 'runs', 'cells', sweep_lib.cell_name({'task': task, 'encoding': name})
  )


def _train(directory, name, configs, sets, plan, elapsed, lock, preemption, retry) -> dict:
  """{task: its results.json}: each task's cell trained and evaluated on its frozen set (a
  finished cell is read back; a failed one run again if `retry`: not after workers tried
  it), the time and the card's ETA printed after each."""
  results = {}
  ran, spent = [], 0.0  # the tasks trained by this invocation, and the time they took
  for task, config in configs.items():
    cell = _cell(directory, task, name)
    finished = io.exists(os.path.join(cell, 'results.json'))
    started = time.time()
    config.eval.from_files = sets[task][0]
    rows = sweep_lib.run_sweep(
      config,
      [{'task': task, 'encoding': name}],
      os.path.join(directory, 'runs'),
      progress=lambda line: print(line, flush=True),
      should_stop=preemption,
      lock=lock,
      wait_s=_LEASE_WAIT.value,
      retry_failed=retry,
    )
    if 'held' in rows[0]:
      common.busy(
        f'the run of {task} is held by {rows[0]["held"]}',
        '; rerun once it has ended (or with a longer --lease_wait)',
      )
    if not _TRAIN_ONLY.value:  # the parent's time holds its workers'
      io.write_json_atomic(os.path.join(directory, SECONDS), {'seconds': elapsed()})
    if not io.exists(os.path.join(cell, 'results.json')):
      common.fail(f'the run of {task} failed: {cell}/error.json says why')
    results[task] = io.read_json(os.path.join(cell, 'results.json'))
    if not finished:
      ran.append(task)
      spent += time.time() - started
    left = [t for t in configs if t not in results]
    _progress(plan, list(results), len(configs), elapsed(), ran, spent, left)
  return results


if __name__ == '__main__':
  common.run(main)
