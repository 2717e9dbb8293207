"""The contract suite runs every test against every backend.

A new backend joins by adding one entry to `_URL_FACTORIES`: a function that returns a
URL for a fresh, isolated store (the test's queues and lock keys are unique anyway).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tasuki.backends.base import Backend
from tasuki.backends.urls import backend_from_url


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"memory://contract-{uuid.uuid4().hex}"


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'contract.db'}"


_URL_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(_URL_FACTORIES))
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _URL_FACTORIES[request.param](request, tmp_path)


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


@pytest.fixture
def cross_process(backend: Backend) -> None:
    if not backend.capabilities.cross_process:
        pytest.skip(f"{backend.url} lives in one process")
