"""Fixtures for the aic tests: they need the ``aic`` extra (CI installs it)."""

from __future__ import annotations

import pytest

from plansim.aic.spec import AicSpec, parse_aic_spec

QWEN_H200 = {"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "vllm"}


@pytest.fixture(scope="session")
def qwen_spec() -> AicSpec:
    """Qwen3-32B on H200 with vLLM, TP 1: the model the issue tried."""
    return parse_aic_spec(dict(QWEN_H200))
