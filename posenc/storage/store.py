"""Work directories on object storage: a path is local, or a `gs://bucket/path` or
`s3://bucket/path` URL.

A URL is read and written through `etils.epath` over fsspec's gcsfs and s3fs (as orbax
does), with the credentials those libraries find themselves: Google's application default
credentials for gs://, the `AWS_*` variables (or ~/.aws) for s3://, and their endpoint
settings (`STORAGE_EMULATOR_HOST`, `AWS_ENDPOINT_URL`). They are the extra
`posenc[cloud]`; a local path needs none of this and keeps its os-level code
(`posenc.storage.io`). What differs by scheme is one `Backend` each (`SCHEMES`): a store of
another kind is one more entry.

An object store has no rename and no append: an object is put whole, atomically, so every
write here is one put (`put`), and a first writer is told apart by the store's conditional
create (`create`: S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`). Listings are not cached:
several hosts write one directory, and each must see the others' objects.

Every failure of the store (no such bucket, no credentials or refused ones, permission,
quota, a refused write) is a `StoreError` whose one line names the URL and the reason.
Credentials are looked up once per filesystem, within `CREDENTIALS_S` seconds, before any
request: none found is that one line, saying how to provide them; there is no anonymous
fallback (gcsfs would otherwise fall back to anonymous access and fail much later on a
network error). Anonymous access is used only when asked for (fsspec's configuration, e.g.
`FSSPEC_GCS_TOKEN=anon` against a local emulator).

A directory held by a lease (`posenc.storage.lease.Lease`) is fenced: every write under it first asks
the lease whether it is still this process's (`fence`), so a holder that lost its lease
writes nothing more. Writes that must not undo another writer's are conditional on the
object's version (`read_versioned`, `replace`: S3 `If-Match`, GCS `ifGenerationMatch`).

Example:
  >>> is_url('gs://bucket/table1'), is_url('runs/table1')
  (True, False)
  >>> put('s3://bucket/run/results.json', b'{}')  # the old object or the new  # doctest: +SKIP
  >>> create('s3://bucket/run/lease.0', b'{}')    # False if it exists  # doctest: +SKIP
  True
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import os
import threading
import weakref
from copy import deepcopy
from typing import Any, Callable, Iterator

# How long the lookup of credentials may take (a metadata server that does not answer).
CREDENTIALS_S = 8.0


class StoreError(Exception):
  """A store refused or failed an operation; the message is one line naming the URL."""


class Conflict(StoreError):
  """A conditional write found the object changed or gone (another writer was there)."""


def is_url(path: str | os.PathLike[str]) -> bool:
  """True for `scheme://...` (any scheme: an unknown one is refused by `check`)."""
  return '://' in os.fspath(path)


def scheme(url: str) -> str:
  return os.fspath(url).split('://', 1)[0]


# ---------------------------------------------------------------------------------------
# The backends: what differs by scheme.


@dataclasses.dataclass(frozen=True)
class Backend:
  """A store's scheme: the fsspec implementation that serves it (`posenc[cloud]`), fsspec's
  name of it, how a user provides credentials (the end of the one line when none are
  found), its filesystem with the credentials found (`filesystem(url)`, StoreError saying
  how to provide them), its write conditional on an object's version
  (`replace(fs, url, data, version)`, raising what the library raises), the library's
  settings of timeouts and retries (`timeouts`, fsspec's configuration of the protocol)
  and the errors after which this module sends a request again (`retryable()`)."""

  package: str
  protocol: str
  how_to_log_in: str
  filesystem: Callable[[str], Any]
  replace: Callable[[Any, str, bytes, str], Any]
  timeouts: dict[str, Any]
  retryable: Callable[[], tuple[type[BaseException], ...]]


# Timeouts and retries, chosen against a lease (`lease.LEASE_S` = 60 s: renewed every 15 s,
# given up 15 s before it ends). A request waits at most CONNECT_S to connect and READ_S for
# each response, and is sent at most ATTEMPTS times, by this module: each attempt of a write
# under a held directory is fenced first (`_attempt`), so s3fs's and botocore's own retries
# are off (they would send it again unchecked; aiohttp beneath them still resends an
# idempotent request once, at once, when the connection closes unanswered). One request thus ends within ATTEMPTS *
# (CONNECT_S + READ_S) = 30 s, the time a renewal has between its start and its deadline:
# a renewal (a read and a conditional write) survives a response lost or held back, and a
# conditional write whose response was lost is recognized when it is sent again (`create`,
# `replace`). gcsfs retries on its own (6 times, not configurable); its requests time out
# after READ_S.
CONNECT_S, READ_S, ATTEMPTS = 5.0, 10.0, 2
# Objects of a tree uploaded at once (`upload_tree`).
UPLOADS = 8
# botocore's settings of an S3 client: the timeouts above, its own retries off.
S3_CLIENT = {
  'connect_timeout': CONNECT_S,
  'read_timeout': READ_S,
  'retries': {'mode': 'standard', 'total_max_attempts': 1},
}


def _within(seconds: float, lookup: Callable[[], Any]) -> Any:
  """`lookup()`, or TimeoutError after `seconds` (the lookup is left to finish on its own)."""
  pool = concurrent.futures.ThreadPoolExecutor(1)
  try:
    return pool.submit(lookup).result(timeout=seconds)
  finally:
    pool.shutdown(wait=False)


def _missing_credentials(url: str, why: str) -> StoreError:
  name = scheme(url)
  return StoreError(f'{url}: no credentials for {name}:// ({why}): {SCHEMES[name].how_to_log_in}')


def _look_up(url: str, lookup: Callable[[], None]) -> None:
  """Runs the credentials `lookup` for `url` within CREDENTIALS_S; StoreError if it fails."""
  try:
    _within(CREDENTIALS_S, lookup)
  except concurrent.futures.TimeoutError:
    raise _missing_credentials(
      url, f'none found within {CREDENTIALS_S:.0f} s: the metadata server did not answer'
    ) from None
  except Exception as e:  # pylint: disable=broad-except
    text = ' '.join(str(e).split())
    # google.auth's text for no credentials is a paragraph; its other errors (a key file that
    # is not one) say what is wrong.
    why = 'none found' if isinstance(e, LookupError) or 'were not found' in text else text[:160]
    raise _missing_credentials(url, why) from None


# The filesystems whose credentials were found (each fsspec instance is checked once).
_checked_filesystems: weakref.WeakSet[Any] = weakref.WeakSet()
_checking = threading.Lock()


def _gcs_filesystem(url: str) -> Any:
  """gcsfs's filesystem. gcsfs looks its credentials up when a filesystem is made (not yet
  cached): bounded here first, since a metadata server that does not answer takes a while
  to give up. Its `token` is fsspec's configured one (FSSPEC_GCS_TOKEN: anon, a key file,
  ...), else 'google_default', which fails instead of falling back to anonymous."""
  import fsspec  # pylint: disable=g-import-not-at-top

  def google_credentials():
    import google.auth  # pylint: disable=g-import-not-at-top

    google.auth.default()

  token = fsspec.config.conf.get('gcs', {}).get('token') or 'google_default'
  with _checking:
    if token == 'google_default' and not getattr(
      fsspec.get_filesystem_class('gcs'), '_cache', None
    ):
      _look_up(url, google_credentials)
    try:
      return fsspec.filesystem('gcs', token=token)
    except Exception as e:  # pylint: disable=broad-except
      raise _missing_credentials(url, reason(e)) from None


def _gcs_replace(fs: Any, url: str, data: bytes, expected: str) -> Any:
  """GCS's media upload of one object with `ifGenerationMatch` (gcsfs passes it only as 0,
  for a create); returns the new object's metadata."""
  from urllib.parse import quote  # pylint: disable=g-import-not-at-top

  from fsspec import asyn  # pylint: disable=g-import-not-at-top

  bucket, key, _ = fs.split_path(url)
  return asyn.sync(
    fs.loop,
    fs._call,  # pylint: disable=protected-access
    'POST',
    f'{fs._location}/upload/storage/v1/b/{quote(bucket)}/o',  # pylint: disable=protected-access
    uploadType='media',
    name=key,
    ifGenerationMatch=str(expected),
    headers={'Content-Type': 'application/octet-stream'},
    data=data,
    json_out=True,
  )


