"""`?archive=true`: acked messages move to `tasuki_archive` in the ack's own statement,
and a maintenance service run by the workers prunes rows older than `archive_days` in
batches. (The contract
suite also runs with the option on: `postgresql-archive` in tests/support/backends.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from tasuki import errors
from tasuki.backends.base import Envelope
from tasuki.backends.postgres import PostgresBackend, from_url
from tasuki.backends.postgres.archive import ArchivePruner
from tasuki.testing.servers import PostgresServer

# The maintenance services of a PostgreSQL backend without the archive.
SERVICES = {"expired", "history", "results", "flows", "limits", "durable", "console"}


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    return postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")


def _archived(backend: PostgresBackend) -> list[tuple[Any, ...]]:
    base = backend.postgres.conninfo
    with psycopg.connect(base) as conn:
        return conn.execute(
            "SELECT queue, id, body, headers, attempt, max_attempts, fence, enqueued_at,"
            f' acked_at FROM "{backend.schema}".tasuki_archive ORDER BY id'
        ).fetchall()


def test_acked_messages_are_archived_with_what_they_carried(url: str) -> None:
    backend = from_url(f"{url}&archive=true")
    backend.clock = lambda: 1_000.0
    backend.enqueue([Envelope("q", "a", b"body-a", {"h": "1"}), Envelope("q", "b", b"body-b")])
    backend.enqueue([Envelope("q", "c", b"body-c", max_attempts=3)])
    leased = {d.id: d for d in backend.lease("q", 10, 30.0)}
    backend.clock = lambda: 1_005.0
    stale = leased["c"].receipt._replace(token=leased["c"].receipt.token + "x")
    assert backend.ack([leased["a"].receipt, leased["b"].receipt, stale]) == [True, True, False]
    assert backend.stats("q").in_flight == 1  # c: its stale ack changed nothing
    rows = _archived(backend)
    assert [row[:4] for row in rows] == [
        ("q", "a", b"body-a", '{"h":"1"}'),
        ("q", "b", b"body-b", "{}"),
    ]
    for row in rows:
        assert row[4:] == (1, 10, 1, 1_000.0, 1_005.0)  # attempt, max, fence, enqueued, acked
    # The contract is unchanged: an acked id without a window is unknown, and can come back.
    assert backend.inspect("q", "a").state == "unknown"
    assert backend.enqueue([Envelope("q", "a", b"again")])[0].status == "enqueued"
    backend.close()


def test_without_the_option_nothing_is_archived(url: str) -> None:
    backend = from_url(url)
    backend.enqueue([Envelope("q", "a", b"x")])
    [d] = backend.lease("q", 1, 30.0)
    assert backend.ack([d.receipt]) == [True]
    assert _archived(backend) == []
    assert {s.name for s in backend.maintenance()} == SERVICES
    backend.close()


def _pruner(backend: PostgresBackend, limit: int) -> ArchivePruner:
    """The backend's archive pruning service, with a batch limit of `limit` rows."""
    [service] = [s for s in backend.maintenance() if isinstance(s, ArchivePruner)]
    service.limit = limit
    return service


def test_rows_past_archive_days_are_pruned_in_batches_by_the_maintenance_service(
    url: str,
) -> None:
    backend = from_url(f"{url}&archive=true&archive_days=1")
    assert {s.name for s in backend.maintenance()} == SERVICES | {"archive"}
    now = [0.0]
    backend.clock = lambda: now[0]
    for day in range(3):  # 5 messages acked at each of days 0, 1 and 2 (+1 s)
        now[0] = day * 86_400.0 + 1.0
        backend.enqueue([Envelope("q", f"d{day}-{i}", b"x") for i in range(5)])
        receipts = [d.receipt for d in backend.lease("q", 10, 30.0)]
        assert backend.ack(receipts) == [True] * 5
    # Acks only archive: pruning is the service's, off the ack's path.
    assert sorted({row[1][:2] for row in _archived(backend)}) == ["d0", "d1", "d2"]
    now[0] = 3 * 86_400.0  # days 0 and 1 are past their day, day 2 not yet
    pruner = _pruner(backend, limit=4)
    assert [pruner.run() for _ in range(4)] == [True, True, False, False]  # 4, 4, 2, 0
    assert sorted({row[1][:2] for row in _archived(backend)}) == ["d2"]
    backend.close()


def test_archive_days_zero_keeps_everything_and_a_negative_one_is_refused(url: str) -> None:
    backend = from_url(f"{url}&archive=true&archive_days=0")
    now = [1.0]
    backend.clock = lambda: now[0]
    backend.enqueue([Envelope("q", "a", b"x")])
    [d] = backend.lease("q", 1, 30.0)
    backend.ack([d.receipt])
    now[0] = 10 * 365 * 86_400.0
    backend.enqueue([Envelope("q", "b", b"x")])
    [d] = backend.lease("q", 1, 30.0)
    backend.ack([d.receipt])
    assert [row[1] for row in _archived(backend)] == ["a", "b"]
    assert "archive" not in {s.name for s in backend.maintenance()}  # nothing to prune
    backend.close()
    with pytest.raises(errors.InvalidURL, match="archive_days"):
        from_url(f"{url}&archive=true&archive_days=-1")
