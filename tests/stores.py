"""Local object stores for the tests: moto's S3 server and gcp-storage-emulator, each on a free
port of 127.0.0.1, and the environment that points the clients (and `launch.*` subprocesses)
at them: `AWS_ENDPOINT_URL` with dummy `AWS_*` keys for s3fs/botocore, `STORAGE_EMULATOR_HOST`
with anonymous credentials for gcsfs.

Example:
  >>> with s3_server() as env:                  # env: the variables to run launch.* under
  ...   subprocess.run([... '--workdir=s3://posenc-test/run'], env={**os.environ, **env})
"""

import contextlib
import os
import socket
from typing import Iterator

BUCKET = 'posenc-test'


def free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[dict[str, str]]:
  """Sets `env` in this process too (the tests' own reads of the store) while inside."""
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    yield env
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
    _forget_filesystems()


def _forget_filesystems() -> None:
  """fsspec caches a filesystem per protocol with its endpoint: the next server gets its own."""
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
def gcs_server() -> Iterator[dict[str, str]]:
  """gcp-storage-emulator (in memory) with the bucket BUCKET; yields the environment that
  reaches it. gcsfs's zonal-bucket probe (gRPC, which the emulator does not speak) is off."""
  from gcp_storage_emulator.server import create_server  # pylint: disable=g-import-not-at-top

  port = free_port()
  server = create_server('127.0.0.1', port, in_memory=True, default_bucket=BUCKET)
  server.start()
  env = {
    'STORAGE_EMULATOR_HOST': f'http://127.0.0.1:{port}',
    'FSSPEC_GCS_TOKEN': 'anon',
    'GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT': 'false',
  }
  try:
    with _environment(env):
      yield env
  finally:
    server.stop()


SERVERS = {'s3': s3_server, 'gs': gcs_server}
