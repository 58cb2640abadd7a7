"""Checkpoints of a population's training state.

The state is checkpointed by orbax as host NumPy arrays of the real members only
(`state.saved`): a population lives on one process's local devices (orbax writes only
jax.Arrays that are global in a multi-process job), and without the padding members a
checkpoint written on D devices restores on any other count. Next to it, `run` records the
device counts the run has trained on: [{'from_step', 'devices', 'platform'}].

A checkpoint that does not restore (a truncated or missing file) is set aside and the
newest one that restores is used instead (`restore_newest`).

A work directory on an object store (`gs://`, `s3://`) has its checkpoints written by orbax
into a local staging directory and put to the store step by step (`StagedManager`), in the
background while training goes on, each step's files streamed and its marker UPLOADED
last: a step without the marker (a host killed mid-upload) is not a checkpoint. A resume
fetches only the checkpoint it restores (the newest complete one). The staging directory
is removed when the manager is closed; one a killed process left is removed by the next
manager made on that machine (`processes.staging_directory`). Orbax 0.12.7 cannot write s3:// itself (its path
normalization turns 's3://b' into 's3:/b' and refuses it as "not absolute"). It can write
gs:// (arrays through tensorstore's gcs driver, the rest through etils.epath), but gs:// is
staged too: against the GCS emulator of the tests those writes fail now and then, so a
direct path would go untested (`checkpoint_manager`).

Example:
  >>> manager = checkpoint_manager(workdir)  # doctest: +SKIP
  >>> history = [{'from_step': 0, 'devices': 1, 'platform': 'cpu'}]  # devices trained on
  >>> save_state(manager, 100, state, population, history)  # doctest: +SKIP
  >>> step, state, history, notes = restore_newest(manager, abstract, population,  # doctest: +SKIP
  ...                                              lambda s: f'left in place: {s}')
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from typing import Any, Callable

import jax
import orbax.checkpoint as ocp

from posenc.storage import processes
from posenc.training import state as state_lib
from posenc.storage import store
from posenc.training.population import Population

# The object that completes a step's upload to a store (written after the step's objects).
UPLOADED = 'UPLOADED'


def checkpoint_manager(workdir: str) -> Any:
  """Orbax manager of `workdir/checkpoints`: synchronous, the last three steps kept (a
  damaged newest one leaves two to fall back on: `restore_newest`).

  In a multi-process job each process trains its own populations (its shard of a sweep)
  on its local devices, so its manager involves only itself: no cross-process barriers.
  """
  kwargs = {}
  if jax.process_count() > 1:
    me = jax.process_index()
    kwargs['multiprocessing_options'] = ocp.options.MultiprocessingOptions(
      primary_host=me, active_processes={me}, barrier_sync_key_prefix=f'process{me}'
    )
  options = ocp.CheckpointManagerOptions(
    max_to_keep=3, create=False, enable_async_checkpointing=False, **kwargs
  )
  if store.is_url(workdir):
    # gs:// is staged as s3:// is, though orbax writes gs:// itself: against the test
    # emulator (gcp-storage-emulator 2026.7.19, with TENSORSTORE_GCS_HTTP_URL pointing
    # tensorstore at it) saves fail now and then with 'ValueError: Error writing
    # "layer0.b/0" in OCDBT database at gs://.../state/ocdbt.process_0/: Error writing
    # gs://.../manifest.ocdbt: Malformed StorageGeneration'. The emulator's media reads carry
    # no x-goog-generation header and ignore ifGenerationNotMatch, which tensorstore's
    # conditional manifest writes rely on; real GCS has both, so there orbax could write
    # directly, untested.
    return StagedManager(os.path.join(workdir, 'checkpoints'), options)
  directory = os.path.abspath(os.path.join(workdir, 'checkpoints'))
  os.makedirs(directory, exist_ok=True)
  return ocp.CheckpointManager(directory, options=options)


class StagedManager:
  """An orbax CheckpointManager over a local staging directory, for `url` (the checkpoints
  directory of a work directory on a store).

  `save` writes the step with orbax, then uploads it in a background thread (its files
  streamed, then UPLOADED; the store keeps the newest `max_to_keep` uploaded steps) while
  training goes on; the next `save` (and `wait_until_finished`) first waits for that upload
  and raises its error. The first `save` deletes the steps on the store without UPLOADED
  (a killed writer's unfinished uploads: the lease makes this process the only writer). `all_steps` are the store's uploaded steps; `restore` fetches the
  one it restores, if it is not staged. `close` waits for the upload and removes the staging
  directory.

  Example:
    >>> manager = StagedManager('gs://bucket/run/checkpoints', options)   # doctest: +SKIP
    >>> manager.save(100, args=...)  # .../checkpoints/100/... then .../UPLOADED  # doctest: +SKIP
    >>> manager.close()              # the upload waited for, the staging directory removed  # doctest: +SKIP
  """

  def __init__(self, url: str, options: ocp.CheckpointManagerOptions):
    self.url = url
    self.directory = processes.staging_directory('checkpoints')
    self._keep = options.max_to_keep
    self._steps = _uploaded_steps(url)
    self._upload: threading.Thread | None = None
    self._error: BaseException | None = None
    self._swept = False
    try:
      self._manager = ocp.CheckpointManager(self.directory, options=options)
    except BaseException:
      shutil.rmtree(self.directory, ignore_errors=True)
      raise

  def _staged(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def _fetch(self, step: int) -> None:
    """Stages the store's `step` (streamed), unless it is staged already."""
    if os.path.exists(self._staged(step)):
      return
    partial = os.path.join(self.directory, f'.fetching-{step}')  # not a step name to orbax
    shutil.rmtree(partial, ignore_errors=True)
    store.download_tree(f'{self.url}/{step}', partial, (UPLOADED,))
    os.rename(partial, self._staged(step))  # orbax sees the whole step or none of it
    self._manager.reload()

  def save(self, step: int, args: Any) -> bool:
    self._wait_for_upload()
    if not self._swept:  # The writer's first save: steps a killed writer left half uploaded.
      for name in store.listdir(self.url):
        if name.isdigit() and int(name) not in self._steps:
          store.remove(f'{self.url}/{name}', recursive=True)
      self._swept = True
    saved = self._manager.save(step, args=args)
    self._manager.wait_until_finished()
    if saved:
      self._upload = threading.Thread(target=self._upload_step, args=(step,), daemon=True)
      self._upload.start()
    return saved

  def _upload_step(self, step: int) -> None:
    """Puts the staged `step` to the store, then UPLOADED; drops the store's steps beyond
    the newest max_to_keep. Its error is raised by the next wait."""
    try:
      store.upload_tree(self._staged(step), f'{self.url}/{step}')
      store.put(f'{self.url}/{step}/{UPLOADED}', b'')
      self._steps = sorted(set(self._steps) | {step})
      if self._keep is not None:
        for old in self._steps[: -self._keep]:
          store.remove(f'{self.url}/{old}', recursive=True)
        self._steps = self._steps[-self._keep :]
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e

  def _wait_for_upload(self) -> None:
    if self._upload is not None:
      self._upload.join()
      self._upload = None
    if self._error is not None:
      error, self._error = self._error, None
      raise error

  def restore(self, step: int, args: Any) -> Any:
    self._fetch(step)
    return self._manager.restore(step, args=args)

  def all_steps(self) -> list[int]:
    return list(self._steps)

  def reload(self) -> None:
    """Looks at the store's steps again; a staged step the store no longer has (set aside as
    damaged) is dropped."""
    self._wait_for_upload()
    self._steps = _uploaded_steps(self.url)
    for name in os.listdir(self.directory):
      if name.isdigit() and int(name) not in self._steps:
        shutil.rmtree(os.path.join(self.directory, name))
    self._manager.reload()

  def wait_until_finished(self) -> None:
    self._manager.wait_until_finished()
    self._wait_for_upload()

  def close(self) -> None:
    """Waits for the upload (its error is not raised: the step is then not a checkpoint)
    and removes the staging directory."""
    try:
      if self._upload is not None:
        self._upload.join()
      self._manager.close()
    finally:
      shutil.rmtree(self.directory, ignore_errors=True)


def _uploaded_steps(url: str) -> list[int]:
  """The steps under the store's checkpoints directory `url` whose upload finished."""
  return sorted(
    int(n) for n in store.listdir(url) if n.isdigit() and store.exists(f'{url}/{n}/{UPLOADED}')
  )


def save_state(
  manager: ocp.CheckpointManager,
  step: int,
  state: state_lib.TrainState,
  population: Population,
  history: list[dict[str, Any]],
) -> None:
  """Writes the real members of `state` at `step` in the layout `state.LAYOUT` (a plain
  dict, `state.saved`), and beside it the device history and the layout's number."""
  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave(state_lib.saved(state, population.size)),
      run=ocp.args.JsonSave({'device_history': history, 'state_layout': state_lib.LAYOUT}),
    ),
  )


