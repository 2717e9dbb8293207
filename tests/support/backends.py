"""Backend URLs for tests, in one place: a new backend joins the suites by adding an entry.

Each factory returns the URL of a fresh, isolated store. Tests also use unique queue
names and lock keys, so a shared server (one redis-server per session) is safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"memory://test-{uuid.uuid4().hex}"


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / f'tasuki-{uuid.uuid4().hex[:8]}.db'}"


def _redis(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The session's own redis-server; a fresh key prefix isolates each test."""
    server = request.getfixturevalue("redis_server")
    return f"{server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:"


URL_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis,
}

# Backends whose store is shared by several processes (real-process tests run on these).
CROSS_PROCESS = ["redis", "sqlite"]
ALL = sorted(URL_FACTORIES)
