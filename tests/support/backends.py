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


def _sqs(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The session's local SQS server; a fresh queue prefix and lock store per test."""
    server = request.getfixturevalue("sqs_server")
    locks = tmp_path / f"locks-{uuid.uuid4().hex[:8]}.db"
    return (
        f"sqs://us-east-1?endpoint_url={server.endpoint}&prefix=t{uuid.uuid4().hex[:10]}-"
        f"&locks=sqlite:///{locks}"
    )


URL_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis,
    "sqs": _sqs,
}

# Share of a bulk test's message count each backend's test server runs in sane time
# (the local SQS server does ~130 send+receive+delete cycles a second, fewer when deep).
VOLUME: dict[str, float] = {"sqs": 0.02}

# Backends whose store is shared by several processes (real-process tests run on these).
CROSS_PROCESS = ["redis", "sqlite"]
# The worker suites (tests/worker) run on these; the contract suite on CONTRACT.
ALL = ["memory", "redis", "sqlite"]
CONTRACT = sorted(URL_FACTORIES)
