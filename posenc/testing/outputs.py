"""The conformance check's first pass: the encoding's own outputs at the smallest size, against
what its kind declares, in a few seconds and before anything is compiled.

Each part of the encoding is built (its module initialized, no model around it) and called
on 3 sequences of 9 positions, 2 heads of width 4 (the model width 8), over the whole
sequence and for the last 4 queries against every key as a decoding step calls it (the
module applied to their inputs, their positions one set per sequence), in each form the
encoding runs in (the causal one as a decoder runs it, each sequence with its own length,
so a randomized encoding draws per sequence): one small compiled program per form. Each
output must have

- the shape its kind declares (`posenc.encodings.define`; for an encoding the helpers made,
  what its own function returned, before the helper reshapes or casts it):

    bias       [H, Q, S], [Q, S] or [B, H, Q, S]        rotation   [B, T, H, K'], K' >= K
    weights    [B, H, Q, S] (the scores too)            embedding  [T, width] or [B, T, width]

- a dtype that works: a rotation's, scores' and weights' the queries' dtype (float32), a
  bias's or an embedding's a real number (the helpers cast them to float32);
- finite values: a NaN anywhere, or an infinity anywhere but a bias's -inf (a mask), fails.

A failure is one line in the encoding's terms: 'rotation returned 3 channels for head_dim 4,
expected at least 4', 'bias is NaN at head 0, query 3, key 1 (and 17 more)', 'rotation
returned float16 for float32 queries, expected float32'; an exception inside the encoding is
named with the line of the encoding's own code it came from, not jax's.

Example:
  >>> check_outputs('alibi').line()
  'outputs      pass  bias: declared shapes and dtypes, finite values (bidirectional and causal; 9 positions, 2 heads of width 4)'
"""

from __future__ import annotations

import functools
import os
import traceback
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from posenc import encodings
from posenc.attention import reference
from posenc.encodings import core
from posenc.encodings import define
from posenc.testing import compare
from posenc.testing.compare import Check, Violation

# 3 sequences, not 2: a batch axis the size of the heads' would hide a misplaced one.
B, T, H, K = 3, 9, 2, 4
LENGTH = 7  # real positions of the batch
QUERIES = 4  # the last queries, against every key
NOISE = {'noise': jax.random.key(7)}
AXES = {
  'bias': {
    2: ('query', 'key'),
    3: ('head', 'query', 'key'),
    4: ('sequence', 'head', 'query', 'key'),
  },
  'scores': {4: ('sequence', 'head', 'query', 'key')},
  'weights': {4: ('sequence', 'head', 'query', 'key')},
  'rotation': {4: ('sequence', 'position', 'head', 'channel')},
  'embedding': {2: ('position', 'channel'), 3: ('sequence', 'position', 'channel')},
}
# Where jax, flax and posenc's own code live: an exception is placed at the last frame outside.
_LIBRARIES = tuple(os.path.dirname(m.__file__) + os.sep for m in (jax, np, __import__('flax'))) + (
  os.path.dirname(os.path.dirname(__file__)) + os.sep,
)


def _forms(spec: encodings.Encoding) -> tuple[bool, ...]:
  return (True,) if spec.causal_only else (False, True)


def _raised(what: str, e: Exception) -> Violation:
  """One line for an exception the encoding raised: its type, its message's first line and
  the frame of the encoding's own code it came from (else the last one)."""
  frames = traceback.extract_tb(e.__traceback__)
  own = [f for f in frames if not f.filename.startswith(_LIBRARIES)] or frames[-1:]
  where = ''
  if own:
    frame = own[-1]
    path = frame.filename
    path = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
    where = f' (at {path}:{frame.lineno}: {(frame.line or "").strip()})'
  message = ' '.join(str(e).split()) or '(no message)'
  return Violation(f'{what} raised {type(e).__name__}: {message[:200]}{where}')


def _call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
  try:
    return fn(*args, **kwargs)
  except Violation:
    raise
  except Exception as e:  # pylint: disable=broad-except  (the encoding's, named in one line)
    raise _raised(what, e) from None


def _finite(what: str, x: Any, axes: tuple[str, ...], masks: bool = False) -> None:
  """Violation naming the first entry of `x` that is NaN or infinite (-inf allowed where
  `masks`: a bias's mask), by the axes' names, with how many more there are."""
  x = np.asarray(x, np.float64)
  bad = np.isnan(x) | (np.isposinf(x) if masks else np.isinf(x))
  count = int(bad.sum())
  if not count:
    return
  where = tuple(int(i) for i in np.argwhere(bad)[0])
  value = {True: 'NaN', False: 'infinite'}[bool(np.isnan(x[where]))]
  value = value if value == 'NaN' else ('+inf' if x[where] > 0 else '-inf')
  at = ', '.join(f'{axis} {i}' for axis, i in zip(axes, where))
  more = f' (and {count - 1} more)' if count > 1 else ''
  verb = 'are' if what.split(' ')[0] in ('scores', 'weights') else 'is'
  raise Violation(f'{what} {verb} {value} at {at}{more}')


