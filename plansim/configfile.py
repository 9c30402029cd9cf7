"""Reading config files: the one reader of every YAML or JSON file a user hands plansim
(deployments, engine args, planner configs, retune run files).

``read_config(path, what)`` returns the top-level mapping. Every problem is a ``ConfigError``
naming the file (and the line where one is known): unreadable file, bytes that are not UTF-8, a
syntax error, a key given twice in one mapping (YAML and JSON parsers would silently keep the
last one), a top level that is not a mapping, a text with a NUL character (no key or value has
one, and a path with one cannot be opened). A UTF-8 byte-order mark is accepted.

Values are not checked here: the pydantic models behind each file do that (``plansim.validation``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from plansim.errors import ConfigError, InputError

_MERGE_TAG = "tag:yaml.org,2002:merge"


def read_config(path: str | Path, *, what: str = "config file") -> dict[str, Any]:
    """The mapping in the YAML/JSON file ``path`` (an empty file is ``{}``); see the module
    docstring. ``what`` names the file's role in the "cannot read" message."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", source=source) from None
    parsed = parse_config_bytes(data, source, Path(path).suffix.lower())
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ConfigError(
            f"a {what} must be a mapping at the top level, not a {_kind(parsed)}", source=source
        )
    field = _nul_field(parsed)
    if field is not None:
        raise ConfigError("a NUL character in a text", source=source, field=field)
    return parsed


def _nul_field(value: Any, at: str = "") -> str | None:
    """The dotted key of the first key or text in ``value`` holding a NUL character, if any."""
    if isinstance(value, str):
        return at if "\0" in value else None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        shown = str(key).replace("\0", "\\0")  # the NUL written as the user would write it
        name = f"{at}[{key}]" if isinstance(value, list) else f"{at}.{shown}" if at else shown
        found = name if isinstance(key, str) and "\0" in key else _nul_field(item, name)
        if found is not None:
            return found
    return None


def parse_config_bytes(data: bytes, source: str, suffix: str = "") -> Any:
    """The data in a config file's bytes: JSON for ``suffix`` ``.json``, YAML for ``.yaml`` and
    ``.yml``, otherwise JSON if it parses, else YAML."""
    text = _decode(data, source)
    if suffix == ".json":
        return _json(text, source)
    if suffix in (".yaml", ".yml"):
        return _yaml(text, source)
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs(source))
    except json.JSONDecodeError:
        return _yaml(text, source)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column}",
            source=source,
            line=line,
        ) from None


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs(source))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.msg} at column {exc.colno}", source=source, line=exc.lineno
        ) from None


def _unique_pairs(source: str):
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError("given twice in one object", source=source, field=key)
            out[key] = value
        return out

    return build


def _yaml(text: str, source: str) -> Any:
    import yaml  # only for YAML files: a JSON-only run never loads it

    try:
        return yaml.load(text, Loader=_unique_key_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        if line is None and isinstance(getattr(exc, "position", None), int):
            line = text.count("\n", 0, exc.position) + 1  # a character the reader refuses
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"invalid YAML: {' '.join(problem.split())}", source=source, line=line
        ) from None
    except _DuplicateKey as exc:
        raise ConfigError(
            f"given twice in one mapping (first on line {exc.first_line})",
            source=source,
            line=exc.line,
            field=str(exc.key),
        ) from None


_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def locate(exc: InputError) -> InputError:
    """``exc`` with the line of its field in its source, when it names a config file (YAML or
    JSON) and a dotted field but no line; else ``exc`` itself. The key is looked up at its path
    from the top of the file, else at that path inside any mapping of it (a planner block
    within a deployment file)."""
    if exc.line is not None or not exc.source or not exc.field:
        return exc
    path = Path(exc.source)
    if path.suffix.lower() not in _CONFIG_SUFFIXES or not path.is_file():
        return exc
    import yaml

    try:
        root = yaml.compose(path.read_bytes().decode("utf-8-sig"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return exc
    line = _key_line(root, exc.field.split("."))
    if line is None:
        return exc
    return type(exc)(exc.message, source=exc.source, line=line, field=exc.field)


def _key_line(root: Any, parts: list[str]) -> int | None:
    """The 1-based line of the key at ``parts`` below ``root``, or below any mapping in it."""
    import yaml

    pending = [root]
    while pending:
        node = pending.pop(0)
        if isinstance(node, yaml.MappingNode):
            found = _at_path(node, parts)
            if found is not None:
                return found
            pending += [value for _, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            pending += list(node.value)
    return None


def _at_path(node: Any, parts: list[str]) -> int | None:
    import yaml

    for i, part in enumerate(parts):
        if not isinstance(node, yaml.MappingNode):
            return None
        match = next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part),
            None,
        )
        if match is None:
            return None
        if i == len(parts) - 1:
            return match[0].start_mark.line + 1
        node = match[1]
    return None


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first_line = key, line, first_line


@functools.cache
def _unique_key_loader() -> type:
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (merge
    keys, ``<<: *anchor``, may still be overridden: that is what they are for)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _DuplicateKey(key, line, seen[key])
                    seen[key] = line
                except TypeError:  # an unhashable key: the base loader reports it
                    continue
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _kind(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )
