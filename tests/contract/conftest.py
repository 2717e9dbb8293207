"""The contract suite runs every test against every backend.

A new backend joins by adding one entry to `tests/support/backends.py`.
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


@pytest.fixture
def cross_process(backend: Backend) -> None:
    if not backend.capabilities.cross_process:
        pytest.skip(f"{backend.url} lives in one process")
