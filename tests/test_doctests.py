"""The worked examples of the docstrings are true: each module's examples run as doctests
(`# doctest: +SKIP` marks a line that needs a run directory or a training), in a fresh
directory (the examples that write files write there)."""

import doctest
import importlib

import pytest

# The modules the documentation site's API reference shows, and the helpers they build on.
MODULES = (
  'posenc.encodings',
  'posenc.encodings.biases',
  'posenc.encodings.core',
  'posenc.encodings.define',
  'posenc.encodings.embeddings',
  'posenc.encodings.randomized',
  'posenc.encoding_names',
  'posenc.testing.compare',
  'posenc.testing.invariants',
  'tasks',
  'tasks.digits',
  'posenc.benchmark',
  'posenc.card',
  'posenc.leaderboard',
  'posenc.leaderboard.site',
  'posenc.config',
  'posenc.plots',
  'posenc.io',
  'posenc.results',
  'posenc.results.evaluations',
  'posenc.results.members',
  'posenc.report.intervals',
  'posenc.report.verdicts',
  'posenc.report.statistics',
  'posenc.report.tables',
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize('name', MODULES)
def test_the_docstring_examples_are_true(name, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  module = importlib.import_module(name)
  runner = doctest.DocTestRunner(optionflags=FLAGS)
  report = []
  for test in doctest.DocTestFinder().find(module, name):
    runner.run(test, out=report.append)
  result = runner.summarize(verbose=False)
  assert result.failed == 0, ''.join(report)
  assert result.attempted > 0, f'{name} has no example that runs'
