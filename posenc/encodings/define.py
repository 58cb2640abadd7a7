"""Encodings from one pure function: the public helpers of each kind.

An encoding outside posenc is an `Encoding` record, the same the registry holds. The helpers
here build one from a single pure function of positions, and own the rest: the Linen module
that creates the function's parameters, the positions (0..T-1, or a sorted random draw for
the randomized twin), the lookups of a decoding step and of per-sequence draws.

  bias(fn)      fn(q_pos [Q], k_pos [S], **params) -> [H, Q, S], added to q·k / sqrt(K)
  rotation(fn)  fn(x [B, T, H, K], pos [T], **params) -> [B, T, H, K'] (q and k; `keys=`
                another function for the keys)
  embedding(fn) fn(pos [T], width, **params) -> [T, width], added to the token embeddings
  weights(fn)   fn(scores [B, H, Q, S], q_pos [Q], k_pos [S], visible [., ., Q, S], **params)
                -> [B, H, Q, S], the attention weights in place of softmax(scores)

Positions may also come one set per sequence ([B, Q], [B, S], [B, T]: the randomized twin of
a decoder draws per sequence); a function written with `...` axes serves both. A bias
function that takes a `causal` keyword gets the model's (its form may follow the mask, as
ALiBi's does). Parameters are declared with `param(shape, init)`, their shape written with
the sizes the model gives ('heads', 'head_dim', 'width'), and reach the function by name.

Example (a square-root ALiBi, a learned slope per head):
  >>> def sqrt_alibi(q_pos, k_pos, slopes):
  ...   dist = jnp.sqrt(jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(float))
  ...   return -jax.nn.softplus(slopes)[:, None, None] * dist[..., None, :, :]
  >>> SQRT_ALIBI = bias(sqrt_alibi, slopes=param(('heads',), nn.initializers.ones))
  >>> randomized_twin(SQRT_ALIBI).randomized      # its randomized twin
  True
Then `--config.encoding=my_module:SQRT_ALIBI` trains it, and
`python -m launch.check_encoding my_module:SQRT_ALIBI` checks it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import embeddings
from posenc.encodings import randomized as randomized_lib

Array = jax.Array
SIZES = ('heads', 'head_dim', 'width')


@dataclasses.dataclass(frozen=True)
class Param:
  """A parameter of an encoding function: its shape (ints, or 'heads', 'head_dim', 'width'
  for the sizes the model gives) and its initializer (a `jax.nn.initializers` function)."""

  shape: tuple[int | str, ...]
  init: Callable[..., Array] = nn.initializers.zeros

  def concrete(self, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[s] if isinstance(s, str) else int(s) for s in self.shape)


def param(
  shape: tuple[int | str, ...] | int | str, init: Callable[..., Array] = nn.initializers.zeros
) -> Param:
  """A parameter declaration. Example: param(('heads',), nn.initializers.ones)."""
  shape = shape if isinstance(shape, tuple) else (shape,)
  bad = [
    s
    for s in shape
    if not (isinstance(s, str) and s in SIZES)
    and not (isinstance(s, int) and not isinstance(s, bool) and s >= 1)
  ]
  if bad:
    raise ValueError(
      f'parameter shape {shape!r}: {bad[0]!r} is not a positive int or one of {", ".join(SIZES)}'
    )
  if not callable(init):
    raise ValueError(f'parameter init {init!r} is not an initializer (key, shape, dtype) -> array')
  return Param(shape, init)


def _params(
  module: nn.Module, spec: tuple[tuple[str, Param], ...], sizes: dict[str, int]
) -> dict[str, Array]:
  return {
    name: module.param(name, p.init, p.concrete(sizes), module.param_dtype) for name, p in spec
  }


def _takes_causal(fn: Callable[..., Any]) -> bool:
  try:
    return 'causal' in inspect.signature(fn).parameters
  except (TypeError, ValueError):
    return False


class FunctionEncoding(core.EncodingModule):
  """An attention encoding from one function of positions (`bias`, `rotation`, `weights`)."""

  family: str = 'outside'
  kind: str = core.BIAS
  fn: Callable[..., Any] | None = None
  keys_fn: Callable[..., Any] | None = None
  spec: tuple[tuple[str, Param], ...] = ()
  randomized: bool = False
  normalize: bool = False

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del inputs, deterministic
    params = _params(
      self,
      self.spec,
      {'heads': self.num_heads, 'head_dim': self.head_dim, 'width': self.num_heads * self.head_dim},
    )
    positions = embeddings.positions_of(self, num_positions, length)
    at = lambda idx: randomized_lib.lookup(positions, idx, 1)
    extra = {'causal': self.causal} if _takes_causal(self.fn) else {}
    fn = functools.partial(self.fn, **params, **extra)
    if self.kind == core.BIAS:
      return core.AttentionEncoding(
        self.family,
        core.BIAS,
        bias=lambda q, k, qi, ki: core.with_batch(fn(at(qi), at(ki))).astype(jnp.float32),
        params={'positions': positions, **params},
      )
    if self.kind == core.ROTATION:
      keys = None if self.keys_fn is None else functools.partial(self.keys_fn, **params)
      return core.AttentionEncoding(
        self.family,
        core.ROTATION,
        rotate=lambda x, idx: fn(x, at(idx)),
        rotate_keys=None if keys is None else (lambda x, idx: keys(x, at(idx))),
        params={'positions': positions, **params},
      )
    return core.AttentionEncoding(
      self.family,
      core.GEOMETRIC,
      scores=lambda q, k, qi, ki: (
        jnp.einsum('bqhk,bshk->bhqs', q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
      ),
      weights=lambda s, qi, ki, visible: fn(s, at(qi), at(ki), visible),
      normalize=self.normalize,
      params={'positions': positions, **params},
    )


class FunctionEmbedding(nn.Module):
  """An input encoding from one function of positions (`embedding`): [T, D] ([B, T, D] for
  draws per sequence)."""

  width: int
  max_position: int = 2048
  fn: Callable[..., Any] | None = None
  spec: tuple[tuple[str, Param], ...] = ()
  randomized: bool = False
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, tokens: Array | None = None, deterministic: bool = True
  ) -> Array:
    del tokens, deterministic
    params = _params(self, self.spec, {'width': self.width})
    out = self.fn(embeddings.positions_of(self, num_positions, length), self.width, **params)
    return jnp.asarray(out, jnp.float32)


def _spec(params: dict[str, Param]) -> tuple[tuple[str, Param], ...]:
  for name, p in params.items():
    if not isinstance(p, Param):
      raise ValueError(
        f'parameter {name!r} is {p!r}; declare it with posenc.encodings.param(shape, init)'
      )
  return tuple(sorted(params.items()))


def _function(fn: Any, what: str) -> Callable[..., Any]:
  if not callable(fn):
    raise ValueError(f'{what} must be a function, got {type(fn).__name__} {fn!r}')
  return fn


def bias(
  fn: Callable[..., Array], *, causal_only: bool = False, name: str | None = None, **params: Param
) -> core.Encoding:
  """An additive logits bias: fn(q_pos [Q], k_pos [S], **params) -> [H, Q, S] (or [Q, S]
  shared by the heads, or [B, H, Q, S]). `causal_only` for a bias that is causal by
  definition (only the decoder may use it)."""
  fn = _function(fn, 'a bias')
  return core.Encoding(
    core.BIAS,
    attention=functools.partial(
      FunctionEncoding, family=name or fn.__name__, kind=core.BIAS, fn=fn, spec=_spec(params)
    ),
    causal_only=causal_only,
  )


def rotation(
  fn: Callable[..., Array],
  *,
  keys: Callable[..., Array] | None = None,
  even_head_dim: bool = True,
  name: str | None = None,
  **params: Param,
) -> Any:
  """A rotation of q and k: fn(x [B, T, H, K], positions [T], **params) -> [B, T, H, K']
  (K' >= K; the keys through `keys` when they differ, e.g. xPos's inverse scale)."""
  fn = _function(fn, 'a rotation')
  keys = None if keys is None else _function(keys, 'keys')
  return core.Encoding(
    core.ROTATION,
    attention=functools.partial(
      FunctionEncoding,
      family=name or fn.__name__,
      kind=core.ROTATION,
      fn=fn,
      keys_fn=keys,
      spec=_spec(params),
    ),
    even_head_dim=even_head_dim,
  )


def weights(
  fn: Callable[..., Array],
  *,
  normalize: bool = False,
  causal_only: bool = False,
  name: str | None = None,
  **params: Param,
) -> Any:
  """A replacement of the softmax: fn(scores [B, H, Q, S], q_pos, k_pos, visible, **params)
  -> weights [B, H, Q, S] (0 where not visible); `normalize` divides them by their row sums."""
  fn = _function(fn, 'a weights function')
  return core.Encoding(
    core.GEOMETRIC,
    attention=functools.partial(
      FunctionEncoding,
      family=name or fn.__name__,
      kind=core.GEOMETRIC,
      fn=fn,
      spec=_spec(params),
      normalize=normalize,
    ),
    causal_only=causal_only,
  )


def embedding(fn: Callable[..., Array], **params: Param) -> Any:
  """An input encoding: fn(positions [T], width, **params) -> [T, width]."""
  fn = _function(fn, 'an embedding')
  return core.Encoding(
    core.EMBEDDING, embedding=functools.partial(FunctionEmbedding, fn=fn, spec=_spec(params))
  )


def randomized_twin(encoding: Any) -> Any:
  """The randomized twin of an encoding whose module draws its positions (every encoding the
  helpers make, and built-ins with a `randomized` field): positions are a sorted random
  draw from {0..max_position-1} per batch (per sequence in a decoder), as Ruoss et al.

  Raises:
    ValueError: the encoding's module has no `randomized` field (it reads no positions).
  """
  factory = encoding.attention if encoding.embedding is None else encoding.embedding
  cls = getattr(factory, 'func', factory)
  if factory is None or 'randomized' not in getattr(cls, '__dataclass_fields__', {}):
    raise ValueError(
      'this encoding has no randomized twin: its module '
      f'{getattr(cls, "__name__", cls)!r} draws no positions'
    )
  twin = functools.partial(factory, randomized=True)
  if encoding.embedding is None:
    return dataclasses.replace(encoding, attention=twin, randomized=True)
  return dataclasses.replace(encoding, embedding=twin, randomized=True)
