"""Check that an encoding keeps the invariants every built-in keeps:
`python -m launch.check_encoding NAME [--checks=a,b]`.

  python -m launch.check_encoding alibi
  python -m launch.check_encoding my_pkg.my_module:MY_ENCODING
  python -m launch.check_encoding xpos --checks=outputs,backends,generation

NAME is anything `--config.encoding` takes: a built-in, `input+attention`, an import path
`module:ENCODING` (an `Encoding` record, e.g. built with posenc.encodings.bias), or an
installed package's entry point (group `posenc.encodings`), each with `randomized_` for its
twin. One line per check (posenc/testing): first `outputs`, the encoding's own outputs at
the smallest size against what its kind declares, in seconds; then the invariants (backends,
padded, causal, step, generation, gradients, export, training), skipped when the first pass
fails. A line says pass with the largest difference, or FAIL with what is wrong in the
encoding's terms (the output, its shape, dtype, or the first non-finite entry by head,
query and key) or what differed (the two arrays compared, where, both values and the
tolerance); exit status 0 when all pass, 1 when one fails, 2 for a name that does not load
(one line). Under a minute on a 2-core CPU (docs/benchmark.md). Every built-in passes it.

  $ python -m launch.check_encoding my_pkg:NAN_BIAS
  outputs      FAIL  bias (bidirectional) is NaN at head 0, query 0, key 0 (and 161 more)
  backends     skip  not run: the first pass (outputs) failed
  ...
  my_pkg:NAN_BIAS: 0 of 1 checks pass (failed: outputs); 8 not run after the first pass failed in 6 s
"""

import sys
import time

from absl import flags

from launch import common
from posenc import testing

_CHECKS = flags.DEFINE_list(
  'checks', None, f'Only these checks (default: all of {", ".join(testing.CHECKS)}).'
)


def main(argv: list[str]) -> None:
  if len(argv) != 2:
    common.fail(
      'give one encoding, e.g. python -m launch.check_encoding alibi or '
      'my_pkg.my_module:MY_ENCODING'
    )
  name = argv[1]
  checks = tuple(_CHECKS.value) if _CHECKS.value else None
  start = time.time()
  try:
    results = testing.conformance(name, checks, report=lambda c: print(c.line(), flush=True))
  except ValueError as e:
    common.fail(e)
  failed = [c.name for c in results if not c.passed and not c.skipped]
  skipped = [c.name for c in results if c.skipped]
  run = len(results) - len(skipped)
  print(
    f'{name}: {run - len(failed)} of {run} checks pass'
    + (f' (failed: {", ".join(failed)})' if failed else '')
    + (f'; {len(skipped)} not run after the first pass failed' if skipped else '')
    + f' in {time.time() - start:.0f} s'
  )
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  common.run(main)
