"""plansim.commands.help_text: --help in click's words, docstrings reflowed, short helps."""

from __future__ import annotations

import re

import pytest
from test_console import commands

from plansim.commands.help_text import reflow

# typer's own type display: <int>, <bool>, <list[Path]>, <int range>.
TYPER_TYPES = re.compile(r"<(?:int|float|str|bool|path|list\[[^\]]*\])(?: range)?>", re.IGNORECASE)


def test_a_docstring_paragraph_is_one_line_and_lists_keep_their_lines():
    text = "First line\nwrapped here.\n\nSecond paragraph\n  wrapped too.\n- item one\n- item two"
    assert reflow(text) == (
        "First line wrapped here.\n\nSecond paragraph wrapped too.\n- item one\n- item two"
    )
    assert reflow("\b\nkept\nas is") == "\b\nkept\nas is"


@pytest.mark.parametrize("command", commands())
def test_help_shows_no_typer_types_and_no_source_line_breaks(run_cli, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "200")
    code, stdout, _ = run_cli(*command.split(), "--help")
    assert code == 0
    assert TYPER_TYPES.findall(stdout) == []
    # At 200 columns a docstring paragraph of the source (wrapped at 100) fits on one line:
    # no help line ends mid-sentence without a panel border.
    prose = [line.strip() for line in stdout.splitlines() if line.strip() and "│" not in line]
    assert all(not line.endswith((" the", " a", " of", " to", ",")) for line in prose), prose


def test_router_param_help_names_the_knobs_only(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    _, stdout, _ = run_cli("replay", "run", "--help")
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "--router-param" in line)
    end = next(i for i in range(start + 1, len(lines)) if "│ --" in lines[i])
    # Was 40 lines of every knob's bounds and meaning; each knob's flag or message has those.
    assert end - start <= 8
    assert "prefill_load_scale" in "".join(lines[start:end])
