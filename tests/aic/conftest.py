"""Fixtures for the aic tests: they need the ``aic`` extra (CI installs it). Tables and memory
estimates are cached in a folder of this session, so the real SDK builds each table once."""

from __future__ import annotations

import pytest

from plansim.aic.spec import AicSpec, parse_aic_spec

QWEN_H200 = {"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "vllm"}


@pytest.fixture(scope="session", autouse=True)
def aic_cache_dir(tmp_path_factory):
    """One cache folder for the whole session (tables cost seconds to build)."""
    path = tmp_path_factory.mktemp("aic-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("PLANSIM_CACHE_DIR", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="session")
def qwen_spec() -> AicSpec:
    """Qwen3-32B on H200 with vLLM, TP 1: the model the issue tried."""
    return parse_aic_spec(dict(QWEN_H200))
