"""Check a submitted card before it joins the leaderboard:
`python -m launch.check_card CARD_DIR --workdir=DIR [--member=TASK:SEED:DATA]`.

  python -m launch.check_card cards/my_encoding --workdir=runs/check_my_encoding
  python -m launch.check_card cards/my_encoding --workdir=runs/check --member=flip_flop:3:1
  python -m launch.check_card cards/my_encoding --workdir=runs/check --tolerance=0.5

CARD_DIR is a card directory as `launch.benchmark --workdir` leaves it (card.json and
entry.json are read); the suite is the one its card names (--suite, if given, must be it). One line per check (posenc.benchmark.submission): suite (card and entry of the
suite and its version), config (every task's run is the suite's cell for its encoding),
card (card.json's member scores are entry.json's), checksums (the frozen evaluation sets
drawn here, in DIR/eval_sets, are the suite's; and those in CARD_DIR/eval_sets, if it
has them), rerun (one member trained again here, in DIR/rerun, scores what the entry
records at every test length; trained only when the other checks pass). Exit status 0 when
all pass, 1 when one fails, 2 for bad
input (one line: not a card directory, an unknown suite, a member the entry does not have,
an encoding that does not load here: install the submitter's package first).

The rerun trains one member of one cell (by default the first member of the suite's first
task): about 2 min for cpu-v2 on a 2-core CPU. A single member trains as it does in its
population, so on the same kind of processor the scores are equal to the last bit; on
another, the last digits may differ: --tolerance=POINTS accepts a difference up to that.
Rerunning the command resumes the rerun.

  $ python -m launch.check_card runs/mine --workdir=runs/check_mine
  suite      ok    card and entry of tiny version 1, encoding 'mine'
  ...
  runs/mine: 5 of 5 checks pass in 48 s: ready for the leaderboard
"""

import os
import sys
import time

from absl import flags

from experiments import benchmarks
from launch import common
from posenc import benchmark
from posenc.storage import lease
from posenc import config as config_lib
from posenc import encodings
from posenc.storage import io
from posenc.benchmark import leaderboard
from posenc import setup
from posenc.benchmark import submission
from posenc import suggest
from posenc.training import train

_WORKDIR = flags.DEFINE_string(
  'workdir', None, 'Directory of the check: the frozen sets and the rerun (created or resumed).'
)
_SUITE = flags.DEFINE_string(
  'suite',
  None,
  f'The suite the card must be of (one of {", ".join(benchmarks.SUITES)}); default: the one '
  'its card.json names.',
)
_MEMBER = flags.DEFINE_string(
  'member',
  None,
  'The member to train again, TASK:SEED:DATA_SEED (DATA_SEED empty for a suite of one data '
  'order); default: the first member of the first task.',
)
_TOLERANCE = flags.DEFINE_float(
  'tolerance', 0.0, 'Points the rerun may differ by, at any length (0: equal).'
)


def _suite_of(card, card_dir: str) -> str:
  """The suite the card names (--suite, if given, must be it)."""
  named = card.get('suite') if isinstance(card, dict) else None
  name = named.get('name') if isinstance(named, dict) else None
  if not isinstance(name, str):
    common.fail(
      f'{card_dir}/{benchmark.CARD_JSON} names no suite: it is not a posenc benchmark card'
    )
  if _SUITE.value is not None and benchmarks.get(_SUITE.value).name != name:
    common.fail(
      f'--suite={_SUITE.value}, but the card in {card_dir} is of suite {name!r}; drop --suite '
      'to check it against its own suite'
    )
  return name


def _member(suite: benchmark.Suite, entry: dict) -> tuple[str, int | None, int | None]:
  if not _MEMBER.value:
    first = entry['tasks'][next(iter(suite.tasks))]['members'][0]
    return next(iter(suite.tasks)), first.get('seed'), first.get('data_seed')
  task, _, rest = _MEMBER.value.partition(':')
  seed, _, data = rest.partition(':')
  if task not in suite.tasks:
    common.fail(
      f'--member={_MEMBER.value}: {task!r}{suggest.did_you_mean(task, suite.tasks)} is not a '
      f'task of {suite.name}; its tasks: {", ".join(suite.tasks)}'
    )
  try:
    return task, int(seed) if seed else None, int(data) if data else None
  except ValueError:
    common.fail(f'--member={_MEMBER.value} must be TASK:SEED:DATA_SEED, e.g. {task}:0:1')


