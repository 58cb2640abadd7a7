"""Test-wide settings: fast compiles, a shared compilation cache, the same for subprocesses.

Both are set in the environment so that `python -m launch.*` subprocesses the tests start
(and pytest-xdist workers) inherit them.
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

# Tiny models: XLA's optimisation passes cost more than they save (flax's lm1b tests do
# the same).
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', 'true')

# Many tests (and the kill-and-resume subprocesses) compile the same tiny programs: a
# persistent cache shared by the whole test run compiles each once. It lives in a fresh
# directory per run, so nothing carries over between runs.
if 'JAX_COMPILATION_CACHE_DIR' not in os.environ:
  _cache = tempfile.mkdtemp(prefix='posenc-test-jax-cache-')
  atexit.register(shutil.rmtree, _cache, ignore_errors=True)
  os.environ['JAX_COMPILATION_CACHE_DIR'] = _cache
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES', '0')

import jax  # noqa: E402

jax.config.update(
  'jax_disable_most_optimizations', os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] == 'true'
)


import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def kill_after_checkpoint():
  """kill(cmd, workdir, step): runs the `launch.train` command `cmd` from the project root,
  which kills itself with SIGKILL right after writing the checkpoint of `step`
  (POSENC_KILL_AFTER_CHECKPOINT): a crash at a known point, without a race."""

  def kill(cmd, workdir, step, timeout=300):
    env = dict(os.environ, POSENC_KILL_AFTER_CHECKPOINT=str(step))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert os.path.exists(os.path.join(workdir, 'checkpoints', str(step)))
    assert not os.path.exists(os.path.join(workdir, 'results.json'))

  return kill


class CliServer:
  """`python -m MODULE ARGS` for many commands, each forked from one process that has the
  libraries imported (tests/scripts/cli_server.py): the same exit status and output as the
  command line, without paying for JAX's import in every command."""

  def __init__(self):
    self.proc = subprocess.Popen(
      [sys.executable, os.path.join(ROOT, 'tests', 'scripts', 'cli_server.py')],
      cwd=ROOT,
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
    )

  def run(self, argv, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    """Runs `python -m argv[0] argv[1:]` in `cwd`, with `env` added to the environment."""
    self.proc.stdin.write(
      json.dumps({'argv': list(argv), 'cwd': str(cwd), 'env': dict(env or {})}) + '\n'
    )
    self.proc.stdin.flush()
    reply = json.loads(self.proc.stdout.readline())
    return subprocess.CompletedProcess(
      ['python', '-m', *argv], reply['returncode'], reply['stdout'], reply['stderr']
    )

  def close(self):
    self.proc.stdin.close()
    self.proc.wait(timeout=60)


@pytest.fixture(scope='session')
def cli():
  server = CliServer()
  yield server
  server.close()


# Checks that repeat one invariant over every encoding: the default suite runs them on one
# encoding of each kind (and every method with code of its own), `-m slow` on all of them.
REPRESENTATIVES = {
  'none',
  'relative',
  'rotary',
  'geometric_directional',
  'dape',
  'stick_breaking',
  'abacus+fire',
}
# One encoding of each kind of model input: content only, an embedding drawn per sequence, a
# rotation, the study's relative bias (distances drawn), a replacement of the softmax, one
# that caches features of the keys (causal only), one that reads digits (and a combination).
ONE_PER_KIND = {
  'none',
  'randomized_sin_cos',
  'rotary',
  'randomized_relative',
  'geometric_directional',
  'forgetting',
  'abacus+fire',
}
# The model invariants' default sample: content only (the backends' test above covers the
# attention kinds; `-m slow` runs ONE_PER_KIND and the rest).
MODEL_INVARIANTS = {'none'}
# Padding's invariance over the study's 13: content only and the relative bias.
PADDED = {'none', 'relative'}
# Lowering for CUDA and TPU differs by the attention's kind, not by the encoding within it.
EXPORTED = {'none', 'rotary', 'alibi', 'geometric_directional', 'dape', 'cope', 'stick_breaking'}
EVERY_ENCODING = {
  'test_conformance.py::test_a_builtin_s_backends_equal_the_reference': REPRESENTATIVES,
  'test_conformance.py::test_a_builtin_keeps_the_model_invariants': MODEL_INVARIANTS,
  'test_model.py::test_padded_equals_exact': PADDED,
  'test_attention.py::test_one_decoding_step_equals_the_whole_sequence': REPRESENTATIVES,
  'test_model.py::test_blocked_attention_equals_whole': REPRESENTATIVES,
  'test_export.py::test_accelerator_programs_take_the_fused_path': EXPORTED,
  'test_export.py::test_decoder_training_and_generation_export_on_the_fused_path': EXPORTED,
}


# Long end-to-end checks whose parts cheaper default tests check one by one: the default
# suite stays near ten minutes on 2 cores; `-m slow` runs these with the other slow ones.
SLOW = {
  # Whole runs reproduced bit for bit (the stored tiny suite; data seeds; a saved run).
  'test_benchmark.py::test_the_tiny_suite_reproduces_its_stored_result_bit_for_bit',
  'test_data_seeds.py::test_data_seed_members_are_the_runs_of_that_data_order',
  'test_data_seeds.py::test_a_data_seed_population_resumes_bit_for_bit',
  'test_interventions.py::test_before_and_after_on_a_saved_run',
  # Killed and resumed end to end (test_train's and test_resume's kills stay by default).
  'test_kill_resume.py::test_tiny_mode_end_to_end_killed_run_and_killed_evaluation_resume',
  'test_sweep.py::test_killed_sweep_reruns_exactly_the_missing_cells',
  'test_watch.py::test_a_resumed_run_continues_its_curves_without_a_step_twice',
  'test_workers.py::test_sigterm_reaches_the_workers_and_the_rerun_resumes',
  'test_workers.py::test_a_card_trained_by_two_workers_is_the_stored_one',
  'test_workers.py::test_cells_of_killed_workers_are_resumed_by_the_sweep',
  # SMOKE_ONLY: run by the smoke on the newest JAX (.ci/smoke, after the suite in CI).
  # A second process refused on a live work dir (test_lease and test_store refuse a second
  # writer by default) and a local cache reloaded (test_store's cache on a bucket stays).
  'test_resume.py::test_second_process_on_a_live_workdir_is_refused',
  'test_watch.py::test_a_rerun_loads_its_programs_from_the_cache_and_ends_equal',
  # Studies' tiny modes end to end beyond one per family.
  'test_lm.py::test_tiny_mode_end_to_end_with_a_resumed_evaluation_and_the_report',
  'test_lm.py::test_masked_language_model_of_the_same_data',
  'test_later_tasks.py::test_tiny_decoder_run[associative_recall]',
  'test_later_tasks.py::test_tiny_decoder_run[copy]',
  'test_hinting.py::test_other_variants_train_and_evaluate',
  'test_decoder.py::test_generation_under_a_population_vmap_equals_each_member_alone',
  'test_decoder.py::test_decoder_options_generate_consistently[options2]',
  'test_decoder.py::test_decoder_options_generate_consistently[options3]',
  'test_decoder.py::test_decoder_options_generate_consistently[options4]',
  'test_decoder.py::test_decoder_options_generate_consistently[options5]',
  'test_decoder.py::test_decoder_options_generate_consistently[options6]',
  # Options and paths checked bit for bit or to rounding elsewhere by default (a plan
  # recorded, vmap against map, the batched optimizer, the data seeds' record, a cache
  # that cannot be written).
  'test_programs.py::test_a_run_keeps_the_plan_it_recorded',
  'test_train.py::test_vmap_and_map_agree_to_float_rounding',
  'test_train.py::test_batched_optimizer_agrees_with_the_members_optimizer_to_float_rounding',
  'test_data_seeds.py::test_results_record_each_member_s_data_seed',
  'test_watch.py::test_the_cache_off_or_unwritable[args2-env2-True]',
  # The documentation site's whole build (the leaderboard's pages stay by default).
  'test_pages.py::test_the_documentation_site_builds_links_and_loads_whole_offline',
  # Outside encodings through a package's entry point and the whole conformance check
  # (their import paths, options and first pass stay by default).
  'test_benchmark.py::test_the_example_package_is_found_by_its_entry_point',
  'test_outside_encodings.py::test_the_conformance_helper_passes_outside_encodings',
  'test_outside_encodings.py::test_an_outside_encoding_s_own_option_is_set_from_the_command_line',
  # Devices and processes beyond the one sharded check and the one two-process sweep kept.
  'test_scale.py::test_cpu_devices_shard_the_population_over_the_host',
  # Measurements' own end-to-end runs and the cost model's measured member.
  'test_speed.py::test_population_times_every_setting_and_compiles_one_program_per_bucket',
  'test_cost.py::test_sequence_task_estimate_measures_one_member_and_scales_by_flops',
  'test_receptive.py::test_training_a_bias_family_prints_the_diagnostic_first',
}
# What .ci/smoke runs on the newest JAX (Python 3.12) with -m smoke (the quickstart's tiny
# mode there as its command line). The resume test and the quickstart's tiny mode run there
# and with -m slow, not in the default suite: CI runs both.
SMOKE = {
  'test_export.py',
  'test_resume.py::test_sigterm_checkpoints_where_it_stopped_and_the_rerun_equals_a_straight_run',
  'test_experiments.py::test_quickstart_tiny_runs_end_to_end',
}
# Of those, what the default suite leaves to the smoke (marked slow and smoke_only): the
# accelerator programs' exports, whose JAX that matters is the newest (the one a GPU or TPU
# install brings); test_train's killed run resumes bit for bit by default, and
# test_experiments runs other tiny modes.
SMOKE_ONLY = {
  'test_export.py',
  'test_resume.py::test_sigterm_checkpoints_where_it_stopped_and_the_rerun_equals_a_straight_run',
  'test_experiments.py::test_quickstart_tiny_runs_end_to_end',
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    test = f'{item.path.name}::{item.originalname}'
    if test in SLOW or f'{item.path.name}::{item.name}' in SLOW:
      item.add_marker(pytest.mark.slow)
    sample = EVERY_ENCODING.get(f'{item.path.name}::{item.originalname}')
    params = getattr(item, 'callspec', None)
    if sample is not None and params is not None and params.params.get('name') not in sample:
      item.add_marker(pytest.mark.slow)
    if test in SMOKE or item.path.name in SMOKE:
      item.add_marker(pytest.mark.smoke)
    # What the smoke runs of the default suite's: out of the default suite, into the smoke's.
    only = test in SMOKE_ONLY or item.path.name in SMOKE_ONLY
    if only and item.get_closest_marker('slow') is None:
      item.add_marker(pytest.mark.slow)
      item.add_marker(pytest.mark.smoke_only)