def restore_state(
  manager: ocp.CheckpointManager,
  step: int,
  abstract: state_lib.TrainState,
  population: Population,
) -> tuple[state_lib.TrainState, list[dict[str, Any]]]:
  """(the checkpointed state at `step` padded and placed like `abstract`, device history).

  A checkpoint that names no layout is of layout 1 (the plain dict `state.saved` writes).

  Raises:
    state.LayoutError: the checkpoint is of another layout (one line naming it).
  """
  run = manager.restore(step, args=ocp.args.Composite(run=ocp.args.JsonRestore()))['run']
  state_lib.check_layout(run.get('state_layout', 1), f'checkpoint {step}')
  target = state_lib.saved_shapes(abstract, population.size)
  restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target)))
  return state_lib.from_saved(restored['state'], abstract), run['device_history']


# What a damaged checkpoint raises on restore: tensorstore's read errors (a data file
# truncated or missing: OUT_OF_RANGE, FAILED_PRECONDITION) and orbax's structure errors (its
# metadata missing) are ValueErrors; a missing item directory is a KeyError ('Item "state"
# was not found'); a missing file elsewhere an OSError.
DAMAGED = (ValueError, KeyError, OSError)


def restore_newest(
  manager: ocp.CheckpointManager,
  abstract: Any,
  population: Population,
  set_aside: Callable[[int], str],
) -> tuple[int | None, Any, list[dict[str, Any]], list[str]]:
  """(step, state, device history, damage notes) of the newest checkpoint that restores,
  step None when none does (then state and history are None).

  Each checkpoint that fails to restore is handed to `set_aside(step)`, which returns where
  it now is (training moves it out of the manager's way; a reader leaves it), and noted as
  'checkpoint 40 (OUT_OF_RANGE: Error reading ...) kept in W/checkpoints_damaged/40'.
  """
  notes = []
  for step in sorted(manager.all_steps(), reverse=True):
    try:
      state, history = restore_state(manager, step, abstract, population)
      return step, state, history, notes
    except state_lib.LayoutError:
      raise  # not damaged: written by another version, and left as it is
    except DAMAGED as e:
      _drop_closed_loop_callbacks()
      reason = ' '.join(str(e).split())
      reason = reason if len(reason) <= 100 else reason[:97] + '...'
      notes.append(f'checkpoint {step} ({type(e).__name__}: {reason}) kept in {set_aside(step)}')
  return None, None, None, notes


