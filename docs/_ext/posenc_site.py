"""What posenc's site generates at build time, so that no generated file is kept in git:

- the `launcher-help` directive: a launcher's `--help` (its docstring and its own flags, as
  `python -m launch.NAME --help` prints them), every launcher's read by one process;
- the cpu-v2 leaderboard, written into the built site's `leaderboard/` by
  `posenc.leaderboard` (the same pages `launch.benchmark --leaderboard` writes);
- links of the markdown pages to repository files that are pages of the site too (the
  README is the home page, each suite's baselines.md a page under baselines/), pointed at
  those pages.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHERS = (
  'train',
  'sweep',
  'report',
  'analyze',
  'benchmark',
  'check_encoding',
  'export_eval_set',
  'speed',
)
LEADERBOARD_SUITE = 'cpu-v2'
# A repository file's link -> the page of the site that shows it.
LINKS = (
  (re.compile(r'\]\(\.\./README\.md'), '](index.md'),
  (re.compile(r'\]\(\.\./experiments/benchmarks/([\w-]+)/baselines\.md'), r'](baselines/\1.md'),
)


def launcher_helps() -> dict[str, str]:
  """{launcher: its --help}: each launcher imported in turn, its flags read as `launch.cli`
  prints them and then removed, so that the next may define flags of the same names (two
  launchers never run in one process otherwise)."""
  from absl import flags

  out = {}
  for name in LAUNCHERS:
    module = importlib.import_module(f'launch.{name}')
    own = flags.FLAGS.get_flags_for_module(module)
    text = flags.FLAGS.module_help(module) if own else ''
    out[name] = module.__doc__.strip() + ('\n\nflags:\n' + text if text else '')
    for flag in own:
      delattr(flags.FLAGS, flag.name)
  return out


def _helps(app) -> None:
  # A process of its own: the launchers' flags stay out of Sphinx's, and the import is paid
  # once.
  proc = subprocess.run(
    [sys.executable, os.path.abspath(__file__)], cwd=ROOT, capture_output=True, text=True
  )
  if proc.returncode != 0:
    raise RuntimeError(f'reading the launchers\' --help failed: {proc.stderr[-2000:]}')
  app.posenc_helps = json.loads(proc.stdout)


class LauncherHelp(Directive):
  """```{launcher-help} NAME```: the `--help` of `python -m launch.NAME`."""

  required_arguments = 1

  def run(self):
    name = self.arguments[0]
    helps = self.state.document.settings.env.app.posenc_helps
    if name not in helps:
      raise self.error(f'unknown launcher {name!r}; known: {", ".join(LAUNCHERS)}')
    block = nodes.literal_block(helps[name], helps[name])
    block['language'] = 'text'
    return [block]


def _links(app, docname, source) -> None:
  for pattern, replacement in LINKS:
    source[0] = pattern.sub(
      lambda m: m.expand(replacement) if docname.count('/') == 0 else m.group(0), source[0]
    )


def _leaderboard(app, exception) -> None:
  if exception is not None or app.builder.format != 'html':
    return
  from experiments import benchmarks
  from posenc import benchmark
  from posenc import leaderboard
  from posenc.leaderboard import site

  suite = benchmarks.get(LEADERBOARD_SUITE)
  board = leaderboard.leaderboard(suite, benchmark.read_baselines(suite))
  site.write(os.path.join(app.outdir, 'leaderboard'), site.files(board))


def setup(app):
  app.connect('builder-inited', _helps)
  app.connect('source-read', _links)
  app.connect('build-finished', _leaderboard)
  app.add_directive('launcher-help', LauncherHelp)
  return {'parallel_read_safe': True, 'parallel_write_safe': True}


if __name__ == '__main__':
  sys.path.insert(0, ROOT)
  print(json.dumps(launcher_helps()))
