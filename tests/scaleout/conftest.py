"""A real local Ray cluster (head + one worker node on loopback, `fake_gpu: 1` each) shared by the tests here.

Every test in this folder is marked `ray` and `engine` (slow, run by CI; `-m "not engine"` skips them): Ray comes with the `ray`
extra (`pip install servetune[ray]`); without it the tests skip locally and fail in CI.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from tests.scaleout.cluster import RayCluster


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "scaleout" in item.nodeid:
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.engine)  # slow like the engine tests: CI runs them, `-m "not engine"` skips


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[RayCluster]:
    """One cluster for this folder's tests, stopped after its last one (the rest of the suite never sees it)."""
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed: scripts/setup.sh installs the ray extra")
        pytest.skip("ray not installed (pip install servetune[ray])")
    with RayCluster(workers=1) as cluster:
        yield cluster
    assert not cluster.left([]), "the cluster's processes are all gone"
