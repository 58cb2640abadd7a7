"""Encodings from one pure function: the helpers that make the built-ins and outside ones.

An encoding is an `Encoding` record, the one the registry holds. The helpers build it from a
single pure function of positions and own the rest: the Linen module that creates the
function's parameters, its positions (0..T-1, or a sorted random draw for the randomized
twin), the lookups of a decoding step and of per-sequence draws, and its options.

  bias(fn)      fn(q_pos [Q], k_pos [S], ...) -> [H, Q, S] (or [Q, S], shared by the
                heads), added to q·k / sqrt(K)
                (`content=True`: fn(q [B, Q, H, K], k [B, S, H, K], q_pos, k_pos, ...))
  rotation(fn)  fn(x [B, T, H, K], pos [T], ...) -> [B, T, H, K'] (q and k; `keys=`
                another function for the keys)
  embedding(fn) fn(pos [T], width, ...) -> [T, width], added to the token embeddings
  weights(fn)   fn(scores [B, H, Q, S], q_pos, k_pos, visible [., ., Q, S], ...)
                -> [B, H, Q, S], the attention weights in place of softmax(scores)

Positions may also come one set per sequence ([B, Q], [B, S], [B, T]: the randomized twin of
a decoder draws per sequence); a function written with `...` axes serves both.

What a function gets by keyword:
- every parameter declared with `param(shape, init)`, its shape written with the sizes the
  model gives ('heads', 'head_dim', 'width', 'max_position') (created in the order of their
  names, so that a parameter's initial value does not depend on how the call is written);
- every value its encoding's `inputs` function makes (below);
- of the rest, those its signature names: the encoding's options (declared with
  `option(default, doc)`, set with `--config.encoding_options.NAME=VALUE`), the model's
  `causal`, the sizes and `num_positions` (T), and for `draws='distances'` the randomized
  twin's `distances` and `left_distances` (None unless randomized).
`inputs` is a function of those same names returning more keywords: values made once per
layer (ALiBi's fixed slopes, the offsets of Transformer-XL's table) or `param` declarations
whose set depends on an option (FIRE's variants).

The randomized twin (`randomized_twin`) draws from the 'noise' stream, once per layer (per
call for an embedding; per sequence in a decoder), at evaluation too: `draws='positions'`
(the default) replaces 0..T-1 by a sorted random subset of {0..max_position-1};
`draws='distances'` keeps the positions and replaces each distance d by r_d, one sorted
draw from {1..max_position-1} (and a second for keys left of the query with the option
`randomize_both_sides`); `draw_in_evaluation=False` draws in training only.

Example (a square-root ALiBi, a learned slope per head, and an option):
  >>> from posenc.encodings.declare import option, param
  >>> def sqrt_alibi(q_pos, k_pos, slopes, *, power):
  ...   dist = jnp.abs(k_pos[..., None, :] - q_pos[..., :, None]).astype(float) ** power
  ...   return -jax.nn.softplus(slopes)[:, None, None] * dist[..., None, :, :]
  >>> SQRT_ALIBI = bias(sqrt_alibi, slopes=param(('heads',), nn.initializers.ones),
  ...                   options={'power': option(0.5, 'the distance is raised to it')})
  >>> randomized_twin(SQRT_ALIBI).randomized      # its randomized twin
  True

Then `--config.encoding=my_module:SQRT_ALIBI --config.encoding_options.power=0.25` trains it,
and `python -m launch.check_encoding my_module:SQRT_ALIBI` checks it. Every helper also takes
`about=` (what the encoding is, in a sentence or two) and `papers=` (its publications,
`core.Paper`): the leaderboard's page of the encoding shows them with its options.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from posenc.encodings import core
from posenc.encodings import declare
from posenc.encodings import papers as papers_lib
from posenc.encodings import randomized as randomized_lib

Array = jax.Array
SIZES = declare.SIZES
POSITIONS, DISTANCES = 'positions', 'distances'
# What a function may name besides its options and parameters; no option takes these names.
CONTEXT = (*SIZES, 'num_positions', 'causal', 'distances', 'left_distances')
# What a randomized twin adds to its encoding's `about`.
TWIN_ABOUT = (
  'Its randomized twin (Ruoss et al. 2023) takes its positions, or its distances, from a '
  'sorted random draw of a range longer than any test sequence, so that a longer sequence '
  'meets only positions seen in training.'
)


class _Stored(nn.Module):
  """One parameter stored in a submodule ('w_r/kernel'), as a layer of that name stores it."""

  leaf: str
  initializer: Callable[..., Array]
  shape: tuple[int, ...]
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self) -> Array:
    return self.param(self.leaf, self.initializer, self.shape, self.param_dtype)


def _names(fn: Callable[..., Any], skip: int) -> tuple[str, ...]:
  """The names fn takes by keyword after its first `skip` arguments."""
  try:
    parameters = list(inspect.signature(fn).parameters.values())[skip:]
  except (TypeError, ValueError):
    return ()
  kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  return tuple(p.name for p in parameters if p.kind in kinds)


def _bind(
  module: nn.Module,
  context: dict[str, Any],
  sizes: dict[str, int],
  fns: tuple[tuple[Callable[..., Any], int], ...],
) -> tuple[dict[str, Any], ...]:
  """The keywords of each function of `fns` ((fn, positional arguments)): the parameters
  (created here), the values of `inputs` and the names of `context` it takes."""

  def create(name: str, p: declare.Param) -> Array:
    module_name, _, leaf = (p.stored_as or name).rpartition('/')
    shape = p.concrete(sizes)
    if module_name:
      return _Stored(leaf, p.init, shape, module.param_dtype, name=module_name)()
    return module.param(leaf, p.init, shape, module.param_dtype)

  made = {name: create(name, p) for name, p in module.spec}
  if module.inputs is not None:
    given = {n: context[n] for n in _names(module.inputs, 0) if n in context}
    for name, value in module.inputs(**given).items():
      made[name] = create(name, value) if isinstance(value, declare.Param) else value
  return tuple(
    {**{n: context[n] for n in _names(fn, skip) if n in context and n not in made}, **made}
    for fn, skip in fns
  )


def _positions(module: nn.Module, draw: bool, num_positions: int, length: Array) -> Array:
  """0..T-1, or one sorted random draw from the module's 'noise' stream."""
  if not draw:
    return jnp.arange(num_positions)
  return randomized_lib.random_positions(
    module.make_rng('noise'), num_positions, max_position=module.max_position, length=length
  )


