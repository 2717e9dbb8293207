"""Backends for tests, in one place: a new backend joins every suite with one entry here.

Each entry makes the URL of a fresh, isolated store. Tests also use unique queue names
and lock keys, so a shared server (one redis-server per session) is safe. The suites that
read this list: the contract suite (`tests/contract/conftest.py` hands each entry to
`tasuki.testing.contract` as its `make_backend_url`), the worker tests (`any_url`, and
`shared_url` for real worker processes) and the chaos tests. Tests skip by the
backend's declared `Capabilities`, never by its URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Backend
from tasuki.testing.contract import ContractOptions


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


def _sqs_redis(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same, its lock store the session's Redis server (`locks=redis://`)."""
    server = request.getfixturevalue("sqs_server")
    locks = request.getfixturevalue("redis_server").url()
    return (
        f"sqs://us-east-1?endpoint_url={server.endpoint}&prefix=t{uuid.uuid4().hex[:10]}-"
        f"&locks={locks}"
    )


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A schema of its own on the session's PostgreSQL, dropped when the session ends."""
    server = request.getfixturevalue("postgres_server")
    return str(server.url(f"t_{uuid.uuid4().hex[:12]}"))


def _postgresql_archive(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same, with acked messages archived (`?archive=true`): the contract holds."""
    return f"{_postgresql(request, tmp_path)}&archive=true"


def _redis_expire_lock(backend: Backend, key: str, seconds: float | None) -> None:
    """Give a lock `seconds` more on the server's clock, or delete it (None)."""
    redis: Any = backend
    full = redis.keys.lock(key)
    if seconds is None:
        redis._command("DEL", full)
    else:
        redis._command("PEXPIRE", full, max(1, int(seconds * 1000)))


@dataclass(frozen=True)
class BackendEntry:
    url: Callable[[pytest.FixtureRequest, Path], str]
    # Several processes can share the store: real-process worker tests run on it.
    cross_process: bool = True
    # Lock TTLs kept on the server's own clock, which a test cannot move: how the lock
    # property test lapses or shortens a lock where its model says. None: the lock
    # store's `clock` attribute is the model's clock.
    expire_lock: Callable[[Backend, str, float | None], None] | None = None
    # The worker suites (tests/worker) run on it, not only the contract suite.
    worker_suites: bool = True
    # Share of a bulk test's message count its test server runs in sane time.
    volume: float = 1.0
    # Examples and steps of the contract's lock property test: more where a step is cheap.
    lock_examples: int = 40
    lock_steps: int = 25
    # Where set, the suites run on it only in these test files or classes (parts of a
    # test's node id): a variant that proves one feature, not every suite once more.
    only: tuple[str, ...] = ()

    @property
    def contract(self) -> ContractOptions:
        """What the contract suite is told beyond the URL (`contract_options`)."""
        return ContractOptions(
            volume=self.volume,
            expire_lock=self.expire_lock,
            lock_examples=self.lock_examples,
            lock_steps=self.lock_steps,
        )


BACKENDS: dict[str, BackendEntry] = {
    "memory": BackendEntry(_memory, cross_process=False, lock_examples=150, lock_steps=30),
    "postgresql": BackendEntry(_postgresql),
    "postgresql-archive": BackendEntry(_postgresql_archive, worker_suites=False),
    "sqlite": BackendEntry(_sqlite),
    "redis": BackendEntry(_redis, expire_lock=_redis_expire_lock),
    # The local SQS server does ~130 send+receive+delete cycles a second, fewer when deep.
    "sqs": BackendEntry(_sqs, volume=0.02),
    # SQS with a Redis lock store runs the suites of the workflows, the durable steps and
    # the console it keeps there (its other records are proven by tests/backends/sqs):
    # the SQS suite already dominates CI.
    "sqs-redis": BackendEntry(
        _sqs_redis,
        cross_process=False,
        volume=0.02,
        only=(
            "::TestFlows::",
            "tests/worker/test_flows.py::",
            "::TestSteps::",
            "::TestPause::",
            "::TestBrowse::",
            "::TestActions::",
            "::TestWorkers::",
            "::TestJobStats::",
        ),
    ),
}

URL_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    name: entry.url for name, entry in BACKENDS.items()
}
# The contract suite runs on every backend; the worker suites on ALL.
CONTRACT = sorted(BACKENDS)
ALL = sorted(name for name, entry in BACKENDS.items() if entry.worker_suites)
# Backends whose store is shared by several processes (real-process tests run on these).
CROSS_PROCESS = sorted(n for n in ALL if BACKENDS[n].cross_process)
VOLUME = {name: entry.volume for name, entry in BACKENDS.items() if entry.volume != 1.0}
