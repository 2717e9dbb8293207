"""Leasing on `memory://`: what is due taken by rank (`Queue.ready`), a message over a
rate or concurrency limit parked instead, one whose attempts are spent dead-lettered;
an idle wait sleeps on the store's condition until a change or the next due time."""

from __future__ import annotations

import heapq
import os
import time

from tasuki.backends.base import Delivery
from tasuki.backends.memory.codec import IN_FLIGHT, WAITING, Record, delivery
from tasuki.backends.memory.store import Queue, Store
from tasuki.backends.waiting import lease_until
from tasuki.core import reliability
from tasuki.core.reasons import ATTEMPTS_EXHAUSTED, LEASE_EXPIRED, exhausted


def lease(
    store: Store,
    queue: str,
    max_messages: int,
    visibility_timeout: float,
    wait: float,
    aging: float,
) -> list[Delivery]:
    def try_lease() -> tuple[list[Delivery], float]:
        now = time.time()
        q = store.queue(queue)
        leased = _lease_now(store, q, max_messages, visibility_timeout, now, aging)
        return leased, q.next_due(now)

    def wait_for_change(remaining: float, next_due: float) -> None:
        store.changed.wait(max(0.001, min(remaining, next_due)))

    with store.mutex:  # the condition's wait releases it
        return lease_until(wait, try_lease, wait_for_change)


def _lease_now(
    store: Store, queue: Queue, max_messages: int, default_vt: float, now: float, aging: float
) -> list[Delivery]:
    admission = store.admission
    for key in admission.expired_slots(now):
        store.wake(key, now, aging)
    queue.promote(now, aging)
    leased: list[Delivery] = []
    # One system call per lease, not per message (os.urandom releases the GIL, and a
    # busy worker then waits to get it back): a random prefix and a counter.
    prefix = os.urandom(4).hex()
    ready = queue.ready
    while ready and len(leased) < max_messages:
        record = queue.current(heapq.heappop(ready))
        if record is None:
            continue
        env = record.envelope
        lost = record.state == IN_FLIGHT
        if lost:
            record.remember(record.visible_at, "lease lost")  # when it expired
            reliability.add(queue.meters, {reliability.LEASES_LOST: 1})
            store.free(record, aging)
        if exhausted(record.attempt, env.max_attempts):
            reason = LEASE_EXPIRED if lost else ATTEMPTS_EXHAUSTED
            store.dead_letter(queue, record, reason, None, now)
            continue
        if env.limits:
            parked = admission.admit((env.queue, env.id), env.limits, now)
            if parked is not None:
                _park(store, queue, record, parked, now)
                continue
        vt = env.visibility_timeout or default_vt
        if lost:
            reliability.observe(queue.meters, reliability.RECOVERY, now - record.visible_at)
        record.state = IN_FLIGHT
        record.parked = False
        record.progress = None
        record.attempt += 1
        if record.attempt > 1:
            reliability.add(queue.meters, {reliability.REDELIVERIES: 1})
        record.fence += 1
        record.token = f"{prefix}{next(store.tokens):08x}"
        queue.schedule(record, now + vt)
        if env.limits:
            admission.take((env.queue, env.id), env.limits, now, now + vt)
        leased.append(delivery(record, vt))
    return leased


def _park(
    store: Store, queue: Queue, record: Record, parked: tuple[float, str | None], now: float
) -> None:
    """Over a limit: no attempt spent; due again when a token or a slot is expected."""
    until, key = parked
    record.state = WAITING
    record.token = None
    record.parked = True
    queue.schedule(record, max(until, now))
    if key is not None:
        store.admission.park(key, (record.envelope.queue, record.envelope.id))