def _drop_closed_loop_callbacks() -> None:
  """Silences the reads a failed restore leaves in flight: when one read fails, orbax's
  event loop closes under the others, and each of their completions reports 'Event loop is
  closed' through sys.unraisablehook (milliseconds later, hundreds of tracebacks). Every
  other unraisable exception still reaches the previous hook. Installed once per process."""
  previous = sys.unraisablehook
  if getattr(previous, 'drops_closed_loop', False):
    return

  def hook(unraisable: Any) -> None:
    if not (
      unraisable.exc_type is RuntimeError and str(unraisable.exc_value) == 'Event loop is closed'
    ):
      previous(unraisable)

  hook.drops_closed_loop = True
  sys.unraisablehook = hook


def set_aside_damaged(workdir: str, step: int) -> str:
  """Moves `workdir/checkpoints/step` to `workdir/checkpoints_damaged/step` (a free name:
  step.1, step.2, ... if a damaged copy of that step is there already) and returns it."""
  aside = os.path.join(workdir, 'checkpoints_damaged')
  if store.is_url(workdir):
    source = os.path.join(workdir, 'checkpoints', str(step))
    target = f'{aside}/{step}.{len(store.listdir(aside))}'
    for rel in store.files_under(source):
      store.copy(f'{source}/{rel}', f'{target}/{rel}')
    store.remove(source, recursive=True)
    return target
  os.makedirs(aside, exist_ok=True)
  target, k = os.path.join(aside, str(step)), 0
  while os.path.exists(target):
    k += 1
    target = os.path.join(aside, f'{step}.{k}')
  os.replace(os.path.join(workdir, 'checkpoints', str(step)), target)
  return target


# The suffix of the directory orbax writes a step into before renaming it to the step.
UNFINISHED = '.orbax-checkpoint-tmp'


def remove_unfinished(directory: str) -> list[str]:
  """Removes every checkpoint orbax did not finish (`STEP.orbax-checkpoint-tmp...`) under the
  local `directory` (a run or a sweep); returns their paths. The finished steps stay.

  Example: after a full disk during the save of step 30 -> ['run/checkpoints/30.orbax-...'].
  """
  if store.is_url(directory) or not os.path.isdir(directory):
    return []  # A store's steps are staged locally and removed with the staging directory.
  removed = []
  for root, dirs, _ in os.walk(directory):
    for name in list(dirs):
      if UNFINISHED in name:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(os.path.join(root, name))
        dirs.remove(name)
  return removed


def saved_steps(workdir: str) -> list[int]:
  """The steps of `workdir/checkpoints` that orbax finished writing, ascending (read from
  the directory names, so nothing is created or opened; [] without checkpoints).

  Example: a run checkpointed at steps 10 and 20 -> [10, 20].
  """
  if store.is_url(workdir):
    return _uploaded_steps(os.path.join(workdir, 'checkpoints'))
  try:
    names = os.listdir(os.path.join(workdir, 'checkpoints'))
  except OSError:
    return []
  # Orbax writes a step under a temporary name and renames it to the bare number when done.
  return sorted(int(n) for n in names if n.isdigit())
