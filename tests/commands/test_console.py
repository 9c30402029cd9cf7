"""plansim.commands.console: every command of the CLI app takes --json and -q, --version works,
and each command's --json prints one JSON object, the file its run writes where it writes one.

The commands are enumerated from the app itself, so that a command added later must be given an
example here (``EXAMPLES``) to pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import typer

from plansim import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "traces" / "sample.dynamo.jsonl.gz"
RETUNE = ROOT / "examples" / "retune.yaml"
MICRO = ROOT / "tests" / "sim" / "reference" / "micro" / "M7-round-robin.jsonl"
MICRO_FLAGS = ("--format", "mooncake", "--trace-block-size", "512")
DEPLOY = "num_workers: 2\nsla: {ttft_ms: 1000, tpot_ms: 50}\n"


def commands() -> list[str]:
    """Every command of the CLI app, as its words (``replay run``)."""
    cli.register_commands([])
    found: list[str] = []

    def walk(command: object, words: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, [*words, name])
        else:
            found.append(" ".join(words))

    walk(typer.main.get_command(cli.app), [])
    return sorted(found)


def _replay(run_cli: Callable, out: Path) -> None:
    config = out.parent / "deploy.yaml"
    config.write_text(DEPLOY)
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO),
        *MICRO_FLAGS,
        "-c",
        str(config),
        "--out",
        str(out),
        "--no-report",
        "-q",
    )
    assert code == 0, err


# Per command: (arguments given a scratch folder and run_cli, the file whose object --json
# prints, or None when the run writes no such file).
Example = Callable[[Path, Callable], tuple[list[str], str | None]]


def _compare(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    _replay(run_cli, d / "a")
    _replay(run_cli, d / "b")
    return ["compare", str(d / "a"), str(d / "b"), "--out", str(d / "out")], "compare.json"


def _report(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    _replay(run_cli, d / "out")
    return ["report", str(d / "out")], None


def _capacity(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    (d / "deploy.yaml").write_text(DEPLOY)
    return (
        [
            "capacity",
            str(MICRO),
            *MICRO_FLAGS,
            "-c",
            str(d / "deploy.yaml"),
            "--max-gpu-budget",
            "2",
            "--no-default-policies",
            "--segment-s",
            "10",
            "--jobs",
            "1",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "capacity.json",
    )


def _calibrate(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    import yaml

    from tests.calibrate.calibrate_traces import DEPLOYMENT, record, synthetic

    trace = record(d / "trace.jsonl.gz", synthetic(n=400), DEPLOYMENT)
    (d / "deploy.yaml").write_text(yaml.safe_dump(DEPLOYMENT))
    return (
        [
            "calibrate",
            str(trace),
            "-c",
            str(d / "deploy.yaml"),
            "--family",
            "scaled",
            "--jobs",
            "1",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "calibration.json",
    )


def _fleet(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    from tests.fleet.fleet_cases import on_demand, write_fleet

    path = write_fleet(d, on_demand(4, 8), models=("light",), search={})
    return (
        ["fleet", str(path), "--jobs", "1", "--out", str(d / "out"), "--no-report"],
        "fleet.json",
    )


def _replay_run(d: Path, run_cli: Callable) -> tuple[list[str], str | None]:
    (d / "deploy.yaml").write_text(DEPLOY)
    return (
        [
            "replay",
            "run",
            str(MICRO),
            *MICRO_FLAGS,
            "-c",
            str(d / "deploy.yaml"),
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "summary.json",
    )


EXAMPLES: dict[str, Example] = {
    "calibrate": _calibrate,
    "capacity": _capacity,
    "compare": _compare,
    "fleet": _fleet,
    "predict compare": lambda d, _: (
        [
            "predict",
            "compare",
            str(SAMPLE),
            "--interval",
            "30",
            "--predictors",
            "constant",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "summary.json",
    ),
    "profile aic": lambda d, _: (
        [
            "profile",
            "aic",
            "--model",
            "Qwen/Qwen3-32B",
            "--system",
            "h200_sxm",
            "--max-num-seqs",
            "16",
            "--max-context",
            "4096",
            "-o",
            str(d / "p.npz"),
        ],
        None,
    ),
    "replay run": _replay_run,
    "replay synth": lambda d, _: (
        [
            "replay",
            "synth",
            "--rate",
            "5",
            "--duration",
            "5",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "summary.json",
    ),
    "report": _report,
    "retune sweep": lambda d, _: (
        ["retune", "sweep", str(RETUNE), "--out", str(d / "out"), "--no-report", "--no-baseline"],
        "summary.json",
    ),
    "retune window": lambda d, _: (
        [
            "retune",
            "window",
            str(RETUNE),
            "--window",
            "0",
            "--no-timeout",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "summary.json",
    ),
    "retune windows": lambda d, _: (
        [
            "retune",
            "windows",
            str(RETUNE),
            "--from",
            "0",
            "--to",
            "0",
            "--no-timeout",
            "--out",
            str(d / "out"),
            "--no-report",
        ],
        "summary.json",
    ),
    "trace convert": lambda d, _: (
        ["trace", "convert", str(MICRO), str(d / "t.jsonl"), "--to", "mooncake", *MICRO_FLAGS],
        None,
    ),
    "trace inspect": lambda d, _: (["trace", "inspect", str(SAMPLE)], None),
    "trace synth": lambda d, _: (
        ["trace", "synth", "--rate", "5", "--duration", "10", "-o", str(d / "s.jsonl.gz")],
        None,
    ),
}


def test_every_command_has_an_example():
    assert sorted(EXAMPLES) == commands(), "give every command an example in EXAMPLES"


def test_version_prints_the_installed_version(run_cli):
    from importlib.metadata import version

    code, stdout, _ = run_cli("--version")
    assert (code, stdout) == (0, f"plansim {version('plansim')}\n")


@pytest.mark.parametrize("command", commands())
def test_every_command_takes_json_and_quiet(run_cli, command):
    code, stdout, err = run_cli(*command.split(), "--help")
    assert code == 0, err
    assert "--json" in stdout and "--quiet" in stdout and "-q" in stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_json_prints_one_object_the_run_s_file(run_cli, tmp_path, command):
    args, written = EXAMPLES[command](tmp_path, run_cli)
    code, stdout, err = run_cli(*args, "--json")
    assert code == 0, err
    result = json.loads(stdout)  # one object, nothing else on stdout
    assert isinstance(result, dict) and result
    if written is not None:
        out = Path(args[args.index("--out") + 1])
        assert stdout == (out / written).read_text()


def test_quiet_prints_only_the_result_line(run_cli, tmp_path):
    (tmp_path / "deploy.yaml").write_text(DEPLOY)
    code, stdout, err = run_cli(
        "replay",
        "run",
        str(MICRO),
        *MICRO_FLAGS,
        "-c",
        str(tmp_path / "deploy.yaml"),
        "--out",
        str(tmp_path / "o"),
        "-q",
    )
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    share = summary["goodput_completed_requests"] / summary["num_requests"]
    assert stdout == (
        f"goodput {share:.1%} (TTFT ≤ 1000 ms and TPOT ≤ 50 ms), "
        f"{summary['gpu_hours']:.4f} GPU-hours: {tmp_path / 'o'}\n"
    )
    code, stdout, _ = run_cli("trace", "inspect", str(SAMPLE), "-q")
    assert stdout == "2,254 requests over 599.6 s\n"
