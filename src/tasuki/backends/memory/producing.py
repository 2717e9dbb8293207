"""Enqueueing on `memory://`: a record per new message, its id window and its unique
claim checked first; the caller holds the store's mutex."""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.memory.codec import WAITING, stored
from tasuki.backends.memory.store import Queue, Store


def enqueue(store: Store, envelopes: Sequence[Envelope], now: float) -> list[Enqueued]:
    return [_enqueue_one(store, env, now) for env in envelopes]


def _enqueue_one(store: Store, env: Envelope, now: float) -> Enqueued:
    queue = store.queue(env.queue)
    if _known(queue, env.id, now):
        return Enqueued(env.id, "duplicate")
    if env.unique is not None:
        holder = store.locks.holder(env.unique.key)
        if holder is not None and holder.owner != env.id:
            waiting = queue.records.get(holder.owner)
            if env.unique.replace and waiting is not None and waiting.state == WAITING:
                waiting.envelope = waiting.envelope._replace(body=env.body, headers=env.headers)
                return Enqueued(holder.owner, "replaced")
            return Enqueued(holder.owner, "conflict")
        store.locks.acquire(env.unique.key, env.id, env.unique.ttl)
    record = stored(env, next(store.seq), now)
    queue.records[env.id] = record
    queue.schedule(record, now + env.delay)
    if env.keep_result > 0:
        store.flows.pending(env.queue, env.id)
    return Enqueued(env.id, "enqueued")


def _known(queue: Queue, msg_id: str, now: float) -> bool:
    if msg_id in queue.records or queue.finished.get(msg_id, 0.0) > now:
        return True
    cancelled = queue.cancelled.get(msg_id)
    return cancelled is not None and cancelled[0] > now
