"""Behind pgBouncer in transaction mode: `?pgbouncer=true` (no startup options, no
prepared statements, schema-qualified queries); wake-ups through a direct LISTEN session
(`listen_url`) or, without one, by polling."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest

from tasuki.backends.base import Delivery, Envelope, Receipt
from tasuki.backends.postgres import PostgresBackend, from_url
from tasuki.testing.servers import PostgresServer
from tests.support.pgbouncer import PgBouncer


@pytest.fixture(scope="module")
def bouncer(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(postgres_server.port).start()
    yield bouncer
    bouncer.stop()


def bounced_url(postgres_server: PostgresServer, bouncer: PgBouncer, *, listen: bool) -> str:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    direct = postgres_server.url(schema).split("?", 1)[0]
    url = f"postgresql://postgres@127.0.0.1:{bouncer.port}/test?schema={schema}&pgbouncer=true"
    return url + (f"&listen_url={quote(direct, safe='')}" if listen else "")


def lease_when_enqueued(backend: PostgresBackend, queue: str) -> float:
    """Seconds from an enqueue to the return of a lease that was waiting for it."""
    got: list[Delivery] = []
    waiter = threading.Thread(target=lambda: got.extend(backend.lease(queue, 1, wait=5.0)))
    waiter.start()
    time.sleep(0.5)  # the leaser is waiting
    sent = time.monotonic()
    backend.enqueue([Envelope(queue, uuid.uuid4().hex, b"x")])
    waiter.join(10)
    assert len(got) == 1
    return time.monotonic() - sent


def test_pgbouncer_refuses_the_startup_options_the_direct_sessions_use(
    bouncer: PgBouncer,
) -> None:
    """Why `pgbouncer=true` exists: without it the pool's sessions ask for options."""
    with pytest.raises(psycopg.OperationalError, match="options"):
        psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{bouncer.port}/test",
            options="-c search_path=x",
            connect_timeout=5,
        )


def test_the_lifecycle_runs_through_pgbouncer_and_wakes_through_the_direct_session(
    postgres_server: PostgresServer, bouncer: PgBouncer
) -> None:
    backend = from_url(bounced_url(postgres_server, bouncer, listen=True))
    try:
        # Enough rounds that psycopg would have prepared statements (it does after 5).
        for round_ in range(8):
            ids = [f"{round_}-{i}" for i in range(20)]
            results = backend.enqueue([Envelope("q", i, b"body") for i in ids])
            assert {r.status for r in results} == {"enqueued"}
            leased = backend.lease("q", 20)
            assert sorted(d.id for d in leased) == sorted(ids)
            assert all(backend.ack([Receipt("q", d.id, d.token) for d in leased]))
        assert backend.stats("q").ready == 0
        assert backend.locks.acquire("k", "me", 30.0)
        assert not backend.locks.acquire("k", "you", 30.0)
        # LISTEN on the direct connection: woken at once, not at the next poll.
        assert lease_when_enqueued(backend, "wake") < 0.2
    finally:
        backend.close()


def test_without_listen_url_waiting_leasers_poll(
    postgres_server: PostgresServer, bouncer: PgBouncer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="tasuki.postgres"):
        backend = from_url(bounced_url(postgres_server, bouncer, listen=False))
    assert "behind pgBouncer without listen_url" in caplog.text
    try:
        backend.enqueue([Envelope("q", "warm", b"x")])  # connect and migrate first
        took = lease_when_enqueued(backend, "poll")
        assert took < 1.0  # found by a poll (every 0.25 s), not at the end of the wait
        assert backend.postgres.listener._thread is None  # no LISTEN session was opened
    finally:
        backend.close()
