"The layering, checked from the import graph of the package: shared modules never import a system, systems never each other."
import ast
from pathlib import Path
import wordbench

PKG = Path(wordbench.__file__).parent
SYSTEMS = ('winodict', 'newterm', 'probes', 'wscplus')
TOP = ('cli',)   # the command line sits above every system and imports them by name


def imports(path: Path) -> set[str]:
    "Every `wordbench...` module a file imports, at the top or inside a function (relative imports resolved)."
    parts = path.relative_to(PKG.parent).with_suffix('').parts
    pkg = parts[:-1] if parts[-1] != '__init__' else parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import): out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level: base = '.'.join(pkg[:len(pkg) - node.level + 1] + ((base,) if base else ()))
            out |= {base} | {f'{base}.{a.name}' for a in node.names}
    return {m for m in out if m.startswith('wordbench')}


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
