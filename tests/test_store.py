"""Work directories on object stores (posenc/storage/store.py, the lease in posenc/storage/lease.py), against
real servers on 127.0.0.1 (tests/stores.py): moto's S3 server and gcp-storage-emulator.

The lease's refusal of a second writer is tested on S3 only: moto refuses a second
`put_object(IfNoneMatch='*')` on one key as S3 does, while gcp-storage-emulator 2026.7.19
does not enforce `ifGenerationMatch=0` (real GCS does), so on the emulator two writers
would both get the lease.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from posenc.storage import io
from posenc.storage import lease
from posenc.storage import store
import processes
import stores

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = '--config=experiments/rpe_table1.py:task=parity_check,encoding=randomized_rotary,tiny'
TRAIN = ['launch.train', CONFIG, '--config.train.steps=40', '--config.train.log_every=5']


@pytest.fixture(scope='module')
def s3():
  """The environment of a fresh moto S3 server with the bucket stores.BUCKET."""
  with stores.s3_server() as env:
    yield env


@pytest.fixture(scope='module')
def gcs():
  with stores.gcs_server() as env:
    yield env


def _url(scheme: str, name: str) -> str:
  return f'{scheme}://{stores.BUCKET}/{name}-{os.getpid()}-{time.monotonic_ns()}'


def _run(argv, env, **kwargs):
  """`python -m argv...` from the project root with the store's environment."""
  return subprocess.run(
    [sys.executable, '-m', *argv],
    cwd=ROOT,
    env={**os.environ, **env, **kwargs.pop('extra', {})},
    capture_output=True,
    text=True,
    timeout=kwargs.pop('timeout', 600),
    **kwargs,
  )


def _files(url):
  return store.files_under(url)


# ---------------------------------------------------------------------------------------
# The default suite: a tiny run and its report on a store, the lease, bad input.


def test_a_tiny_run_and_its_report_live_on_the_store(s3):
  url = _url('s3', 'run')
  proc = _run([*TRAIN, f'--workdir={url}', '--config.tensorboard=True'], s3)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f'results in {url}/results.json' in proc.stdout
  files = _files(url)
  # TensorBoard's event files per member: one per checkpoint interval (4), one of the
  # evaluation.
  for member in ('seed0_lr0.001', 'seed1_lr0.001'):
    events = [f for f in files if f.startswith(f'tensorboard/{member}/events.out.tfevents')]
    assert len(events) == 5, files
  # Whole objects only: results, config, the logs rewritten whole, the checkpoints with the
  # marker of a finished upload, the lease released.
  assert {'config.json', 'results.json', 'metrics.jsonl', 'eval.jsonl', 'lease.0'} <= set(files)
  assert not [f for f in files if 'tmp' in f]
  assert 'checkpoints/40/UPLOADED' in files
  assert [r['step'] for r in io.read_jsonl(f'{url}/metrics.jsonl')] == [5 * k for k in range(1, 9)]
  assert json.loads(store.read_bytes(f'{url}/lease.0'))['released']
  report = _run(['launch.report', url, f'--out={url}/report'], s3)
  assert report.returncode == 0, report.stderr[-3000:]
  assert 'table1.md' in store.listdir(f'{url}/report')
  assert 'parity_check' in store.read_bytes(f'{url}/report/table1.md').decode()


def test_a_second_writer_is_refused_and_an_expired_lease_taken_over(s3):
  url = _url('s3', 'lease')
  with lease.Lease(url, lease_s=60):
    with pytest.raises(lease.DirectoryBusy, match=f'{url} is in use by process {os.getpid()}'):
      lease.Lease(url, lease_s=60).__enter__()
  # Released: taken at once, as lease.1 (lease.0 deleted).
  with lease.Lease(url, lease_s=60):
    assert store.listdir(url) == ['lease.1']
  # A holder killed without releasing it: on this host its process is seen gone, and the
  # lease taken over at once (as the kernel drops a flock).
  assert _killed_holder(url, s3, 'import socket') == -signal.SIGKILL
  with lease.Lease(url, lease_s=60):
    assert store.listdir(url) == ['lease.3']
  # On another host (a preempted machine: its process cannot be looked up), refused until
  # the lease goes unrenewed for its holder's lease_s.
  assert _killed_holder(url, s3, 'import socket; socket.gethostname = lambda: "gone"') == -9
  with pytest.raises(lease.DirectoryBusy, match='on host gone .* once it goes 2 s without renewal'):
    lease.Lease(url, lease_s=60).__enter__()
  time.sleep(2.5)
  with lease.Lease(url, lease_s=60):
    assert store.listdir(url) == ['lease.5']


