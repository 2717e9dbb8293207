from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.fixtures import skip_unless_capable
from tests.support.backends import VOLUME
from tests.worker.helpers import WorkerProcess, kill_all


@pytest.fixture(autouse=True)
def _requires(request: pytest.FixtureRequest) -> None:
    """`@pytest.mark.requires("capability")`: skipped on a backend that lacks it, as in
    the contract suite, with the reason printed."""
    wanted = [c for marker in request.node.iter_markers("requires") for c in marker.args]
    if not wanted:
        return
    fixture = "shared_url" if "shared_url" in request.fixturenames else "any_url"
    backend = backend_from_url(request.getfixturevalue(fixture))
    try:
        for capability in wanted:
            skip_unless_capable(backend, capability)
    finally:
        backend.close()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "runs.jsonl"


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    kill_all(started)


@pytest.fixture
def volume(request: pytest.FixtureRequest) -> Callable[[int, int], int]:
    """Scale a bulk test's message count to what the backend's test server runs quickly
    (never below `floor`, the least that still tests what the test is about)."""
    params = request.node.callspec.params
    share = VOLUME.get(params.get("any_url", params.get("shared_url", "")), 1.0)
    return lambda count, floor=50: max(floor, int(count * share))
