"""posenc: positional encodings and length generalization of transformers, in JAX/Flax.

`posenc.encodings` holds every encoding as a small pure function and the registry of their
names (and loads encodings from outside the package); `posenc.models` the encoder and the
decoder; `posenc.setup` builds a run's objects from its config once; `posenc.train` is the
one loop; `posenc.evaluate` the protocols that judge a run; `posenc.results` the schema of
results.json; `posenc.report` the tables and figures. Submodules are imported explicitly
(`from posenc import encodings`) so that importing the package stays cheap.
"""
