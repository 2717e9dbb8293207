"""The contract suite runs every test against every backend.

A new backend joins by adding one entry to `tests/support/backends.py`. A test that
needs a capability some backend lacks says so with `@pytest.mark.requires("name")` (a
field of `tasuki.backends.base.Capabilities`); it is skipped there, with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tasuki.backends.base import Backend
from tasuki.backends.urls import backend_from_url


@pytest.fixture
def backend_url(any_url: str) -> str:
    return any_url


@pytest.fixture
def backend(backend_url: str) -> Iterator[Backend]:
    b = backend_from_url(backend_url)
    yield b
    b.close()


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
