"""`redis://`, `rediss://`, `unix://` — many machines, high throughput.

Every state change is one Lua script per queue per call (`lua/*.lua`, one file per
operation), so the lifecycle is enforced by Redis atomically and nothing here does
read-modify-write. Times are the Redis server's clock, read inside the scripts; callers
pass durations. Python's part is to group a batch by queue, flatten it into ARGV, call
the script by SHA and turn the flat reply into values: one round trip per queue per
batch, whatever the batch size (up to `CHUNK` messages per script call, so one call
never holds Redis for long).

An idle `lease(wait=...)` blocks in BLPOP on the queue's signal list, which enqueue,
release and redrive push to; the lease script tells it when the next delayed message
or lease falls due, so it wakes for that too. See docs/redis.md for the whole design.

Each method is a flatten-call-unflatten of one script: the logic is in its `.lua` file,
the mapping of records to arguments and of replies to records in `codec/`. Here: the
lease, the settle, keep and extend, cancel, results; producing.py: enqueue;
workflows.py: starting, reading, waiting on and cancelling flows; operating.py: counts,
dead letters, inspection, redrive, purge; plumbing.py: the connection, the grouping by
queue and the wait on a notify list.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    CancelStatus,
    Delivery,
    Keep,
    LeaseStatus,
    Receipt,
    Settle,
)
from tasuki.backends.redis import codec
from tasuki.backends.redis.codec import ms, us
from tasuki.backends.redis.keys import QueueKeys
from tasuki.backends.redis.locks import RedisLockStore
from tasuki.backends.redis.operating import Operating
from tasuki.backends.redis.options import RedisOptions
from tasuki.backends.redis.plumbing import CHUNK, MIN_BLOCK
from tasuki.backends.redis.workflows import Workflows
from tasuki.backends.waiting import lease_until
from tasuki.core.flowrecords import ResultRecord

# In the last tick before a delayed message is due, re-check this often (see `_pause`).
FINAL_STRETCH_STEP = 0.02
# How long a cancelled id stays known (an enqueue of it is a no-op, `inspect` says
# "cancelled"), when its own keep_id window is shorter.
CANCELLED_WINDOW = 3600.0
# keep.lua's answers by code.
_LEASE_STATUS: tuple[LeaseStatus, ...] = ("lost", "held", "cancelled")


class RedisBackend(Workflows, Operating):
    """The Backend interface on Redis (or Redis Cluster); `from_url` builds one."""

    def __init__(self, options: RedisOptions) -> None:
        super().__init__(options)
        self._locks = RedisLockStore(self)

    @property
    def locks(self) -> RedisLockStore:
        return self._locks

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        if max_messages <= 0:
            return []
        keys, script_keys, args = self._lease_request(queue, max_messages, visibility_timeout)

        def try_lease() -> tuple[list[Delivery], int]:
            # The script returns the deliveries, or only the microseconds until the next
            # delayed message falls due (-1: none), which is the wait's hint.
            reply = self._eval("lease", script_keys, args)
            if len(reply) > 1:
                return codec.deliveries(queue, reply, visibility_timeout), -1
            return [], int(reply[0])

        def wait_for_change(remaining: float, hint_us: int) -> None:
            self._pause(keys.signal, remaining, hint_us)

        return lease_until(wait, try_lease, wait_for_change)

    def _lease_request(
        self, queue: str, max_messages: int, visibility_timeout: float
    ) -> tuple[QueueKeys, list[str], list[Any]]:
        keys = self.keys.queue(queue)
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

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """The lease script sent now, its reply read later: Redis leases the next batch
        while the worker runs the current one."""
        if max_messages <= 0:
            return list
        _, script_keys, args = self._lease_request(queue, max_messages, visibility_timeout)
        finish = self._connection().run_soon("lease", script_keys, args)

        def leased() -> list[Delivery]:
            reply = finish()
            return codec.deliveries(queue, reply, visibility_timeout) if len(reply) > 1 else []

        return leased

    def _pause(self, signal: str, remaining: float, hint_us: int) -> None:
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
        granule = self._conn.granule
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
        block = min(block, self._max_block)
        self._command("BLPOP", signal, block)

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        """One settle.lua call per queue (and per CHUNK items), whatever the verdicts; a
        workflow step's effects go in the same call (`lua/includes/flows.lua`)."""
        flows = any(item.effects is not None for item in items)
        if flows:
            self._check_effects(items)

        def call(keys: QueueKeys, part: Sequence[Settle]) -> list[int]:
            args = codec.settle_args(keys.base, part)
            if flows:
                queue = part[0].receipt.queue
                args += codec.effects_args(
                    part,
                    lambda flow_id: self._flow_keys(flow_id, queue),
                    self.keys.queue,
                    self.keys.lock,
                    self.priority_aging,
                )
            reply: list[int] = self._eval("settle", codec.settle_keys(keys), args)
            return reply

        return self._per_queue(items, _receipt_of, call)

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        """One keep.lua call per queue (and per CHUNK items): extend, store progress
        under the current lease only, and tell "held", "lost" or "cancelled"."""
        out: list[LeaseStatus] = ["lost"] * len(items)
        groups: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            groups.setdefault(item.receipt.queue, []).append(n)
        for queue, indices in groups.items():
            keys = self.keys.queue(queue)
            for start in range(0, len(indices), CHUNK):
                part = indices[start : start + CHUNK]
                args = codec.keep_args(keys.base, [items[n] for n in part])
                reply = self._eval("keep", [keys.leased, keys.leases, keys.limited], args)
                for n, code in zip(part, reply, strict=True):
                    out[n] = _LEASE_STATUS[code]
        return out

    def cancel(self, queue: str, id: str) -> CancelStatus:
        keys = self.keys.queue(queue)
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
        reply = self._eval("cancel", script_keys, [keys.base, id, ms(CANCELLED_WINDOW)])
        status: CancelStatus = reply.decode()
        return status

    # -- results ---------------------------------------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        return self._result(queue, id, waiting=False)

    def _result(self, queue: str, id: str, waiting: bool) -> ResultRecord | None:
        keys = self.keys.queue(queue)
        reply = self._eval("result", [keys.results, keys.waiters], [keys.base, id, int(waiting)])
        return codec.result_record(reply)

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        """Block on the message's notify list (`n:<id>`, pushed by the settle that writes
        the result, since the read that found it pending marked it as awaited) instead
        of polling: one BLMOVE of the list onto itself, so every waiter wakes and the
        token stays for the next one, then one read."""
        deadline = time.monotonic() + timeout
        notify = self.keys.queue(queue).base + "n:" + id
        while True:
            found = self._result(queue, id, waiting=True)
            remaining = deadline - time.monotonic()
            if found is None or found.state != "pending" or remaining <= 0:
                return found
            self._wait_on(notify, remaining)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        """`keep` without progress: keep.lua is the one script that extends a lease."""
        held = self.keep([Keep(r, visibility_timeout) for r in receipts])
        return [status == "held" for status in held]


def _receipt_of(item: Settle) -> Receipt:
    return item.receipt
