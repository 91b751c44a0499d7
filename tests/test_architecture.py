"The layering, checked on the package's import graph: shared modules, systems, builders, tasks, backends."
import ast
from pathlib import Path
import pytest
import wordbench
from wordbench.systems import builtin_systems

PKG = Path(wordbench.__file__).parent
SYSTEMS = tuple(builtin_systems())   # declared once, as entry points in pyproject.toml
assert len(SYSTEMS) >= 4, SYSTEMS
TOP = ('cli', '__main__')   # the command line (and `python -m wordbench`) sit above every system


def package_of(path: Path) -> tuple:
    "The package a file's relative imports start from, as name parts."
    return path.relative_to(PKG.parent).with_suffix('').parts[:-1]


def absolute(node: ast.ImportFrom, pkg: tuple) -> str:
    "The module a `from ... import` names, relative imports resolved against `pkg`."
    base = node.module or ''
    if node.level: base = '.'.join(pkg[:len(pkg) - node.level + 1] + ((base,) if base else ()))
    return base


def imports(path: Path) -> set[str]:
    "Every `wordbench...` module a file imports, at the top or inside a function (relative imports resolved)."
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import): out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, package_of(path))
            out |= {base} | {f'{base}.{a.name}' for a in node.names}
    return {m for m in out if m.startswith('wordbench')}


def private(name: str) -> bool: return name.startswith('_') and not name.startswith('__')


def private_uses(source: str, pkg: tuple) -> list[str]:
    "`module.name` for each private name taken from another wordbench module: imported, or read off an import."
    tree, out, modules = ast.parse(source), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {(a.asname or a.name): a.name for a in node.names if a.name.startswith('wordbench')}
        elif isinstance(node, ast.ImportFrom) and absolute(node, pkg).startswith('wordbench'):
            base = absolute(node, pkg)
            out += [f'{base}.{a.name}' for a in node.names if private(a.name)]
            modules |= {(a.asname or a.name): f'{base}.{a.name}' for a in node.names}   # perhaps submodules
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and private(node.attr):
            if node.value.id in modules: out.append(f'{modules[node.value.id]}.{node.attr}')
    return sorted(set(out))


def system_of(module: str) -> str|None:
    parts = module.split('.')
    return parts[1] if len(parts) > 1 and parts[1] in SYSTEMS else None


def test_shared_modules_import_no_system():
    shared = [p for p in PKG.glob('*.py') if p.stem not in TOP + ('_modidx',)]
    shared += [p for room in ('models', 'evaluate', 'publish', 'bench') for p in (PKG/room).glob('*.py')]
    assert len(shared) >= 40
    bad = {p.name: sorted(m for m in imports(p) if system_of(m)) for p in shared}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def test_systems_import_no_other_system():
    for s in SYSTEMS:
        for p in (PKG/s).glob('*.py'):
            others = sorted(m for m in imports(p) if system_of(m) not in (None, s))
            assert not others, (p, others)


def test_the_graph_is_read():
    "The checks above would pass vacuously on an empty graph: the command line does import the systems, by name."
    assert 'wordbench.winodict.task' in imports(PKG/'winodict'/'foreign.py')
    assert any(system_of(m) for m in imports(PKG/'winodict'/'__init__.py'))


W = 'wordbench.'
ROOMS = ('models', 'evaluate', 'publish', 'bench')   # the shared layer's subpackages, each a noun
BUILDERS = {f'{W}{s}.build' for s in SYSTEMS}
TASK_MODULES = {f'{W}{s}.task' for s in SYSTEMS} | {W + 'winodict.foreign'}
# the local decode engine, kernels and backend; `hf_common` (tokenising as the `hf` backend does) is shared with it
HF_ENGINE = {W + 'models.' + m for m in ('hf_generate', 'hf_kernels', 'hf')}
SERVER_CLIENT = {W + 'models.' + m for m in ('openai_client', 'openai_endpoint', 'openai_transport')}
SYSTEM_MODELS = {W + 'models.lm', W + 'models.open'}   # all a system may take from the model layer


def room_of(module: str) -> str:
    "The room a module lives in: its subpackage, its system, or itself (a top-level module)."
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else parts[0]


def in_room(*rooms): return lambda m: room_of(m) in rooms


