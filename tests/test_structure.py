"""The package's structure: imports run one way (no module of posenc imports one that
imports it back, at module level or inside a function, or through the modules the kinds'
registry loads by name)."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_name(path: str) -> str:
  rel = os.path.relpath(path, ROOT)[: -len('.py')].replace(os.sep, '.')
  return rel.removesuffix('.__init__')


def import_graph(package: str = 'posenc') -> dict[str, set[str]]:
  """{module: the posenc modules it imports}, every import statement counted, and the
  registry's loads by name (`registry_edges`) counted as its imports."""
  modules = {}
  for directory, _, files in os.walk(os.path.join(ROOT, package)):
    for name in files:
      if name.endswith('.py'):
        path = os.path.join(directory, name)
        modules[module_name(path)] = path
  graph = {}
  for module, path in modules.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    targets = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        targets.update(a.name for a in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        # `from posenc import train` names a module; `from posenc.x import y` may name one.
        targets.add(node.module)
        targets.update(f'{node.module}.{a.name}' for a in node.names)
    graph[module] = {
      t for t in targets if t in modules and t != module and not module.startswith(t + '.')
    }
  for module, loaded in registry_edges(modules).items():
    graph[module] |= loaded
  return graph


def registry_edges(modules) -> dict[str, set[str]]:
  """{'posenc.kinds': every module of `modules` it loads by name}: each part (`PARTS`) of
  each kind's folder (`KINDS`), found by the registry's own tables, as importlib finds them
  when a reader asks for a kind's part."""
  from posenc import kinds

  names = {f'{package}.{part}' for package in kinds.KINDS.values() for part in kinds.PARTS}
  return {'posenc.kinds': names & set(modules)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """One import cycle as [a, b, ..., a], or None."""
  state = {}

  def visit(node, path):
    state[node] = 'open'
    for nxt in sorted(graph[node]):
      if state.get(nxt) == 'open':
        return path[path.index(nxt) :] + [nxt]
      if nxt not in state:
        found = visit(nxt, path + [nxt])
        if found:
          return found
    state[node] = 'done'
    return None

  for start in sorted(graph):
    if start not in state:
      found = visit(start, [start])
      if found:
        return found
  return None


def test_find_cycle_finds_one():
  assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
  assert find_cycle({'a': {'b'}, 'b': set()}) is None


def test_posenc_imports_have_no_cycle():
  graph = import_graph()
  assert 'posenc.training.update' in graph['posenc.training.train']
  assert find_cycle(graph) is None, ' -> '.join(find_cycle(graph))


def room_of(module: str) -> str:
  """The room a module stands in: its folder directly in posenc/ (`posenc.training`), or the
  module itself at the top of posenc/ (`posenc.config`)."""
  return '.'.join(module.split('.')[:2])


def test_the_folders_import_one_way():
  """Folder by folder (each folder of posenc/ one room, as the map of docs/design.md draws
  them) the imports run one way: no two rooms import each other, through any path."""
  graph = import_graph()
  rooms: dict[str, set[str]] = {}
  for module, targets in graph.items():
    rooms.setdefault(room_of(module), set()).update(
      room_of(t) for t in targets if room_of(t) != room_of(module)
    )
  for targets in list(rooms.values()):
    for t in targets:
      rooms.setdefault(t, set())
  assert {'posenc.training', 'posenc.programs'} <= rooms['posenc.kinds']
  assert find_cycle(rooms) is None, ' -> '.join(find_cycle(rooms))


# Below the run its settings are read, not the config's sections: the modules that may read
# `config.train`, `config.eval` or `config.model` (the parse, the checks of the fields they
# own, and those that build a config to run).
READS_THE_CONFIG = (
  'posenc/config.py',  # the surface, its scales and its general checks
  'posenc/training/settings.py',  # the records, read once
  'posenc/training/run.py',  # the parse
  'posenc/training/population.py',  # the data keys, made as the run is parsed
  'posenc/training/frozen.py',  # a frozen set's manifest against the config that asks for it
  'posenc/models/checks.py',  # the model's fields
  'posenc/models/objectives.py',  # the loss's field
  'posenc/testing/invariants.py',  # builds the configs it checks
  'posenc/speed/timing.py',  # builds the config it times
)


def test_below_the_run_the_settings_are_read_not_the_config():
  pattern = re.compile(r'\bconfig\.(train|eval|model)\.(?!\w+ =)')
  found = [
    f'{rel}:{n}: {line.strip()}'
    for rel, text in _sources()
    if rel.startswith('posenc/') and rel not in READS_THE_CONFIG
    for n, line in enumerate(text.splitlines(), 1)
    if pattern.search(line) and '--config.' not in line
  ]
  assert not found, '\n'.join(found)


def test_the_registry_loads_every_part_by_name_above_the_kinds():
  """The registry's loads by name are edges of the graph: every part of every kind. A part
  that reached back to a module that looks kinds up (a reader of any results.json, the
  report, the run's setup, the cost of any kind) would close a loop through them, which
  the cycle check finds; none of the shared base below the kinds looks a kind up."""
  graph = import_graph()
  assert {'posenc.kinds.range.record', 'posenc.kinds.grid.section'} <= graph['posenc.kinds']
  assert 'posenc.kinds.range.cost' in graph['posenc.kinds']
  assert 'posenc.kinds.perplexity.cost' not in graph  # a kind without a cost model
  # A loop only the names close: a record that imported the run's setup (which looks the
  # kinds up).
  looped = {
    **graph,
    'posenc.kinds.range.record': graph['posenc.kinds.range.record'] | {'posenc.setup'},
  }
  cycle = find_cycle(looped) or []
  assert {'posenc.kinds', 'posenc.kinds.range.record', 'posenc.setup'} <= set(cycle)
  # The shared base: the record schema, what every section is made of, the run with its
  # loop and cost model, the models, the programs, storage and the statistics.
  base = (
    'posenc.results',
    'posenc.sections',
    'posenc.training',
    'posenc.models',
    'posenc.programs',
    'posenc.storage',
    'posenc.statistics',
  )
  below = [m for m in graph if m in base or m.startswith(tuple(f'{b}.' for b in base))]
  assert len(below) > len(base)
  reach = [m for m in below if 'posenc.kinds' in _reached(graph, m)]
  assert not reach, reach


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
  seen, todo = set(), [start]
  while todo:
    for nxt in graph[todo.pop()] - seen:
      seen.add(nxt)
      todo.append(nxt)
  return seen


# What testing the kind of a task looks like; only the kinds' folders (posenc/kinds/) and the
# task registry may.
KIND_TESTS = (
  'is_sequence_task',
  'is_hinting_task',
  'is_language_task',
  "['evaluation'] ==",
  "evaluation == '",
  'tasks.ARITHMETIC',
  'tasks.LANGUAGE',
  'tasks.HINTING',
  '.level ==',
  '.protocol ==',
  "level in (",
)


def test_only_the_protocols_test_the_kind_of_a_task():
  found = []
  for package in ('posenc', 'launch', 'experiments'):
    for directory, _, files in os.walk(os.path.join(ROOT, package)):
      for name in files:
        path = os.path.join(directory, name)
        rel = os.path.relpath(path, ROOT)
        if not name.endswith('.py') or rel.startswith('posenc/kinds/'):
          continue
        with open(path) as f:
          for number, line in enumerate(f, 1):
            if any(pattern in line for pattern in KIND_TESTS):
              found.append(f'{rel}:{number}: {line.strip()}')
  assert not found, '\n'.join(found)


def test_nothing_in_the_library_imports_the_speed_tools():
  """posenc.speed sits on top: it measures the library (setup, the cost model, the loop) and
  only launch.speed imports it."""
  graph = import_graph()
  speed = {m for m in graph if m == 'posenc.speed' or m.startswith('posenc.speed.')}
  assert 'posenc.speed.floor' in speed and 'posenc.training.run' in graph['posenc.speed.floor']
  found = [
    f'{m} imports {sorted(graph[m] & speed)}' for m in graph if m not in speed and graph[m] & speed
  ]
  assert not found, found


def design_map(path: str = os.path.join(ROOT, 'docs', 'design.md')) -> dict[str, str]:
  """{path: its line} of every folder and module the map of docs/design.md ("## Layout", its
  first code block) names: an entry is a name ending in '.py' or '/' at its folder's
  indentation (two spaces a level), several on a line where they share one description; a
  folder listed without entries of its own names its modules in its description."""
  with open(path) as f:
    text = f.read()
  block = text.split('## Layout', 1)[1].split('```', 2)[1]
  found, stack, last = {}, [], []
  for line in block.splitlines()[1:]:
    indent = len(line) - len(line.lstrip(' '))
    if not line.strip() or indent > 12 or indent % 2:
      for name in last:  # a description's continuation
        found[name] += ' ' + line.strip()
      continue
    tokens = line.split()
    names = []
    for token in tokens:
      if not re.fullmatch(r'\w+(\.py|/)', token):
        break
      names.append(token)
    if not names:
      continue
    level = indent // 2
    stack[level:] = []
    parent = ''.join(stack)
    description = line.split(names[-1], 1)[1]
    last = [parent + name for name in names]
    for name in last:
      found[name] = description
    if names[0].endswith('/'):
      stack.append(names[0])
  return found


def test_the_tree_is_the_map_of_the_design():
  """Every module of posenc/ stands in the map of docs/design.md, and every folder and module
  the map names exists (a package's __init__.py comes with its folder)."""
  mapped = design_map()
  assert 'posenc/training/' in mapped and 'posenc/training/train.py' in mapped
  modules = []
  for directory, _, files in os.walk(os.path.join(ROOT, 'posenc')):
    modules += [
      os.path.relpath(os.path.join(directory, f), ROOT) for f in files if f.endswith('.py')
    ]
  missing = []
  for module in modules:
    folder, name = module.rsplit('/', 1)
    folder += '/'
    if module in mapped or (name == '__init__.py' and folder in mapped):
      continue
    # A folder listed without entries of its own names its modules in its description.
    listed_alone = folder in mapped and not any(
      k.startswith(folder) and k != folder for k in mapped
    )
    if listed_alone and re.search(rf'\b{re.escape(name)}\b', mapped[folder]):
      continue
    missing.append(module)
  assert not missing, f'modules not in the map of docs/design.md: {missing}'
  gone = [p for p in mapped if not os.path.exists(os.path.join(ROOT, p))]
  assert not gone, f'the map of docs/design.md names what is not there: {gone}'


# A function's length: its lines from `def` to its last, less its docstring (a worked example
# is not length). Past FUNCTION_LINES a reader loses the step it is in.
FUNCTION_LINES = 80
# The functions allowed past it, and why splitting them would hurt.
LONG_FUNCTIONS: dict[str, str] = {}


def function_lengths(packages=('posenc', 'launch', 'tasks')) -> dict[str, int]:
  """{'path:Class.function': its length} of every function of `packages`."""
  lengths = {}
  for rel, text in _sources(packages):

    def visit(node, prefix):
      for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
          n = child.end_lineno - child.lineno + 1
          doc = child.body[0]
          if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
            if isinstance(doc.value.value, str):
              n -= doc.end_lineno - doc.lineno + 1
          lengths[f'{rel}:{prefix}{child.name}'] = n
          visit(child, f'{prefix}{child.name}.')
        elif isinstance(child, ast.ClassDef):
          visit(child, f'{prefix}{child.name}.')
        else:
          visit(child, prefix)

    visit(ast.parse(text), '')
  return lengths


def test_no_function_is_over_80_lines_but_the_listed_ones():
  lengths = function_lengths()
  assert lengths['posenc/sweep/__init__.py:run_sweep'] > 40  # Found, and counted.
  long = {name: n for name, n in lengths.items() if n > FUNCTION_LINES}
  unlisted = [f'{name}: {n} lines' for name, n in long.items() if name not in LONG_FUNCTIONS]
  assert not unlisted, f'over {FUNCTION_LINES} lines (split it, or list it with why): {unlisted}'
  stale = [name for name in LONG_FUNCTIONS if name not in long]
  assert not stale, f'listed as long but not (any more): {stale}; remove them from the list'


def _sources(packages=('posenc', 'launch')):
  for package in packages:
    for directory, _, files in os.walk(os.path.join(ROOT, package)):
      for name in files:
        if name.endswith('.py'):
          path = os.path.join(directory, name)
          with open(path) as f:
            yield os.path.relpath(path, ROOT), f.read()


def test_a_run_is_built_in_one_place():
  """A config becomes a task and its hint tasks where a run is built (posenc/training/run.py), and a
  protocol where its task's kind is looked up (posenc/setup.py); everything else reads them
  off the run."""
  calls = []
  for rel, text in _sources():
    if rel in ('posenc/training/run.py', 'posenc/setup.py'):
      continue
    tree = ast.parse(text)
    for node in ast.walk(tree):
      if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', '')
        if name in ('tasks_of', 'protocol_of', 'validate') and 'protocol' not in ast.unparse(f):
          calls.append(f'{rel}:{node.lineno}: {ast.unparse(node)[:60]}')
  assert not calls, calls


def test_every_hook_takes_the_run():
  """No protocol, training or objective hook takes (config, task, ...): they take the run."""
  found = [
    f'{rel}:{n}: {line.strip()}'
    for rel, text in _sources()
    if rel.startswith(('posenc/kinds/', 'posenc/training/', 'posenc/models/objectives.py'))
    for n, line in enumerate(text.splitlines(), 1)
    if re.search(r'def \w+\(\s*config[^,)]*,\s*task\b', line) or re.search(r'\bdel task\b', line)
  ]
  assert not found, '\n'.join(found)


def test_each_kind_of_evaluation_is_registered_once():
  """The kinds' folders are named in one registry (posenc/kinds/__init__.py); no other module
  keeps a table keyed by kind of evaluation (the registries each package kept before:
  PROTOCOLS, KINDS, SECTIONS, SEQUENCE_COSTS). The encodings' kinds (embedding, bias, ...)
  are another thing."""
  found = [
    f'{rel}:{n}: {line.strip()}'
    for rel, text in _sources()
    if rel != 'posenc/kinds/__init__.py' and not rel.startswith('posenc/encodings/')
    for n, line in enumerate(text.splitlines(), 1)
    if re.match(r'\s*[A-Z_]*(PROTOCOLS|SECTIONS|COSTS|KINDS)\b[^=]*=', line)
  ]
  assert not found, '\n'.join(found)


def test_only_the_family_record_names_a_model_family():
  """What a module asks of the model family is a field of `posenc.models.families.Family`."""
  pattern = re.compile(
    r"""family\s*[!=]=\s*['"](encoder|decoder)|['"](encoder|decoder)['"]\s*[!=]="""
  )
  found = [
    f'{rel}:{n}: {line.strip()}'
    for rel, text in _sources()
    if rel != 'posenc/models/families.py'
    for n, line in enumerate(text.splitlines(), 1)
    if pattern.search(line)
  ]
  assert not found, '\n'.join(found)