def _eval_sets(suite, entry, card_dir, directory) -> submission.Check:
  """The suite's frozen sets drawn in `directory` (checked against checksums.json), and the
  card directory's own if it has them."""
  expected = benchmark.checksums(suite)
  for task in suite.tasks:
    config = suite.cell_config(task, entry['encoding'])
    try:
      benchmark.prepare_eval_set(suite, task, config, expected, directory)
      submitted = os.path.join(card_dir, 'eval_sets', task, 'manifest.json')
      if io.exists(submitted):
        manifest = benchmark.read_json(submitted, 'manifest')
        benchmark.verify_eval_set(suite, task, manifest, expected)
    except benchmark.BenchmarkError as e:
      return submission.Check('checksums', False, str(e))
  own = io.exists(os.path.join(card_dir, 'eval_sets'))
  return submission.Check(
    'checksums',
    True,
    f'the frozen sets of {len(suite.tasks)} tasks drawn here are the suite\'s'
    + (' and so are the card directory\'s' if own else ''),
  )


def _rerun(suite, entry, task, seed, data_seed, directory, preemption) -> submission.Check:
  recorded = submission.member_of(entry, task, seed, data_seed)
  config = suite.cell_config(task, entry['encoding'])
  common.cpu_devices([config])
  config.eval.from_files = os.path.join(directory, 'eval_sets', task)
  config.seeds = [recorded['seed']]
  if config.get('data_seeds'):
    config.data_seeds = [recorded['data_seed']]
  where = os.path.join(
    directory, 'rerun', f'{task}__seed{recorded["seed"]}_data{recorded.get("data_seed")}'
  )
  results_path = os.path.join(where, 'results.json')
  if not io.exists(results_path):
    train.train_and_evaluate(
      setup.build(config),
      where,
      progress=lambda line: print(line, flush=True),
      should_stop=preemption,
    )
  (member,) = io.read_json(results_path)['members']
  return submission.compare_member(task, recorded, member, _TOLERANCE.value)


def main(argv):
  if len(argv) != 2:
    common.fail(
      'give one card directory, e.g. python -m launch.check_card runs/mine --workdir=runs/check_mine'
    )
  card_dir = argv[1]
  if not _WORKDIR.value:
    common.fail('--workdir is required: the directory of the check, e.g. --workdir=runs/check_mine')
  if os.path.abspath(_WORKDIR.value) == os.path.abspath(card_dir):
    common.fail(f'--workdir={_WORKDIR.value} is the card directory; give a directory of its own')
  if _TOLERANCE.value < 0:
    common.fail(f'--tolerance={_TOLERANCE.value:g} must be >= 0')
  common.check_out_dir(_WORKDIR.value, '--workdir')
  start = time.time()
  try:
    card = benchmark.read_json(os.path.join(card_dir, benchmark.CARD_JSON), 'card')
    suite = benchmarks.get(_suite_of(card, card_dir))
    entry = leaderboard.read_card_dir(suite, card_dir)
    task, seed, data_seed = _member(suite, entry)
    submission.member_of(entry, task, seed, data_seed)
    encodings.get(entry['encoding'])
  except ValueError as e:  # BenchmarkError, a damaged record, a member or encoding not there
    common.fail(e)
  checks = [
    submission.Check(
      'suite',
      True,
      f'card and entry of {suite.name} version {suite.version}, encoding {entry["encoding"]!r}',
    )
  ]
  print(checks[0].line(), flush=True)

  def report(check: submission.Check) -> None:
    checks.append(check)
    print(check.line(), flush=True)

  report(submission.check_config(suite, entry))
  report(submission.check_card(card, entry))
  common.make_dir(_WORKDIR.value, '--workdir')
  report(_eval_sets(suite, entry, card_dir, _WORKDIR.value))
  if all(c.passed for c in checks):
    preemption = common.Preemption()
    preemption.install()
    try:
      report(_rerun(suite, entry, task, seed, data_seed, _WORKDIR.value, preemption))
    except config_lib.ConfigError as e:
      common.fail(e)
    except lease.Preempted as e:
      print(f'{e}; rerun the same command to resume the check', flush=True)
      raise SystemExit(common.PREEMPTED_EXIT) from None
  else:
    # A card that fails a check is not accepted whatever its rerun gives: nothing is trained.
    report(submission.Check('rerun', False, 'not run: an earlier check failed'))
  failed = [c.name for c in checks if not c.passed]
  print(
    f'{card_dir}: {len(checks) - len(failed)} of {len(checks)} checks pass in '
    f'{time.time() - start:.0f} s'
    + (f' (failed: {", ".join(failed)})' if failed else ': ready for the leaderboard')
  )
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  common.run(main)
