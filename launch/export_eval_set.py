"""Write a run's evaluation examples to files: `python -m launch.export_eval_set
--config=FILE[:ARG] --out=DIR`.

  python -m launch.export_eval_set --config=experiments/rpe_table1.py:task=parity_check,tiny \
      --out=sets/parity_tiny
  python -m launch.train --config=experiments/rpe_table1.py:task=parity_check,tiny \
      --workdir=runs/parity --config.eval.from_files=sets/parity_tiny

DIR gets one .npz per evaluated cell (a length, a grid cell, a distribution and length, a
window length) with the exact examples the config's evaluation draws, and manifest.json
(task, options, protocol, the config fields that decide the examples, and each file's
sha256): see posenc/training/frozen.py. `--config.eval.from_files=DIR` then evaluates on
those files instead of sampling, with the same results; other frameworks can score the same
examples. Any config field can be overridden with `--config.KEY=VALUE`. Bad input (a bad
config, an --out that is a file or holds another set) is one line, exit status 2, and
nothing written. A disk that fills up is one line too: the files written are whole, the set
has no manifest.json until it is complete, and rerunning the same command writes it.
"""

import os

from absl import flags
from ml_collections import config_flags

from launch import common
from launch import full_disk
from posenc import config as config_lib
from posenc.storage import io
from posenc import setup
from posenc.storage import store
from posenc.training import frozen

# New attributes: an encoding's own options (`--config.encoding_options.NAME`); the names
# of other fields are checked by common.check_overrides.
_CONFIG = config_flags.DEFINE_config_file(
  'config', None, 'Experiment file[:arg].', lock_config=False, accept_new_attributes=True
)
_OUT = flags.DEFINE_string('out', None, 'Directory of the evaluation set (created).')


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    common.fail(f'unexpected arguments {argv[1:]}; give flags only (--config, --out)')
  if _CONFIG.value is None:
    common.fail('--config is required, e.g. --config=experiments/rpe_table1.py:tiny')
  if not _OUT.value:
    common.fail('--out is required, e.g. --out=sets/my_set')
  config = _CONFIG.value
  if config.eval.get('from_files'):
    common.fail(
      f'--config.eval.from_files={config.eval.from_files!r}: exporting draws the '
      'examples; leave it empty'
    )
  try:
    run = setup.build(config)
  except config_lib.ConfigError as e:
    common.fail(e)
  protocol = run.protocol
  if protocol.examples is None:
    common.fail(f'task {config.task!r} ({protocol.name} protocol) has no frozen evaluation sets')
  if store.is_url(_OUT.value):  # The scheme, the bucket, the credentials: before any read.
    common.check_out_dir(_OUT.value, '--out')
  if io.exists(os.path.join(_OUT.value, frozen.MANIFEST)):
    common.fail(f'--out={_OUT.value} already holds an evaluation set; use a new directory')
  common.check_out_dir(_OUT.value, '--out')
  kept = lambda: (
    f'the cells written so far are kept; {frozen.MANIFEST}, written last, marks the set complete'
  )
  with full_disk.on_full_disk(kept, _OUT.value):
    common.make_dir(_OUT.value, '--out')
    manifest = frozen.write(
      _OUT.value,
      config,
      protocol.name,
      protocol.examples(run),
      protocol.example_fields,
    )
  print(
    f'wrote {len(manifest["cells"])} cells of {config.task} ({protocol.name} protocol) '
    f'and {frozen.MANIFEST} to {_OUT.value}'
  )


if __name__ == '__main__':
  common.run(main)
