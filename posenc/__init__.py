"""posenc: positional encodings and length generalization of transformers, in JAX/Flax.

`posenc.encodings` holds every encoding as a small pure function and the registry of their
names (and loads encodings from outside the package); `posenc.models` the encoder and the
decoder; `posenc.setup` builds a run of any kind from its config once (`posenc.run`);
`posenc.train` is the one loop; `posenc.kinds` the kinds of evaluation, each in a folder
with its protocol (how its tasks train and are judged, and what it reads off a task), its
results.json record, its report section and its cost; `posenc.evaluate` what every
protocol shares; `posenc.results` the schema of results.json; `posenc.report` the tables
and figures. Submodules are imported explicitly (`from posenc import encodings`) so that
importing the package stays cheap.
"""
