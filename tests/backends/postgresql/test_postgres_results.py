"""Waiting for a result on PostgreSQL is woken by LISTEN/NOTIFY, not by polling: the
waiter reads the record a handful of times however long it waits, and wakes within a
fraction of a second of the settle, made by another process's backend."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tasuki.backends.base import Effects, Envelope, Settle
from tasuki.backends.sql import results
from tasuki.backends.sql.backend import SQLBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import PostgresServer


def test_a_waiter_is_woken_by_the_settle_and_does_not_poll(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    waiter, worker = backend_from_url(url), backend_from_url(url)
    assert isinstance(waiter, SQLBackend)
    reads = [0]
    read = results.read

    def counted(*args: object) -> object:
        reads[0] += 1
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(results, "read", counted)
    try:
        worker.enqueue([Envelope("q", "m", b"x", keep_result=60.0)])
        [d] = worker.lease("q", 1, 30.0)
        settled: list[float] = []

        def settle_later() -> None:
            time.sleep(2.5)  # a poller would be at its 1 s interval by now
            worker.settle([Settle.ack(d.receipt, Effects(result=b'"done"'))])
            settled.append(time.monotonic())

        thread = threading.Thread(target=settle_later)
        thread.start()
        found = waiter.wait_result("q", "m", 20.0)
        woke = time.monotonic()
        thread.join()
        assert found is not None and found.value == b'"done"'
        assert woke - settled[0] < 0.5, "not woken by the settle's notification"
        # The first read, one when the LISTEN session starts, one per notification:
        # polling 10 ms doubling to 1 s would have read about eight times.
        assert reads[0] <= 4, f"{reads[0]} reads while waiting 2.5 s"
    finally:
        waiter.close()
        worker.close()
