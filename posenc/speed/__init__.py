"""Speed: what `python -m launch.speed NAME` measures, as functions that return figures.

The entry point (`launch/speed/`) keeps the flags, the checks, the printed lines and the
JSON; the measurements live here (docs/speed.md has every figure and its command):

  floor.py     measured lower bounds: the dense-product floor of a training step and of a
               range evaluation, the geometric floor of a forward pass
  timing.py    training throughput, range evaluation, forward passes, generation
  population.py  a population's throughput under candidate settings, side by side
  profile.py   where a training step's time goes, from a trace of its compiled program
  samplers.py  the task samplers' throughput
  machine.py   the machine under measurement: glibc's allocator setting, the hypervisor's
               steal time

Runs are built by `posenc.setup.build`, as everywhere else. The package sits at the top of
the library, above the cost model and the loop it measures; nothing in posenc imports it.
Submodules are imported explicitly (`from posenc.speed import floor`), so that
`launch.speed --help` imports no JAX.
"""
