"""Cancelling a message on `memory://`: a waiting one removed, a running one flagged for
its worker's next keep; its id stays known for `CANCELLED_WINDOW` (or its keep_id)."""

from __future__ import annotations

import time

from tasuki.backends.base import CancelStatus
from tasuki.backends.memory.codec import DEAD, IN_FLIGHT
from tasuki.backends.memory.store import Store
from tasuki.core.records import CANCELLED_WINDOW


def cancel(store: Store, queue: str, id: str, aging: float) -> CancelStatus:
    with store.mutex:
        now = time.time()
        q = store.queues.get(queue)
        record = q.records.get(id) if q else None
        if q is None or record is None or record.state == DEAD:
            return "unknown"
        running = record.state == IN_FLIGHT and record.visible_at > now
        env = record.envelope
        q.forget(id)
        window = max(env.keep_id, CANCELLED_WINDOW)
        q.cancelled[id] = (now + window, (record.token or "") if running else "")
        store.free(record, aging)
        if env.unique is not None:
            store.locks.drop_if_owned(env.unique.key, env.id)
        store.flows.forget(queue, id)
        store.changed.notify_all()
        return "signalled" if running else "removed"