def _s3_filesystem(url: str) -> Any:
  """s3fs's filesystem, once botocore finds credentials where s3fs's session will look."""
  import botocore.session  # pylint: disable=g-import-not-at-top
  import fsspec  # pylint: disable=g-import-not-at-top

  # A copy each time: s3fs adds to the dict it is given, and fsspec keys its cache of
  # filesystems by the arguments (the configuration's own settings win).
  config = deepcopy({**S3_CLIENT, **fsspec.config.conf.get('s3', {}).get('config_kwargs', {})})
  fs = fsspec.filesystem('s3', config_kwargs=config)

  def aws_credentials():
    if fs.anon or fs.key:
      return
    session = botocore.session.Session(profile=getattr(fs, 'profile', None))
    if session.get_credentials() is None:
      raise LookupError('no credentials')

  fs.retries = 1  # this module retries (`_attempt`), each attempt fenced
  with _checking:
    if fs not in _checked_filesystems:
      _look_up(url, aws_credentials)
      _checked_filesystems.add(fs)
  return fs


def _s3_retryable() -> tuple[type[BaseException], ...]:
  from s3fs import core  # pylint: disable=g-import-not-at-top

  return core.S3_RETRYABLE_ERRORS


# The schemes a work directory may have.
SCHEMES = {
  'gs': Backend(
    'gcsfs',
    'gcs',
    'run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a '
    "service account's key file, or run on a VM whose service account may use the bucket",
    _gcs_filesystem,
    _gcs_replace,
    {'requests_timeout': READ_S},
    lambda: (),
  ),
  's3': Backend(
    's3fs',
    's3',
    'set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile of ~/.aws/credentials '
    'with AWS_PROFILE, or run with an instance role',
    _s3_filesystem,
    lambda fs, url, data, expected: fs.pipe_file(url, data, IfMatch=expected),
    {},
    _s3_retryable,
  ),
}


