"""What a model knows of position (Haviv et al. 2022): a probe per layer on frozen states.

The probe is a 2-layer ReLU MLP (hidden 256) trained with Adam to classify each token's
absolute position from the layer's output, with the states held fixed (stop-gradient). It
is judged by the mean absolute distance between the predicted and the true position on
held-out inputs, against the baseline of guessing uniformly at random: for N positions
E|X - Y| = (N² - 1) / (3N).

    >>> hidden = [h0, h1, ...]  # per batch, per layer [B, T, D] (analysis rows)  # doctest: +SKIP
    >>> probe_layer(train_states, train_lengths,  # doctest: +SKIP
    ...             test_states, test_lengths, num_classes=T)
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


def random_baseline(n: int) -> float:
  """Mean |X - Y| of two independent uniform positions in 0..n-1: (n² - 1) / (3n).

  Example: n = 2 -> 0.5.
  """
  return (n * n - 1) / (3.0 * n)


class Probe(nn.Module):
  """[..., D] -> [..., num_classes] logits: Dense 256, ReLU, Dense."""

  num_classes: int
  hidden: int = 256

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = nn.relu(nn.Dense(self.hidden)(jax.lax.stop_gradient(x)))
    return nn.Dense(self.num_classes)(x)


def _flat(states: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The real tokens of [B, T, D] states: ([N, D], their positions [N])."""
  real = np.arange(states.shape[1])[None, :] < np.asarray(lengths)[:, None]
  pos = np.broadcast_to(np.arange(states.shape[1])[None, :], real.shape)
  return np.asarray(states, np.float32)[real], pos[real]


def probe_layer(
  train_states: np.ndarray,
  train_lengths: np.ndarray,
  test_states: np.ndarray,
  test_lengths: np.ndarray,
  num_classes: int,
  *,
  steps: int = 500,
  batch: int = 256,
  learning_rate: float = 1e-3,
  seed: int = 0,
) -> dict[str, Any]:
  """Trains a probe on one layer's states and tests it on others.

  Args:
    train_states, test_states: [B, T, D] layer outputs; *_lengths: [B] real tokens.
    num_classes: positions the probe can name (>= the longest test length).

  Returns {'mean_abs_distance', 'baseline' (at the test lengths' positions), 'by_position'
  [T_test] (mean error per position), 'train_accuracy'}.
  """
  x, y = _flat(train_states, train_lengths)
  xt, yt = _flat(test_states, test_lengths)
  probe = Probe(num_classes)
  key, init_key = jax.random.split(jax.random.key(seed))
  params = probe.init(init_key, x[:1])
  tx = optax.adam(learning_rate)
  opt = tx.init(params)

  @jax.jit
  def step(params, opt, key):
    idx = jax.random.randint(key, (batch,), 0, x.shape[0])

    def loss_fn(p):
      logits = probe.apply(p, jnp.asarray(x)[idx])
      return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(y)[idx]).mean()

    grads = jax.grad(loss_fn)(params)
    updates, opt = tx.update(grads, opt)
    return optax.apply_updates(params, updates), opt

  for k in jax.random.split(key, steps):
    params, opt = step(params, opt, k)
  predict = jax.jit(lambda p, v: jnp.argmax(probe.apply(p, v), -1))
  pred = np.asarray(predict(params, jnp.asarray(xt)))
  err = np.abs(pred - yt).astype(np.float64)
  longest = int(np.max(test_lengths))
  by_position = [float(err[yt == t].mean()) if (yt == t).any() else None for t in range(longest)]
  train_acc = float(np.mean(np.asarray(predict(params, jnp.asarray(x))) == y))
  return {
    'mean_abs_distance': float(err.mean()),
    'baseline': random_baseline(longest),
    'by_position': by_position,
    'train_accuracy': train_acc,
  }


def probe_layers(
  train_rows: Sequence[dict[str, Any]], test_rows: Sequence[dict[str, Any]], **kwargs: Any
) -> list[dict[str, Any]]:
  """`probe_layer` for every layer, on analysis rows (`posenc.analysis.attention_rows`)
  concatenated over batches."""

  def stack(rows, layer):
    return (
      np.concatenate([r['hidden'][layer] for r in rows]),
      np.concatenate([r['lengths'] for r in rows]),
    )

  classes = max(int(np.max(r['lengths'])) for r in [*train_rows, *test_rows])
  return [
    probe_layer(*stack(train_rows, layer), *stack(test_rows, layer), classes, **kwargs)
    for layer in range(len(train_rows[0]['hidden']))
  ]