def _real(what: str, x: Any) -> None:
  dtype = jnp.asarray(x).dtype
  if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
    raise Violation(f'{what} returned {dtype}, expected a real number dtype (float32)')


def _same_dtype(what: str, x: Any, like: Any, of: str) -> None:
  dtype, want = jnp.asarray(x).dtype, jnp.asarray(like).dtype
  if dtype != want:
    raise Violation(f'{what} returned {dtype} for {want} {of}, expected {want}')


class _Recorder:
  """The outputs of an encoding's own functions (the helpers' `fn`, `keys_fn`), as each
  last returned them: wraps them into a copy of the encoding's module factory."""

  def __init__(self):
    self.out: dict[str, Any] = {}
    # Whether the function's last call got positions (or distances) one set per sequence.
    self.per_sequence: dict[str, bool] = {}

  def wrap(self, factory: Any) -> Any:
    if not isinstance(factory, define.Maker):
      return factory
    fields = dict(factory.fields)
    wrapped = {}
    for field in ('fn', 'keys_fn'):
      if fields.get(field) is not None:
        wrapped[field] = self._recording(field, fields[field])
    return factory.with_fields(**wrapped)

  def _recording(self, field: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    # functools.wraps: the helpers bind keywords by the function's own signature.
    @functools.wraps(fn)
    def recorded(*args, **kwargs):
      out = fn(*args, **kwargs)
      self.out[field] = out
      # A bias's positions are its last two arguments; a draw of distances is a keyword.
      drawn = [kwargs.get(d) for d in ('distances', 'left_distances')] + list(args[-2:])
      self.per_sequence[field] = any(jnp.ndim(a) == 2 for a in drawn if a is not None)
      return out

    return recorded

  def take(self, field: str = 'fn') -> Any:
    return self.out.pop(field, None)

  def took_per_sequence(self, field: str = 'fn') -> bool:
    return self.per_sequence.pop(field, False)


def _inputs():
  keys = jax.random.split(jax.random.key(0), 4)
  q, k = (jax.random.normal(kk, (B, T, H, K)) for kk in keys[:2])
  x = jax.random.normal(keys[2], (B, T, H * K))
  return q, k, x


def _bias(out, nq, ns, label, per_sequence):
  raw, b = out['raw'], out['bias']
  if raw is not None:
    shape = tuple(raw.shape)
    # Positions one set per sequence ([B, Q]): a bias shared by the heads is [B, Q, S].
    shared = (B, nq, ns) if per_sequence else (nq, ns)
    if shape not in ((H, nq, ns), shared, (B, H, nq, ns)):
      raise Violation(
        f'bias{label} returned shape {shape} for {H} heads, {nq} queries and {ns} keys, '
        f'expected [H, Q, S] = ({H}, {nq}, {ns}), [Q, S] or [B, H, Q, S] with B = {B}'
      )
    _real(f'bias{label}', raw)
    axes = ('sequence', 'query', 'key') if shape == shared and per_sequence else None
    _finite(f'bias{label}', raw, axes or AXES['bias'][len(shape)], masks=True)
  shape = tuple(b.shape)
  if len(shape) != 4 or shape[0] not in (1, B) or shape[1] not in (1, H) or shape[2:] != (nq, ns):
    raise Violation(
      f'bias{label} gave shape {shape} for {H} heads, {nq} queries and {ns} keys, expected '
      f'[B or 1, H or 1, Q, S] = ({B} or 1, {H} or 1, {nq}, {ns})'
    )
  _real(f'bias{label}', b)
  _finite(f'bias{label}', b, AXES['bias'][4], masks=True)


def _rotation(out, inputs, label):
  widths = {}
  for which in ('queries', 'keys'):
    x, got = inputs[which], out[which]
    shape = tuple(got.shape)
    if len(shape) != 4 or shape[:3] != x.shape[:3]:
      raise Violation(
        f'rotation{label} returned shape {shape} for {which} of shape {tuple(x.shape)} '
        f"[B, T, H, K], expected [B, T, H, K'] = {tuple(x.shape[:3])} + (K' >= {K},)"
      )
    if shape[3] < K:
      raise Violation(
        f'rotation{label} returned {shape[3]} channels for head_dim {K}, expected at least '
        f'{K} (the {which})'
      )
    widths[which] = shape[3]
    _same_dtype(f'rotation{label}', got, x, which)
    _finite(f'rotation{label} of the {which}', got, AXES['rotation'][4])
  if widths['queries'] != widths['keys']:
    raise Violation(
      f'rotation{label} returned {widths["queries"]} channels for the queries and '
      f'{widths["keys"]} for the keys, expected the same'
    )


def _geometric(out, q, nq, ns, label):
  want = (B, H, nq, ns)
  for what in ('scores', 'weights'):
    got = out[what]
    shape = tuple(got.shape)
    if shape != want:
      raise Violation(
        f'{what}{label} returned shape {shape} for {H} heads, {nq} queries and {ns} keys, '
        f'expected [B, H, Q, S] = {want}'
      )
    _same_dtype(f'{what}{label}', got, q, 'queries')
    _finite(f'{what}{label}', got, AXES[what][4])


def _attention(spec, options, causal: bool) -> None:
  """Both calls of one form, compiled as one program: the whole sequence, and the last
  QUERIES queries as a decoding step makes them (the module applied to their inputs, their
  positions one set per sequence, the keys' state of every key)."""
  recorder = _Recorder()
  q, k, x = _inputs()
  form = 'causal' if causal else 'bidirectional'
  factory = recorder.wrap(spec.attention)
  module = _call(
    f'the attention module ({form})',
    factory,
    max_position=64,
    num_heads=H,
    head_dim=K,
    causal=causal,
    **options,
  )
  whole = jnp.arange(T)
  last = jnp.broadcast_to(jnp.arange(T - QUERIES, T), (B, QUERIES))
  calls = (
    (whole, q, x, f' ({form})'),
    (last, q[:, -QUERIES:], x[:, -QUERIES:], f' of the last {QUERIES} queries ({form})'),
  )

  # A decoder (the causal form) gives each sequence its length, and a randomized encoding
  # draws one set of positions per sequence; an encoder one length for the batch.
  length = jnp.full((B,), LENGTH) if causal else jnp.int32(LENGTH)
  per_sequence: list[bool] = []  # per bias call, noted while the program is traced

  def run(q, k, x):
    rngs = {'params': jax.random.key(4), **NOISE}
    variables = _call(f'initializing the encoding ({form})', module.init, rngs, T, length, x)
    full = None
    outs = []
    per_sequence.clear()
    for qi, queries, inputs, label in calls:
      enc = _call(f'the encoding{label}', module.apply, variables, T, length, inputs, rngs=NOISE)
      full = enc if full is None else full
      if enc.key_state:
        enc = _call(f'the encoding{label} bound to its keys', enc.with_keys, full.key_state)
      recorder.out.clear()
      if enc.kind == core.BIAS:
        b = _call(f'bias{label}', enc.bias, queries, k, qi, whole)
        outs.append({'bias': b, 'raw': recorder.take()})
        per_sequence.append(recorder.took_per_sequence())
      elif enc.kind == core.ROTATION:
        rq, rk = _call(f'rotation{label}', enc.rotated, queries, k, qi, whole)
        outs.append({'queries': rq, 'keys': rk})
      elif enc.kind == core.GEOMETRIC:
        s = _call(f'scores{label}', enc.scores, queries, k, qi, whole)
        visible = reference.visible(qi, whole, jnp.arange(T) < LENGTH, causal)
        w = _call(f'weights{label}', enc.weights, s, qi, whole, visible)
        outs.append({'scores': s, 'weights': w})
      else:
        outs.append({})
    return outs

  outs = jax.jit(run)(q, k, x)
  for i, ((_, queries, _, label), out) in enumerate(zip(calls, outs)):
    nq = queries.shape[1]
    if 'bias' in out:
      _bias(out, nq, T, label, bool(per_sequence[i]) if i < len(per_sequence) else False)
    elif 'queries' in out:
      _rotation(out, {'queries': queries, 'keys': k}, label)
    elif 'scores' in out:
      _geometric(out, queries, nq, T, label)


def _embedding(spec, options) -> None:
  recorder = _Recorder()
  width = H * K
  factory = recorder.wrap(spec.embedding)
  module = _call('the embedding module', factory, width=width, max_position=64, **options)
  tokens = jax.random.randint(jax.random.key(3), (B, T), 0, 12)

  def run(tokens):
    rngs = {'params': jax.random.key(4), **NOISE}
    length = jnp.int32(LENGTH)
    variables = _call('initializing the embedding', module.init, rngs, T, length, tokens)
    out = _call('the embedding', module.apply, variables, T, length, tokens, rngs=NOISE)
    return out, recorder.take()

  out, raw = jax.jit(run)(tokens)
  for got in (out,) if raw is None else (raw, out):
    shape = tuple(got.shape)
    if shape not in ((T, width), (B, T, width)):
      raise Violation(
        f'embedding returned shape {shape} for {T} positions of width {width}, expected '
        f'[T, width] = ({T}, {width}) or [B, T, width] with B = {B}'
      )
    _real('embedding', got)
    _finite('embedding', got, AXES['embedding'][len(shape)])


@compare.invariant
def check_outputs(name: str) -> Check:
  """The first pass: every part of encoding `name` at the smallest size, its outputs' shapes,
  dtypes and values against its kind's declaration (the module docstring)."""
  spec = encodings.get(name)
  attention_options, embedding_options = encodings.resolve_options(name)
  parts = []
  if spec.embedding is not None:
    _embedding(spec, embedding_options)
    parts.append('embedding')
  if spec.attention is not None:
    for causal in _forms(spec):
      _attention(spec, attention_options, causal)
    kind = {core.GEOMETRIC: 'scores and weights'}.get(spec.kind, spec.kind)
    parts.append(kind)
  forms = ' and '.join('causal' if c else 'bidirectional' for c in _forms(spec))
  if not parts:
    return Check('outputs', True, 'n/a: no positional encoding (content only)')
  return Check(
    'outputs',
    True,
    f'{" and ".join(parts)}: declared shapes and dtypes, finite values ({forms}; {T} '
    f'positions, {H} heads of width {K})',
  )
