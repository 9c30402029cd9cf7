"""Extension points: every one is a ``plansim.registry.Registry`` whose entries are each one
module and one registration line, and nothing else names a registered entry (no hand-kept list,
no branch on a registered name, no help text listing names, outside the entry's own modules)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path

import pytest

import plansim
from plansim.planner_core.predictors.factory import PREDICTORS
from plansim.planner_core.scaling_policies import SCALING_POLICIES
from plansim.registry import Registry, load_target
from plansim.reports.folder import FOLDER_REPORTS
from plansim.sim.routing import ROUTERS
from plansim.sim.schedulers import SCHEDULERS
from plansim.sim.timing import TIMING_MODELS
from plansim.traces.formats import TRACE_FORMATS
from plansim.workers.backends import EXECUTORS

ROOT = Path(plansim.__file__).resolve().parent

# Each extension point: its registry and the module holding its table.
POINTS: dict[str, tuple[Registry, str]] = {
    "engine backend": (SCHEDULERS, "plansim.sim.schedulers"),
    "router mode": (ROUTERS, "plansim.sim.routing"),
    "timing model type": (TIMING_MODELS, "plansim.sim.timing"),
    "load predictor": (PREDICTORS, "plansim.planner_core.predictors.factory"),
    "scaling policy": (SCALING_POLICIES, "plansim.planner_core.scaling_policies"),
    "trace format": (TRACE_FORMATS, "plansim.traces.formats"),
    "folder report": (FOLDER_REPORTS, "plansim.reports.folder"),
    "executor backend": (EXECUTORS, "plansim.workers.backends"),
}
# Points whose names users choose (in configs, flags, files): only those can be branched on.
# A folder report is chosen by the tables a folder holds, and its names are common words.
USER_NAMED = [point for point in POINTS if point != "folder report"]

# Words other namespaces use too, by module: where the word is not the registered name.
OTHER_NAMESPACES: dict[str, set[str]] = {
    # AIConfigurator's backends (``AicSpec.backend``, checked against the SDK's support
    # matrix): the SDK's own names, which ``aic`` (below ``sim``) cannot read from the
    # scheduler registry, and the profile command's help for them.
    "plansim.aic.memory": {"vllm", "sglang", "trtllm"},
    "plansim.aic.sdk": {"vllm", "sglang", "trtllm"},
    "plansim.commands.profile": {"vllm", "sglang", "trtllm"},
    # Synthetic traffic: a length distribution ``fixed``, a rate schedule ``constant``.
    "plansim.traces.synth": {"fixed", "constant"},
    "plansim.commands.synth_options": {"fixed", "constant"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


@functools.cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def _targets_in(record: object) -> list[str]:
    """The ``"module:attribute"`` targets a registered record names (a scaling policy's
    ``build``, a trace format's reader, linker, writer, ...), nested records included."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return []
    out = []
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if isinstance(value, str) and re.fullmatch(r"plansim(\.\w+)+:\w+", value):
            out.append(value)
        out += _targets_in(value)
    return out


def _owners(registry: Registry, name: str) -> set[str]:
    """The modules an entry is: its registered object's, and those its record names."""
    targets = [registry._targets[name], *_targets_in(registry.get(name))]
    return {target.partition(":")[0] for target in targets}


def _table(module: str, registry: Registry) -> ast.Dict:
    """The dict literal passed to the ``Registry(...)`` call of ``module``'s table."""
    tree = _tree(module)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Registry"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == registry.what
    ]
    assert len(calls) == 1, f"{module}: one Registry({registry.what!r}, ...) table"
    table = calls[0].args[1]
    assert isinstance(table, ast.Dict)
    return table


@pytest.mark.parametrize("point", POINTS)
def test_each_entry_is_one_module_and_one_registration_line(point):
    registry, module = POINTS[point]
    table = _table(module, registry)
    assert [k.value for k in table.keys] == list(registry.names())
    for key, value in zip(table.keys, table.values, strict=True):
        assert isinstance(value, ast.Constant) and key.lineno == value.end_lineno, (
            f"{key.value}: its registration is one line"
        )
        target_module, _, attr = value.value.partition(":")
        assert target_module in MODULES, f"{key.value}: {target_module} is a module"
        tree = _tree(target_module)
        defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        defined |= {
            t.id
            for n in tree.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        assert attr in defined, f"{key.value}: {target_module} defines {attr}"
        for target in _targets_in(registry.get(key.value)):  # it loads, and what it names
            load_target(target)


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


@functools.cache
def _mentions(tree: ast.AST) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """Every place ``tree`` could name entries: ``(line, kind, strings)`` of each comparison,
    list, tuple, set, dict keys and text (not a docstring)."""
    docstrings = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            strings = [s for side in (node.left, *node.comparators) for s in _strings(side)]
            kind = "compares with"
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings, kind = _strings(node), "lists"
        elif isinstance(node, ast.Dict):
            strings = [s for key in node.keys if key is not None for s in _strings(key)]
            kind = "keys a table by"
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            strings, kind = [node.value], "names in a text"
        else:
            continue
        if strings:
            out.append((node.lineno, kind, tuple(strings)))
    return tuple(out)


def _namings(tree: ast.AST, names: set[str]) -> list[tuple[int, str, list[str]]]:
    """Where ``tree`` names registered ``names``: a comparison with one (``==``, ``in``, ...),
    a list, tuple, set or dict of two or more, a text (not a docstring) naming two or more."""
    if not names:
        return []
    words = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(names))) + r")(?![\w-])")
    found = []
    for line, kind, strings in _mentions(tree):
        if kind == "names in a text":
            hits = sorted(set(words.findall(strings[0])))
        else:
            hits = [s for s in strings if s in names]
        if hits and (kind == "compares with" or len(hits) > 1):
            found.append((line, kind, hits))
    return found


@pytest.mark.parametrize("point", USER_NAMED)
def test_nothing_outside_an_entrys_modules_names_it(point):
    registry, table_module = POINTS[point]
    owners = {name: _owners(registry, name) for name in registry}
    problems = []
    table = _table(table_module, registry)
    for module in MODULES:
        # A module may name the entries it is part of.
        names = {n for n, mods in owners.items() if module not in mods}
        names -= OTHER_NAMESPACES.get(module, set())
        for line, kind, hits in _namings(_tree(module), names):
            if not (module == table_module and table.lineno <= line <= table.end_lineno):
                problems.append(f"{module}:{line} {kind} {point} {', '.join(hits)}")
    assert problems == []


def test_the_check_finds_a_branch_a_list_and_a_help_text():
    tree = ast.parse(
        '"""Docs may name dynamo and mooncake."""\n'
        'if fmt == "dynamo":\n    pass\n'
        'CHOICES = ("dynamo", "azure")\n'
        'HELP = "Trace format: dynamo or mooncake."\n'
        'ONE = {"dynamo": 1}\n'
    )
    assert _namings(tree, {"dynamo", "mooncake", "azure"}) == [
        (2, "compares with", ["dynamo"]),
        (4, "lists", ["dynamo", "azure"]),
        (5, "names in a text", ["dynamo", "mooncake"]),
    ]