def _killed_holder(url, env, prelude):
  """Runs a process that takes the lease of `url` (for 2 s) and is killed holding it."""
  code = (
    f'{prelude}; import os, sys; from posenc.storage import lease; '
    'lease.Lease(sys.argv[1], lease_s=2).__enter__(); os.kill(os.getpid(), 9)'
  )
  return subprocess.run(
    [sys.executable, '-c', code, url], cwd=ROOT, env={**os.environ, **env}
  ).returncode


def test_a_lease_is_renewed_while_its_holder_lives(s3):
  url = _url('s3', 'renewed')
  with lease.Lease(url, lease_s=1.2):
    time.sleep(2.0)  # Longer than the lease: only renewals keep it.
    with pytest.raises(lease.DirectoryBusy):
      lease.Lease(url, lease_s=1.2).__enter__()


def test_whole_object_writes_logs_and_a_lease_on_the_gcs_emulator(gcs):
  url = _url('gs', 'objects')
  io.write_json_atomic(f'{url}/results.json', {'score': 0.5})
  for step in (5, 10, 15):
    io.append_jsonl(f'{url}/metrics.jsonl', {'step': step})
  # A resume keeps the lines up to its checkpoint, rewriting the object whole.
  kept = io.read_jsonl(f'{url}/metrics.jsonl', keep=lambda r: r['step'] <= 10, rewrite=True)
  assert kept == io.read_jsonl(f'{url}/metrics.jsonl') == [{'step': 5}, {'step': 10}]
  assert io.read_json(f'{url}/results.json') == {'score': 0.5}
  with lease.lock(url):
    assert json.loads(store.read_bytes(f'{url}/lease.0'))['pid'] == os.getpid()
  assert json.loads(store.read_bytes(f'{url}/lease.0'))['released']
  assert store.listdir(url) == ['lease.0', 'metrics.jsonl', 'results.json']


def _export(cli, out, env):
  """`launch.export_eval_set` of parity_check's tiny frozen sets into `out`."""
  return cli.run(
    [
      'launch.export_eval_set',
      '--config=experiments/rpe_table1.py:task=parity_check,tiny',
      f'--out={out}',
    ],
    env=env,
  )


@pytest.mark.parametrize(
  'workdir, env, needle',
  [
    (
      'ftp://host/run',
      {},
      "ftp://host/run: unknown scheme 'ftp'; give a local path or a gs://, s3:// URL",
    ),
    ('s3:///run', {}, 's3:///run: no bucket named'),
    ('s3://no-such-bucket-posenc/run', None, 'bucket does not exist'),
    (
      's3://posenc-test/run',
      {
        'AWS_ACCESS_KEY_ID': '',
        'AWS_SECRET_ACCESS_KEY': '',
        'AWS_SHARED_CREDENTIALS_FILE': '/nonexistent',
        'AWS_CONFIG_FILE': '/nonexistent',
        'AWS_EC2_METADATA_DISABLED': 'true',
      },
      'no credentials for s3:// (none found): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY',
    ),
  ],
)
def test_bad_store_input_is_one_line(cli, s3, workdir, env, needle):
  env = {**s3, **(env or {})}
  proc = _export(cli, workdir, env)
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f'error: --out={workdir}'), lines
  assert needle in lines[0], lines[0]


def _save(manager, step):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave({'w': np.full(3, step, np.float32)}),
      run=ocp.args.JsonSave({'device_history': []}),
    ),
  )


def test_checkpoints_upload_in_the_background_and_a_resume_fetches_only_the_newest(s3):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  from posenc.training import checkpoint  # pylint: disable=g-import-not-at-top

  url = _url('s3', 'staged')
  # A step a killed writer left half uploaded (no UPLOADED): swept by the next writer.
  store.put(f'{url}/checkpoints/7/state/stray', b'x')
  writer = checkpoint.checkpoint_manager(url)
  staging = writer.directory
  for step in (10, 20, 30, 40):
    _save(writer, step)  # Each waits for the previous upload, then starts its own.
  writer.wait_until_finished()
  writer.close()
  assert not os.path.exists(staging)
  assert checkpoint_steps(url) == [20, 30, 40]  # The newest three, as orbax keeps them.
  assert store.listdir(f'{url}/checkpoints') == ['20', '30', '40']
  reader = checkpoint.checkpoint_manager(url)
  assert reader.all_steps() == [20, 30, 40] and os.listdir(reader.directory) == []
  restored = reader.restore(
    40,
    args=ocp.args.Composite(
      state=ocp.args.StandardRestore({'w': np.zeros(3, np.float32)}), run=ocp.args.JsonRestore()
    ),
  )
  assert restored['state']['w'].tolist() == [40.0] * 3
  assert os.listdir(reader.directory) == ['40']  # Only the step restored was fetched.
  reader.close()


