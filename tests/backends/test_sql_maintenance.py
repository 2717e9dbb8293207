"""The SQL backends' clean-up runs as maintenance services, never inside enqueue or
settle: on SQLite and PostgreSQL, what the services forget, in batches, and that the hot
path sends none of their statements."""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tasuki.backends.base import (
    Backend,
    Effects,
    Envelope,
    Fill,
    FlowRecord,
    FlowStep,
    Settle,
    UniqueClaim,
)
from tasuki.backends.sql.backend import SQLBackend
from tasuki.backends.sql.maintenance.service import SQLService
from tasuki.backends.urls import backend_from_url
from tasuki.core.console import JobTally, WorkerInfo
from tasuki.core.message import ErrorInfo
from tasuki.testing.servers import PostgresServer


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLBackend]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tasuki.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.url(f"t_{uuid.uuid4().hex[:12]}")
    b = backend_from_url(url)
    assert isinstance(b, SQLBackend)
    yield b
    b.close()


def rows(backend: SQLBackend, table: str) -> int:
    with backend.dialect.read() as conn:
        [(count,)] = conn.execute(f"SELECT count(*) AS n FROM {table}").fetchall()
    return int(count)


def service(backend: SQLBackend, name: str) -> SQLService:
    [found] = [s for s in backend.maintenance() if s.name == name]
    assert isinstance(found, SQLService)
    return found


