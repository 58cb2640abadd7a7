"""The encodings made with the helpers of posenc.encodings.define, and every randomized twin
made by `randomized_twin`, against their hand-written Linen modules: the same parameters
(names, shapes, initial values) and draws give the same biases, rotations and embeddings
(tests/data/hand_written.npz, written by tests/scripts/make_hand_written.py with the
hand-written modules)."""

import functools
import importlib.util
import os

import numpy as np
import pytest

from posenc import encoding_names

SCRIPT = os.path.join(os.path.dirname(__file__), 'scripts', 'make_hand_written.py')
_spec = importlib.util.spec_from_file_location('make_hand_written', SCRIPT)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


@functools.lru_cache(maxsize=None)
def recorded():
  return dict(np.load(script.PATH))


def test_every_helper_made_encoding_and_every_twin_is_recorded():
  names = {name for name, _ in script.CASES}
  assert {encoding_names.twin(n) for n in encoding_names.TWINS} <= names
  assert 'pope' not in names  # PoPE's hand-written module had no twin; its golden test stays


# Every twin and the study's encodings (and FIRE) in the default suite; the plain bias
# families and the options' variants with -m slow.
CASES = [
  pytest.param(n, o, marks=[pytest.mark.slow] if o or n in encoding_names.FAMILIES else [])
  for n, o in script.CASES
]


@pytest.mark.parametrize('name, options', CASES)
def test_helper_made_encoding_equals_its_hand_written_module(name, options):
  got = {}
  script.record(name, options, got)
  want = {k: v for k, v in recorded().items() if k.startswith(script.tag(name, options) + '|')}
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    assert got[key].shape == value.shape and got[key].dtype == value.dtype, key
    np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