def everything_but(*keep):
    "The rooms of the package except `keep`, as module prefixes (for a rule that allows only `keep`)."
    names = {p.stem for p in PKG.glob('*.py')} | {p.name for p in PKG.iterdir() if (p/'__init__.py').exists()}
    return lambda m: {W + n for n in names - set(keep) - {'__init__', '_modidx'}}


RULES = {  # rule: (whether it binds a module, the modules that module may not import)
    'models imports no evaluate, publish, build, systems, cli or system':
        (in_room('models'), lambda m: {W + r for r in ('evaluate', 'publish', 'build', 'systems', 'cli', *SYSTEMS)}),
    'evaluate imports no publish, build, cli or system':
        (in_room('evaluate'), lambda m: {W + r for r in ('publish', 'build', 'cli', *SYSTEMS)}),
    'bench imports only core': (in_room('bench'), everything_but('core', 'bench')),
    'nothing imports bench': (lambda m: room_of(m) != 'bench', lambda m: {W + 'bench'}),
    'systems take from models only the interface and the opener':
        (in_room(*SYSTEMS), lambda m: {x for x in MODEL_MODULES if x not in SYSTEM_MODELS}),
    'a builder imports no task of its system':
        (lambda m: m in BUILDERS, lambda m: {t for t in TASK_MODULES if system_of(t) == system_of(m)}),
    'a task imports no builder': (lambda m: m in TASK_MODULES, lambda m: BUILDERS),
    'the server client imports no HF engine': (lambda m: m in SERVER_CLIENT, lambda m: HF_ENGINE),
    'the endpoint room imports neither the client nor an hf room':
        (lambda m: m == W + 'models.openai_endpoint',
         lambda m: {W + 'models.openai_client'} | {x for x in MODEL_MODULES if x.startswith(W + 'models.hf')}),
    'only the command line is the front door': (lambda m: m not in (W + 'cli', W + '__main__'), lambda m: {W + 'cli'}),
}


def module_name(path: Path) -> str:
    return '.'.join(package_of(path) + (path.stem,)).removesuffix('.__init__')


GRAPH = {module_name(p): imports(p) for p in PKG.rglob('*.py') if p.stem != '_modidx'}   # module -> imports
MODEL_MODULES = {m for m in GRAPH if room_of(m) == 'models' and m != W + 'models'}


def broken(rule: str, graph: dict) -> dict:
    "Per module `rule` binds in `graph`: the imports it forbids (modules, or names read from them)."
    binds, banned = RULES[rule]
    found = {m: sorted(i for i in imported if any(i == b or i.startswith(b + '.') for b in banned(m)))
             for m, imported in graph.items() if binds(m)}
    return {m: v for m, v in found.items() if v}


@pytest.mark.parametrize('rule', list(RULES))
def test_layering_rule(rule):
    assert any(RULES[rule][0](m) for m in GRAPH), f'{rule}: binds no module'
    assert not broken(rule, GRAPH)


def test_each_rule_can_fail():
    "Each rule catches an import that breaks it in a made-up graph, and passes one that keeps it."
    bad = {'models imports no evaluate, publish, build, systems, cli or system':
               {W + 'models.open': {W + 'build.Funnel', W + 'evaluate.tasks'}},
           'evaluate imports no publish, build, cli or system': {W + 'evaluate.verify': {W + 'publish.card'}},
           'bench imports only core': {W + 'bench.flops': {W + 'models.hf'}},
           'nothing imports bench': {W + 'publish.regenerate': {W + 'bench.servers'}},
           'systems take from models only the interface and the opener': {W + 'probes.task': {W + 'models.t5'}},
           'a builder imports no task of its system': {W + 'newterm.build': {W + 'newterm.task.DEDUCE'}},
           'a task imports no builder': {W + 'winodict.foreign': {W + 'winodict.build'}},
           'the server client imports no HF engine':
               {W + 'models.openai_client': {W + 'models.hf_generate.plain_chat_prompt'}},
           'the endpoint room imports neither the client nor an hf room':
               {W + 'models.openai_endpoint': {W + 'models.openai_client', W + 'models.hf_common'}},
           'only the command line is the front door': {W + 'evaluate.tasks': {W + 'cli.main'}}}
    assert set(bad) == set(RULES)
    for rule, graph in bad.items():
        assert broken(rule, graph) == {m: sorted(v) for m, v in graph.items()}, rule
    ok = {W + 'newterm.build': {W + 'newterm.terms', W + 'winodict.task', W + 'models.open.open_lm'},
          W + 'bench.flops': {W + 'core', W + 'bench.peak_memory'}, W + 'models.hf': {W + 'models.lm', W + 'core'},
          W + 'evaluate.tasks': {W + 'models.open'}, W + 'cli': {W + 'cli', W + 'bench.servers'},
          W + '__main__': {W + 'cli.main'}}
    assert {rule: broken(rule, ok) for rule in RULES} == {rule: (
        {W + 'cli': [W + 'bench.servers']} if rule == 'nothing imports bench' else {}) for rule in RULES}


