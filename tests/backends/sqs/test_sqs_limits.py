"""Limits on SQS, admitted after the receive in the `locks=` store (limits.py): what
the contract cannot see. A slot freed in one process wakes a message another process
put back; a message put back costs no attempt and few requests."""

from __future__ import annotations

import time
import uuid
from collections import Counter

from tasuki.backends.base import Limit, Settle
from tasuki.testing.contract.helpers import env
from tests.backends.sqs.support import opened, requests_counted
from tests.support.deps import need

need("boto3")


def test_a_slot_freed_in_another_process_wakes_the_next(locked_url: str) -> None:
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    holder, waiter = opened(locked_url), opened(locked_url)
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
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, f"m{i}", limits=(one,)) for i in range(10)])
        [first] = backend.lease(queue, 10, 30.0)
        calls = requests_counted(backend)
        for _ in range(3):
            assert backend.lease(queue, 10, 30.0) == []  # nothing visible: one empty receive
        assert calls == Counter({"ReceiveMessage": 3}), calls
        calls.clear()
        backend.settle([Settle.ack(first.receipt)])
        [second] = backend.lease(queue, 10, 30.0, wait=2.0)
        assert second.attempt == 1
        # The ack's delete, one wake, the long poll that took the woken one, and its
        # lease set (a long poll receives for LONG_POLL_HOLD only: leasing.py).
        assert calls == Counter(
            {"DeleteMessageBatch": 1, "ChangeMessageVisibilityBatch": 2, "ReceiveMessage": 1}
        ), calls
    finally:
        backend.close()


def test_an_extended_lease_keeps_its_slot(locked_url: str) -> None:
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, f"m{i}", limits=(one,)) for i in range(2)])
        [held] = backend.lease(queue, 10, 2.0)
        assert backend.extend([held.receipt], 30.0) == [True]
        time.sleep(2.5)  # the first lease's length: the slot was renewed with it
        assert backend.lease(queue, 10, 30.0, wait=1.0) == []
    finally:
        backend.close()


def test_a_lease_runs_what_it_admitted_without_passing_over_the_backlog(locked_url: str) -> None:
    """A receive that comes back full of messages over their limit ends the lease when it
    holds some already: what it admitted runs now, not after receives that pass over the
    whole backlog (each putting ten back), while its slots and lease time run out."""
    one = Limit(f"concurrency:{uuid.uuid4().hex}", "concurrency", 1)
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, f"m{i}", limits=(one,)) for i in range(40)])
        calls = requests_counted(backend)
        [first] = backend.lease(queue, 5, 30.0)
        assert first.attempt == 1
        # Five received (one admitted), then the four of the room left, all put back.
        assert calls["ReceiveMessage"] == 2, calls
        assert backend.stats(queue).ready >= 30
    finally:
        backend.close()