# ---------------------------------------------------------------------------------------
# One API over them.


def intended(path: str | os.PathLike[str]) -> str | None:
  """The store URL `path` was meant to be when its first component names a store's scheme
  written otherwise ('s3:/b/run', 's3:b/run', 'S3://b/run'), else None: such a path would
  otherwise be a local directory named 's3:' (or an unknown scheme).

  Example: intended('s3:/bucket/run') == intended('S3:bucket/run') == 's3://bucket/run';
    intended('runs/a') is intended('s3://bucket/run') is None.
  """
  text = os.fspath(path)
  head, colon, rest = text.partition(':')
  if not colon or head.lower() not in SCHEMES or (head in SCHEMES and rest.startswith('//')):
    return None  # a local path, or a URL as written (`check` judges the rest)
  url = f'{head.lower()}://{rest.lstrip("/")}'
  return None if url == text else url


def check_path(path: str | os.PathLike[str]) -> None:
  """Raises StoreError (one line showing the URL meant) for a path that names a store's
  scheme without being its URL (`intended`); a local path or a URL passes."""
  url = intended(path)
  if url is not None:
    raise StoreError(
      f'{os.fspath(path)} is not a store URL (did you mean {url}?); a store URL is '
      f'{" or ".join(f"{s}://BUCKET/PATH" for s in SCHEMES)}, anything else a local path'
    )


