"""The contract suite runs every test against every backend.

A new backend joins by adding one entry to `tests/support/backends.py`. A test that
needs a capability some backend lacks says so with `@pytest.mark.requires("name")` (a
field of `tasuki.backends.base.Capabilities`); it is skipped there, with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tasuki.backends.base import Backend
from tasuki.backends.urls import backend_from_url
from tests.support.backends import CONTRACT, URL_FACTORIES, VOLUME


@pytest.fixture(params=CONTRACT)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store on every backend, SQS included, one test run each."""
    return URL_FACTORIES[request.param](request, tmp_path)


@pytest.fixture
def backend(backend_url: str) -> Iterator[Backend]:
    b = backend_from_url(backend_url)
    yield b
    b.close()


@pytest.fixture
def short(backend: Backend) -> float:
    """A short lease or delay the backend can keep: 0.25 s, or its timer resolution."""
    return max(0.25, backend.capabilities.timer_resolution)


@pytest.fixture
def volume(request: pytest.FixtureRequest) -> Callable[[int], int]:
    """Scale a bulk test's message count to what the backend's test server runs quickly."""
    name = request.node.callspec.params.get("backend_url", "")
    share = VOLUME.get(name, 1.0)
    return lambda count: max(50, int(count * share))


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def key_prefix() -> str:
    return f"k-{uuid.uuid4().hex[:12]}:"


def skip_unless_capable(backend: Backend, capability: str) -> None:
    if not hasattr(backend.capabilities, capability):
        raise AssertionError(f"no capability called {capability!r}")
    if not getattr(backend.capabilities, capability):
        scheme = backend.url.split("://", 1)[0]
        pytest.skip(f"{scheme}:// lacks the {capability} capability")


@pytest.fixture(autouse=True)
def _requires(request: pytest.FixtureRequest) -> None:
    for marker in request.node.iter_markers("requires"):
        backend: Backend = request.getfixturevalue("backend")
        for capability in marker.args:
            skip_unless_capable(backend, capability)


@pytest.fixture
def cross_process(backend: Backend) -> None:
    skip_unless_capable(backend, "cross_process")
