"""Language modelling on a corpus every machine has: the Python standard library's source.

The corpus is the bytes of the `.py` files under `sysconfig.get_paths()['stdlib']` (without
`site-packages`, `test`/`tests`, `idlelib`, `turtledemo` and `__pycache__`), in sorted order
of their relative paths, each followed by a newline. A file belongs to the validation split
when crc32 of its relative path mod 100 is below `valid_percent`: a deterministic split by
file, the same on every machine with the same Python. `split_info()` records it (Python
version, file counts, bytes) for results.json. Each split is cut to its byte budget
(`max_train_bytes`, `max_valid_bytes`): the data live on the device inside the compiled
programs.

Training batches are windows of n + 1 bytes at uniform random offsets of the training text,
drawn on the device. As a sequence task (`posenc.models.objectives`), a window is a prompt of one
byte and an "answer" of n, trained on every token (`train.loss_on='all'`); evaluation is the
perplexity of the validation text (`posenc.lm_eval`).

    task = get()                                   # python_stdlib
    batch = task.sample_train(key, 32, 64, 1, 64)  # tokens [32, 65] of bytes
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import sysconfig
import zlib
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

_SKIP = ('site-packages', '__pycache__', 'test', 'tests', 'idlelib', 'turtledemo')


@functools.lru_cache(maxsize=None)
def _files(root: str) -> tuple[str, ...]:
  """The corpus files under `root`: relative paths of `.py` files, sorted."""
  out = []
  for directory, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if d not in _SKIP)
    out += [os.path.relpath(os.path.join(directory, n), root) for n in names if n.endswith('.py')]
  return tuple(sorted(out))


def split_files(root: str, valid_percent: int) -> dict[str, list[str]]:
  """{'train': [...], 'valid': [...]}: the corpus files under `root` (relative paths,
  sorted), a file in 'valid' when crc32 of its path mod 100 < valid_percent."""
  parts = {'train': [], 'valid': []}
  for rel in _files(root):
    parts['valid' if zlib.crc32(rel.encode()) % 100 < valid_percent else 'train'].append(rel)
  return parts


@functools.lru_cache(maxsize=None)
def _split(
  root: str, valid_percent: int, max_train: int, max_valid: int
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
  parts = split_files(root, valid_percent)
  texts, info = (
    {},
    {'python': platform.python_version(), 'root': root, 'valid_percent': valid_percent},
  )
  for which, budget in (('train', max_train), ('valid', max_valid)):
    chunks, size, used = [], 0, 0
    for rel in parts[which]:
      if size >= budget:
        break
      with open(os.path.join(root, rel), 'rb') as f:
        chunks.append(f.read() + b'\n')
      size += len(chunks[-1])
      used += 1
    data = np.frombuffer(b''.join(chunks)[:budget], np.uint8)
    texts[which] = data
    info[which] = {
      'files': len(parts[which]),
      'files_used': used,
      'bytes': int(data.size),
      'first_file': parts[which][0] if parts[which] else None,
    }
  return texts['train'], texts['valid'], info


@dataclasses.dataclass(frozen=True)
class StdlibCorpus:
  """Byte-level text of the Python standard library (vocabulary: the 256 byte values).

  The task of the perplexity kind of evaluation: it has what that kind reads off a task
  (`posenc.kinds.perplexity.protocol.CorpusTask`), which is checked when a run is built.

  Attributes:
    valid_percent: share of files (by a hash of their path) in the validation split.
    max_train_bytes, max_valid_bytes: byte budgets of the splits.
  """

  name: str = 'python_stdlib'
  level: str = 'language'
  protocol: ClassVar[str] = 'perplexity'
  valid_percent: int = 10
  max_train_bytes: int = 4_000_000
  max_valid_bytes: int = 400_000
  OPTIONS: ClassVar[tuple[str, ...]] = ('valid_percent', 'max_train_bytes', 'max_valid_bytes')
  axes: ClassVar[tuple[str, str]] = ('length', 'length')

  def __post_init__(self):
    if not 0 < self.valid_percent < 100:
      raise ValueError(f'valid_percent={self.valid_percent} must be in 1..99')
    for key in ('max_train_bytes', 'max_valid_bytes'):
      if getattr(self, key) < 1024:
        raise ValueError(f'{key}={getattr(self, key)} must be at least 1024 bytes')

  @property
  def vocab_size(self) -> int:
    return 256

  @property
  def digit_ids(self) -> tuple[int, ...]:
    return tuple(range(ord('0'), ord('9') + 1))

  @property
  def eos_id(self) -> int:
    return 0  # not generated: the corpus is scored, not completed

  def texts(self) -> tuple[np.ndarray, np.ndarray]:
    """(train, valid) uint8 byte arrays."""
    train, valid, _ = _split(
      sysconfig.get_paths()['stdlib'],
      self.valid_percent,
      self.max_train_bytes,
      self.max_valid_bytes,
    )
    if train.size < 2 or valid.size < 2:
      raise ValueError(
        f'the corpus split is empty (train {train.size} bytes, validation '
        f'{valid.size} bytes at valid_percent={self.valid_percent})'
      )
    return train, valid

  def split_info(self) -> dict[str, Any]:
    self.texts()
    return _split(
      sysconfig.get_paths()['stdlib'],
      self.valid_percent,
      self.max_train_bytes,
      self.max_valid_bytes,
    )[2]

  def check_cell(self, a: int, b: int) -> None:
    if a < 2:
      raise ValueError(f'{self.name}: windows need at least 2 bytes, got {a}')
    train, valid = self.texts()
    if a + 1 > train.size:
      raise ValueError(f'{self.name}: a window of {a} bytes is longer than the training text')
    del valid

  def max_prompt(self, a: int, b: int) -> int:
    return 1

  def max_answer(self, a: int, b: int) -> int:
    return a

  def sample_train(
    self, key: jax.Array, batch_size: int, n: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """Windows of n + 1 bytes at uniform offsets of the training text: tokens int32
    [B, prompt_width + answer_width] (= n + 1), prompt_length 1, length n + 1."""
    return self._windows(self.texts()[0], key, batch_size, n, prompt_width + answer_width)

  def sample(
    self, key: jax.Array, batch_size: int, a: int, b: int, prompt_width: int, answer_width: int
  ) -> dict[str, jax.Array]:
    """As `sample_train`, from the validation text (held-out windows of a + 1 bytes, e.g. for
    the analyses of `posenc.analysis`)."""
    del b
    return self._windows(self.texts()[1], key, batch_size, a, prompt_width + answer_width)

  def _windows(
    self, text: np.ndarray, key: jax.Array, batch_size: int, n: int, width: int
  ) -> dict[str, jax.Array]:
    data = jnp.asarray(text)
    offsets = jax.random.randint(key, (batch_size,), 0, data.shape[0] - width + 1)
    tokens = jax.vmap(lambda o: jax.lax.dynamic_slice(data, (o,), (width,)))(offsets)
    return {
      'tokens': tokens.astype(jnp.int32),
      'prompt_length': jnp.ones((batch_size,), jnp.int32),
      'length': jnp.full((batch_size,), n + 1, jnp.int32),
    }


TASKS = {'python_stdlib': StdlibCorpus()}
