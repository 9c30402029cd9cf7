"""Module structure: the floors of ``docs/architecture.md`` hold, no two modules import each other,
and every module imports on its own in a fresh interpreter.

An import is any ``import`` statement of a module, at module level or inside a function or class,
except under ``if TYPE_CHECKING:``; a registry entry (a string ``"plansim.pkg.module:attribute"``)
counts as an import of its module, since the registry imports it on first use. The layer order
is the table of ``docs/architecture.md``'s Layers section, read here: a module may import any
module of its own top-level package or module, and of the floors below its own, nothing else.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import plansim

ROOT = Path(plansim.__file__).resolve().parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()
# A registry entry: "plansim.sim.routing.kv_router:KvRouter".
_ENTRY = re.compile(r"plansim(?:\.\w+)+:\w+")


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> list[ast.Import | ast.ImportFrom | ast.Constant]:
    """Every import statement of the module (in functions and classes too) and every registry
    entry string, except what is under ``if TYPE_CHECKING:`` (its ``else`` counts)."""
    found: list[ast.Import | ast.ImportFrom | ast.Constant] = []
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _ENTRY.fullmatch(node.value):
                found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def _edges(name: str, path: Path) -> set[Edge]:
    """The plansim modules ``name`` imports (``from pkg import submodule`` counts as the
    submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[tuple[str, int]] = set()
    for node in _imports(path):
        if isinstance(node, ast.Constant):
            targets.add((node.value.partition(":")[0], node.lineno))
            continue
        if isinstance(node, ast.Import):
            targets.update((a.name, node.lineno) for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
        targets.update(
            (m, node.lineno) for m in (subs if len(subs) == len(node.names) else subs | {base})
        )
    return {Edge(name, m, line) for m, line in targets if m in MODULES and m != name}


EDGES = {e for name, path in MODULES.items() for e in _edges(name, path)}


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


def _unit(module: str) -> str:
    """The top-level module or package ``module`` belongs to (``plansim`` for the package's
    own ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _floors(text: str) -> dict[str, int]:
    """Unit -> floor from the table of the Layers section (rows ``| floor | `unit`, ... |``)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for row in re.finditer(r"^\| *(\d+) *\|([^|]*)\|", section, re.MULTILINE):
        for unit in re.findall(r"`([\w.]+)`", row.group(2)):
            assert unit not in out, f"{unit} is on two floors of the Layers table"
            out[unit] = int(row.group(1))
    return out


FLOORS = _floors(ARCHITECTURE.read_text(encoding="utf-8"))


def _against_the_floors(edges: set[Edge], floors: dict[str, int]) -> list[str]:
    """Imports from one unit into another that is not on a floor below it."""
    out = []
    for e in sorted(edges, key=lambda e: (e.source, e.line, e.target)):
        a, b = _unit(e.source), _unit(e.target)
        if a != b and not floors[b] < floors[a]:
            out.append(
                f"{e.source}:{e.line} imports {e.target} "
                f"({a} is on floor {floors[a]}, {b} on floor {floors[b]})"
            )
    return out


def test_the_cycle_finder_finds_a_cycle_and_only_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_and_registry_entries_count_and_type_checking_ones_do_not(tmp_path):
    pkg = tmp_path / "plansim"
    pkg.mkdir()
    (pkg / "probe.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from plansim import errors\n"
        "else:\n"
        "    from plansim import roles\n"
        "def f():\n"
        "    import plansim.schema\n"
        "class C:\n"
        "    def g(self):\n"
        "        from plansim.io import atomic_open\n"
        "TABLE = {'x': 'plansim.params:Param', 'log': 'plansim.limits'}\n"
    )
    found = {(e.target, e.line) for e in _edges("plansim.probe", pkg / "probe.py")}
    assert found == {
        ("plansim.roles", 5),
        ("plansim.schema", 7),
        ("plansim.io", 10),
        ("plansim.params", 11),
    }


def test_the_floor_check_names_an_import_that_runs_up_or_across():
    floors = {"errors": 1, "io": 2, "traces": 2, "sim": 3}
    edges = {
        Edge("plansim.sim.host", "plansim.io", 3),
        Edge("plansim.io", "plansim.sim.clock", 40),
        Edge("plansim.traces.load", "plansim.io", 7),
        Edge("plansim.traces", "plansim.traces.load", 9),
    }
    assert _against_the_floors(edges, floors) == [
        "plansim.io:40 imports plansim.sim.clock (io is on floor 2, sim on floor 3)",
        "plansim.traces.load:7 imports plansim.io (traces is on floor 2, io on floor 2)",
    ]


def test_every_top_level_module_and_package_is_on_one_floor_of_the_layers_table():
    units = {_unit(name) for name in MODULES}
    assert sorted(units - FLOORS.keys()) == [], "on no floor of docs/architecture.md's Layers"
    assert sorted(FLOORS.keys() - units) == [], "in the Layers table but not in plansim"


def test_no_import_runs_against_the_layer_order():
    assert _against_the_floors(EDGES, FLOORS) == []


def test_no_module_imports_itself_through_others():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for e in EDGES:
        graph[e.source].add(e.target)
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
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, *names],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT.parent,
    )
    assert out.stdout.strip() == ""
