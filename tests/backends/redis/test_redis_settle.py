"""Redis settles a batch of any mix of verdicts in one script call per queue (settle.lua),
counted by the server itself (INFO commandstats)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasuki.backends.base import Envelope, Settle
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import ErrorInfo
from tasuki.testing.servers import RedisServer
from tests.backends.script_calls import script_calls


@pytest.fixture
def backend(counted_redis: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{counted_redis.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def _leased(backend: RedisBackend, queue: str, n: int, **options: Any) -> list[Any]:
    envelopes = [Envelope(queue, f"m{i}", b"{}", max_attempts=5, **options) for i in range(n)]
    backend.enqueue(envelopes)
    leased = backend.lease(queue, n, 30.0)
    assert [d.id for d in leased] == [e.id for e in envelopes]
    return leased


def test_a_batch_of_every_verdict_is_one_script_call(backend: RedisBackend) -> None:
    queue = "mixed"
    kept, retried, handed_back, died = _leased(backend, queue, 4, keep_id=60.0)
    error = ErrorInfo("ValueError", "bad", "Traceback ...")
    items = [
        Settle.ack(kept.receipt),
        Settle.release(retried.receipt, 10.0, penalty=True, error=error),
        Settle.release(handed_back.receipt, 0.0, penalty=False),
        Settle.dead(died.receipt, "gave up", error),
    ]
    before = script_calls(backend._command)
    assert backend.settle(items) == [True] * 4
    assert script_calls(backend._command) - before == 1
    assert backend.inspect(queue, "m0").state == "finished"
    retry = backend.inspect(queue, "m1")
    assert (retry.state, retry.attempt) == ("delayed", 1)
    assert [(h.event, h.detail) for h in retry.history] == [
        ("retried", "again in 10s: ValueError: bad")
    ]
    again = backend.inspect(queue, "m2")
    assert (again.state, again.attempt) == ("ready", 0)  # the attempt given back
    [letter] = backend.dead_letters(queue)
    assert (letter.id, letter.reason, letter.error) == ("m3", "gave up", error)
    assert backend.settled_totals(queue) == (1, 1)
    assert backend.settle(items) == [False] * 4  # settled already: stale


def test_a_receipt_repeated_in_one_call_is_settled_by_its_first_item(
    backend: RedisBackend,
) -> None:
    """Whatever the verdicts, the first item of a receipt settles it and the later ones
    are refused: here the release, not the ack after it, so the message waits again."""
    [d] = _leased(backend, "twice", 1)
    items = [Settle.release(d.receipt, 0.0, penalty=False), Settle.ack(d.receipt)]
    assert backend.settle(items) == [True, False]
    assert backend.inspect("twice", d.id).state == "ready"
    assert backend.settled_totals("twice") == (0, 0)


def test_a_batch_over_several_queues_is_one_call_per_queue(backend: RedisBackend) -> None:
    a = _leased(backend, "a", 3)
    b = _leased(backend, "b", 2)
    items = [Settle.ack(a[0].receipt), Settle.dead(b[0].receipt, "no"), Settle.ack(a[1].receipt)]
    items += [Settle.release(b[1].receipt), Settle.release(a[2].receipt, penalty=False)]
    before = script_calls(backend._command)
    assert backend.settle(items) == [True] * 5
    assert script_calls(backend._command) - before == 2
    assert backend.stats("a").ready == 1 and backend.stats("b").ready == 1
    assert backend.stats("b").dead == 1