def check(url: str) -> None:
  """Raises StoreError unless `url` has a known scheme whose package is installed.

  Example: check('ftp://host/x') -> StoreError("ftp://host/x: unknown scheme 'ftp'; ...")
  """
  check_path(url)
  name = scheme(url)
  if name not in SCHEMES:
    known = ', '.join(f'{s}://' for s in SCHEMES)
    raise StoreError(f"{url}: unknown scheme '{name}'; give a local path or a {known} URL")
  package = SCHEMES[name].package
  try:
    __import__(package)
  except ImportError:
    raise StoreError(
      f"{url}: {name}:// needs the package {package}: pip install 'posenc[cloud]'"
    ) from None
  if not url.split('://', 1)[1].split('/', 1)[0]:
    raise StoreError(f'{url}: no bucket named; write {name}://BUCKET/PATH')


def _configure() -> None:
  """No listing caches (an object another host wrote must be seen at the next look), and the
  timeouts and retries above (where fsspec's configuration does not set its own)."""
  import fsspec  # pylint: disable=g-import-not-at-top

  for backend in SCHEMES.values():
    conf = fsspec.config.conf.setdefault(backend.protocol, {})
    conf.setdefault('use_listings_cache', False)
    for key, value in backend.timeouts.items():
      conf.setdefault(key, value)


def _fs(url: str) -> Any:
  """The fsspec filesystem of `url` (one per scheme and process, cached by fsspec), its
  credentials found (StoreError saying how to provide them, within CREDENTIALS_S)."""
  check(url)
  _configure()
  return SCHEMES[scheme(url)].filesystem(url)


def path(url: str) -> Any:
  """`etils.epath.Path(url)`: pathlib's interface over the store."""
  from etils import epath  # pylint: disable=g-import-not-at-top

  check(url)
  _configure()
  return epath.Path(url)


def as_path(given: str | os.PathLike[str]) -> Any:
  """pathlib.Path of a local path, `path` (etils.epath) of a URL: pathlib would fold
  'gs://b' into 'gs:/b'. Both give str() back as written and join with `/`."""
  import pathlib  # pylint: disable=g-import-not-at-top

  return path(os.fspath(given)) if is_url(given) else pathlib.Path(given)


# S3's error codes for a key it does not accept, and what each means. botocore carries the
# code in its ClientError; s3fs raises a PermissionError from it, whose text is S3's message
# alone ("The request signature we calculated does not match...").
REFUSED_KEYS = {
  'InvalidAccessKeyId': 'the access key id is unknown to the store',
  'SignatureDoesNotMatch': 'the secret access key does not match the access key id',
  'InvalidToken': 'the session token is not valid',
  'ExpiredToken': 'the session token has expired',
}


def _s3_error_code(error: BaseException | None) -> str | None:
  """The S3 error code of the botocore ClientError behind `error`, if there is one."""
  while error is not None:
    response = getattr(error, 'response', None)
    if isinstance(response, dict) and 'Error' in response:
      return response['Error'].get('Code')
    error = error.__cause__ or error.__context__
  return None


def reason(error: BaseException) -> str:
  """The first line of what a store library says about `error`, with its type if terse; a
  key the store refused is said so.

  Example: s3fs's PermissionError from S3's SignatureDoesNotMatch -> 'credentials refused
  (SignatureDoesNotMatch: the secret access key does not match the access key id)'.
  """
  code = _s3_error_code(error)
  if code in REFUSED_KEYS:
    return f'credentials refused ({code}: {REFUSED_KEYS[code]})'
  text = ' '.join(str(error).split()) or type(error).__name__
  if isinstance(error, FileNotFoundError) and 'bucket' not in text.lower():
    text = f'not found ({text})'
  return text if len(text) <= 200 else text[:197] + '...'


def _precondition(error: BaseException) -> bool:
  """A conditional write refused by the store (HTTP 412): s3fs raises S3's PreconditionFailed
  as OSError(EINVAL), gcsfs GCS's as FileExistsError, some clients pass its text on."""
  text = str(error).lower()
  return (
    'precondition' in text
    or 'if-match' in text
    or isinstance(error, FileExistsError)
    or getattr(error, 'errno', None) == errno.EINVAL
  )


