"""`memory://` for operators: stats, dead letters, inspect, redrive, purge."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tasuki.backends.base import MessageInfo, QueueStats, Reliability, SettledTotals
from tasuki.backends.memory.codec import (
    DEAD,
    IN_FLIGHT,
    WAITING,
    dead_letter,
    lease_info,
    message_info,
)
from tasuki.backends.memory.store import Store
from tasuki.core import reliability as meters
from tasuki.core.flowrecords import flow_of
from tasuki.core.message import DeadLetter


def stats(store: Store, queue: str) -> QueueStats:
    ready = in_flight = delayed = dead = 0
    oldest: float | None = None
    with store.mutex:
        now = time.time()
        for record in store.queue(queue).records.values():
            if record.state == DEAD:
                dead += 1
            elif record.visible_at > now:
                if record.state == IN_FLIGHT:
                    in_flight += 1
                else:
                    delayed += 1  # delayed, or parked until a token or slot is due
            else:
                ready += 1
                if oldest is None or record.visible_at < oldest:
                    oldest = record.visible_at
    age = max(0.0, now - oldest) if oldest is not None else 0.0
    return QueueStats(ready, in_flight, delayed, dead, age)


def queues(store: Store) -> list[str]:
    with store.mutex:
        return sorted(name for name, q in store.queues.items() if q.records)


def dead_letters(store: Store, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
    with store.mutex:
        dead = [r for r in store.queue(queue).records.values() if r.state == DEAD]
    dead.sort(key=lambda r: (-r.died_at, -r.seq))
    return [dead_letter(r) for r in dead[offset : offset + limit]]


def in_flight(store: Store, queue: str, limit: int = 100) -> list[MessageInfo]:
    with store.mutex:
        now = time.time()
        held = [
            r
            for r in store.queue(queue).records.values()
            if r.state == IN_FLIGHT and r.visible_at > now
        ]
    held.sort(key=lambda r: (r.visible_at, r.seq))
    return [lease_info(r) for r in held[:limit]]


def settled_totals(store: Store, queue: str) -> SettledTotals:
    with store.mutex:
        q = store.queue(queue)
        return SettledTotals(q.acked, q.dead)


def reliability(store: Store, queue: str) -> Reliability:
    with store.mutex:
        return Reliability.from_meters(store.queue(queue).meters)


def add_meters(store: Store, queue: str, increments: Mapping[str, int]) -> None:
    with store.mutex:
        meters.add(store.queue(queue).meters, increments)


def inspect(store: Store, queue: str, id: str) -> MessageInfo:
    with store.mutex:
        now = time.time()
        q = store.queue(queue)
        record = q.records.get(id)
        if record is None:
            cancelled = q.cancelled.get(id)
            if cancelled is not None and cancelled[0] > now:
                return MessageInfo(queue, id, "cancelled", finished_until=cancelled[0])
            until = q.finished.get(id, 0.0)
            if until <= now:
                return MessageInfo(queue, id, "unknown")
            history = q.finished_history.get(id, ())
            return MessageInfo(queue, id, "finished", finished_until=until, history=history)
        return message_info(record, now)


def redrive(store: Store, queue: str, ids: Sequence[str] | None = None) -> int:
    count = 0
    with store.mutex:
        now = time.time()
        q = store.queue(queue)
        chosen = q.records.values() if ids is None else [q.records.get(i) for i in ids]
        for record in list(chosen):
            if record is None or record.state != DEAD:
                continue
            record.state = WAITING
            record.attempt = 0
            record.reason = ""
            record.error = None
            q.schedule(record, now)
            if record.envelope.keep_result > 0:
                store.flows.pending(queue, record.envelope.id)
            flow_id = flow_of(record.envelope.headers)
            if flow_id is not None:
                store.flows.resume(flow_id, queue, record.envelope.id, now)
            count += 1
        store.changed.notify_all()
    return count


def purge_dead(store: Store, queue: str) -> int:
    with store.mutex:
        q = store.queue(queue)
        dead = [i for i, r in q.records.items() if r.state == DEAD]
        for msg_id in dead:
            q.forget(msg_id)
            store.flows.forget(queue, msg_id)
        return len(dead)


def purge(store: Store, queue: str, aging: float) -> int:
    with store.mutex:
        q = store.queue(queue)
        count = len(q.records)
        holding = []
        for record in q.records.values():
            env = record.envelope
            if env.unique is not None and record.state == WAITING:
                store.locks.drop_if_owned(env.unique.key, env.id)
            if record.state == IN_FLIGHT:
                holding.append(record)
            store.flows.forget(queue, env.id)
        q.records.clear()
        q.timers.clear()
        q.ready.clear()
        # A purged lease's slots go at once, to parked messages that still exist (the
        # ones purged here are skipped), not when that lease would have expired.
        for record in holding:
            store.free(record, aging)
        return count
