"""Trace formats: ``TRACE_FORMATS``, the one table of every format plansim reads or writes.

Each format is one declaration module here (its ``FORMAT``, a ``base.TraceFormat``): what it is
(for help), what detection looks for in a file's first line and the test that finds it
(``sniff``), its reader, its closed-loop graph builder (``linker``), whether it records
latencies, the block size a trace of it is read with when the file does not say, its writer
(``trace convert``, ``trace synth``) and the reader of retune windows. Readers, linkers and
writers are ``"module:attribute"`` targets imported when used, so detecting a format imports no
reader. The registry's order is detection's: the most specific test first (the agentic Mooncake
header is also a row with a ``schema``).

The ``--format``/``--to`` choices and help texts, the loader's checks and the convert command's
rules all derive from the records (``input_help``, ``output_help``, ``block_size_help``).

Adding a format: one declaration module (its reader may live in it, or be named by its target)
and one line in ``TRACE_FORMATS``.
"""

from __future__ import annotations

from plansim.registry import Registry
from plansim.traces.formats.base import TraceFormat, TraceWriter

TRACE_FORMATS: Registry[TraceFormat] = Registry(
    "trace format",
    {
        "agentic_mooncake": "plansim.traces.formats.agentic_mooncake:FORMAT",
        "dynamo": "plansim.traces.formats.dynamo:FORMAT",
        "mooncake": "plansim.traces.formats.mooncake:FORMAT",
        "azure": "plansim.traces.formats.azure:FORMAT",
    },
)


def _either(names: list[str], word: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def writable() -> tuple[str, ...]:
    """The formats ``trace convert`` and ``trace synth`` write."""
    return tuple(name for name, fmt in TRACE_FORMATS.items() if fmt.writer is not None)


def windowed() -> str:
    """The formats retune windows read, with what they are (for errors)."""
    return _either(
        [
            f"{name} traces ({fmt.about})"
            for name, fmt in TRACE_FORMATS.items()
            if fmt.windows is not None
        ]
    )


def input_help() -> str:
    """``--format``'s help."""
    return (
        "Input format: "
        + _either(
            [
                "auto (detect from the content)",
                *(f"{name} ({fmt.about})" for name, fmt in TRACE_FORMATS.items()),
            ]
        )
        + "."
    )


def output_help() -> str:
    """``--to``'s help."""
    return (
        "Output format: "
        + _either([f"{name} ({TRACE_FORMATS.get(name).writer.about})" for name in writable()])
        + "."
    )


def block_size_help() -> str:
    """``--trace-block-size``'s help."""
    given = [
        (name, fmt.block_size) for name, fmt in TRACE_FORMATS.items() if fmt.block_size is not None
    ]
    carried = [name for name, fmt in TRACE_FORMATS.items() if fmt.block_size is None]
    defaults = "; ".join(
        f"{_either([n for n, b in given if b == size], 'and')} traces default to {size}"
        for size in dict.fromkeys(b for _, b in given)
    )
    return (
        f"Tokens per hash block. {defaults}; {_either(carried, 'and')} traces carry their own "
        "block size and a different value is an error."
    )


def detection_hint() -> str:
    """What detection looks for, every format's first line (for the unknown-format error)."""
    return _either([fmt.first_line for _, fmt in TRACE_FORMATS.items()])


__all__ = [
    "TRACE_FORMATS",
    "TraceFormat",
    "TraceWriter",
    "block_size_help",
    "detection_hint",
    "input_help",
    "output_help",
    "windowed",
    "writable",
]
