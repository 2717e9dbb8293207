from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasuki.testing.servers import DUMMY_AWS_ENV, MotoServer, PostgresServer, RedisServer
from tests.support.backends import ALL, BACKENDS, CROSS_PROCESS, URL_FACTORIES
from tests.support.deps import need


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def counted_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server of the module's own, for tests that count the scripts a server ran
    (INFO commandstats counts every client's): nothing an earlier test left running in
    this process can call it. The session's server once counted one call too many."""
    with RedisServer(tmp_path_factory.mktemp("counted-redis")) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    yield server
    server.drop_schemas()
    server.stop()


@pytest.fixture(scope="session")
def sqs_server() -> Iterator[MotoServer]:
    """A local SQS-compatible server for the session, with dummy credentials in the env."""
    need("boto3")
    saved = {name: os.environ.get(name) for name in DUMMY_AWS_ENV}
    os.environ.update(DUMMY_AWS_ENV)
    try:
        with MotoServer() as server:
            yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tasuki.db'}"


@pytest.fixture(params=ALL)
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store on every backend, one test run each."""
    return URL_FACTORIES[request.param](request, tmp_path)


@pytest.fixture(params=CROSS_PROCESS)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store on every backend that several processes can share."""
    return URL_FACTORIES[request.param](request, tmp_path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `./dev test` (pytest-xdist, `--dist loadgroup`) the chaos tests run one after
    another on one test process: each starts several workers and times their recovery,
    and two at once on two cores measured each other instead. A backend entry limited to
    some suites (`BackendEntry.only`) is deselected from the others."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        names = [params.get(f) for f in ("any_url", "shared_url", "make_backend_url")]
        only = [BACKENDS[n].only for n in names if isinstance(n, str) and n in BACKENDS]
        if any(parts and not any(p in item.nodeid for p in parts) for parts in only):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in items:
        if item.nodeid.startswith("tests/chaos/"):
            item.add_marker(pytest.mark.xdist_group("chaos"))
