"""Settling on `memory://`: ack, release (or suspend a durable run, `durable.suspended`)
or dead-letter under the current lease only, a workflow step's effects applied in the
same step (`FlowStore.apply`); keep and extend."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tasuki.backends.base import Keep, LeaseStatus, Receipt, Settle
from tasuki.backends.memory import durable, producing
from tasuki.backends.memory.codec import WAITING, Record
from tasuki.backends.memory.store import Queue, Store
from tasuki.core.records import death_detail, error_summary, release_event


def settle(store: Store, items: Sequence[Settle], aging: float) -> list[bool]:
    results = []
    with store.mutex:
        now = time.time()
        for item in items:
            held = store.holding(item.receipt)
            if held is not None:
                _settle_one(store, held[0], held[1], item, now, aging)
            results.append(held is not None)
        store.changed.notify_all()
    return results


def _settle_one(
    store: Store, queue: Queue, record: Record, item: Settle, now: float, aging: float
) -> None:
    store.free(record, aging)
    env = record.envelope
    effects = item.effects
    if item.verdict == "ack":
        _ack(queue, record, now)
        store.flows.settled(env, now, effects.result if effects else None, failed=False)
    elif item.verdict == "release":
        record.state = WAITING
        record.token = None
        if not item.penalty:
            record.attempt -= 1
        detail = error_summary(item.error)
        record.remember(now, *release_event(item.delay, item.penalty, detail))
        queue.schedule(record, now + item.delay)
        record.waiting = None
        if item.wait is not None:
            durable.suspended(store, queue, record, item.wait, now + item.delay, now, aging)
    else:
        record.remember(now, "dead", death_detail(item.reason, item.error))
        store.dead_letter(queue, record, item.reason, item.error, now)
    if effects is not None and item.verdict != "release":
        store.flows.apply(effects, now, lambda envs: producing.enqueue(store, envs, now))


def _ack(queue: Queue, record: Record, now: float) -> None:
    msg_id = record.envelope.id
    queue.forget(msg_id)
    queue.acked += 1
    if record.envelope.keep_id > 0:
        queue.finished[msg_id] = now + record.envelope.keep_id
        record.remember(now, "acked")
        queue.finished_history[msg_id] = record.history


def keep(store: Store, items: Sequence[Keep]) -> list[LeaseStatus]:
    out: list[LeaseStatus] = []
    with store.mutex:
        now = time.time()
        for item in items:
            held = store.holding(item.receipt)
            if held is None:
                out.append(_why_not_held(store, item.receipt, now))
                continue
            queue, record = held
            if record.envelope.limits and record.visible_at <= now:
                out.append("lost")  # lapsed: the slot it held may be another's now
                continue
            queue.schedule(record, now + item.visibility_timeout)
            if record.envelope.limits:
                store.admission.extend(
                    (record.envelope.queue, record.envelope.id),
                    record.envelope.limits,
                    record.visible_at,
                )
            if item.progress is not None:
                record.progress = item.progress
            out.append("held")
    return out


def extend(store: Store, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
    return [s == "held" for s in keep(store, [Keep(r, visibility_timeout) for r in receipts])]


def _why_not_held(store: Store, receipt: Receipt, now: float) -> LeaseStatus:
    queue = store.queues.get(receipt.queue)
    cancelled = queue.cancelled.get(receipt.id) if queue else None
    if cancelled is not None and cancelled[1] == receipt.token and cancelled[0] > now:
        return "cancelled"
    return "lost"
