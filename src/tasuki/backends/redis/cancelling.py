"""Cancelling a message on Redis: one `cancel.lua` call, which removes a waiting message
or flags a running one for its worker's next keep."""

from __future__ import annotations

from tasuki.backends.base import CancelStatus
from tasuki.backends.redis.codec import ms
from tasuki.backends.redis.plumbing import Plumbing

# How long a cancelled id stays known (an enqueue of it is a no-op, `inspect` says
# "cancelled"), when its own keep_id window is shorter.
CANCELLED_WINDOW = 3600.0


def cancel(redis: Plumbing, queue: str, id: str) -> CancelStatus:
    keys = redis.keys.queue(queue)
    script_keys = [
        keys.waiting,
        keys.leased,
        keys.leases,
        keys.delayed,
        keys.keep,
        keys.results,
        keys.waiters,
        keys.limited,
    ]
    reply = redis.eval("cancel", script_keys, [keys.base, id, ms(CANCELLED_WINDOW)])
    status: CancelStatus = reply.decode()
    return status
