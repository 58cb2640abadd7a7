"""Test-wide settings: fast compiles, and the same for subprocesses the tests start."""

import os

# Tiny models: XLA's optimisation passes cost more than they save (flax's lm1b tests do
# the same). Set in the environment so `python -m launch.*` subprocesses inherit it.
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', 'true')

import jax  # noqa: E402

jax.config.update('jax_disable_most_optimizations',
                  os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] == 'true')
