"""Work directories on object storage: a path is local, or a `gs://bucket/path` or
`s3://bucket/path` URL.

A URL is read and written through `etils.epath` over fsspec's gcsfs and s3fs (as orbax
does), with the credentials those libraries find themselves: Google's application default
credentials for gs://, the `AWS_*` variables (or ~/.aws) for s3://, and their endpoint
settings (`STORAGE_EMULATOR_HOST`, `AWS_ENDPOINT_URL`). They are the extra
`posenc[cloud]`; a local path needs none of this and keeps its os-level code (`posenc.io`).

An object store has no rename and no append: an object is put whole, atomically, so every
write here is one put (`put`), and a first writer is told apart by the store's conditional
create (`create`: S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`). Listings are not cached:
several hosts write one directory, and each must see the others' objects.

Every failure of the store (no such bucket, no credentials or refused ones, permission,
quota, a refused write) is a `StoreError` whose one line names the URL and the reason.

Example:
  >>> is_url('gs://bucket/table1'), is_url('runs/table1')
  (True, False)
  >>> put('s3://bucket/run/results.json', b'{}')  # the old object or the new  # doctest: +SKIP
  >>> create('s3://bucket/run/lease.0', b'{}')    # False if it exists  # doctest: +SKIP
  True
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

# The schemes a work directory may have, and the package that serves each (`posenc[cloud]`).
SCHEMES = {'gs': 'gcsfs', 's3': 's3fs'}
# fsspec's protocol name of each scheme (its configuration is keyed by it).
_FSSPEC_NAMES = {'gs': 'gcs', 's3': 's3'}


class StoreError(Exception):
  """A store refused or failed an operation; the message is one line naming the URL."""


def is_url(path: str | os.PathLike[str]) -> bool:
  """True for `scheme://...` (any scheme: an unknown one is refused by `check`)."""
  return '://' in os.fspath(path)


def scheme(url: str) -> str:
  return os.fspath(url).split('://', 1)[0]


def check(url: str) -> None:
  """Raises StoreError unless `url` has a known scheme whose package is installed.

  Example: check('ftp://host/x') -> StoreError("ftp://host/x: unknown scheme 'ftp'; ...")
  """
  name = scheme(url)
  if name not in SCHEMES:
    known = ', '.join(f'{s}://' for s in SCHEMES)
    raise StoreError(f"{url}: unknown scheme '{name}'; give a local path or a {known} URL")
  try:
    __import__(SCHEMES[name])
  except ImportError:
    raise StoreError(
      f"{url}: {name}:// needs the package {SCHEMES[name]}: pip install 'posenc[cloud]'"
    ) from None
  if not url.split('://', 1)[1].split('/', 1)[0]:
    raise StoreError(f'{url}: no bucket named; write {name}://BUCKET/PATH')


def _configure() -> None:
  """No listing caches: an object another host wrote must be seen at the next look."""
  import fsspec  # pylint: disable=g-import-not-at-top

  for protocol in _FSSPEC_NAMES.values():
    fsspec.config.conf.setdefault(protocol, {}).setdefault('use_listings_cache', False)


def _fs(url: str) -> Any:
  """The fsspec filesystem of `url` (one per scheme and process, cached by fsspec)."""
  import fsspec  # pylint: disable=g-import-not-at-top

  check(url)
  _configure()
  return fsspec.filesystem(_FSSPEC_NAMES[scheme(url)])


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


@contextlib.contextmanager
def guard(url: str, doing: str) -> Iterator[None]:
  """Turns any failure of the store inside the block into StoreError('URL: doing: reason')."""
  try:
    yield
  except StoreError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise StoreError(f'{url}: {doing} failed: {reason(e)}') from e


def exists(url: str) -> bool:
  with guard(url, 'looking up'):
    return _fs(url).exists(url)


def isdir(url: str) -> bool:
  with guard(url, 'looking up'):
    return _fs(url).isdir(url)


def isfile(url: str) -> bool:
  with guard(url, 'looking up'):
    return _fs(url).isfile(url)


def listdir(url: str) -> list[str]:
  """The names directly under `url` ([] if there are none: a store has no empty folders)."""
  fs = _fs(url)
  with guard(url, 'listing'):
    if not fs.exists(url):
      return []
    return sorted(os.path.basename(p.rstrip('/')) for p in fs.ls(url, detail=False))


def read_bytes(url: str) -> bytes:
  """The object at `url`; FileNotFoundError if there is none."""
  fs = _fs(url)
  try:
    return fs.cat_file(url)
  except FileNotFoundError:
    raise FileNotFoundError(2, 'No such object', url) from None
  except Exception as e:  # pylint: disable=broad-except
    raise StoreError(f'{url}: reading failed: {reason(e)}') from e


def put(url: str, data: bytes) -> None:
  """Writes the object `url` whole (one put: readers see the old object or the new)."""
  with guard(url, 'writing'):
    _fs(url).pipe_file(url, data)


def create(url: str, data: bytes) -> bool:
  """Writes the object `url` only if it does not exist; False if it does (another writer
  was first). The store decides: S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`."""
  try:
    _fs(url).pipe_file(url, data, mode='create')
  except FileExistsError:
    return False
  except Exception as e:  # pylint: disable=broad-except
    if 'precondition' in str(e).lower():  # 412, as some clients pass it on
      return False
    raise StoreError(f'{url}: writing failed: {reason(e)}') from e
  return True


def remove(url: str, recursive: bool = False) -> None:
  """Deletes the object `url` (with `recursive`, every object under it); absent is fine."""
  fs = _fs(url)
  with guard(url, 'deleting'):
    if fs.exists(url):
      fs.rm(url, recursive=recursive)


def files_under(url: str) -> list[str]:
  """The paths, relative to `url`, of every object under it, sorted."""
  fs = _fs(url)
  prefix = url.split('://', 1)[1].rstrip('/') + '/'
  with guard(url, 'listing'):
    found = fs.find(url)
  return sorted(p[len(prefix) :] for p in found if p.startswith(prefix))


def upload_tree(local: str, url: str) -> None:
  """Puts every file under the local directory `local` to the same place under `url`."""
  for root, _, files in os.walk(local):
    for name in files:
      file = os.path.join(root, name)
      with open(file, 'rb') as f:
        put(f'{url}/{os.path.relpath(file, local)}', f.read())


def download_tree(url: str, local: str, skip: tuple[str, ...] = ()) -> None:
  """Writes every object under `url` (but the names in `skip`) to the same place under the
  local directory `local`."""
  for rel in files_under(url):
    if os.path.basename(rel) in skip:
      continue
    target = os.path.join(local, rel)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'wb') as f:
      f.write(read_bytes(f'{url}/{rel}'))


def walk(url: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """os.walk over a store: (directory URL, subdirectory names, object names), top down; a
  caller may prune the subdirectory list in place, as with os.walk."""
  fs = _fs(url)
  with guard(url, 'listing'):
    entries = fs.ls(url, detail=True)
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
  with guard(url, 'writing'):
    fs = _fs(url)
    fs.pipe_file(probe, b'')
    fs.rm(probe)
