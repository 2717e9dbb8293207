"""`memory://`'s durable steps (DESIGN §4c): step records, signals and waits, kept on the
message's own `Record`, so they are dropped with it (ack, cancel, purge, dead-letter
purge) and kept by a redrive. Every operation runs under the store's one lock: that is
what makes each of them atomic with its lease check."""

from __future__ import annotations

import time

from tasuki.backends.base import Receipt, SignalStatus, StepRecord, Taken, Wait, Waiting
from tasuki.backends.memory.codec import DEAD, WAITING, Record
from tasuki.backends.memory.store import Queue, Store


def steps(store: Store, queue: str, id: str) -> list[StepRecord]:
    with store.mutex:
        found = _record(store, queue, id)
        return list(found[1].steps or ()) if found else []


def record_step(store: Store, receipt: Receipt, record: StepRecord) -> bool:
    with store.mutex:
        held = store.holding(receipt)
        if held is None:
            return False
        _add(held[1], record)
        return True


def take_signal(store: Store, receipt: Receipt, name: str, occurrence: int) -> Taken:
    with store.mutex:
        held = store.holding(receipt)
        if held is None:
            return Taken(False, None)
        record = held[1]
        signals = record.signals or []
        for n, (sent, payload) in enumerate(signals):
            if sent == name:
                del signals[n]
                step = StepRecord(f"tasuki:signal:{name}", occurrence, payload, time.time(), 0.0)
                _add(record, step)
                return Taken(True, payload)
        return Taken(True, None)


def signal(
    store: Store, queue: str, id: str, name: str, payload: bytes, aging: float
) -> SignalStatus:
    with store.mutex:
        found = _record(store, queue, id)
        if found is None or found[1].state == DEAD:
            return "unknown"
        q, record = found
        if record.signals is None:
            record.signals = []
        record.signals.append((name, payload))
        waiting = record.waiting
        if record.state == WAITING and waiting is not None and waiting.signal == name:
            _wake_now(store, q, record, time.time(), aging)
        return "delivered"


def waiting(store: Store, queue: str, id: str) -> Waiting | None:
    with store.mutex:
        found = _record(store, queue, id)
        if found is None:
            return None
        record = found[1]
        if record.state != WAITING or record.visible_at <= time.time():
            return None
        return record.waiting


def suspended(
    store: Store, queue: Queue, record: Record, wait: Wait, until: float, now: float, aging: float
) -> None:
    """A settle suspended the run (called under the lock, after its release)."""
    record.waiting = Waiting(wait.signal, until)
    if wait.signal and any(sent == wait.signal for sent, _ in record.signals or ()):
        _wake_now(store, queue, record, now, aging)


def _record(store: Store, queue: str, id: str) -> tuple[Queue, Record] | None:
    q = store.queues.get(queue)
    record = q.records.get(id) if q else None
    return None if q is None or record is None else (q, record)


def _wake_now(store: Store, queue: Queue, record: Record, now: float, aging: float) -> None:
    record.waiting = None
    record.visible_at = now
    queue.make_ready(record, aging)
    store.changed.notify_all()


def _add(record: Record, step: StepRecord) -> None:
    if record.steps is None:
        record.steps = []
    record.steps.append(step)
