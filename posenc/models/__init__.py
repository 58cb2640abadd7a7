"""The model families and what they are trained on: the study's `Encoder` (encoder.py) and a
causal `Decoder` with a KV cache (decoder.py), on shared layers (layers.py, stack.py); both take
every encoding, pre- or post-LN, ReLU or GELU-GLU, a looped block with input injection, an
attention temperature and several output heads. families.py holds the families as records
(no JAX: the report reads them), generate.py greedy generation, objectives.py what each
family trains on and is judged by.
"""