def _attempt(url: str, doing: str, op: Callable[[], Any], write: bool = True) -> Any:
  """`op()`, the request for `url`, sent up to ATTEMPTS times while the store times out or
  drops the connection, each attempt of a write fenced first (`fence`: a holder that lost
  its lease sends nothing more), and a write that failed fenced again (its lease, lost
  meanwhile, is the reason to give). Not-found and refused conditions pass as the library
  raises them; any other failure is StoreError('URL: doing failed: reason')."""
  retryable = SCHEMES[scheme(url)].retryable()
  for attempt in range(ATTEMPTS):
    if write:
      _fenced(url)
    try:
      return op()
    except Exception as e:  # pylint: disable=broad-except
      if write:
        _fenced(url)
      if isinstance(e, retryable) and attempt + 1 < ATTEMPTS:
        continue
      if isinstance(e, (FileNotFoundError, StoreError)) or _precondition(e):
        raise
      raise StoreError(f'{url}: {doing} failed: {reason(e)}') from e
  raise AssertionError('unreachable')


def exists(url: str) -> bool:
  fs = _fs(url)
  return _attempt(url, 'looking up', lambda: fs.exists(url), write=False)


def isdir(url: str) -> bool:
  fs = _fs(url)
  return _attempt(url, 'looking up', lambda: fs.isdir(url), write=False)


def isfile(url: str) -> bool:
  fs = _fs(url)
  return _attempt(url, 'looking up', lambda: fs.isfile(url), write=False)


def listdir(url: str) -> list[str]:
  """The names directly under `url` ([] if there are none: a store has no empty folders)."""
  fs = _fs(url)
  if not _attempt(url, 'listing', lambda: fs.exists(url), write=False):
    return []
  names = _attempt(url, 'listing', lambda: fs.ls(url, detail=False), write=False)
  return sorted(os.path.basename(p.rstrip('/')) for p in names)


def read_bytes(url: str) -> bytes:
  """The object at `url`; FileNotFoundError if there is none."""
  fs = _fs(url)
  try:
    return _attempt(url, 'reading', lambda: fs.cat_file(url), write=False)
  except FileNotFoundError:
    raise FileNotFoundError(2, 'No such object', url) from None


def _holds(url: str, data: bytes) -> bool:
  """Whether a conditional write the store refused was this writer's own, sent again after
  its response was lost (by `_attempt`, or by the HTTP client itself: aiohttp resends an
  idempotent request, PUT included, once when the server closes the connection unanswered):
  the object is exactly what was sent. A lease's object holds its token, so of two
  processes racing for it only the creator's bytes match; under a fenced directory the
  caller has checked the lease first, so no other writer took the directory over."""
  try:
    return read_bytes(url) == data
  except FileNotFoundError:
    return False


# ---------------------------------------------------------------------------------------
# Fencing: the writes under a directory whose lease this process holds.

# directory URL -> the check its lease gives (raises once the lease is no longer this
# process's). Process state, as the lease is: every writer of the directory in the process
# (the evaluation's, a background upload's) must honour it, whichever path it writes by.
_fences: dict[str, Callable[[], None]] = {}


@contextlib.contextmanager
def fence(directory: str, still_held: Callable[[], None]) -> Iterator[None]:
  """While inside, every request that writes under `directory` calls `still_held()` first
  (it raises to refuse the write): each object, each attempt of it (`_attempt`), and each
  part of a large one (`put_file`). A request already sent when the lease is lost can
  still land: at most one per writing thread, within CONNECT_S + READ_S of its check (the
  lease's margin at its default length, lease.Lease) once its body is sent.

  Example:
    >>> with fence('s3://b/run', lease.check):     # doctest: +SKIP
    ...   put('s3://b/run/results.json', b'{}')    # refused once the lease is lost
  """
  directory = directory.rstrip('/')
  _fences[directory] = still_held
  try:
    yield
  finally:
    _fences.pop(directory, None)


