"""Redis keeps a message's durable records in its own hash (docs/redis.md, "Durable
steps"): nothing of them outlives the message, a wait is the latest lease's only, and a
signal wakes a waiting message of any priority."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tasuki.backends.base import Envelope, Settle, StepRecord, Wait
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer


@pytest.fixture
def backend(redis_server: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def _keys(backend: RedisBackend) -> set[bytes]:
    return set(backend._command("KEYS", backend.keys.prefix + "*"))


def test_an_ack_leaves_no_key_of_the_records_behind(backend: RedisBackend) -> None:
    backend.enqueue([Envelope("q", "plain", b"{}")])
    [plain] = backend.lease("q", 1, 30.0)
    backend.settle([Settle.ack(plain.receipt)])
    without = _keys(backend)
    backend.enqueue([Envelope("q", "d", b"{}")])
    [d] = backend.lease("q", 1, 30.0)
    for n in range(1, 4):
        assert backend.record_step(d.receipt, StepRecord("s", n, b"1", time.time(), 0.0))
    assert backend.signal("q", "d", "unused", b"1") == "delivered"
    assert backend.settle([Settle.ack(d.receipt)]) == [True]
    assert _keys(backend) == without


def test_a_signal_wakes_a_waiting_message_of_a_priority_out_of_delayed(
    backend: RedisBackend,
) -> None:
    backend.enqueue([Envelope("q", "p", b"{}", priority=5)])
    [d] = backend.lease("q", 1, 30.0)
    assert backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("go"))]) == [True]
    delayed = backend.keys.queue("q").delayed
    assert backend._command("ZSCORE", delayed, "p") is not None
    assert backend.signal("q", "p", "go", b"1") == "delivered"
    assert backend._command("ZSCORE", delayed, "p") is None
    [again] = backend.lease("q", 1, 30.0)
    assert again.id == "p"


def test_a_wait_is_its_lease_s_only(backend: RedisBackend) -> None:
    """An expired sleep's message leased again: the wait field, left in the hash, no
    longer counts, and a signal of its name does not move the new lease's message."""
    backend.enqueue([Envelope("q", "w", b"{}")])
    [d] = backend.lease("q", 1, 30.0)
    assert backend.settle([Settle.suspend(d.receipt, 0.05, Wait("go"))]) == [True]
    [again] = backend.lease("q", 1, 30.0, wait=3.0)
    assert backend.waiting("q", "w") is None
    assert backend.signal("q", "w", "go", b"1") == "delivered"
    assert backend.inspect("q", "w").state == "in_flight"
    assert backend.settle([Settle.ack(again.receipt)]) == [True]
