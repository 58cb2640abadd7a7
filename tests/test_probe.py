"""The position probe: it reads position where the states carry it and guesses where not."""

import numpy as np
import pytest

from posenc.analysis import probe


def test_random_baseline_is_the_mean_distance_of_two_uniform_positions():
  for n in (1, 2, 5, 40):
    grid = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    assert probe.random_baseline(n) == pytest.approx(grid.mean())


def test_probe_learns_position_when_the_states_carry_it_and_not_otherwise():
  rng = np.random.default_rng(0)
  b, t, d = 64, 16, 32
  lengths = np.full(b, t)
  table = rng.normal(size=(t, d))
  carries = table[None] + 0.1 * rng.normal(size=(b, t, d))
  test = table[None] + 0.1 * rng.normal(size=(16, t, d))
  got = probe.probe_layer(carries, lengths, test, lengths[:16], t, steps=300)
  assert got['mean_abs_distance'] < 0.2 and got['train_accuracy'] > 0.95
  noise = probe.probe_layer(
    rng.normal(size=(b, t, d)), lengths, rng.normal(size=(16, t, d)), lengths[:16], t, steps=300
  )
  assert (
    noise['mean_abs_distance']
    > 0.8 * noise['baseline']
    == pytest.approx(0.8 * probe.random_baseline(t))
  )
  assert len(noise['by_position']) == t