def _fenced(url: str) -> None:
  """Raises (the lease's error) if `url` lies under a directory whose lease was lost."""
  for directory, still_held in list(_fences.items()):
    if url == directory or url.startswith(directory + '/'):
      still_held()


# ---------------------------------------------------------------------------------------
# Writes.


def put(url: str, data: bytes) -> None:
  """Writes the object `url` whole (one put: readers see the old object or the new)."""
  fs = _fs(url)
  _attempt(url, 'writing', lambda: fs.pipe_file(url, data))


def _version_of(response: Any) -> str | None:
  """The version a put answered with: S3's ETag, GCS's generation."""
  if isinstance(response, dict):
    version = response.get('ETag') or response.get('generation')
    return None if version is None else str(version)
  return None


def create(url: str, data: bytes) -> str | None:
  """Writes the object `url` only if it does not exist; returns its version (S3 ETag, GCS
  generation), or None if it exists holding other bytes (another writer was first). The
  store decides: S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`. Refused, and the object
  exactly `data`, it is taken as this write's own (sent again after its response was lost,
  perhaps by the HTTP client unseen: `_holds`)."""
  fs = _fs(url)
  try:
    response = _attempt(url, 'writing', lambda: fs.pipe_file(url, data, mode='create'))
  except Exception as e:  # pylint: disable=broad-except
    if not _precondition(e):
      raise
    return version(url) if _holds(url, data) else None
  return _version_of(response) or version(url)


def version(url: str) -> str | None:
  """The object's current version (S3 ETag, GCS generation); None if there is none."""
  fs = _fs(url)
  try:
    info = _attempt(url, 'looking up', lambda: fs.info(url), write=False)
  except FileNotFoundError:
    return None
  value = info.get('ETag') or info.get('generation')
  return None if value is None else str(value)


def read_versioned(url: str) -> tuple[bytes, str]:
  """(the object's bytes, its version) for a later `replace`; FileNotFoundError if none.

  The version is looked up first: a write between the two makes `replace` refuse (the
  version is older than the bytes), never accept a stale one."""
  found = version(url)
  if found is None:
    raise FileNotFoundError(2, 'No such object', url)
  return read_bytes(url), found


def replace(url: str, data: bytes, expected: str) -> str:
  """Overwrites the object `url` only if its version is still `expected`; returns the new
  version. Raises Conflict if it changed or is gone (S3 `If-Match`, GCS
  `ifGenerationMatch`): a writer that lost its place cannot undo another's write. Refused
  when sent again after its response was lost, it is done (not a conflict) if the object is
  exactly `data`: the first one landed."""
  fs, backend = _fs(url), SCHEMES[scheme(url)]
  try:
    response = _attempt(url, 'writing', lambda: backend.replace(fs, url, data, expected))
  except FileNotFoundError:
    _fenced(url)  # A holder that lost its lease meanwhile is told so first.
    raise Conflict(f'{url}: gone (another writer deleted it)') from None
  except Exception as e:  # pylint: disable=broad-except
    if not _precondition(e):
      raise
    _fenced(url)
    if _holds(url, data):
      return version(url) or ''
    raise Conflict(f'{url}: changed by another writer') from None
  return _version_of(response) or version(url) or ''


def remove(url: str, recursive: bool = False) -> None:
  """Deletes the object `url` (with `recursive`, every object under it); absent is fine."""
  fs = _fs(url)
  if _attempt(url, 'deleting', lambda: fs.exists(url), write=False):
    _attempt(url, 'deleting', lambda: fs.rm(url, recursive=recursive))


def copy(source: str, target: str) -> None:
  """Copies the object `source` to `target` on the store (no download)."""
  fs = _fs(source)
  _attempt(target, 'copying', lambda: fs.copy(source, target))


