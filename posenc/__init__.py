"""posenc: positional encodings and the encoder transformer of the length-generalization study.

`posenc.encodings` holds the 13 encodings as pure functions plus the `ENCODINGS` registry;
`posenc.model` holds the Flax Linen `Transformer`. Submodules are imported explicitly
(`from posenc import encodings`) so that importing the package stays cheap.
"""
