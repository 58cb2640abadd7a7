"""Padding never changes a real token's id, for every encoding that reads digits (taken from
the registry by `Encoding.reads_digits`) and for index hints.

Batches pad each row past its real length with token 0, which is also the digit 0; a row's
real tokens must read the same ids and embeddings whether it is padded to one width or
another, in training (under the same key) and at evaluation.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tasks
from posenc import encodings
from posenc.models import decoder as decoder_lib
from posenc.models import encoder as encoder_lib
from posenc.encodings import embeddings
from tasks import arithmetic

WIDTHS = (24, 40)
# Whole sequences, each fed (as the decoder is in training) without its last token, the
# EOS: the real length is one less than the text.
ROWS = ('5+5=01$', '98282+3859172=2787472$', '0+0=0$', '123456+7=823456$')
READS_DIGITS = tuple(name for name, spec in encodings.ENCODINGS.items() if spec.reads_digits)


def _batch(width):
  ids = [arithmetic.encode(text) for text in ROWS]
  tokens = jnp.asarray([row + [0] * (width - len(row)) for row in ids])
  return tokens, jnp.asarray([len(row) - 1 for row in ids])


def _assert_real_tokens_equal(by_width, lengths):
  narrow, wide = (np.asarray(by_width[w]) for w in WIDTHS)
  for row, length in enumerate(np.asarray(lengths)):
    np.testing.assert_array_equal(narrow[row, :length], wide[row, :length], err_msg=ROWS[row])


def test_the_registry_names_the_digit_readers():
  assert {'abacus', 'position_coupling'} <= set(READS_DIGITS)


@pytest.mark.parametrize('deterministic', [True, False])
@pytest.mark.parametrize('name', READS_DIGITS)
def test_padding_never_changes_a_real_tokens_embedding(name, deterministic):
  _, options = encodings.resolve_options(name, {})
  module = encodings.get(name).embedding(width=8, max_position=64, **options)
  tokens, lengths = _batch(WIDTHS[0])
  params = module.init({'params': jax.random.key(0)}, WIDTHS[0], lengths, tokens)
  out = {}
  for width in WIDTHS:
    tokens, lengths = _batch(width)
    # The same key at both widths: Abacus draws one offset per batch, position coupling
    # one per row from the row's own bound; neither draw reads the padding.
    out[width] = module.apply(
      params, width, lengths, tokens, deterministic, rngs={'noise': jax.random.key(1)}
    )
  _assert_real_tokens_equal(out, lengths)


@pytest.mark.parametrize('name', READS_DIGITS)
def test_padding_never_reaches_a_real_token_in_a_causal_decoder(name):
  model = decoder_lib.Decoder(
    vocab_size=arithmetic.NUM_BASE_TOKENS,
    encoding=name,
    num_layers=1,
    d_model=16,
    num_heads=2,
    ffn_size=16,
    dropout=0.0,
    max_position=64,
    attention_impl='reference',
  )
  tokens, lengths = _batch(WIDTHS[0])
  params = model.init(encoder_lib.init_rngs(jax.random.key(0)), tokens, lengths, deterministic=True)
  out = {}
  for width in WIDTHS:
    tokens, lengths = _batch(width)
    out[width], _ = model.apply(
      params, tokens, lengths, deterministic=False, rngs={'noise': jax.random.key(1)}
    )
  _assert_real_tokens_equal(out, lengths)


def test_abacus_counts_padding_as_a_number_that_no_real_token_sees():
  """Abacus numbers every run of digit tokens, padding included: the zeros after a row's
  EOS are a number of their own, and after a prefix that ends in a digit (a prompt being
  completed) they continue its last number. Neither reaches a real token: a token's index
  depends only on itself and the tokens to its left (its run counts from its start), and
  padding lies right of every real token; in a causal decoder no real query attends to it
  either (keys past each row's length are masked, and a query sees only keys up to itself),
  as the decoder test above checks."""
  tokens = jnp.asarray(
    [arithmetic.encode('5+5=01$') + [0] * 5, arithmetic.encode('98+385=27') + [0] * 3]
  )
  ids = np.asarray(embeddings.abacus_positions(tokens, tokens < 10))
  np.testing.assert_array_equal(
    ids, [[1, 0, 1, 0, 1, 2, 0, 1, 2, 3, 4, 5], [1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5]]
  )
  for cut in (6, 9):  # the rows' real lengths (the first fed without its EOS)
    np.testing.assert_array_equal(
      embeddings.abacus_positions(tokens[:, :cut], tokens[:, :cut] < 10), ids[:, :cut]
    )


def test_index_hints_never_hint_padding():
  # The same row, padded with zeros to two widths: the hints go before the real digits only.
  row = arithmetic.encode('98+385=')
  out = {}
  for width in WIDTHS:
    tokens = jnp.asarray([row + [0] * (width // 2 - len(row))])
    hinted, length = arithmetic.with_index_hints(
      tokens, jnp.asarray([len(row)]), jnp.asarray([3]), 102, width
    )
    assert int(length[0]) == 12 and not np.asarray(hinted[0, 12:]).any()
    out[width] = hinted
  assert arithmetic.decode(out[WIDTHS[0]][0, :12]) == 'd9e8+d3e8f5='
  _assert_real_tokens_equal(out, [12])
  # The task at two widths under one key: each example's start, and so the symbol of every
  # significance, is the same (the digits may differ: operands are drawn at the width).
  task = tasks.get('addition', {'index_hints': True})
  symbols = {}
  for extra in (0, 6):
    batch = task.sample(
      jax.random.key(2), 8, 3, 5, task.max_prompt(3, 5) + extra, task.max_answer(3, 5) + extra
    )
    prompt = np.arange(batch['tokens'].shape[1])[None, :] < batch['prompt_length'][:, None]
    symbols[extra] = np.where(
      prompt & (batch['tokens'] >= arithmetic.FIRST_INDEX_SYMBOL), batch['tokens'], -1
    )[:, : task.max_prompt(3, 5)]
  np.testing.assert_array_equal(symbols[0], symbols[6])
