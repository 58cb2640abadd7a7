"""Local object stores for the tests: moto's S3 server and gcp-storage-emulator, each on a free
port of 127.0.0.1, and the environment that points the clients (and `launch.*` subprocesses)
at them: `AWS_ENDPOINT_URL` with dummy `AWS_*` keys for s3fs/botocore, `STORAGE_EMULATOR_HOST`
with anonymous credentials for gcsfs. `s3_server` takes any key; `s3_server_checking_keys`
refuses every key but the one it issued, as S3 does.

Example:
  >>> with s3_server() as env:                  # env: the variables to run launch.* under
  ...   subprocess.run([... '--workdir=s3://posenc-test/run'], env={**os.environ, **env})
"""

import collections
import contextlib
import hashlib
import http.client
import http.server
import json
import os
import random
import re
import subprocess
import sys
import threading
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


# ---------------------------------------------------------------------------------------
# A store that answers slowly or loses responses: a proxy in front of the S3 server.

HOP_BY_HOP = {'connection', 'keep-alive', 'transfer-encoding', 'expect', 'proxy-connection'}
# The faults FaultProxy injects: a response held 3 s, held past the client's read timeout
# (store.READ_S + 2 s), or lost (the request lands; the connection closes unanswered).
FAULTS = ('slow', 'timeout', 'lost')


class FaultProxy(http.server.ThreadingHTTPServer):
  """Forwards every request to the S3 server at `upstream` (host, port), logging it, and
  faults the response (FAULTS) of a share `rate` of the requests under the path `prefix`,
  never twice the same request within a minute (a client's second sending passes); `planned`
  faults, (method, fault) pairs, go first to the next requests of their method.

  Each log row: t, who (the request's access key), method, path, query, status, fault,
  create (an If-None-Match: * write).

  Example:
    >>> proxy = FaultProxy(('127.0.0.1', 5000), '/posenc-test/', 0.0, seed=0)
    >>> proxy.planned.append(('PUT', 'lost'))   # the next PUT lands, unanswered
    >>> threading.Thread(target=proxy.serve_forever, daemon=True).start()  # doctest: +SKIP
  """

  daemon_threads = True

  def __init__(self, upstream: tuple[str, int], prefix: str, rate: float, seed: int):
    super().__init__(('127.0.0.1', 0), _FaultHandler)
    self.upstream, self.prefix, self.rate = upstream, prefix, rate
    self.random = random.Random(seed)
    self.lock = threading.Lock()
    self.log: list[dict] = []
    self.planned: list[tuple[str, str]] = []
    self.faulted: dict[str, float] = {}  # request digest -> when it was faulted
    self.faults = collections.Counter()

  def handle_error(self, request, client_address) -> None:
    del request, client_address  # a client killed mid-request: its connection reset

  def fault(self, method: str, path: str, body: bytes) -> str | None:
    if not path.startswith(self.prefix):
      return None
    digest = hashlib.sha256(f'{method} {path}'.encode() + body).hexdigest()
    with self.lock:
      now = time.monotonic()
      if now - self.faulted.get(digest, -1e9) < 60:
        return None
      planned = [i for i, (m, _) in enumerate(self.planned) if m == method]
      if planned:
        kind = self.planned.pop(planned[0])[1]
      elif self.random.random() < self.rate:
        kind = self.random.choice(FAULTS)
      else:
        return None
      self.faulted[digest] = now
      self.faults[kind] += 1
      return kind


class _FaultHandler(http.server.BaseHTTPRequestHandler):
  protocol_version = 'HTTP/1.1'

  def log_message(self, *args):  # quiet
    del args

  def _body(self) -> bytes:
    if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
      chunks = []
      while True:
        size = int(self.rfile.readline().split(b';')[0], 16)
        chunk = self.rfile.read(size)
        self.rfile.readline()
        if not size:
          return b''.join(chunks)
        chunks.append(chunk)
    length = int(self.headers.get('Content-Length') or 0)
    return self.rfile.read(length) if length else b''

  def _proxy(self) -> None:
    from posenc.storage import store  # pylint: disable=g-import-not-at-top

    server: FaultProxy = self.server
    body = self._body()
    credential = re.search(r'Credential=([^/]+)/', self.headers.get('Authorization', ''))
    fault = server.fault(self.command, self.path, body)
    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
    headers['Content-Length'] = str(len(body))
    upstream = http.client.HTTPConnection(*server.upstream, timeout=120)
    upstream.request(self.command, self.path, body=body, headers=headers)
    response = upstream.getresponse()
    data = response.read()
    upstream.close()
    with server.lock:
      server.log.append(
        {
          't': time.time(),
          'who': credential.group(1) if credential else '',
          'method': self.command,
          'path': self.path.split('?')[0],
          'query': self.path.partition('?')[2],
          'status': response.status,
          'fault': fault,
          'create': self.headers.get('If-None-Match') == '*',
        }
      )
    if fault == 'lost':  # landed upstream; the client never hears of it
      self.close_connection = True
      return
    if fault in ('slow', 'timeout'):
      time.sleep(3.0 if fault == 'slow' else store.READ_S + 2)
    self.send_response_only(response.status, response.reason)
    for key, value in response.getheaders():
      if key.lower() not in HOP_BY_HOP and key.lower() != 'content-length':
        self.send_header(key, value)
    length = response.getheader('Content-Length') if self.command == 'HEAD' else len(data)
    self.send_header('Content-Length', str(length or 0))
    self.end_headers()
    if self.command != 'HEAD':
      self.wfile.write(data)

  do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _proxy


@contextlib.contextmanager
def faulty_s3_server(
  prefix: str, rate: float = 0.0, seed: int = 0
) -> Iterator[tuple[dict, FaultProxy]]:
  """moto's S3 server behind a FaultProxy: yields (the environment that reaches the server
  through the proxy, the proxy)."""
  with s3_server() as env:
    host, port = env['AWS_ENDPOINT_URL'].split('//')[1].split(':')
    proxy = FaultProxy((host, int(port)), prefix, rate, seed)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    through = {**env, 'AWS_ENDPOINT_URL': f'http://127.0.0.1:{proxy.server_port}'}
    try:
      with _environment(through):
        yield through, proxy
    finally:
      proxy.shutdown()
