"""An encoding's record (`Encoding`) and its options (`Option`), what an attention encoding
hands to the attention function (`AttentionEncoding`), and shared initializers.

Letters: B batch, Q queries, S keys, T sequence length (static; a padded batch has T = its
maximum), H heads, K head width, D model width (= H * K), L the range of randomized
positions (`max_position`). q_idx [Q] and k_idx [S] are int32 indices of queries and keys in
the sequence: arange(T) for both over a whole sequence, [t] against arange(t + 1) for one
decoding step at t.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array

# Haiku's default `hk.Linear` init: TruncatedNormal(1/sqrt(fan_in)) cut at 2 sigma, no
# variance correction. 0.87962566...² undoes variance_scaling's correction exactly.
HAIKU_LINEAR_INIT = nn.initializers.variance_scaling(
  0.87962566103423978**2, 'fan_in', 'truncated_normal'
)

# The four kinds of positional encoding (`Encoding.kind`). GEOMETRIC is every replacement of
# the softmax (NDR geometric attention, stick-breaking), named after the first one here.
EMBEDDING, ROTATION, BIAS, GEOMETRIC = 'embedding', 'rotation', 'bias', 'geometric'
# Attention without a positional encoding (content only).
CONTENT = 'content'


@dataclasses.dataclass(frozen=True)
class AttentionEncoding:
  """One layer's attention encoding: its parameters and draws, bound into pure functions.

  Attributes:
    family: the encoding function it calls ('content', 'rotary', 'alibi', 'relative',
      'geometric', ...); backends may key a faster equivalent on it.
    kind: CONTENT, ROTATION, BIAS or GEOMETRIC.
    rotate: ROTATION: (x [B, T', H, K], idx [T']) -> x rotated to the positions of idx
      ([B, T', H, K'], K' >= K: PoPE's are twice as wide as v).
    rotate_keys: ROTATION: the keys' rotation where it differs from the queries' (None:
      `rotate`).
    bias: BIAS: (q [B, Q, H, K], k [B, S, H, K], q_idx, k_idx) -> [B or 1, H, Q, S], added
      to the logits q·k / sqrt(K).
    scores: GEOMETRIC: (q, k, q_idx, k_idx) -> s [B, H, Q, S], the logits of the keys.
    weights: GEOMETRIC: (s, q_idx, k_idx, visible [.., Q, S] bool) -> [B, H, Q, S], the
      attention weights that replace softmax(s).
    normalize: GEOMETRIC: divide the weights by their row sums.
    params: the parameters and draws behind the functions, by name (for backends).
    key_state: features of the given tokens [B, Q, H, X] that the functions need for every
      key (e.g. the Forgetting Transformer's gates), by name: the model caches them next
      to the keys and values and calls `with_keys` with the state of all the keys.
    with_keys: (state of every key {name: [B, S, H, X]}) -> the encoding bound to it.
  """

  family: str
  kind: str
  rotate: Callable[[Array, Array], Array] | None = None
  rotate_keys: Callable[[Array, Array], Array] | None = None
  bias: Callable[[Array, Array, Array, Array], Array] | None = None
  scores: Callable[[Array, Array, Array, Array], Array] | None = None
  weights: Callable[[Array, Array, Array, Array], Array] | None = None
  normalize: bool = True
  params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  key_state: Mapping[str, Array] = dataclasses.field(default_factory=dict)
  with_keys: Callable[[Mapping[str, Array]], 'AttentionEncoding'] | None = None

  def rotated(self, q: Array, k: Array, q_idx: Array, k_idx: Array) -> tuple[Array, Array]:
    """ROTATION: (q, k) rotated to the positions of q_idx and k_idx."""
    return self.rotate(q, q_idx), (self.rotate_keys or self.rotate)(k, k_idx)


@dataclasses.dataclass(frozen=True)
class Option:
  """One option of an encoding, set with `--config.encoding_options.NAME=VALUE`.

  Attributes:
    default: its value when the config gives none.
    doc: what it means, in one line.
    valid: the values it takes: a tuple of choices, or a function (value, options) -> bool
      of the value and the encoding's options (defaults filled in); None: any value.
    must_be: the valid values in words, for the error ('an integer >= 1'), or a function
      of the options giving them; made from the choices when `valid` is a tuple.
    test: changes the encoding at test time only (a knob of `posenc.analysis.interventions`, neutral
      by default): passed when given, and not recorded among a run's options otherwise.
    twin: taken by the randomized twin only (`define.randomized_twin` gives it to the twin).
    part: 'embedding' or 'attention': the part of the encoding that takes it (the record
      sets it; a combination `a+b` keeps each part's).

  Example:
    >>> Option(128, "sliding_window's w", lambda w, _: w >= 1, 'an integer >= 1').check(
    ...   'bias_window', 0, {})
    Traceback (most recent call last):
    ValueError: encoding_options.bias_window=0 must be an integer >= 1
  """

  default: Any
  doc: str
  valid: tuple[Any, ...] | Callable[[Any, Mapping[str, Any]], bool] | None = None
  must_be: str | Callable[[Mapping[str, Any]], str] = ''
  test: bool = False
  twin: bool = False
  part: str = ''

  def check(self, name: str, value: Any, options: Mapping[str, Any]) -> None:
    """ValueError (one line) naming `value` and the valid values unless `value` is valid."""
    if self.valid is None:
      return
    if isinstance(self.valid, tuple):
      if value in self.valid and type(value) in {type(c) for c in self.valid}:
        return
      must_be = f'one of {", ".join(repr(c) for c in self.valid)}'
    else:
      if self.valid(value, options):
        return
      must_be = self.must_be(options) if callable(self.must_be) else self.must_be
    raise ValueError(f'encoding_options.{name}={value!r} must be {must_be}')


@dataclasses.dataclass(frozen=True)
class Paper:
  """The publication an encoding comes from, as a citation and as BibTeX.

  Attributes:
    key: the BibTeX key ('press2022alibi').
    authors: BibTeX's author field ('Press, Ofir and Smith, Noah A. and Lewis, Mike').
    title: the title.
    year: the year of the venue given (or of the preprint).
    venue: where it appeared ('ICLR 2022'; 'arXiv' for a preprint).
    url: where to read it (an arXiv abstract, an anthology page).
    fields: more BibTeX fields, ((name, value), ...): booktitle, journal, eprint.
    kind: the BibTeX entry type.

  Example:
    >>> p = Paper('vaswani2017attention', 'Vaswani, Ashish and Shazeer, Noam',
    ...           'Attention Is All You Need', 2017, 'NeurIPS 2017',
    ...           'https://arxiv.org/abs/1706.03762')
    >>> p.cite
    'Vaswani and Shazeer 2017'
    >>> print(p.bibtex().splitlines()[0])
    @inproceedings{vaswani2017attention,
  """

  key: str
  authors: str
  title: str
  year: int
  venue: str
  url: str
  fields: tuple[tuple[str, str], ...] = ()
  kind: str = 'inproceedings'

  @property
  def cite(self) -> str:
    """'Press et al. 2022', 'Csordás and Irie 2022', 'Dai 2019'."""
    surnames = [a.split(',')[0].strip() for a in self.authors.split(' and ')]
    if len(surnames) > 2 or surnames[-1] == 'others':
      return f'{surnames[0]} et al. {self.year}'
    return f'{" and ".join(surnames)} {self.year}'

  def bibtex(self) -> str:
    """The BibTeX entry."""
    fields = [('author', self.authors), ('title', '{' + self.title + '}')]
    fields += [*self.fields, ('year', str(self.year)), ('url', self.url)]
    body = ',\n'.join(f'  {name} = {{{value}}}' for name, value in fields)
    return f'@{self.kind}{{{self.key},\n{body}\n}}\n'


@dataclasses.dataclass(frozen=True)
class Encoding:
  """How the model builds one encoding.

  Attributes:
    kind: core.EMBEDDING, ROTATION, BIAS, GEOMETRIC or CONTENT (no encoding); for a
      combination, its attention part's kind.
    embedding: optional module factory `(width=, max_position=, **options)`, called once
      per forward pass as `module(num_positions, length) -> [T, D]`; the model adds it to
      the token embeddings and applies dropout.
    attention: optional module factory `(max_position=, num_heads=, head_dim=,
      param_dtype=, causal=, **options)`, called per layer as `module(num_positions,
      length, inputs) -> AttentionEncoding` with the layer input [B, T, D]. None: content
      only.
    options: the options it takes, declared ((name, `Option`) pairs, or a dict), in the
      order a run records them; its parts take them as keywords.
    randomized: draws from the 'noise' RNG stream (at evaluation too).
    reads_digits: reads which tokens are digits (the task's `digit_ids`): a task without
      digits cannot use it.
    learned_table: positions index a learned table of `max_position` rows.
    even_head_dim: rotates pairs of coordinates: the head width must be even.
    causal_only: causal by definition (it counts, gates or breaks the keys up to the
      query): only a causal model (the decoder) can use it.
    about: what it is, in a sentence or two a reader new to it understands (the
      leaderboard's page of the encoding shows it).
    papers: the publications it comes from (`Paper`), the method's first.
  """

  kind: str
  embedding: Callable[..., Any] | None = None
  attention: Callable[..., Any] | None = None
  options: tuple[tuple[str, Option], ...] = ()
  randomized: bool = False
  reads_digits: bool = False
  learned_table: bool = False
  even_head_dim: bool = False
  causal_only: bool = False
  about: str = ''
  papers: tuple[Paper, ...] = ()

  def __post_init__(self):
    declared = tuple(self.options.items() if isinstance(self.options, Mapping) else self.options)
    for name, option in declared:
      if not isinstance(name, str) or not isinstance(option, Option):
        raise ValueError(
          f'encoding option {name!r} is declared as {option!r}; declare it with '
          'posenc.encodings.option(default, doc)'
        )
    part = EMBEDDING if self.embedding is not None and self.attention is None else 'attention'
    declared = tuple(
      (name, option if option.part else dataclasses.replace(option, part=part))
      for name, option in declared
    )
    object.__setattr__(self, 'options', declared)
    object.__setattr__(self, 'papers', tuple(self.papers))

  def taken(self) -> dict[str, Option]:
    """The options it takes now, by name (a twin's own ones only on the twin)."""
    return {name: option for name, option in self.options if not option.twin}

  def _names(self, part: str, test: bool) -> tuple[str, ...]:
    return tuple(
      name
      for name, option in self.options
      if not option.twin and option.test == test and (test or option.part == part)
    )

  @property
  def embedding_options(self) -> tuple[str, ...]:
    """The names of the options its embedding part takes."""
    return self._names(EMBEDDING, False)

  @property
  def attention_options(self) -> tuple[str, ...]:
    """The names of the options its attention part takes (test-time options aside)."""
    return self._names('attention', False)

  @property
  def test_options(self) -> tuple[str, ...]:
    """The names of its test-time options (`Option.test`)."""
    return self._names('attention', True)

  @property
  def bounded(self) -> bool:
    """Sequences longer than `max_position` cannot be encoded: positions are drawn from
    {0..max_position-1}, or index a table of that many rows."""
    return self.randomized or self.learned_table


def with_batch(x: Array) -> Array:
  """[H, Q, S] -> [1, H, Q, S]; [B, H, Q, S] unchanged."""
  return x if x.ndim == 4 else x[None]


class EncodingModule(nn.Module):
  """Base of the attention encodings' modules: the sizes the model gives every one of them.

  Subclasses are called per layer as `module(num_positions, length, inputs) ->
  AttentionEncoding`, with T = num_positions (static, the length its draws cover), the
  traced number of real positions and the layer input of the queries [B, Q, D] (the whole
  sequence, or the tokens of one decoding step).
  """

  max_position: int = 2048
  num_heads: int = 8
  head_dim: int = 8
  param_dtype: Any = jnp.float32
  causal: bool = False  # the model's: keys right of a query are masked


def check_causal(module: EncodingModule, name: str) -> None:
  """ValueError unless `module` runs under a causal mask (for encodings causal by definition)."""
  if not module.causal:
    raise ValueError(
      f'encoding {name!r} is causal by definition and needs a causal model (model.family=decoder)'
    )