@contextlib.contextmanager
def statements(backend: Backend) -> Iterator[list[str]]:
    """The SQL the engine's client sends meanwhile (this thread's, on SQLite)."""
    sent: list[str] = []
    if backend.url.startswith("sqlite"):
        conn = backend.sqlite.conn()  # type: ignore[attr-defined]
        conn.set_trace_callback(sent.append)
        try:
            yield sent
        finally:
            conn.set_trace_callback(None)
        return
    execute, many = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def traced_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    def traced_many(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return many(self, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", traced_execute)
        patch.setattr(psycopg.Cursor, "executemany", traced_many)
        yield sent


def is_clean_up(sql: str) -> bool:
    """A statement of the clean-up: finished ids, expired locks, gone messages' history,
    the archive's old rows."""
    sql = " ".join(sql.split())
    return (
        "DELETE FROM tasuki_finished" in sql
        or ("DELETE FROM tasuki_locks" in sql and "expires_at <=" in sql)
        or ("DELETE FROM tasuki_history" in sql and "NOT EXISTS" in sql)
        or "DELETE FROM tasuki_archive" in sql
    )


def test_enqueue_lease_and_settle_send_no_clean_up(backend: SQLBackend) -> None:
    """Clean-up used to run inside the first enqueue of every 30 s (and archive pruning
    inside PostgreSQL's acks): now the hot path has none of it, whatever is due."""
    now = [1_000.0]
    backend.clock = lambda: now[0]
    backend.locks.clock = lambda: now[0]
    backend.enqueue([Envelope("q", "kept", b"x", keep_id=1.0)])  # migrations first
    [d] = backend.lease("q", 1, 30.0)
    backend.settle([Settle.ack(d.receipt)])
    backend.locks.acquire("k", "me", 1.0)
    now[0] += 3_600.0  # the finished id, the lock and the history are all past their time
    error = ErrorInfo("RuntimeError", "boom", "")
    with statements(backend) as sent:
        backend.enqueue([Envelope("q", "a", b"x")])
        backend.enqueue([Envelope("q", f"b{i}", b"x") for i in range(3)])
        backend.enqueue([Envelope("q", "u", b"x", unique=UniqueClaim("uk", 60.0))])
        leased = backend.lease("q", 10, 30.0)
        assert len(leased) == 5
        verdicts = [
            Settle.ack(leased[0].receipt),
            Settle.ack(leased[1].receipt),
            Settle.release(leased[2].receipt, 0.0, True, error),
            Settle.dead(leased[3].receipt, "failed", error),
        ]
        assert backend.settle(verdicts) == [True] * 4
        assert backend.settle([Settle.ack(leased[4].receipt)]) == [True]
    assert sent, "no statement traced"
    assert [sql for sql in sent if is_clean_up(sql)] == []
    # The services find all of it, in their own transactions.
    assert rows(backend, "tasuki_finished") == 1
    for chore in backend.maintenance():
        chore.run()
    assert rows(backend, "tasuki_finished") == 0
    assert backend.locks.holder("k") is None and rows(backend, "tasuki_locks") == 1  # "uk"
    assert backend.inspect("q", "kept").state == "unknown"


def test_expired_ids_and_locks_are_forgotten_in_batches(backend: SQLBackend) -> None:
    now = [1_000.0]
    backend.clock = lambda: now[0]
    backend.locks.clock = lambda: now[0]
    backend.enqueue([Envelope("q", f"m{i}", b"x", keep_id=60.0) for i in range(5)])
    backend.settle([Settle.ack(d.receipt) for d in backend.lease("q", 10, 30.0)])
    for i in range(3):
        assert backend.locks.acquire(f"lock-{i}", "me", 60.0)
    assert backend.locks.acquire("live", "me", 600.0)
    expired = service(backend, "expired")
    expired.limit = 2
    assert expired.run() is False  # nothing past its time yet
    assert (rows(backend, "tasuki_finished"), rows(backend, "tasuki_locks")) == (5, 4)
    now[0] += 61.0
    assert [expired.run() for _ in range(4)] == [True, True, False, False]  # 2+2, 2+1, 1, 0
    assert (rows(backend, "tasuki_finished"), rows(backend, "tasuki_locks")) == (0, 1)
    assert backend.locks.holder("live") is not None


def test_the_history_of_gone_messages_is_forgotten_unless_the_id_is_remembered(
    backend: SQLBackend,
) -> None:
    now = [1_000.0]
    backend.clock = lambda: now[0]
    error = ErrorInfo("RuntimeError", "boom", "")
    backend.enqueue([Envelope("q", "gone", b"x"), Envelope("q", "kept", b"x", keep_id=60.0)])
    backend.enqueue([Envelope("q", "here", b"x")])
    for _ in range(2):  # each one fails once (a history entry), then "gone" and "kept" end
        leased = backend.lease("q", 10, 30.0)
        backend.settle([Settle.release(d.receipt, 0.0, True, error) for d in leased])
    leased = {d.id: d for d in backend.lease("q", 10, 30.0)}
    backend.settle([Settle.ack(leased["gone"].receipt), Settle.ack(leased["kept"].receipt)])
    history = service(backend, "history")
    history.run()
    assert backend.inspect("q", "gone").state == "unknown"
    assert rows_of(backend, "gone") == 0
    assert [e.event for e in backend.inspect("q", "kept").history] == ["retried"] * 2 + ["acked"]
    assert [e.event for e in backend.inspect("q", "here").history] == ["retried"] * 2
    now[0] += 61.0
    service(backend, "expired").run()
    history.run()
    assert rows_of(backend, "kept") == 0 and rows_of(backend, "here") == 2


def rows_of(backend: SQLBackend, msg_id: str) -> int:
    with backend.dialect.read() as conn:
        cursor = conn.execute(
            "SELECT count(*) AS n FROM tasuki_history WHERE id = "
            + ("?" if isinstance(conn, sqlite3.Connection) else "%s"),
            (msg_id,),
        )
        [(count,)] = cursor.fetchall()
    return int(count)


def test_each_backend_names_its_services(backend: SQLBackend) -> None:
    assert sorted(s.name for s in backend.maintenance()) == [
        "console",
        "durable",
        "expired",
        "flows",
        "history",
        "limits",
        "results",
    ]
    assert all(s.interval > 0 for s in backend.maintenance())


def test_workers_and_job_stats_are_forgotten_after_a_day(backend: SQLBackend) -> None:
    now = [time.time()]
    backend.clock = lambda: now[0]
    minute = now[0] - now[0] % 60.0
    info = WorkerInfo("w1", "host", 1, "0", ("q",), 1, now[0])
    backend.announce(info, [JobTally("q", "j", minute, {"succeeded": 1, "t3": 1})])
    now[0] += 3600.0
    backend.announce(WorkerInfo("w2", "host", 2, "0", ("q",), 1, now[0]))
    service(backend, "console").run()
    assert (rows(backend, "tasuki_workers"), rows(backend, "tasuki_job_stats")) == (2, 2)
    now[0] += 86400.0 - 3600.0 + 1.0
    service(backend, "console").run()
    assert (rows(backend, "tasuki_workers"), rows(backend, "tasuki_job_stats")) == (1, 0)
    assert [w.id for w in backend.workers()] == ["w2"]


def test_results_past_their_time_are_forgotten(backend: SQLBackend) -> None:
    now = [time.time()]
    backend.clock = lambda: now[0]
    backend.enqueue([Envelope("q", "r", b"x", keep_result=60.0), Envelope("q", "p", b"x")])
    leased = {d.id: d for d in backend.lease("q", 10, 30.0)}
    backend.settle([Settle.ack(leased["r"].receipt, Effects(result=b"1"))])
    assert rows(backend, "tasuki_results") == 1
    service(backend, "results").run()
    assert rows(backend, "tasuki_results") == 1  # still within its time
    now[0] += 61.0
    assert backend.result("q", "r") is None  # reads ignore it at once
    service(backend, "results").run()
    assert rows(backend, "tasuki_results") == 0


def test_flows_their_barriers_and_slots_past_their_time_are_forgotten(
    backend: SQLBackend,
) -> None:
    now = [time.time()]
    backend.clock = lambda: now[0]
    steps = (FlowStep("0.0", "job", "q", "f.0.0"), FlowStep("0.1", "job", "q", "f.0.1"))
    record = FlowRecord("f", now[0], 120.0, steps)
    backend.start_flow(record, [Envelope("q", s.message_id, b"x") for s in steps])
    for delivery in backend.lease("q", 10, 30.0):
        slot = int(delivery.id.rsplit(".", 1)[1])
        fill = Fill("f", "0", slot, 2)
        effects = Effects(result=b"1", flow="f", fills=(fill,), final=True, ttl=60.0)
        assert backend.settle([Settle.ack(delivery.receipt, effects)]) == [True]
    tables = ("tasuki_flows", "tasuki_flow_barriers", "tasuki_flow_slots")
    assert [rows(backend, t) for t in tables] == [1, 1, 2]
    service(backend, "flows").run()
    assert [rows(backend, t) for t in tables] == [1, 1, 2]  # still within their time
    now[0] += 61.0  # the barrier's time (`Effects.ttl`), not yet the flow's
    assert backend.group_value("f", "0") is None
    service(backend, "flows").run()
    assert [rows(backend, t) for t in tables] == [1, 0, 0]
    assert backend.flow("f").result == b"[1,1]"  # type: ignore[union-attr]
    now[0] += 60.0
    assert backend.flow("f") is None
    service(backend, "flows").run()
    assert [rows(backend, t) for t in tables] == [0, 0, 0]
