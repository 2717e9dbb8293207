"""SQLite files tasuki creates are private (0600), whatever the process's umask: the
backend's database with its -wal and -shm, and the SQS lock store's database."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import tasuki
from tasuki.testing.servers import MotoServer

FILES = ("", "-wal", "-shm")


@pytest.fixture(params=[0o022, 0o000, 0o277])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for one test: the usual one, the loosest, and one that would
    leave the owner unable to write."""
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def modes(db: Path) -> dict[str, str]:
    return {suffix or "db": oct(stat.S_IMODE(os.stat(f"{db}{suffix}").st_mode)) for suffix in FILES}


PRIVATE = {"db": "0o600", "-wal": "0o600", "-shm": "0o600"}


@pytest.mark.usefixtures("umask")
def test_the_database_and_its_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    app = tasuki.App(f"sqlite:///{db}")
    app.send("default", b"{}")  # a write: the -wal and -shm exist from here on
    try:
        assert modes(db) == PRIVATE
    finally:
        app.close()


def test_an_existing_database_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    tasuki.App(f"sqlite:///{db}").close()
    db.chmod(0o640)  # the owner's choice: a group of operators may read it
    app = tasuki.App(f"sqlite:///{db}")
    app.send("default", b"{}")
    try:
        assert stat.S_IMODE(db.stat().st_mode) == 0o640
    finally:
        app.close()


@pytest.mark.usefixtures("umask")
def test_the_sqs_lock_stores_database_is_created_0600(
    tmp_path: Path, sqs_server: MotoServer
) -> None:
    locks = tmp_path / "locks.db"
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=m{uuid.uuid4().hex[:10]}-"
        f"&locks=sqlite:///{locks}"
    )
    app = tasuki.App(url)

    @app.job(dedup=True)  # dedup and the lease records write to the lock store
    def work() -> None: ...

    work.enqueue()
    app.worker().run(until_idle=True, timeout=30)
    try:
        assert modes(locks) == PRIVATE
    finally:
        app.close()