def rooms_graph(graph: dict) -> dict:
    "The import graph at room scale: room -> the other rooms it imports."
    out = {}
    for m, imported in graph.items():
        out.setdefault(room_of(m), set()).update(room_of(i) for i in imported if room_of(i) != room_of(m))
    return out


def cycle(graph: dict) -> list:
    "A cycle of `graph` (node -> nodes) as a list of nodes, or [] when there is none."
    state, path = {}, []
    def visit(n):
        state[n], _ = 'open', path.append(n)
        for x in sorted(graph.get(n, ())):
            if state.get(x) == 'open': return path[path.index(x):] + [x]
            if x not in state and (found := visit(x)): return found
        state[n], _ = 'done', path.pop()
        return []
    for n in sorted(graph):
        if n not in state and (found := visit(n)): return found
    return []


def test_rooms_have_no_cycle():
    "Rooms import downwards only: the graph of subpackages, systems and top-level modules has no cycle."
    rooms = rooms_graph(GRAPH)
    assert set(ROOMS) <= set(rooms) and 'models' in rooms['evaluate'] and 'evaluate' in rooms['publish']
    assert cycle(rooms) == []
    assert cycle({'models': {'core'}, 'evaluate': {'models'}, 'publish': {'evaluate'}}) == []
    assert cycle({'models': {'core', 'evaluate'}, 'evaluate': {'models'}}) == ['evaluate', 'models', 'evaluate']


def test_no_module_uses_another_modules_private_names():
    "`from .x import _y` (or `x._y` on an imported module) couples a module to another's internals: none may."
    files = [p for p in PKG.rglob('*.py') if p.stem != '_modidx']
    assert len(files) >= 50, len(files)
    bad = {str(p.relative_to(PKG)): private_uses(p.read_text(), package_of(p)) for p in files}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def test_private_uses_are_found():
    "The check above cannot pass vacuously: each way of reaching a private name is caught."
    pkg = ('wordbench', 'winodict')
    test = lambda src: private_uses(src, pkg)
    assert test('from .task import _row, load') == ['wordbench.winodict.task._row']
    assert test('from ..models.hf import _pad as pad') == ['wordbench.models.hf._pad']
    assert test('import wordbench.models.cache as c\nc._chunk()') == ['wordbench.models.cache._chunk']
    assert test('from wordbench.models import lm\nlm._u') == ['wordbench.models.lm._u']
    assert test('from .task import load\nx = obj._private\nfrom . import __init__') == []


BUILDER_LAYER = ('Builder', 'BUILDERS', 'register_builder', 'builder_kwargs', 'Funnel', 'RunDir', 'annotation_sheet',
                 'read_annotations', 'agreement')   # what `wordbench.build` holds for every builder
MODEL_LAYER = {'models.open': ('open_lm', 'CallLog'), 'models.dummy': ('DummyLM', 'ScriptedLM')}   # and where


def defined(source: str) -> set[str]:
    "The names a module defines at its top level: functions, classes and assigned names."
    out = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.add(node.name)
        elif isinstance(node, ast.Assign): out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


FILES = {module_name(p): p for p in PKG.rglob('*.py') if p.stem != '_modidx'}


def defined_once(home: str, names) -> dict:
    "Modules other than `home` that define any of `names` (empty when each is defined in `home` only)."
    assert set(names) <= defined(FILES[home].read_text()), (home, names)
    again = {m: sorted(defined(p.read_text()) & set(names)) for m, p in FILES.items() if m != home}
    return {m: v for m, v in again.items() if v}


def test_one_builder_layer():
    "The registry, funnel, run folder and annotation sheet are defined once, in `build`; every builder uses `Funnel`."
    assert defined_once(W + 'build', BUILDER_LAYER) == {}
    assert BUILDERS <= set(GRAPH)
    assert not [b for b in sorted(BUILDERS) if W + 'build.Funnel' not in GRAPH[b]]
    assert defined('class ScriptedLM(LM): pass\nagreement = 1\ndef f(): pass') == {'ScriptedLM', 'agreement', 'f'}


