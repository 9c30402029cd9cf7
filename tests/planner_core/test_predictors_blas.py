"""single_threaded_blas: one thread inside the block, previous counts restored after."""

import scipy.linalg  # noqa: F401 - load scipy's OpenBLAS too

from plansim.planner_core.predictors.blas import _openblas_controls, single_threaded_blas


def test_blas_threads_are_limited_inside_and_restored_after():
    controls = _openblas_controls()
    assert controls  # numpy's and scipy's Linux wheels each bundle an OpenBLAS
    before = [get() for get, _ in controls]
    with single_threaded_blas():
        assert [get() for get, _ in controls] == [1] * len(controls)
    assert [get() for get, _ in controls] == before


def test_counts_are_restored_when_the_block_raises():
    controls = _openblas_controls()
    before = [get() for get, _ in controls]
    try:
        with single_threaded_blas():
            raise ValueError("boom")
    except ValueError:
        pass
    assert [get() for get, _ in controls] == before
