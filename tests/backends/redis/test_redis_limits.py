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
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import RedisServer
from tests.backends.limit_checks import check_a_kept_lease_keeps_its_slot
from tests.backends.script_calls import script_calls

ONE = Limit("concurrency:q:job", "concurrency", 1)


@pytest.fixture
def backend(counted_redis: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{counted_redis.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


@pytest.mark.parametrize("how", ["keep", "extend"])
def test_a_kept_lease_keeps_its_slot(backend: RedisBackend, how: str) -> None:
    check_a_kept_lease_keeps_its_slot(backend, how, ONE)


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


RATE = Limit("rate:q:job", "rate", 5, 0.5)


def _limit_keys(backend: RedisBackend, queue: str) -> dict[str, int]:
    """The queue's limit keys (`lim:` and `park:`), each with its PTTL."""
    base = backend.keys.queue(queue).base
    found = backend._command("KEYS", base.replace("{", "\\{").replace("}", "\\}") + "*")
    names = [k.decode() if isinstance(k, bytes) else k for k in found]
    return {
        n[len(base) :]: backend._command("PTTL", n)
        for n in names
        if n[len(base) :].startswith(("lim:", "park:"))
    }


def test_limit_keys_go_once_nothing_can_need_them(backend: RedisBackend) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE, RATE)) for i in range(2)])
    [dying] = backend.lease("q", 10, 0.2)
    assert backend.lease("q", 10, 30.0) == []  # m1 parked for the slot
    ttls = _limit_keys(backend, "q")
    assert set(ttls) == {"lim:" + ONE.key, "park:" + ONE.key, "lim:" + RATE.key}
    assert all(ttl > 0 for ttl in ttls.values()), ttls  # none lives forever
    # Its worker died: past the lease, the window and the parked timer (+ the slack),
    # nothing of the limits is left, per tenant or otherwise.
    time.sleep(1.7)
    assert _limit_keys(backend, "q") == {}
    [again] = backend.lease("q", 10, 30.0)  # and the limits hold as before
    assert backend.lease("q", 10, 30.0) == []
    backend.ack([again.receipt])
    assert dying.id in ("m0", "m1")
    assert list(_limit_keys(backend, "q")) == ["lim:" + RATE.key]  # the window: `per` more


def test_a_kept_holder_outlives_its_slot_key_s_first_ttl(backend: RedisBackend) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(2)])
    [held] = backend.lease("q", 10, 0.2)
    first_ttl = _limit_keys(backend, "q")["lim:" + ONE.key]
    assert backend.keep([Keep(held.receipt, 3.0)]) == ["held"]
    time.sleep(first_ttl / 1000 + 0.3)  # past the TTL the key got with the lease
    assert backend.lease("q", 10, 30.0) == []  # the slot is still the running holder's
    assert backend.keep([Keep(held.receipt, 3.0)]) == ["held"]
    assert _limit_keys(backend, "q")["lim:" + ONE.key] > 3000
    backend.ack([held.receipt])
    assert [d.id for d in backend.lease("q", 10, 30.0, wait=1.0)] == ["m1"]


@pytest.mark.parametrize("how", ["purge", "cancel"])
def test_a_removed_message_leaves_no_limit_state(backend: RedisBackend, how: str) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(3)])
    [held] = backend.lease("q", 10, 30.0)
    assert backend.lease("q", 10, 30.0) == []  # m1, m2 parked for the slot
    if how == "purge":
        backend.purge("q")
    else:
        assert [backend.cancel("q", m) for m in ("m0", "m1", "m2")].count("removed") == 2
    assert _limit_keys(backend, "q") == {}  # the slot freed, nobody left parked on it
    backend.enqueue([env("q", "n0", limits=(ONE,))])
    assert [d.id for d in backend.lease("q", 10, 30.0)] == ["n0"]
    assert held.id == "m0"