def test_one_model_opener_and_fakes():
    "Opening a model and the fakes live in `models/`, defined once; `build` holds none of them."
    for home, names in MODEL_LAYER.items(): assert defined_once(W + home, names) == {}, home
    assert not defined(FILES[W + 'build'].read_text()) & {'open_lm', 'CallLog', 'ScriptedLM'}


def lm_classes_outside_models(classes) -> list[str]:
    "The package's classes among `classes` defined outside `wordbench.models`."
    return sorted(f'{c.__module__}.{c.__qualname__}' for c in classes
                  if c.__module__.startswith(W) and not c.__module__.startswith(W + 'models.'))


def subclasses(cls) -> set:
    out = set(cls.__subclasses__())
    for c in list(out): out |= subclasses(c)
    return out


def test_every_backend_lives_in_models():
    "Every `LM` subclass the package defines is defined under `wordbench/models/` (the rule fails on one outside)."
    import importlib
    from wordbench.models.lm import LM
    for m in sorted(FILES): importlib.import_module(m)
    found = subclasses(LM)
    assert len([c for c in found if c.__module__.startswith(W)]) >= 8
    assert lm_classes_outside_models(found) == []
    Stray = type('Stray', (LM,), {'__module__': W + 'build'})
    assert lm_classes_outside_models([Stray]) == [W + 'build.Stray']


def calls_to(source: str, name: str) -> int:
    "How many calls to `name` (plain or as an attribute) a source makes."
    named = lambda f: name in (getattr(f, 'id', None), getattr(f, 'attr', None))
    return sum(isinstance(n, ast.Call) and named(n.func) for n in ast.walk(ast.parse(source)))


def test_models_are_built_only_in_models():
    "Package code outside `models/` opens a model through `models.open`, never with `get_lm(` directly."
    outside = {m: calls_to(p.read_text(), 'get_lm') for m, p in FILES.items() if room_of(m) != 'models'}
    assert {m: n for m, n in outside.items() if n} == {}
    assert calls_to('x = lm.get_lm("hf", m)\nget_lm("dummy", "y")', 'get_lm') == 2


def default_exp(nb: Path) -> str:
    import json
    cells = json.loads(nb.read_text())['cells']
    return next(line.split()[2] for c in cells for line in ''.join(c['source']).splitlines()
                if line.startswith('#| default_exp '))


def test_layout():
    "At most 14 files under `wordbench/`, no model-family prefixes there, and each notebook named after its module."
    top = sorted(p.name for p in PKG.glob('*.py'))
    assert len(top) <= 14, top
    assert not [n for n in top if n.startswith(('lm_', 'hf_', 'openai_'))]
    assert {r for r in ROOMS if (PKG/r/'__init__.py').exists()} == set(ROOMS)
    nbs = [p for p in (PKG.parent/'nbs').glob('[0-9]*.ipynb')]
    assert len(nbs) >= 80
    name = lambda nb: nb.stem.split('_', 1)[1]
    wrong = {nb.name: default_exp(nb) for nb in nbs
             if name(nb) != default_exp(nb).removesuffix('.__init__').replace('.', '_').strip('_')}
    assert wrong == {}


def lines(module: str) -> str: return FILES[W + module].read_text()


def test_sizes():
    "The front door and the client stay small: cli <= 370 lines, 45 flags; client <= 400 lines, 20 patches."
    cli, client = lines('cli'), lines('models.openai_client')
    assert len(cli.splitlines()) <= 370 and cli.count('add_argument(') <= 45
    assert len(client.splitlines()) <= 400 and client.count('@patch') <= 20
    big = {m: n for m, p in FILES.items() if system_of(m) is None and (n := len(p.read_text().splitlines())) > 520}
    assert big == {}


def test_readme_layout_names_each_room():
    "The README has one Layout section, and it names each room's folder and says what the room is for."
    text = (PKG.parent/'README.md').read_text()
    assert text.count('\n## Layout\n') == 1
    layout = text.split('\n## Layout\n')[1].split('\n## ')[0]
    assert [r for r in ROOMS if f'wordbench/{r}/,' not in layout] == []
    docs = {r: (PKG/r/'__init__.py').read_text().strip() for r in ROOMS}
    assert all(d.startswith('"') and len(d) > 20 for d in docs.values()), docs