def test_a_leaderboard_site_is_written_to_a_store_and_replaces_only_its_own(s3):
  from posenc.benchmark.leaderboard import site  # pylint: disable=g-import-not-at-top

  url = _url('s3', 'board')
  index = f'<html>{site.GENERATOR}</html>'.encode()
  site.write(url, {'index.html': index, 'entries/a.html': b'a', 'figures/a.png': b'png'})
  assert store.files_under(url) == ['entries/a.html', 'figures/a.png', 'index.html']
  site.write(url, {'index.html': index, 'entries/b.html': b'b'})  # the previous site's replaced
  assert store.files_under(url) == ['entries/b.html', 'index.html']
  other = _url('s3', 'not-a-board')
  store.put(f'{other}/notes.txt', b'mine')
  with pytest.raises(site.LeaderboardError, match='holds other files \\(notes.txt\\)'):
    site.write(other, {'index.html': index})
  assert store.files_under(other) == ['notes.txt']


def test_an_output_file_url_is_checked_like_a_directory(s3, capsys):
  from launch import common  # pylint: disable=g-import-not-at-top

  common.check_output_file(f's3://{stores.BUCKET}/speed/speed_train.json', '--out')
  assert store.files_under(f's3://{stores.BUCKET}/speed') == []  # the probe deleted again
  for bad, needle in (
    ('s3://no-such-bucket-posenc/speed.json', 'bucket does not exist'),
    (f's3://{stores.BUCKET}', 'names no object'),
  ):
    with pytest.raises(SystemExit) as exited:
      common.check_output_file(bad, '--out')
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith('error: --out=') and needle in err, err


def test_gs_without_credentials_is_one_line_naming_how_to_give_them():
  # No emulator, no key file, no gcloud login, a metadata server that refuses: no anonymous
  # fallback (which would go on to fail on the network much later).
  env = {
    k: v
    for k, v in os.environ.items()
    if k not in ('STORAGE_EMULATOR_HOST', 'FSSPEC_GCS_TOKEN', 'GOOGLE_APPLICATION_CREDENTIALS')
  }
  env.update(
    CLOUDSDK_CONFIG='/nonexistent', GCE_METADATA_HOST='127.0.0.1:9', GCE_METADATA_IP='127.0.0.1:9'
  )
  url = f'gs://{stores.BUCKET}/run'
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'launch.export_eval_set',
      '--config=experiments/rpe_table1.py:task=parity_check,tiny',
      f'--out={url}',
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2 and proc.stdout == '', proc.stderr[-2000:]
  assert proc.stderr == (
    f'error: --out={url}: no credentials for gs:// (none found): run `gcloud auth '
    'application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a service account\'s '
    'key file, or run on a VM whose service account may use the bucket\n'
  )


@pytest.fixture
def s3_keys():
  """The environment of an S3 server that refuses every key but the one in it."""
  with stores.s3_server_checking_keys() as env:
    yield env


def test_a_refused_key_is_one_line_and_writes_nothing(cli, s3_keys):
  url = _url('s3', 'keys')
  for name, value, code in (
    ('AWS_SECRET_ACCESS_KEY', 'not-the-secret', 'SignatureDoesNotMatch'),
    ('AWS_ACCESS_KEY_ID', 'AKIANEVERISSUED', 'InvalidAccessKeyId'),
  ):
    proc = cli.run([*TRAIN, f'--workdir={url}'], env={**s3_keys, name: value})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'error: --workdir={url}: '), lines
    assert f'credentials refused ({code}: ' in lines[0], lines[0]
  assert store.files_under(f's3://{stores.BUCKET}') == []
  # The issued key passes the same check, and writes.
  proc = _export(cli, url, s3_keys)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'manifest.json' in store.listdir(url)


