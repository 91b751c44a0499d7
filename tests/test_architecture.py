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
    assert len(shared) >= 12
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
BUILDERS = {f'{W}{s}.build' for s in SYSTEMS}
TASK_MODULES = {f'{W}{s}.task' for s in SYSTEMS} | {W + 'winodict.foreign'}
BACKENDS = {W + m for m in ('lm_hf', 'lm_mlm', 'lm_t5', 'openai_lm', 'hf_generate', 'hf_common', 'hf_kernels',
                            'openai_endpoint', 'servers')}
# the local decode engine, kernels and backend; `hf_common` (tokenising as the `hf` backend does) is shared with it
HF_ENGINE = {W + m for m in ('hf_generate', 'hf_kernels', 'lm_hf')}
SERVER_CLIENT = {W + 'openai_lm', W + 'openai_endpoint'}
RULES = {  # rule: (whether it binds a module, the modules that module may not import)
    'a builder imports no task of its system':
        (lambda m: m in BUILDERS, lambda m: {t for t in TASK_MODULES if system_of(t) == system_of(m)}),
    'a task imports no builder': (lambda m: m in TASK_MODULES, lambda m: BUILDERS),
    'a system imports no backend': (lambda m: system_of(m) is not None, lambda m: BACKENDS),
    'the server client imports no HF engine': (lambda m: m in SERVER_CLIENT, lambda m: HF_ENGINE),
    'only the command line is the front door': (lambda m: m not in (W + 'cli', W + '__main__'), lambda m: {W + 'cli'}),
}


def module_name(path: Path) -> str:
    return '.'.join(package_of(path) + (path.stem,)).removesuffix('.__init__')


GRAPH = {module_name(p): imports(p) for p in PKG.rglob('*.py') if p.stem != '_modidx'}   # module -> imports


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
    bad = {'a builder imports no task of its system': {W + 'newterm.build': {W + 'newterm.task.DEDUCE'}},
           'a task imports no builder': {W + 'winodict.foreign': {W + 'winodict.build'}},
           'a system imports no backend': {W + 'probes.task': {W + 'lm_t5'}},
           'the server client imports no HF engine': {W + 'openai_lm': {W + 'hf_generate.plain_chat_prompt'}},
           'only the command line is the front door': {W + 'tasks': {W + 'cli.builtin_systems'}}}
    assert set(bad) == set(RULES)
    for rule, graph in bad.items():
        assert broken(rule, graph) == {m: sorted(v) for m, v in graph.items()}, rule
    ok = {W + 'newterm.build': {W + 'newterm.terms', W + 'winodict.task'},   # another system's task: another rule
          W + 'cli': {W + 'cli'}, W + '__main__': {W + 'cli.main'}}
    assert not any(broken(rule, ok) for rule in RULES)


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
    assert test('from ..lm_hf import _pad as pad') == ['wordbench.models.hf._pad']
    assert test('import wordbench.models.cache as c\nc._chunk()') == ['wordbench.models.cache._chunk']
    assert test('from wordbench.models import lm\nlm._u') == ['wordbench.models.lm._u']
    assert test('from .task import load\nx = obj._private\nfrom . import __init__') == []


BUILDER_LAYER = ('Funnel', 'ScriptedLM', 'CallLog', 'RunDir', 'open_lm', 'annotation_sheet', 'read_annotations',
                 'agreement')   # what `wordbench.build` holds for every builder


def defined(source: str) -> set[str]:
    "The names a module defines at its top level: functions, classes and assigned names."
    out = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.add(node.name)
        elif isinstance(node, ast.Assign): out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def test_one_builder_layer():
    "The funnel, scripted model, run folder and annotation sheet are defined once; every builder counts in `Funnel`."
    files = {module_name(p): p for p in PKG.rglob('*.py') if p.stem != '_modidx'}
    assert set(BUILDER_LAYER) <= defined(files[W + 'build'].read_text())
    again = {m: sorted(defined(p.read_text()) & set(BUILDER_LAYER)) for m, p in files.items() if m != W + 'build'}
    assert not any(again.values()), {m: v for m, v in again.items() if v}
    assert BUILDERS <= set(GRAPH)
    assert not [b for b in sorted(BUILDERS) if W + 'build.Funnel' not in GRAPH[b]]
    assert defined('class ScriptedLM(LM): pass\nagreement = 1\ndef f(): pass') == {'ScriptedLM', 'agreement', 'f'}