def put_file(local: str, url: str) -> None:
  """Puts the local file `local` as the object `url`, streamed (a large file is sent in
  parts, never read whole into memory, each part's end fenced); the object appears whole
  when the upload ends."""
  from fsspec import callbacks  # pylint: disable=g-import-not-at-top

  fs = _fs(url)
  # s3fs and gcsfs call the callback as each part ends: the request that makes a large
  # object appear (S3's CompleteMultipartUpload, GCS's last chunk) goes only while the lease
  # holds.
  fenced = {'fence': lambda size, value, **_: _fenced(url)}
  _attempt(
    url, 'writing', lambda: fs.put_file(local, url, callback=callbacks.Callback(hooks=fenced))
  )


def get_file(url: str, local: str) -> None:
  """Writes the object `url` to the local file `local`, streamed."""
  fs = _fs(url)
  try:
    _attempt(url, 'reading', lambda: fs.get_file(url, local), write=False)
  except FileNotFoundError:
    raise FileNotFoundError(2, 'No such object', url) from None


def files_under(url: str) -> list[str]:
  """The paths, relative to `url`, of every object under it, sorted."""
  fs = _fs(url)
  prefix = url.split('://', 1)[1].rstrip('/') + '/'
  found = _attempt(url, 'listing', lambda: fs.find(url), write=False)
  return sorted(p[len(prefix) :] for p in found if p.startswith(prefix))


def upload_tree(local: str, url: str) -> None:
  """Puts every file under the local directory `local` to the same place under `url`:
  streamed, several at once, each object fenced before its request (`put_file`), each whole
  when its upload ends."""
  files = sorted(os.path.join(root, name) for root, _, names in os.walk(local) for name in names)
  targets = [f'{url}/{os.path.relpath(file, local)}' for file in files]
  with concurrent.futures.ThreadPoolExecutor(UPLOADS) as pool:
    for future in [pool.submit(put_file, f, t) for f, t in zip(files, targets)]:
      future.result()


def download_tree(url: str, local: str, skip: tuple[str, ...] = ()) -> None:
  """Writes every object under `url` (but the names in `skip`) to the same place under the
  local directory `local`: streamed, several at once (fsspec's batched transfers)."""
  names = [rel for rel in files_under(url) if os.path.basename(rel) not in skip]
  targets = [os.path.join(local, rel) for rel in names]
  for target in targets:
    os.makedirs(os.path.dirname(target), exist_ok=True)
  if names:
    fs = _fs(url)
    sources = [f'{url}/{rel}' for rel in names]
    _attempt(url, 'reading', lambda: fs.get(sources, targets), write=False)


def walk(url: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """os.walk over a store: (directory URL, subdirectory names, object names), top down; a
  caller may prune the subdirectory list in place, as with os.walk."""
  fs = _fs(url)
  entries = _attempt(url, 'listing', lambda: fs.ls(url, detail=True), write=False)
  dirs = sorted(
    os.path.basename(e['name'].rstrip('/')) for e in entries if e['type'] == 'directory'
  )
  files = sorted(os.path.basename(e['name']) for e in entries if e['type'] != 'directory')
  yield url, dirs, files
  for name in list(dirs):
    yield from walk(f'{url.rstrip("/")}/{name}')


def check_writable(url: str) -> None:
  """Raises StoreError (one line: the URL and why) unless an object can be written under
  `url` and deleted again: the bucket exists, the credentials are there and may write."""
  check(url)
  probe = f'{url.rstrip("/")}/.posenc-write-check-{os.getpid()}'
  fs = _fs(url)
  try:
    _attempt(url, 'writing', lambda: fs.pipe_file(probe, b''))
    _attempt(url, 'writing', lambda: fs.rm(probe))
  except FileNotFoundError as e:  # no such bucket
    raise StoreError(f'{url}: writing failed: {reason(e)}') from e