def test_a_compilation_cache_on_the_bucket_is_hit_by_a_second_process(cli, gcs, tmp_path):
  # A pod's hosts share one cache on a bucket: what one process compiled, the next loads.
  cache = _url('gs', 'jax-cache')
  runs = []
  for name in ('first', 'second'):
    workdir = tmp_path / name
    argv = [*TRAIN[:2], '--config.train.steps=5', f'--config.compilation_cache={cache}']
    proc = cli.run([*argv, f'--workdir={workdir}'], env={**gcs, 'XDG_CACHE_HOME': str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs.append(io.read_json(str(workdir / 'results.json'))['compiled_programs'])
  first, second = runs
  assert first['cache_hits'] == 0 and first['cache_misses'] >= 4
  assert second == {**second, 'cache_hits': first['cache_misses'], 'cache_misses': 0}
  assert sum(name.endswith('-cache') for name in store.files_under(cache)) >= 4
  # XLA's GPU autotuning results (none on a CPU) go through a local mirror of the bucket.
  assert (
    tmp_path
    / 'posenc'
    / 'xla_autotune'
    / cache.split('://')[1]
    / 'xla_gpu_per_fusion_autotune_cache_dir'
  ).is_dir()


def test_xla_writes_its_autotuning_results_to_the_mirror_of_a_bucket_cache(gcs, tmp_path):
  # The compile options XLA gets name the local mirror (XLA_FLAGS, read when the backend
  # starts), and JAX does not point them at the bucket, which XLA's file layer cannot open.
  cache = _url('gs', 'jax-cache')
  script = (
    'from launch import compile_cache\n'
    'from jax._src import compiler\n'
    f'compile_cache.compilation_cache({cache!r})\n'
    'options = compiler.get_compile_options(num_replicas=1, num_partitions=1)\n'
    'print(options.executable_build_options.debug_options.xla_gpu_per_fusion_autotune_cache_dir)\n'
  )
  proc = subprocess.run(
    [sys.executable, '-c', script],
    cwd=ROOT,
    env={**os.environ, **gcs, 'XDG_CACHE_HOME': str(tmp_path)},
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  mirror = (
    tmp_path
    / 'posenc'
    / 'xla_autotune'
    / cache.split('://')[1]
    / 'xla_gpu_per_fusion_autotune_cache_dir'
  )
  assert proc.stdout.strip() == str(mirror) and mirror.is_dir()


@pytest.mark.parametrize('scheme', ['gs', 's3'])
def test_xla_autotuning_results_are_mirrored_to_and_from_the_bucket(s3, gcs, tmp_path, scheme):
  del s3, gcs  # both stores' environments are set in this process
  # XLA writes its GPU autotuning results through local files only: a local mirror is
  # filled from the bucket at the start and puts its new files back at the end.
  from launch import compile_cache  # pylint: disable=g-import-not-at-top

  url = f'{_url(scheme, "jax-cache")}/{compile_cache.XLA_AUTOTUNE}'
  store.put(f'{url}/from_another_host.textproto', b'results: 1')
  local = tmp_path / 'mirror'
  assert compile_cache.autotune_mirror(url, str(local)) == str(local)
  assert (local / 'from_another_host.textproto').read_bytes() == b'results: 1'
  (local / 'tuned_here.textproto').write_bytes(b'results: 2')
  known = frozenset({'from_another_host.textproto'})
  assert compile_cache.put_new_files(str(local), url, known) == ['tuned_here.textproto']
  assert store.read_bytes(f'{url}/tuned_here.textproto') == b'results: 2'
  if scheme == 's3':  # the GCS emulator does not enforce ifGenerationMatch=0 (above)
    # Another host was first with its own result: this one's is not put over it.
    (local / 'tuned_here.textproto').write_bytes(b'results: 3')
    assert compile_cache.put_new_files(str(local), url, known) == []
    assert store.read_bytes(f'{url}/tuned_here.textproto') == b'results: 2'


@pytest.mark.parametrize(
  'cache, needle',
  [
    ('gs:///cache', 'compilation_cache=gs:///cache: no bucket named'),
    ('ftp://host/cache', "compilation_cache=ftp://host/cache: unknown scheme 'ftp'"),
    ('s3://no-such-bucket-posenc/cache', 'The specified bucket does not exist'),
    ('/proc/posenc-no-such-dir/cache', 'cannot be created or written'),
    ('0', 'compilation_cache=0 must be True'),
  ],
)
def test_a_bad_compilation_cache_is_one_line_and_writes_nothing(cli, s3, tmp_path, cache, needle):
  workdir = tmp_path / 'run'
  proc = cli.run([*TRAIN, f'--config.compilation_cache={cache}', f'--workdir={workdir}'], env=s3)
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: compilation_cache='), lines
  assert needle in lines[0] and 'or a gs://BUCKET/PATH or s3://BUCKET/PATH URL' in lines[0]
  assert not workdir.exists()


# ---------------------------------------------------------------------------------------
# -m slow: kill and resume, two writers, a two-process sweep, a refused write, frozen sets,
# and the run on the GCS emulator.


@pytest.mark.slow
@pytest.mark.parametrize('scheme', ['s3', 'gs'])
def test_a_run_killed_after_a_checkpoint_resumes_from_the_store(s3, gcs, tmp_path, scheme):
  env = {'s3': s3, 'gs': gcs}[scheme]
  url = _url(scheme, 'killed')
  local = tmp_path / 'straight'
  straight = _run([*TRAIN, f'--workdir={local}'], env)
  assert straight.returncode == 0, straight.stderr[-3000:]
  killed = _run([*TRAIN, f'--workdir={url}'], env, extra={'POSENC_KILL_AFTER_CHECKPOINT': '20'})
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  # Killed right after orbax wrote step 20: its upload, in the background, may not be done.
  last = checkpoint_steps(url)[-1]
  assert last in (10, 20) and not store.exists(f'{url}/results.json')
  resumed = _run([*TRAIN, f'--workdir={url}'], env)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f'resumed from the checkpoint at step {last}' in resumed.stdout
  results = lambda path: {
    k: v
    for k, v in io.read_json(f'{path}/results.json').items()
    if k not in ('timing', 'versions', 'compiled_programs', 'devices', 'started', 'finished')
  }
  assert results(url)['members'] == results(str(local))['members']
  lose_rate = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  assert lose_rate(io.read_jsonl(f'{url}/metrics.jsonl')) == lose_rate(
    io.read_jsonl(str(local / 'metrics.jsonl'))
  )


def checkpoint_steps(url):
  from posenc.training import checkpoint  # pylint: disable=g-import-not-at-top

  return checkpoint.saved_steps(url)


# A run long enough to be caught mid-way: 600 steps, a checkpoint every 50.
LONG = [
  'launch.train',
  CONFIG,
  '--config.train.steps=600',
  '--config.train.log_every=5',
  '--config.checkpoint_every=50',
]


def _on_host(host, argv, env, extra=None):
  """`python -m argv...` as a process of the host `host` (tests/scripts/on_host.py)."""
  return subprocess.Popen(
    [sys.executable, os.path.join(ROOT, 'tests', 'scripts', 'on_host.py'), host, '-m', *argv],
    cwd=ROOT,
    env={**os.environ, **env, **(extra or {})},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def _wait_until(condition, proc, timeout=300):
  deadline = time.time() + timeout
  while not condition():
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    assert time.time() < deadline
    time.sleep(0.1)


def _same_training(url, local):
  """The run in `url` logged every step once, in order, as the run in `local`, and ended
  with the same members."""
  lose_rate = lambda rows: [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in rows]
  assert lose_rate(io.read_jsonl(f'{url}/metrics.jsonl')) == lose_rate(
    io.read_jsonl(str(local / 'metrics.jsonl'))
  )
  members = lambda path: io.read_json(f'{path}/results.json')['members']
  assert members(url) == members(str(local))


@pytest.mark.slow
def test_a_host_killed_hard_is_followed_by_another_once_its_lease_expires(s3, tmp_path):
  url, local = _url('s3', 'restart'), tmp_path / 'straight'
  straight = _run([*LONG, f'--workdir={local}'], s3)
  assert straight.returncode == 0, straight.stderr[-3000:]
  lease = {'POSENC_LEASE_S': '20'}  # Longer than the second process takes to start.
  first = _on_host('a', [*LONG, f'--workdir={url}'], s3, lease)
  _wait_until(lambda: checkpoint_steps(url), first)
  first.kill()  # No SIGTERM: the lease is left held.
  first.communicate()
  second = _on_host('b', [*LONG, f'--workdir={url}'], s3, lease)
  out, err = second.communicate(timeout=600)
  assert second.returncode == 0, err[-3000:]
  waited = [line for line in out.splitlines() if line.startswith('waiting at most')]
  assert len(waited) == 1 and f'in use by process {first.pid} on host a (started ' in waited[0]
  assert 'resumed from the checkpoint at step' in out
  _same_training(url, local)
  assert json.loads(store.read_bytes(f'{url}/lease.1'))['host'] == 'b'


@pytest.mark.slow
def test_a_stalled_holder_taken_over_stops_and_writes_nothing_more(s3, tmp_path):
  url, local = _url('s3', 'fenced'), tmp_path / 'straight'
  straight = _run([*LONG, f'--workdir={local}'], s3)
  assert straight.returncode == 0, straight.stderr[-3000:]
  lease = {'POSENC_LEASE_S': '4'}
  first = _on_host('a', [*LONG, f'--workdir={url}'], s3, lease)
  _wait_until(lambda: checkpoint_steps(url), first)
  first.send_signal(signal.SIGSTOP)  # A paused VM: its lease runs out.
  try:
    second = _on_host('b', [*LONG, f'--workdir={url}'], s3, lease)
    _wait_until(lambda: 'lease.1' in store.listdir(url), second)
    time.sleep(1.0)  # The second trains; the first wakes while it does.
  finally:
    first.send_signal(signal.SIGCONT)
  out, err = first.communicate(timeout=120)
  assert first.returncode == 75, err[-3000:]
  assert err.splitlines() == [
    f'error: {url}: this process lost its lease (taken over by process {second.pid} on host '
    f'b); it stops and writes nothing more there; process {second.pid} on host b resumes '
    'the run'
  ]
  out, err = second.communicate(timeout=600)
  assert second.returncode == 0, err[-3000:]
  _same_training(url, local)
  assert [n for n in store.listdir(url) if n.startswith('lease.')] == ['lease.1']


@pytest.mark.slow
def test_a_sweep_after_a_hard_kill_waits_for_the_cell_and_ends_whole(s3):
  url = _url('s3', 'sweep-restart')
  sweep = [
    'launch.sweep',
    '--config=experiments/sweep_tiny.py',
    f'--workdir={url}',
    '--tasks=parity_check',
    '--config.train.steps=400',
    '--config.checkpoint_every=50',
  ]
  lease = {'POSENC_LEASE_S': '30'}  # Longer than a sweep takes to start.
  first = _on_host('a', sweep, s3, lease)
  # Killed in its second cell (the first complete).
  cell = f'{url}/cells/parity_check__randomized_relative'
  _wait_until(lambda: checkpoint_steps(cell), first)
  first.kill()
  first.communicate()
  # At once: the held cell is named, exit status 75, a report only when asked, partial.
  now = _on_host('b', [*sweep, '--lease_wait=0', '--partial'], s3, lease)
  out, err = now.communicate(timeout=600)
  assert now.returncode == 75, err[-3000:]
  assert err == (
    'error: 1 of 2 cells of shard 0/1 are not complete: parity_check__randomized_relative; '
    'rerun the same command once their holders have ended (or with a longer --lease_wait)\n'
  )
  held = f'parity_check__randomized_relative: held by process {first.pid} on host a'
  assert f'unfinished: {held}' in out
  assert '(partial: 1 cell of the grid missing, listed at the end)' in out
  # Waiting (the default): taken over at expiry, every cell complete, a whole report.
  later = _on_host('b', sweep, s3, lease)
  out, err = later.communicate(timeout=600)
  assert later.returncode == 0, err[-3000:]
  assert 'sweep shard 0/1: 2 cells: 1 run, 1 already done, 0 held, 0 failed' in out
  assert 'report written to' in out and 'partial' not in out


@pytest.mark.slow
def test_a_second_process_on_a_live_run_is_refused(s3):
  url = _url('s3', 'two')
  first = subprocess.Popen(
    [
      sys.executable,
      '-m',
      'launch.train',
      CONFIG,
      f'--workdir={url}',
      '--config.train.steps=100000',
    ],
    cwd=ROOT,
    env={**os.environ, **s3},
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  try:
    deadline = time.time() + 120
    while not store.exists(f'{url}/config.json'):
      assert first.poll() is None and time.time() < deadline
      time.sleep(0.2)
    second = _run([*TRAIN, f'--workdir={url}', '--lease_wait=0'], s3)
    assert second.returncode == 75, second.stderr[-2000:]  # busy: not bad input
    assert second.stderr.startswith(f'error: {url} is in use by process {first.pid} on host ')
    assert second.stderr.endswith('rerun once it has ended, or with a longer --lease_wait\n')
  finally:
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=120)


@pytest.mark.slow
def test_a_two_process_sweep_writes_one_bucket_and_a_third_reports_it(s3):
  url = _url('s3', 'sweep')
  processes.two_process_sweep(url, s3)
  for i, name in enumerate(['parity_check__none', 'parity_check__randomized_relative']):
    assert store.exists(f'{url}/cells/{name}/results.json')
    index = io.read_json(f'{url}/index/shard-{i}-of-2.json')
    assert [(c['cell'], c['state']) for c in index['cells']] == [(name, 'complete')]
  report = _run(['launch.report', url, f'--out={url}/report'], s3)
  assert report.returncode == 0, report.stderr[-2000:]
  table = store.read_bytes(f'{url}/report/table1.md').decode()
  assert 'none' in table and 'randomized_relative' in table


@pytest.mark.slow
def test_a_store_refusing_a_write_halfway_is_one_line_and_the_rerun_finishes(s3):
  url = _url('s3', 'refused')
  refused = _run([*TRAIN, f'--workdir={url}'], s3, extra={'POSENC_STORE_REFUSES_AT': 'eval.jsonl'})
  assert refused.returncode == 2, refused.stderr[-2000:]
  lines = refused.stderr.strip().splitlines()
  assert lines[-1].startswith(f'error: {url}/eval.jsonl: writing failed: AccessDenied'), lines[-3:]
  assert not store.exists(f'{url}/results.json')
  rerun = _run([*TRAIN, f'--workdir={url}'], s3)
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert store.exists(f'{url}/results.json')


@pytest.mark.slow
def test_a_frozen_set_is_exported_to_the_bucket_and_evaluated_from_it(s3, tmp_path):
  sets = _url('s3', 'set')
  config = '--config=experiments/rpe_table1.py:task=parity_check,encoding=none,tiny'
  export = _run(['launch.export_eval_set', config, f'--out={sets}'], s3)
  assert export.returncode == 0, export.stderr[-2000:]
  assert 'manifest.json' in store.listdir(sets)
  runs = {}
  for name, extra in (('drawn', []), ('frozen', [f'--config.eval.from_files={sets}'])):
    workdir = tmp_path / name
    proc = _run(
      ['launch.train', config, f'--workdir={workdir}', '--config.train.steps=20', *extra], s3
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs[name] = io.read_json(str(workdir / 'results.json'))['members']
  assert runs['frozen'] == runs['drawn']


@pytest.mark.slow
def test_the_tiny_benchmark_on_the_bucket_reproduces_its_stored_result(s3):
  from experiments import benchmarks  # pylint: disable=g-import-not-at-top
  from posenc import benchmark  # pylint: disable=g-import-not-at-top

  url = _url('s3', 'bench')
  proc = _run(['launch.benchmark', '--encoding=rotary', '--suite=tiny', f'--workdir={url}'], s3)
  assert proc.returncode == 0, proc.stderr[-2000:]
  entry = io.read_json(f'{url}/entry.json')
  stored = benchmark.read_baselines(benchmarks.get('tiny'))['rotary']
  for task in stored['tasks']:
    assert entry['tasks'][task]['members'] == stored['tasks'][task]['members'], task
  assert store.read_bytes(f'{url}/card.png')[:4] == b'\x89PNG'


# ---------------------------------------------------------------------------------------
# A store that answers slowly or loses a response; uploads fenced object by object.


def _lose_first_response(monkeypatch, method):
  """The filesystem's `method` lands its first call on the store, then raises a timeout as
  if its response were lost: what a client sees of a response held past its read timeout."""
  import socket  # pylint: disable=g-import-not-at-top

  fs = store._fs(f's3://{stores.BUCKET}/x')  # pylint: disable=protected-access
  real, calls = getattr(fs, method), []

  def lossy(*args, **kwargs):
    calls.append(args)
    result = real(*args, **kwargs)
    if len(calls) == 1:
      raise socket.timeout('read timeout (a held-back response)')
    return result

  monkeypatch.setattr(fs, method, lossy)
  return calls


def test_a_conditional_write_whose_response_was_lost_is_done_not_refused(s3, monkeypatch):
  """Sent again after its response was lost, a conditional write meets its own first copy:
  the store refuses it (412), and the object being exactly what was sent, it is done."""
  url = f'{_url("s3", "lost")}/lease.0'
  calls = _lose_first_response(monkeypatch, 'pipe_file')
  assert store.create(url, b'mine') == store.version(url)
  assert len(calls) == 2 and store.read_bytes(url) == b'mine'  # sent twice, landed once
  calls.clear()
  version = store.replace(url, b'renewed', store.version(url))
  assert version == store.version(url) and store.read_bytes(url) == b'renewed'
  assert len(calls) == 2
  # Refused, finding another writer's bytes: not this write's.
  assert store.create(url, b'theirs') is None
  with pytest.raises(store.Conflict, match='changed by another writer'):
    store.replace(url, b'mine again', 'stale-version')


@pytest.mark.parametrize('fault', ['lost', 'timeout'])
def test_a_log_appended_through_lost_and_held_responses_has_each_line_once(fault):
  """A PUT that lands but whose connection closes unanswered is sent again at once by the
  HTTP client itself (aiohttp resends an idempotent request), one held past the read
  timeout by `store._attempt`; either way the conditional write meets its own first copy
  and the append is done, not a conflict."""
  prefix = f'/{stores.BUCKET}/faults-{fault}/'
  with stores.faulty_s3_server(prefix) as (_, proxy):
    url = f's3:/{prefix}metrics.jsonl'
    io.append_jsonl(url, {'step': 0})  # created
    proxy.planned += [('PUT', fault)]
    io.append_jsonl(url, {'step': 1})  # replaced: its first response lost or held back
    proxy.planned += [('PUT', fault)]
    io.append_jsonl(f's3:/{prefix}eval.jsonl', {'length': 40})  # created likewise
    assert proxy.faults[fault] == 2 and not proxy.planned
    assert [json.loads(line) for line in store.read_bytes(url).splitlines()] == [
      {'step': 0},
      {'step': 1},
    ]
    assert store.read_bytes(f's3:/{prefix}eval.jsonl') == b'{"length": 40}\n'
    puts = [row['status'] for row in proxy.log if row['method'] == 'PUT']
    assert puts == [200, 200, 412, 200, 412]  # each faulted PUT sent twice, landed once


def test_a_fenced_upload_stops_at_the_object_after_the_lease_is_lost(s3, tmp_path):
  """Each object of a tree is fenced before its request: once the lease is lost, no further
  object is sent (UPLOADS objects may already be in flight, each within a request's
  timeout)."""
  url = _url('s3', 'fenced')
  for i in range(40):
    (tmp_path / f'{i:02d}').write_bytes(b'x')
  checks = []

  def still_held():
    checks.append(1)
    if len(checks) > 5:
      raise lease.LeaseLost('lost', '')

  with store.fence(url, still_held):
    with pytest.raises(lease.LeaseLost):
      store.upload_tree(str(tmp_path), url)
  assert len(_files(url)) <= 5  # the objects whose check passed, none after


@pytest.mark.parametrize('scheme', ['s3', 'gs'])
def test_a_large_object_lost_mid_upload_never_appears(s3, gcs, scheme, tmp_path, monkeypatch):
  """An object uploaded in parts (S3 multipart, a GCS resumable upload) is fenced as each
  part ends: a lease lost after the first part stops it before the request that would make
  the object appear, and says so (LeaseLost, not a store failure)."""
  del s3, gcs
  url = _url(scheme, 'parts')
  local = tmp_path / 'big'
  local.write_bytes(os.urandom(12 * 2**20))
  fs = store._fs(url)  # pylint: disable=protected-access
  real = fs.put_file
  # Parts of 5 MiB (S3's smallest) rather than 50 MiB: three parts, the last one committing.
  monkeypatch.setattr(fs, 'put_file', lambda *a, **k: real(*a, chunksize=5 * 2**20, **k))
  checks = []

  def still_held():
    checks.append(1)
    if len(checks) > 1:  # the check before the upload passes, the first part's end does not
      raise lease.LeaseLost('lost', '')

  with store.fence(url, still_held):
    with pytest.raises(lease.LeaseLost):
      store.put_file(str(local), f'{url}/big')
  assert not store.exists(f'{url}/big')
  store.put_file(str(local), f'{url}/big')  # unfenced: it appears whole
  assert store.read_bytes(f'{url}/big') == local.read_bytes()


def test_the_holder_of_a_directory_on_a_store_is_read_without_taking_it(s3):
  url = _url('s3', 'holder')
  assert lease.holder(url) is None
  with lease.Lease(url, lease_s=60):
    assert lease.holder(url) == f'process {os.getpid()} on host {os.uname().nodename}'
    names = store.listdir(url)
  assert lease.holder(url) is None  # released
  assert store.listdir(url) == names  # reading took nothing over


def _in_own_pid_namespace(code: str, env: dict[str, str]) -> subprocess.Popen:
  """`python -c code` as PID 1 of a PID namespace of its own (a container sharing the host's
  name and boot id, as with host networking), or None where namespaces cannot be made."""
  return subprocess.Popen(
    ['unshare', '--pid', '--fork', '--mount-proc', sys.executable, '-c', code],
    cwd=ROOT,
    env={**os.environ, **env, 'PYTHONPATH': ROOT},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def test_a_live_holder_in_another_container_is_waited_for_not_taken_over(s3):
  """Two containers on one host, each PID 1 of its own PID namespace, with the host's name
  and boot id: the second never judges the first's lease gone (its PID means nothing
  there), and waits it out."""
  probe = subprocess.run(
    ['unshare', '--pid', '--fork', '--mount-proc', 'true'], capture_output=True, check=False
  )
  if probe.returncode != 0:
    pytest.skip('PID namespaces cannot be made here (unshare needs CAP_SYS_ADMIN)')
  url = _url('s3', 'containers')
  holder = _in_own_pid_namespace(
    'import os, sys, time; from posenc.storage import lease; '
    f'l = lease.Lease({url!r}, lease_s=60); l.__enter__(); print(os.getpid(), flush=True); '
    'time.sleep(60)',
    s3,
  )
  assert holder.stdout.readline().strip() == '1'  # PID 1 of its namespace, holding the lease
  try:
    second = _in_own_pid_namespace(
      'import os; from posenc.storage import lease; '
      f'lease.Lease({url!r}, lease_s=60, wait_s=0).__enter__()',
      s3,
    )
    _, err = second.communicate(timeout=120)
    assert second.returncode == 1 and 'DirectoryBusy' in err, err  # refused, not taken
    assert (
      err.strip()
      .splitlines()[-1]
      .startswith(f'posenc.storage.lease.DirectoryBusy: {url} is in use by process 1 on host ')
    )
    assert store.listdir(url) == ['lease.0']  # the holder's lease, untouched
  finally:
    holder.kill()
    holder.wait()
