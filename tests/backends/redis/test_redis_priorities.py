"""Priorities on Redis live in the ready ZSET's scores (rank = visible time - priority x
aging); what reads a score as a time must add the boost back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tasuki.backends.base import Settle
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import env, stats
from tasuki.testing.servers import RedisServer


@pytest.fixture
def backend(redis_server: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def test_a_high_priority_message_is_not_reported_old(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "urgent", priority=9)])
    assert backend.stats("q").oldest_ready_age < 5.0  # its rank is 45 minutes ahead
    info = backend.inspect("q", "urgent")
    assert info.state == "ready" and info.visible_at is not None
    assert abs(info.visible_at - time.time()) < 5.0


def test_a_delayed_release_waits_then_keeps_its_rank(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "p5", priority=5)])
    [d] = backend.lease("q", 1, 30.0)
    assert backend.settle([Settle.release(d.receipt, 0.3, penalty=False)]) == [True]
    backend.enqueue([env("q", f"p0-{i}") for i in range(3)])
    assert stats(backend, "q") == (3, 0, 1, 0)
    assert backend.inspect("q", "p5").state == "delayed"
    assert [x.id for x in backend.lease("q", 1, 30.0)] == ["p0-0"]
    time.sleep(0.35)
    assert [x.id for x in backend.lease("q", 3, 30.0)] == ["p5", "p0-1", "p0-2"]


def test_a_redriven_message_keeps_its_priority(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "p9", priority=9, max_attempts=1)])
    [d] = backend.lease("q", 1, 30.0)
    backend.settle([Settle.dead(d.receipt, "no")])
    backend.enqueue([env("q", "p0")])
    assert backend.redrive("q") == 1
    assert [x.id for x in backend.lease("q", 2, 30.0)] == ["p9", "p0"]
