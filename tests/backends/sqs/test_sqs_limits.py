"""Limits on SQS, admitted after the receive in the `locks=` store (limits.py): what
the contract cannot see. A slot freed in one process wakes a message another process
put back; a message put back costs no attempt and few requests."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Limit, Settle
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import env
from tests.backends.sqs.test_sqs_backend import _redis_locks_url, _url
from tests.support.deps import need
from tests.support.servers import MotoServer

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402


@pytest.fixture(params=["sqlite", "redis"])
def locked_url(request: pytest.FixtureRequest, sqs_server: MotoServer, tmp_path: Path) -> str:
    if request.param == "redis":
        return _redis_locks_url(request, sqs_server, tmp_path)
    return _url(sqs_server, tmp_path)


def _open(url: str) -> SqsBackend:
    backend = backend_from_url(url)
    assert isinstance(backend, SqsBackend)
    return backend


def _calls(backend: SqsBackend) -> Counter[str]:
    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    backend._client.meta.events.register("before-call.sqs", count)
    return calls


def test_a_slot_freed_in_another_process_wakes_the_next(locked_url: str) -> None:
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    holder, waiter = _open(locked_url), _open(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        holder.enqueue([env(queue, "first", limits=(one,))])
        [running] = holder.lease(queue, 10, 30.0)
        holder.enqueue([env(queue, "second", limits=(one,))])
        assert waiter.lease(queue, 10, 30.0) == []  # put back for up to 30 s
        started = time.monotonic()
        holder.settle([Settle.ack(running.receipt)])
        [woken] = waiter.lease(queue, 10, 30.0, wait=5.0)
        assert woken.id == "second" and woken.attempt == 1
        assert time.monotonic() - started < 3.0  # woken, not back after the 30 s
    finally:
        holder.close()
        waiter.close()


def test_waiting_messages_cost_nothing_while_no_slot_frees(locked_url: str) -> None:
    """Put back until a slot is expected: no request at all while they wait, and one
    visibility change (the wake) per slot freed, whatever the number waiting."""
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    backend = _open(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, f"m{i}", limits=(one,)) for i in range(10)])
        [first] = backend.lease(queue, 10, 30.0)
        calls = _calls(backend)
        for _ in range(3):
            assert backend.lease(queue, 10, 30.0) == []  # nothing visible: one empty receive
        assert calls == Counter({"ReceiveMessage": 3}), calls
        calls.clear()
        backend.settle([Settle.ack(first.receipt)])
        [second] = backend.lease(queue, 10, 30.0, wait=2.0)
        assert second.attempt == 1
        # The ack's delete, one wake, and the receive that took the woken one.
        assert calls == Counter(
            {"DeleteMessageBatch": 1, "ChangeMessageVisibilityBatch": 1, "ReceiveMessage": 1}
        ), calls
    finally:
        backend.close()


def test_an_extended_lease_keeps_its_slot(locked_url: str) -> None:
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    backend = _open(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, f"m{i}", limits=(one,)) for i in range(2)])
        [held] = backend.lease(queue, 10, 2.0)
        assert backend.extend([held.receipt], 30.0) == [True]
        time.sleep(2.5)  # the first lease's length: the slot was renewed with it
        assert backend.lease(queue, 10, 30.0, wait=1.0) == []
    finally:
        backend.close()
