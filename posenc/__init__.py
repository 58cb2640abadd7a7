"""posenc: positional encodings and length generalization of transformers, in JAX/Flax.

Each folder is one capability (docs/design.md maps them, module by module): `encodings`
every encoding as a small pure function and their registry, `attention` the backends that
apply them, `models` the encoder and the decoder and what they train on, `training` a run
built once from its config (`training/run.py`) and the one loop that trains and evaluates it
(`training/train.py`), `programs` which programs a run compiles, `storage` where runs live
(a disk or an object store), `kinds` the kinds of evaluation, one folder each, `results` the
schema of results.json, `report` and `statistics` the tables, figures and intervals,
`analysis`, `sweep`, `benchmark` and `speed` what is built on runs. `posenc.setup` builds a
run of any kind from its config; `posenc.config` is the config surface. Submodules are
imported explicitly (`from posenc.training import train`) so that importing the package
stays cheap.
"""
