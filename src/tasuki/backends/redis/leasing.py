"""Leasing on Redis: one `lease.lua` call a batch; an idle `lease(wait=...)` blocks in
BLPOP on the queue's signal list, which enqueue, release and redrive push to, and the
script tells when the next delayed message or lease falls due, so it wakes for that too."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from tasuki.backends.base import Delivery
from tasuki.backends.redis import codec
from tasuki.backends.redis.codec import us
from tasuki.backends.redis.keys import QueueKeys
from tasuki.backends.redis.plumbing import MIN_BLOCK, Plumbing
from tasuki.backends.waiting import lease_until

# In the last tick before a delayed message is due, re-check this often (see `_pause`).
FINAL_STRETCH_STEP = 0.02


def lease(
    redis: Plumbing, queue: str, max_messages: int, visibility_timeout: float, wait: float
) -> list[Delivery]:
    if max_messages <= 0:
        return []
    keys, script_keys, args = _request(redis, queue, max_messages, visibility_timeout)

    def try_lease() -> tuple[list[Delivery], int]:
        # The script returns the deliveries, or only the microseconds until the next
        # delayed message falls due (-1: none), which is the wait's hint.
        reply = redis.eval("lease", script_keys, args)
        if len(reply) > 1:
            return codec.deliveries(queue, reply, visibility_timeout), -1
        return [], int(reply[0])

    def wait_for_change(remaining: float, hint_us: int) -> None:
        _pause(redis, keys.signal, remaining, hint_us)

    return lease_until(wait, try_lease, wait_for_change)


def lease_soon(
    redis: Plumbing, queue: str, max_messages: int, visibility_timeout: float
) -> Callable[[], list[Delivery]]:
    """The lease script sent now, its reply read later: Redis leases the next batch
    while the worker runs the current one."""
    if max_messages <= 0:
        return list
    _, script_keys, args = _request(redis, queue, max_messages, visibility_timeout)
    finish = redis.connection().run_soon("lease", script_keys, args)

    def leased() -> list[Delivery]:
        reply = finish()
        return codec.deliveries(queue, reply, visibility_timeout) if len(reply) > 1 else []

    return leased


def _request(
    redis: Plumbing, queue: str, max_messages: int, visibility_timeout: float
) -> tuple[QueueKeys, list[str], list[Any]]:
    keys = redis.keys.queue(queue)
    script_keys = [
        keys.waiting,
        keys.leased,
        keys.dead,
        keys.leases,
        keys.counts,
        keys.results,
        keys.delayed,
        keys.waiters,
        keys.limited,
    ]
    # The lease nonce: os.urandom, as secrets.token_hex, whose import (hmac, hashlib)
    # would add milliseconds to every worker's start.
    args = [keys.base, max_messages, us(visibility_timeout), os.urandom(6).hex()]
    return keys, script_keys, args


def _pause(redis: Plumbing, signal: str, remaining: float, hint_us: int) -> None:
    """Sleep until a signal, the next message falls due (`hint_us`), or `remaining` ends.

    Redis wakes a BLPOP whose timeout passed only at its next tick (1/hz, 100 ms by
    default), too late for a delayed message that must start on time. So when the
    next due message is what ends the wait, BLPOP ends one tick early and the last
    tick is covered by a few short local sleeps, each followed by another lease:
    a delayed message starts within FINAL_STRETCH_STEP of its time, and a new
    message is noticed within the same step even then. Otherwise BLPOP blocks for
    all of `remaining` (a few ms late at worst, which only lengthens an empty wait).
    """
    due = hint_us / 1e6 if hint_us >= 0 else float("inf")
    granule = redis.granule
    if due <= remaining:
        if due <= granule + MIN_BLOCK:
            time.sleep(min(due, FINAL_STRETCH_STEP))
            return
        block = due - granule
    else:
        block = remaining
    if block < MIN_BLOCK:
        time.sleep(block)
        return
    block = min(block, redis.max_block)
    redis.command("BLPOP", signal, block)