def _distances(
  module: nn.Module, draw: bool, num_positions: int, length: Array
) -> dict[str, Array | None]:
  """{'distances', 'left_distances'}: None unless drawn; one draw each from 'noise'."""
  if not draw:
    return {'distances': None, 'left_distances': None}
  one = lambda: randomized_lib.random_distances(
    module.make_rng('noise'), num_positions, max_position=module.max_position, length=length
  )
  distances = one()
  both = dict(module.options).get('randomize_both_sides', False)
  return {'distances': distances, 'left_distances': one() if both else None}


def _four_axes(out: Array, per_sequence: bool) -> Array:
  """A bias function's output as [B or 1, H or 1, Q, S]: [Q, S] (shared by the heads) or,
  with positions or distances per sequence, [B, Q, S] gets a heads axis of 1; [H, Q, S] a
  batch axis of 1; [B, H, Q, S] stays."""
  if out.ndim == 2 or (out.ndim == 3 and per_sequence):
    out = out[..., None, :, :]
  return core.with_batch(out)


def _per_sequence(at: Callable[[Array], Array]) -> Callable[..., bool]:
  """Whether a call's positions (`at` of its indices) or its drawn distances come one set
  per sequence."""

  def per_sequence(q_idx: Array, k_idx: Array, context: Mapping[str, Any]) -> bool:
    drawn = [context.get('distances'), context.get('left_distances')]
    return (
      at(q_idx).ndim == 2
      or at(k_idx).ndim == 2
      or any(d is not None and d.ndim == 2 for d in drawn)
    )

  return per_sequence


