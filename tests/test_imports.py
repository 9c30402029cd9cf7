"""Module structure: every module imports on its own in a fresh interpreter, and no two modules
import each other at import time (the module-level import graph has no cycle; imports under
``if TYPE_CHECKING:`` and inside functions are not import-time edges)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import plansim

ROOT = Path(plansim.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Import statements run when the module is imported (not in functions or classes, not
    under ``if TYPE_CHECKING:``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody
                           + [n for h in node.handlers for n in h.body])
    return found


def _edges(name: str, path: Path) -> set[str]:
    """The plansim modules ``name`` imports at import time (``from pkg import submodule``
    counts as the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _module_level_imports(path):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
        out.update(subs if len(subs) == len(node.names) else subs | {base})
    return {m for m in out if m in MODULES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_only_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others_at_import_time():
    graph = {name: _edges(name, path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


_IMPORT_EACH = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "plansim" or m.startswith("plansim.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def test_every_module_imports_on_its_own_in_a_fresh_interpreter():
    # One interpreter for all (third-party packages stay loaded); before each module every
    # plansim module is forgotten, so each is imported first, as a user's `import` would.
    names = list(MODULES)
    out = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *names], capture_output=True,
                         text=True, check=True, cwd=ROOT.parent)
    assert out.stdout.strip() == ""
