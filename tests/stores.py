"""Local object stores for the tests: moto's S3 server and gcp-storage-emulator, each on a free
port of 127.0.0.1, and the environment that points the clients (and `launch.*` subprocesses)
at them: `AWS_ENDPOINT_URL` with dummy `AWS_*` keys for s3fs/botocore, `STORAGE_EMULATOR_HOST`
with anonymous credentials for gcsfs. `s3_server` takes any key; `s3_server_checking_keys`
refuses every key but the one it issued, as S3 does.

Example:
  >>> with s3_server() as env:                  # env: the variables to run launch.* under
  ...   subprocess.run([... '--workdir=s3://posenc-test/run'], env={**os.environ, **env})
"""

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Iterator

from processes import free_port

BUCKET = 'posenc-test'


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[dict[str, str]]:
  """Sets `env` in this process too (the tests' own reads of the store) while inside, with
  fsspec's configuration of it (`FSSPEC_GCS_TOKEN`: fsspec reads it at import)."""
  import copy  # pylint: disable=g-import-not-at-top
  from fsspec import config  # pylint: disable=g-import-not-at-top

  old = {k: os.environ.get(k) for k in env}
  old_conf = copy.deepcopy(config.conf)
  os.environ.update(env)
  config.set_conf_env(config.conf)
  _forget_filesystems()
  try:
    yield env
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
    config.conf.clear()
    config.conf.update(old_conf)
    _forget_filesystems()


def _forget_filesystems() -> None:
  """fsspec caches a filesystem per protocol with the endpoint and keys of the environment it
  was made in: each server (and each return to an outer one) gets its own."""
  import fsspec  # pylint: disable=g-import-not-at-top

  for protocol in ('s3', 'gcs'):
    fsspec.get_filesystem_class(protocol).clear_instance_cache()


@contextlib.contextmanager
def s3_server() -> Iterator[dict[str, str]]:
  """moto's S3 server with the bucket BUCKET; yields the environment that reaches it."""
  from moto.server import ThreadedMotoServer  # pylint: disable=g-import-not-at-top
  import boto3  # pylint: disable=g-import-not-at-top

  port = free_port()
  server = ThreadedMotoServer(ip_address='127.0.0.1', port=port, verbose=False)
  server.start()
  env = {
    'AWS_ENDPOINT_URL': f'http://127.0.0.1:{port}',
    'AWS_ACCESS_KEY_ID': 'testing',
    'AWS_SECRET_ACCESS_KEY': 'testing',
    'AWS_DEFAULT_REGION': 'us-east-1',
  }
  try:
    with _environment(env):
      boto3.client('s3').create_bucket(Bucket=BUCKET)
      yield env
  finally:
    server.stop()


@contextlib.contextmanager
def s3_server_checking_keys() -> Iterator[dict[str, str]]:
  """moto's S3 server with the bucket BUCKET that checks every request's signature: it knows
  one IAM user, allowed s3:*, whose access key is in the environment yielded. moto checks
  keys only from its INITIAL_NO_AUTH_ACTION_COUNT-th request on (a process-wide setting, so
  this server is a process of its own): the bucket and the user are made unchecked, then its
  /moto-api/reset-auth endpoint sets the count to 0."""
  import boto3  # pylint: disable=g-import-not-at-top

  port = free_port()
  endpoint = f'http://127.0.0.1:{port}'
  server = subprocess.Popen(
    [sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(port)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  try:
    _wait_for(f'{endpoint}/moto-api/', server)
    anyone = {
      'endpoint_url': endpoint,
      'region_name': 'us-east-1',
      'aws_access_key_id': 'setup',
      'aws_secret_access_key': 'setup',
    }
    boto3.client('s3', **anyone).create_bucket(Bucket=BUCKET)
    iam = boto3.client('iam', **anyone)
    iam.create_user(UserName='posenc')
    policy = {
      'Version': '2012-10-17',
      'Statement': [{'Effect': 'Allow', 'Action': 's3:*', 'Resource': '*'}],
    }
    iam.put_user_policy(UserName='posenc', PolicyName='s3', PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName='posenc')['AccessKey']
    urllib.request.urlopen(
      urllib.request.Request(
        f'{endpoint}/moto-api/reset-auth', b'0', {'Content-Type': 'text/plain'}, method='POST'
      )
    )
    env = {
      'AWS_ENDPOINT_URL': endpoint,
      'AWS_ACCESS_KEY_ID': key['AccessKeyId'],
      'AWS_SECRET_ACCESS_KEY': key['SecretAccessKey'],
      'AWS_DEFAULT_REGION': 'us-east-1',
    }
    with _environment(env):
      yield env
  finally:
    server.terminate()
    server.wait(timeout=30)


def _wait_for(url: str, server: subprocess.Popen, timeout_s: float = 60) -> None:
  """Returns once `url` answers; raises if `server` exits or `timeout_s` passes first."""
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      urllib.request.urlopen(url)
      return
    except OSError:
      if server.poll() is not None or time.monotonic() > deadline:
        raise RuntimeError(f'the server of {url} did not start') from None
      time.sleep(0.05)


@contextlib.contextmanager
def gcs_server() -> Iterator[dict[str, str]]:
  """gcp-storage-emulator (in memory) with the bucket BUCKET; yields the environment that
  reaches it. gcsfs's zonal-bucket probe (gRPC, which the emulator does not speak) is off."""
  from gcp_storage_emulator.server import create_server  # pylint: disable=g-import-not-at-top

  import fsspec  # pylint: disable=g-import-not-at-top
  from gcsfs import core  # pylint: disable=g-import-not-at-top

  port = free_port()
  server = create_server('127.0.0.1', port, in_memory=True, default_bucket=BUCKET)
  server.start()
  env = {
    'STORAGE_EMULATOR_HOST': f'http://127.0.0.1:{port}',
    'FSSPEC_GCS_TOKEN': 'anon',
    'GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT': 'false',
  }
  # gcsfs reads GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT when imported: in this process (imported
  # before) its plain filesystem is put in the place of the probing one.
  before = {p: fsspec.get_filesystem_class(p) for p in ('gs', 'gcs')}
  for protocol in before:
    fsspec.register_implementation(protocol, core.GCSFileSystem, clobber=True)
  try:
    with _environment(env):
      yield env
  finally:
    for protocol, cls in before.items():
      fsspec.register_implementation(protocol, cls, clobber=True)
    server.stop()


SERVERS = {'s3': s3_server, 'gs': gcs_server}
