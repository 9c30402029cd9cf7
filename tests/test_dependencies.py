"""The declared dependencies are what the code imports: each distribution ``pip install .``
pulls (``[project] dependencies`` of ``pyproject.toml``) is imported somewhere in ``plansim``,
and each extra's by the code it serves (``test`` by the suite, ``bench`` by the benchmarks, the
others by ``plansim``); and every package ``plansim`` imports is declared or brought by a
declared one. Imports are read from the source (every ``import`` statement, function-level
ones included, and ``importlib.import_module`` of a literal name), so nothing is run."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The folder whose code uses an extra; other extras serve plansim itself.
EXTRA_USERS = {"test": "tests", "bench": "bench"}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised as PEP 503 does."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _import_names() -> dict[str, set[str]]:
    """Installed distribution (normalised) -> the top-level modules it provides."""
    names: dict[str, set[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            names.setdefault(_name(dist), set()).add(module)
    return names


@cache
def _imported(folder: str) -> frozenset[str]:
    """Top-level names of the modules that the Python files under ``folder`` import."""
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.add(node.args[0].value.split(".")[0])
    return frozenset(found)


DECLARED = [(None, r) for r in PROJECT["dependencies"]] + [
    (extra, r) for extra, reqs in PROJECT["optional-dependencies"].items() for r in reqs
]


@pytest.mark.parametrize(
    "extra, requirement", DECLARED, ids=[f"{e or 'install'}:{_name(r)}" for e, r in DECLARED]
)
def test_each_declared_dependency_is_imported_by_the_code_it_serves(extra, requirement):
    dist = _name(requirement)
    folder = EXTRA_USERS.get(extra, "plansim")
    if dist in _import_names():
        modules = _import_names()[dist]
    elif extra is None:
        pytest.fail(f"{dist} is declared but not installed: install plansim first")
    else:
        # An extra the suite does not install has no metadata to map its imports by: its
        # module is taken to be named as the distribution (a mismatch fails, it never skips).
        modules = {dist.replace("-", "_")}
    assert modules & _imported(folder), (
        f"{dist} is declared ({extra or 'dependencies'}) but {folder}/ imports none of "
        f"{sorted(modules)}: remove it, or use it"
    )


def test_every_package_plansim_imports_is_declared_or_brought_by_a_declared_one():
    declared = {_name(r) for _, r in DECLARED}
    brought = {
        _name(r)
        for dist in declared
        if dist in _import_names()
        for r in metadata.requires(dist) or ()
        if "extra ==" not in r
    }
    providers = {module: dist for dist, modules in _import_names().items() for module in modules}
    third_party = _imported("plansim") - set(sys.stdlib_module_names) - {"plansim"}
    undeclared = {
        m: providers.get(m) for m in third_party if providers.get(m) not in declared | brought
    }
    assert not undeclared, f"imported but not declared: {undeclared}"


def test_the_source_scan_sees_function_level_and_importlib_imports(tmp_path, monkeypatch):
    # The scan itself, on a file of each kind of import.
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "m.py").write_text(
        "import a.b\nfrom c import d\nfrom . import e\n"
        "def f():\n    import g\n    importlib.import_module('h.i')\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    _imported.cache_clear()
    try:
        assert _imported("probe") == {"a", "c", "g", "h"}
    finally:
        _imported.cache_clear()
