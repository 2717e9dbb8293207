"""Results on Redis: `result.lua` reads one (and marks it awaited); a waiter blocks on
the message's notify list between reads instead of polling."""

from __future__ import annotations

import time

from tasuki.backends.redis import codec
from tasuki.backends.redis.plumbing import Plumbing
from tasuki.core.flowrecords import ResultRecord


def read(redis: Plumbing, queue: str, id: str, waiting: bool = False) -> ResultRecord | None:
    """`waiting`: mark the message as awaited, so the settle that writes its result
    pushes its notify list."""
    keys = redis.keys.queue(queue)
    reply = redis.eval("result", [keys.results, keys.waiters], [keys.base, id, int(waiting)])
    return codec.result_record(reply)


def wait(redis: Plumbing, queue: str, id: str, timeout: float) -> ResultRecord | None:
    """Block on the message's notify list (`n:<id>`, pushed by the settle that writes
    the result, since the read that found it pending marked it as awaited) instead
    of polling: one BLMOVE of the list onto itself, so every waiter wakes and the
    token stays for the next one, then one read."""
    deadline = time.monotonic() + timeout
    notify = redis.keys.queue(queue).base + "n:" + id
    while True:
        found = read(redis, queue, id, waiting=True)
        remaining = deadline - time.monotonic()
        if found is None or found.state != "pending" or remaining <= 0:
            return found
        redis.wait_on(notify, remaining)