class FunctionEncoding(core.EncodingModule):
  """An attention encoding from one function of positions (`bias`, `rotation`, `weights`):
  its parameters, inputs, options and draws bound into the `AttentionEncoding`, whose
  `params` are the function's keywords (the backends' specializations read them)."""

  family: str = 'outside'
  kind: str = core.BIAS
  fn: Callable[..., Any] | None = None
  keys_fn: Callable[..., Any] | None = None
  spec: tuple[tuple[str, declare.Param], ...] = ()
  inputs: Callable[..., dict[str, Any]] | None = None
  options: tuple[tuple[str, Any], ...] = ()
  draws: str = POSITIONS
  draw_in_evaluation: bool = True
  randomized: bool = False
  content: bool = False
  normalize: bool = False

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, inputs: Array, deterministic: bool = True
  ) -> core.AttentionEncoding:
    del inputs
    sizes = {
      'heads': self.num_heads,
      'head_dim': self.head_dim,
      'width': self.num_heads * self.head_dim,
      'max_position': self.max_position,
    }
    draw = self.randomized and (self.draw_in_evaluation or not deterministic)
    context = {**sizes, 'num_positions': num_positions, 'causal': self.causal}
    context.update(self.options)
    if self.draws == DISTANCES:
      # The positions are the sequence indices; the draw replaces the distances.
      context.update(_distances(self, draw, num_positions, length))
      at, drawn = (lambda idx: idx), {}
    else:
      positions = _positions(self, draw, num_positions, length)
      at, drawn = (lambda idx: randomized_lib.lookup(positions, idx, 1)), {'positions': positions}
    skip = {core.BIAS: 4 if self.content else 2, core.ROTATION: 2, core.GEOMETRIC: 4}[self.kind]
    fns = ((self.fn, skip),) + (((self.keys_fn, 2),) if self.keys_fn is not None else ())
    bound = _bind(self, context, sizes, fns)
    fn = functools.partial(self.fn, **bound[0])
    params = {**drawn, **bound[0]}
    if self.kind == core.BIAS:
      per_sequence = _per_sequence(at)
      if self.content:
        bias = lambda q, k, qi, ki: fn(q, k, at(qi), at(ki))
      else:
        bias = lambda q, k, qi, ki: fn(at(qi), at(ki))
      return core.AttentionEncoding(
        self.family,
        core.BIAS,
        bias=lambda q, k, qi, ki: _four_axes(
          bias(q, k, qi, ki), per_sequence(qi, ki, context)
        ).astype(jnp.float32),
        params=params,
      )
    if self.kind == core.ROTATION:
      keys = None if self.keys_fn is None else functools.partial(self.keys_fn, **bound[1])
      return core.AttentionEncoding(
        self.family,
        core.ROTATION,
        rotate=lambda x, idx: fn(x, at(idx)),
        rotate_keys=None if keys is None else (lambda x, idx: keys(x, at(idx))),
        params=params,
      )
    return core.AttentionEncoding(
      self.family,
      core.GEOMETRIC,
      scores=lambda q, k, qi, ki: (
        jnp.einsum('bqhk,bshk->bhqs', q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
      ),
      weights=lambda s, qi, ki, visible: fn(s, at(qi), at(ki), visible),
      normalize=self.normalize,
      params=params,
    )


class FunctionEmbedding(nn.Module):
  """An input encoding from one function of positions (`embedding`): [T, D] ([B, T, D] for
  draws per sequence)."""

  width: int
  max_position: int = 2048
  fn: Callable[..., Any] | None = None
  spec: tuple[tuple[str, declare.Param], ...] = ()
  inputs: Callable[..., dict[str, Any]] | None = None
  options: tuple[tuple[str, Any], ...] = ()
  draw_in_evaluation: bool = True
  randomized: bool = False
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(
    self, num_positions: int, length: Array, tokens: Array | None = None, deterministic: bool = True
  ) -> Array:
    del tokens
    sizes = {'width': self.width, 'max_position': self.max_position}
    draw = self.randomized and (self.draw_in_evaluation or not deterministic)
    positions = _positions(self, draw, num_positions, length)
    context = {**sizes, 'num_positions': num_positions, **dict(self.options)}
    (bound,) = _bind(self, context, sizes, ((self.fn, 2),))
    return jnp.asarray(self.fn(positions, self.width, **bound), jnp.float32)


@dataclasses.dataclass(frozen=True)
class Maker:
  """The module factory of an encoding the helpers made: the model calls it with the sizes
  and the encoding's options as keywords; it makes the module with the options in one field,
  each option it is not given at its declared default."""

  module: type[nn.Module]
  fields: tuple[tuple[str, Any], ...]
  defaults: tuple[tuple[str, Any], ...]

  def __call__(self, **kwargs: Any) -> nn.Module:
    own = set(self.module.__dataclass_fields__) | {'name', 'parent'}
    options = dict(self.defaults)
    unknown = sorted(k for k in kwargs if k not in own and k not in options)
    if unknown:
      what = dict(self.fields).get('family', 'embedding')
      raise TypeError(f'encoding {what!r} takes no option {unknown[0]!r}')
    options.update((k, v) for k, v in kwargs.items() if k not in own)
    sizes = {k: v for k, v in kwargs.items() if k in own}
    return self.module(**dict(self.fields), **sizes, options=tuple(options.items()))

  def with_fields(self, **fields: Any) -> 'Maker':
    return dataclasses.replace(self, fields=tuple({**dict(self.fields), **fields}.items()))


def _spec(params: dict[str, declare.Param]) -> tuple[tuple[str, declare.Param], ...]:
  for name, p in params.items():
    if not isinstance(p, declare.Param):
      raise ValueError(
        f'parameter {name!r} is {p!r}; declare it with posenc.encodings.param(shape, init)'
      )
  return tuple(sorted(params.items()))


def _options(options: Mapping[str, core.Option] | None, params: dict[str, declare.Param]) -> tuple:
  options = dict(options or {})
  for name, declared in options.items():
    if not isinstance(declared, core.Option):
      raise ValueError(
        f'option {name!r} is {declared!r}; declare it with posenc.encodings.option(default, doc)'
      )
    reserved = {
      *CONTEXT,
      *params,
      *FunctionEncoding.__dataclass_fields__,
      *FunctionEmbedding.__dataclass_fields__,
    }
    if name in reserved or not name.isidentifier():
      raise ValueError(f'option name {name!r} is taken (by a size, a parameter or the module)')
  return tuple(options.items())


def _function(fn: Any, what: str) -> Callable[..., Any]:
  if not callable(fn):
    raise ValueError(f'{what} must be a function, got {type(fn).__name__} {fn!r}')
  return fn


def _record(
  kind: str,
  module: type[nn.Module],
  fields: dict[str, Any],
  options: Mapping[str, core.Option] | None,
  params: dict[str, declare.Param],
  **facts: Any,
) -> core.Encoding:
  declared = _options(options, params)
  maker = Maker(
    module,
    tuple({**fields, 'spec': _spec(params)}.items()),
    tuple((name, o.default) for name, o in declared),
  )
  part = {'embedding': maker} if kind == core.EMBEDDING else {'attention': maker}
  return core.Encoding(kind, **part, options=declared, **facts)


def bias(
  fn: Callable[..., Array],
  *,
  content: bool = False,
  draws: str = POSITIONS,
  draw_in_evaluation: bool = True,
  inputs: Callable[..., dict[str, Any]] | None = None,
  options: Mapping[str, core.Option] | None = None,
  causal_only: bool = False,
  name: str | None = None,
  about: str = '',
  papers: Sequence[core.Paper] = (),
  **params: declare.Param,
) -> core.Encoding:
  """An additive logits bias: fn(q_pos [Q], k_pos [S], ...) -> [H, Q, S] (or [Q, S]
  shared by the heads, or [B, H, Q, S]); with `content`, fn(q, k, q_pos, k_pos, ...) reads
  the queries and keys too. `draws`, `draw_in_evaluation`: how its randomized twin draws;
  `causal_only` for a bias that is causal by definition (only the decoder may use it);
  `name` the family the backends see (default fn's name)."""
  fn = _function(fn, 'a bias')
  if draws not in (POSITIONS, DISTANCES):
    raise ValueError(f'draws={draws!r} must be {POSITIONS!r} or {DISTANCES!r}')
  fields = dict(
    family=name or fn.__name__,
    kind=core.BIAS,
    fn=fn,
    inputs=inputs,
    draws=draws,
    draw_in_evaluation=draw_in_evaluation,
    content=content,
  )
  return _record(
    core.BIAS,
    FunctionEncoding,
    fields,
    options,
    params,
    causal_only=causal_only,
    about=about,
    papers=papers,
  )


def rotation(
  fn: Callable[..., Array],
  *,
  keys: Callable[..., Array] | None = None,
  even_head_dim: bool = True,
  inputs: Callable[..., dict[str, Any]] | None = None,
  options: Mapping[str, core.Option] | None = None,
  name: str | None = None,
  about: str = '',
  papers: Sequence[core.Paper] = (),
  **params: declare.Param,
) -> core.Encoding:
  """A rotation of q and k: fn(x [B, T, H, K], positions [T], ...) -> [B, T, H, K']
  (K' >= K; the keys through `keys` when they differ, e.g. xPos's inverse scale)."""
  fn = _function(fn, 'a rotation')
  keys = None if keys is None else _function(keys, 'keys')
  fields = dict(family=name or fn.__name__, kind=core.ROTATION, fn=fn, keys_fn=keys, inputs=inputs)
  return _record(
    core.ROTATION,
    FunctionEncoding,
    fields,
    options,
    params,
    even_head_dim=even_head_dim,
    about=about,
    papers=papers,
  )


def weights(
  fn: Callable[..., Array],
  *,
  normalize: bool = False,
  inputs: Callable[..., dict[str, Any]] | None = None,
  options: Mapping[str, core.Option] | None = None,
  causal_only: bool = False,
  name: str | None = None,
  about: str = '',
  papers: Sequence[core.Paper] = (),
  **params: declare.Param,
) -> core.Encoding:
  """A replacement of the softmax: fn(scores [B, H, Q, S], q_pos, k_pos, visible, ...)
  -> weights [B, H, Q, S] (0 where not visible); `normalize` divides them by their row sums."""
  fn = _function(fn, 'a weights function')
  fields = dict(
    family=name or fn.__name__, kind=core.GEOMETRIC, fn=fn, inputs=inputs, normalize=normalize
  )
  return _record(
    core.GEOMETRIC,
    FunctionEncoding,
    fields,
    options,
    params,
    causal_only=causal_only,
    about=about,
    papers=papers,
  )


def embedding(
  fn: Callable[..., Array],
  *,
  learned_table: bool = False,
  draw_in_evaluation: bool = True,
  inputs: Callable[..., dict[str, Any]] | None = None,
  options: Mapping[str, core.Option] | None = None,
  about: str = '',
  papers: Sequence[core.Paper] = (),
  **params: declare.Param,
) -> core.Encoding:
  """An input encoding: fn(positions [T], width, ...) -> [T, width]; `learned_table` when
  its positions index a table of max_position rows."""
  fn = _function(fn, 'an embedding')
  fields = dict(fn=fn, inputs=inputs, draw_in_evaluation=draw_in_evaluation)
  return _record(
    core.EMBEDDING,
    FunctionEmbedding,
    fields,
    options,
    params,
    learned_table=learned_table,
    about=about,
    papers=papers,
  )


def randomized_twin(encoding: core.Encoding) -> core.Encoding:
  """The randomized twin of an encoding the helpers made: its positions (or distances) are
  a sorted random draw (as Ruoss et al.), and it takes its twin-only options.

  Raises:
    ValueError: the encoding was not made by the helpers (its module draws no positions).
  """
  factory = encoding.attention if encoding.embedding is None else encoding.embedding
  if not isinstance(factory, Maker):
    cls = getattr(factory, 'func', factory)
    raise ValueError(
      'this encoding has no randomized twin: its module '
      f'{getattr(cls, "__name__", cls)!r} draws no positions'
    )
  twin = factory.with_fields(randomized=True)
  options = tuple((n, dataclasses.replace(o, twin=False)) for n, o in encoding.options)
  part = {'attention': twin} if encoding.embedding is None else {'embedding': twin}
  return dataclasses.replace(
    encoding,
    **part,
    options=options,
    randomized=True,
    about=f'{encoding.about} {TWIN_ABOUT}'.strip(),
    papers=(*encoding.papers, papers_lib.RUOSS2023),
  )
