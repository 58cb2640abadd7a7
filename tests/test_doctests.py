"""The worked examples of the docstrings are true: each module's examples run as doctests
(`# doctest: +SKIP` marks a line that needs a run directory, a training, a bucket or minutes
of compute), in a fresh directory (the examples that write files write there).

The modules are found, not listed: every module of the packages `posenc`, `tasks`,
`experiments` and `launch` whose docstrings hold a `>>>` example is a test case, so a new
module's examples run by themselves. Finding them reads the sources (`ast`), importing
nothing.

A module is imported and its examples run in its namespace (`doctest.DocTestFinder`), except
the launchers': each `launch` module defines its absl flags at import, and two of them
define flags of the same name (`--out`, `--config`), so importing them side by side in one
process raises DuplicateFlagError (and would make the outcome depend on the order of the
test cases). Their docstrings are read from the source instead and run in a fresh
namespace: an example there imports what it uses, as it would at a prompt.
"""

import ast
import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ('posenc', 'tasks', 'experiments', 'launch')
# Imported, their absl flags would clash: their examples run from the parsed source.
NOT_IMPORTED = ('launch',)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_name(path: pathlib.Path) -> str:
  """'posenc/kinds/grid/cost.py' -> 'posenc.kinds.grid.cost'; a package's __init__.py is
  the package."""
  parts = path.relative_to(ROOT).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def docstrings(tree: ast.Module, prefix: str) -> list[tuple[str, str, int]]:
  """(qualified name, docstring, line of the docstring) of the module, its classes and
  functions, nested ones included: what `DocTestFinder` finds in the imported module."""
  found = []

  def visit(node, name):
    text = ast.get_docstring(node, clean=False)
    if text is not None:
      found.append((name, text, node.body[0].lineno - 1))
    for child in node.body:
      if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        visit(child, f'{name}.{child.name}')

  visit(tree, prefix)
  return found


def source_of(name: str) -> pathlib.Path:
  path = ROOT.joinpath(*name.split('.'))
  return path / '__init__.py' if path.is_dir() else path.with_suffix('.py')


def modules_with_examples() -> list[str]:
  names = []
  for package in PACKAGES:
    for path in sorted((ROOT / package).rglob('*.py')):
      tree = ast.parse(path.read_text(), str(path))
      if any('>>>' in text for _, text, _ in docstrings(tree, '')):
        names.append(module_name(path))
  return names


MODULES = modules_with_examples()


def parsed_tests(name: str) -> list[doctest.DocTest]:
  """The module's examples from its source, unimported, each docstring with a fresh
  namespace of its own."""
  path = source_of(name)
  parser = doctest.DocTestParser()
  return [
    parser.get_doctest(text, {'__name__': name}, qualified, str(path), line)
    for qualified, text, line in docstrings(ast.parse(path.read_text()), name)
  ]


def imported_tests(name: str) -> list[doctest.DocTest]:
  return doctest.DocTestFinder().find(importlib.import_module(name), name)


def test_the_modules_are_found():
  # Packages' own examples (__init__.py), modules at each depth, and a launcher's (run from
  # its source).
  found = {'posenc.encodings', 'posenc.encodings.biases', 'posenc.kinds.grid.cost', 'tasks'}
  assert found | {'launch.common'} <= set(MODULES)
  assert not any(name.startswith('tests') for name in MODULES)


@pytest.mark.parametrize('name', MODULES)
def test_the_docstring_examples_are_true(name, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  imported = not name.startswith(NOT_IMPORTED)
  tests = imported_tests(name) if imported else parsed_tests(name)
  runner = doctest.DocTestRunner(optionflags=FLAGS)
  report = []
  for test in tests:
    runner.run(test, out=report.append)
  result = runner.summarize(verbose=False)
  assert result.failed == 0, ''.join(report)
  # Every example the source holds was found (a docstring the finder misses, e.g. of an
  # object defined elsewhere, would leave its examples unrun).
  assert sum(len(t.examples) for t in tests) == sum(len(t.examples) for t in parsed_tests(name)), (
    f'{name}: some examples of the source were not found'
  )
