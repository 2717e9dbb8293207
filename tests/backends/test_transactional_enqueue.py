"""`job.options(connection=conn).enqueue(...)`: the message lives or dies with the caller's
transaction, on every backend with the `transactional_enqueue` capability."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tasuki
from tasuki.testing.servers import PostgresServer


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[tasuki.App, Callable[[], Any]]]:
    """The app, and a factory of the caller's own connections to the same database."""
    if request.param == "sqlite":
        path = tmp_path / "shared.db"
        app = tasuki.App(f"sqlite:///{path}")

        def connect() -> Any:
            return sqlite3.connect(path)
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.url(f"t_{uuid.uuid4().hex[:12]}")
        app = tasuki.App(url)
        base = url.split("?", 1)[0]

        def connect() -> Any:
            return psycopg.connect(base)

    yield app, connect
    app.close()


def _user_table(conn: Any) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS orders (n integer)")
    conn.commit()


def test_rolled_back_never_exists_committed_is_delivered(
    setup: tuple[tasuki.App, Callable[[], Any]],
) -> None:
    app, connect = setup
    ran: list[int] = []

    @app.job
    def ship(n: int) -> None:
        ran.append(n)

    conn = connect()
    _user_table(conn)
    conn.execute("INSERT INTO orders VALUES (1)")
    ship.options(connection=conn).enqueue(1)
    ship.options(connection=conn).enqueue_many([(2,), (3,)])
    conn.rollback()
    assert app.stats("default")["ready"] == 0

    conn.execute("INSERT INTO orders VALUES (4)")
    ship.options(connection=conn).enqueue(4)
    ship.options(connection=conn).enqueue_many([(5,), (6,)])
    assert app.stats("default")["ready"] == 0  # not visible before the commit
    conn.commit()
    conn.close()
    assert app.stats("default")["ready"] == 3
    app.worker(concurrency=2).run(until_idle=True, timeout=30)
    assert sorted(ran) == [4, 5, 6]


def test_a_connection_is_refused_where_the_capability_is_missing() -> None:
    app = tasuki.App("memory://")

    @app.job
    def ship(n: int) -> None: ...

    with pytest.raises(tasuki.errors.InvalidArgument, match="transactional_enqueue"):
        ship.options(connection=object()).enqueue(1)
    app.close()


def test_sqlite_refuses_a_connection_to_another_file(tmp_path: Path) -> None:
    app = tasuki.App(f"sqlite:///{tmp_path / 'a.db'}")

    @app.job
    def ship(n: int) -> None: ...

    other = sqlite3.connect(tmp_path / "b.db")
    with pytest.raises(tasuki.errors.InvalidArgument, match="not the backend's database"):
        ship.options(connection=other).enqueue(1)
    other.close()
    app.close()
