"""Fixtures shared by every test area."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from plansim.cli import main


def pytest_configure(config: pytest.Config) -> None:
    """The Ctrl-C tests need Python's SIGINT handler in this process (and the default
    disposition in the processes it starts): a shell that runs the suite in the background
    without job control leaves SIGINT ignored, and ignored dispositions are inherited."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def run_cli(monkeypatch, capsys) -> Callable[..., tuple[int, str, str]]:
    """Run ``plansim ARGS...`` in-process; returns (exit status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.argv", ["plansim", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture(scope="session")
def qwen_spec():
    """Qwen3-32B on H200 with vLLM, TP 1, as a validated ``aic`` spec (the tests using it need
    the ``aic`` extra; CI installs it)."""
    from plansim.aic.spec import parse_aic_spec

    return parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "vllm"})


@pytest.fixture(scope="session", autouse=True)
def aic_cache_dir(tmp_path_factory):
    """AIConfigurator tables and memory estimates go to a folder of this session, never to the
    user's cache; the real SDK builds each table once per session."""
    path = tmp_path_factory.mktemp("aic-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("PLANSIM_CACHE_DIR", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def ray_executor(request):
    """A ``RayExecutor`` on a local 2-CPU Ray instance (loopback) for one test module; the
    module's own functions are pickled by value, so Ray workers can run them."""
    from plansim.workers.ray_executor import RayExecutor, import_ray

    ray = import_ray(local=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(request.module)
    with RayExecutor(max_parallel=2) as ex:
        yield ex
    ray.shutdown()
