"""Check that an encoding keeps the invariants every built-in keeps:
`python -m launch.check_encoding NAME [--checks=a,b]`.

  python -m launch.check_encoding alibi
  python -m launch.check_encoding my_pkg.my_module:MY_ENCODING
  python -m launch.check_encoding xpos --checks=backends,generation

NAME is anything `--config.encoding` takes: a built-in, `input+attention`, an import path
`module:ENCODING` (an `Encoding` record, e.g. built with posenc.encodings.bias), or an
installed package's entry point (group `posenc.encodings`), each with `randomized_` for its
twin. One line per invariant (posenc/testing: backends, padded, causal, step, generation,
gradients, export, training): pass with the largest difference, or FAIL with what differed
(the first output that is not finite, or the two arrays compared, where, both values and
the tolerance); exit status 0 when all pass, 1 when one fails, 2 for a name that does not
load (one line). About a minute on a 2-core CPU. Every built-in passes it (docs/benchmark.md).

  $ python -m launch.check_encoding my_pkg:NAN_BIAS --checks=causal
  causal       FAIL  decoder logits not finite: nan at [0, 0, 0] (and 125 more)
  my_pkg:NAN_BIAS: 0 of 1 invariants pass (failed: causal) in 4 s
"""

import sys
import time

from absl import flags

from launch import common
from posenc import testing

_CHECKS = flags.DEFINE_list(
  'checks', None, f'Only these invariants (default: all of {", ".join(testing.CHECKS)}).'
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
  failed = [c.name for c in results if not c.passed]
  print(
    f'{name}: {len(results) - len(failed)} of {len(results)} invariants pass'
    + (f' (failed: {", ".join(failed)})' if failed else '')
    + f' in {time.time() - start:.0f} s'
  )
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  common.run(main)
