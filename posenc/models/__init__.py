"""The model families, on shared layers (`layers`, `stack`): the study's `Encoder` and a causal
`Decoder` with a KV cache. Both take every encoding, pre- or post-LN, ReLU or GELU-GLU, a
looped block with input injection, an attention temperature and several output heads."""

from posenc.models.decoder import Decoder
from posenc.models.encoder import Encoder, empty_output_layout, init_rngs, num_params, read_outputs
from posenc.models.stack import Architecture
