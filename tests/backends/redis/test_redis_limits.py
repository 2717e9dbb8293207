"""Limits on Redis: a concurrency slot is the lease holding it, kept alive by the lease's
heartbeat (keep and extend alike) and parked messages wait without polling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tasuki.backends.base import Keep, Limit
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import env, stats
from tests.backends.script_calls import script_calls
from tests.support.servers import RedisServer

ONE = Limit("concurrency:q:job", "concurrency", 1)


@pytest.fixture
def backend(redis_server: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


@pytest.mark.parametrize("how", ["keep", "extend"])
def test_a_kept_lease_keeps_its_slot(backend: RedisBackend, how: str) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(2)])
    [held] = backend.lease("q", 10, 0.5)
    if how == "keep":
        assert backend.keep([Keep(held.receipt, 30.0)]) == ["held"]
    else:
        assert backend.extend([held.receipt], 30.0) == [True]
    time.sleep(0.6)  # past the first expiry: the slot must live with the lease
    assert backend.lease("q", 10, 30.0) == []
    assert stats(backend, "q") == (0, 1, 1, 0)  # the other parked: delayed, not ready


def test_a_parked_message_costs_no_call_until_its_slot_frees(backend: RedisBackend) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(2)])
    [held] = backend.lease("q", 10, 30.0)
    # The enqueue's wake-up tokens cost an empty lease each; then the lease sleeps: the
    # parked message is not due before the holder's expiry.
    assert backend.lease("q", 10, 30.0, wait=0.3) == []
    before = script_calls(backend._command)
    assert backend.lease("q", 10, 30.0, wait=1.0) == []
    assert script_calls(backend._command) - before <= 2
    backend.ack([held.receipt])
    assert [d.id for d in backend.lease("q", 10, 30.0, wait=1.0)] == ["m1"]


def test_a_message_leased_by_its_timer_leaves_the_parked_set(backend: RedisBackend) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(2)])
    [first] = backend.lease("q", 10, 0.3)
    assert backend.lease("q", 10, 30.0) == []  # m1 parked for the slot
    parked = backend.keys.queue("q").base + "park:" + ONE.key
    assert backend._command("ZCARD", parked) == 1
    time.sleep(0.4)  # the holder's lease lapsed: m1's timer (that expiry) ranks it first
    [again] = backend.lease("q", 1, 30.0)
    assert (first.id, again.id) == ("m0", "m1")
    assert backend._command("ZCARD", parked) == 0
