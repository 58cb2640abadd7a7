"""Benchmark an encoding on a fixed suite against stored baselines:
`python -m launch.benchmark --encoding=NAME_OR_PATH [--suite=cpu-v1] --workdir=DIR`.

  python -m launch.benchmark --encoding=my_pkg.my_module:MY_ENCODING --workdir=runs/mine
  python -m launch.benchmark --encoding=xpos --suite=tiny --workdir=runs/xpos_tiny
  python -m launch.benchmark --encoding=alibi --cost

The encoding is anything `--config.encoding` takes: a built-in, an import path
`module:ENCODING`, an installed package's entry point. Every task of the suite is trained
(a sweep: DIR/runs/<task>__<encoding>, resumed when rerun) and evaluated on the suite's
frozen evaluation sets (DIR/eval_sets/<task>: regenerated deterministically and checked
against the checksums the suite stores); then DIR gets the card: card.md (per task the
candidate's mean with its interval, success rate with its interval and longest length
generalized next to every stored baseline, its rank and the pairwise tests), card.png and
card.json (versioned; it names the suite and version, posenc's version, the package
versions and the machine). docs/benchmark.md says how to read it.

  --cost            print what the run takes and exit (the stored baselines' measured times,
                    and posenc.cost's estimate for this machine)
  --save_baseline   also store the run as the suite's baseline of this encoding (for the
                    suite's maintainers: experiments/benchmarks/<suite>/baselines/)
  --write_checksums write the suite's frozen sets into DIR/eval_sets and their checksums
                    into the suite's checksums.json, and exit (for a new suite version)

Bad input (an unknown suite or encoding, an import path that does not load, an object that
is not an Encoding, an encoding the suite's model family cannot run, a tampered frozen set,
a baseline file of another suite version) is one line, exit status 2, nothing written.
SIGTERM checkpoints the running cell and exits with status 143; rerunning resumes.
"""

import json
import os
import shutil
import sys
import time

from absl import flags

from experiments import benchmarks
from launch import common
from posenc import benchmark
from posenc import checkpoint
from posenc import config as config_lib
from posenc import encodings
from posenc import io
from posenc import setup
from posenc import sweep as sweep_lib

_ENCODING = flags.DEFINE_string(
  'encoding',
  None,
  'The candidate: a name, module:ATTRIBUTE, or an installed package\'s entry point.',
)
_SUITE = flags.DEFINE_string(
  'suite', 'cpu-v1', f'The suite: one of {", ".join(benchmarks.SUITES)}.'
)
_WORKDIR = flags.DEFINE_string(
  'workdir', None, 'Directory of the run and its card (created or resumed).'
)
_COST = flags.DEFINE_bool('cost', False, 'Print what the run takes and exit.')
_SAVE = flags.DEFINE_bool('save_baseline', False, "Store the run as the suite's baseline.")
_CHECKSUMS = flags.DEFINE_bool(
  'write_checksums', False, "Write the suite's checksums.json from its frozen sets, and exit."
)
SECONDS = 'seconds.json'  # DIR's wall time so far, across resumed invocations


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
  from posenc import cost  # Deferred: only --cost measures.

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


def main(argv):
  if len(argv) > 1:
    common.fail(f'unexpected arguments {argv[1:]}; give flags only')
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
  except (ValueError, config_lib.ConfigError) as e:  # BenchmarkError, an encoding's error
    common.fail(e)
  if _COST.value:
    _cost(suite, configs, baselines)
    return
  directory = _WORKDIR.value
  if os.path.exists(directory) and not os.path.isdir(directory):
    common.fail(f'--workdir={directory} is a file, not a directory')
  created = not os.path.exists(directory)
  common.make_dir(directory, '--workdir')
  try:
    # Every task's frozen set first: a set that is not the suite's stops the run before
    # anything trains.
    sets = {
      task: benchmark.prepare_eval_set(suite, task, config, expected, directory)
      for task, config in configs.items()
    }
  except benchmark.BenchmarkError as e:
    if created:
      shutil.rmtree(directory, ignore_errors=True)
    common.fail(e)
  if _CHECKSUMS.value:
    path = os.path.join(suite.directory, benchmark.CHECKSUMS)
    os.makedirs(suite.directory, exist_ok=True)
    io.write_text_atomic(
      path,
      json.dumps(
        {
          'suite': suite.name,
          'version': suite.version,
          'tasks': {task: benchmark.manifest_checksums(m) for task, (_, m) in sets.items()},
        },
        indent=1,
      )
      + '\n',
    )
    print(f'wrote {path} from the frozen sets in {os.path.join(directory, "eval_sets")}')
    return
  preemption = common.Preemption()
  preemption.install()
  start = time.time()
  seconds_path = os.path.join(directory, SECONDS)
  before = io.read_json(seconds_path)['seconds'] if os.path.exists(seconds_path) else 0.0
  results = {}
  try:
    with common.on_full_disk(lambda: 'the complete cells are kept; rerun to resume', directory):
      for task, config in configs.items():
        config.eval.from_files = sets[task][0]
        sweep_lib.run_sweep(
          config,
          [{'task': task, 'encoding': name}],
          os.path.join(directory, 'runs'),
          progress=lambda line: print(line, flush=True),
          should_stop=preemption,
        )
        io.write_json_atomic(seconds_path, {'seconds': before + time.time() - start})
        cell = os.path.join(
          directory, 'runs', 'cells', sweep_lib.cell_name({'task': task, 'encoding': name})
        )
        if not os.path.exists(os.path.join(cell, 'results.json')):
          common.fail(f'the run of {task} failed: {cell}/error.json says why')
        results[task] = io.read_json(os.path.join(cell, 'results.json'))
      entry = benchmark.make_entry(
        suite,
        name,
        results,
        ['python', '-m', 'launch.benchmark'] + sys.argv[1:],
        before + time.time() - start,
      )
      card = benchmark.make_card(suite, entry, baselines)
      for file, data in benchmark.card_files(card).items():
        io.write_bytes_atomic(os.path.join(directory, file), data)
      io.write_json_atomic(os.path.join(directory, 'entry.json'), entry)
      if _SAVE.value:
        path = benchmark.baseline_path(suite, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        io.write_text_atomic(path, json.dumps(entry, indent=1) + '\n')
        io.write_text_atomic(
          os.path.join(suite.directory, 'baselines.md'),
          benchmark.baselines_table(suite, {**baselines, name: entry}),
        )
  except config_lib.ConfigError as e:
    common.fail(e)
  except checkpoint.Preempted as e:
    print(f'{e}; rerun the same command to resume the benchmark', flush=True)
    raise SystemExit(common.PREEMPTED_EXIT) from None
  print(benchmark.markdown(card))
  print(
    f'card written to {os.path.join(directory, benchmark.CARD_MD)} (and card.json, '
    'card.png)'
    + (f'; baseline stored in {benchmark.baseline_path(suite, name)}' if _SAVE.value else '')
  )


if __name__ == '__main__':
  common.run(main)
