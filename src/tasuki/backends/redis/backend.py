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
the mapping of records to arguments and of replies to records in `codec.py`. Here: the
hot path (enqueue, lease, settle, extend); operating.py: counts, dead letters,
inspection, redrive, purge; plumbing.py: the connection and the grouping by queue.
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
    Enqueued,
    Envelope,
    Keep,
    LeaseStatus,
    Receipt,
    Settle,
    refuse_connection,
)
from tasuki.backends.redis import codec
from tasuki.backends.redis.codec import ms, us
from tasuki.backends.redis.keys import FlowKeys, QueueKeys
from tasuki.backends.redis.locks import RedisLockStore
from tasuki.backends.redis.operating import Operating
from tasuki.backends.redis.options import RedisOptions
from tasuki.backends.redis.plumbing import CHUNK
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.waiting import lease_until
from tasuki.core.flowrecords import FlowRecord, ResultRecord
from tasuki.errors import InvalidArgument, MessageTooLarge

# An enqueue this large is sent as several script calls, each on its way while the
# next is built (Connection.run_each).
PIPELINED = 250
# How often a producer re-adds a queue to the `queues` set (it is a SET: re-adding is free).
ANNOUNCE_EVERY = 60.0
# A blocked lease never sleeps less than this in BLPOP; shorter pauses sleep locally.
MIN_BLOCK = 0.01
# In the last tick before a delayed message is due, re-check this often (see `_pause`).
FINAL_STRETCH_STEP = 0.02
# How long a cancelled id stays known (an enqueue of it is a no-op, `inspect` says
# "cancelled"), when its own keep_id window is shorter.
CANCELLED_WINDOW = 3600.0
# keep.lua's answers by code.
_LEASE_STATUS: tuple[LeaseStatus, ...] = ("lost", "held", "cancelled")
# How many flows' home queues a process remembers (they never change); then it forgets
# them all and starts again.
FLOW_HOMES = 10_000


class RedisBackend(Operating):
    """The Backend interface on Redis (or Redis Cluster); `from_url` builds one."""

    def __init__(self, options: RedisOptions) -> None:
        super().__init__(options)
        self._locks = RedisLockStore(self)
        self._homes: dict[str, str] = {}

    @property
    def locks(self) -> RedisLockStore:
        return self._locks

    def _announce(self, queue: str) -> None:
        """Add the queue to the `queues` set, at most once a minute per process.

        It is a key of its own slot on Cluster, so it can't join the enqueue script; it is
        added *before* the messages, so a listed queue may be empty but a queue with
        messages is always listed.
        """
        conn = self._connection()
        marker = (self.keys.queues, queue)
        now = time.monotonic()
        if now - conn.announced.get(marker, -ANNOUNCE_EVERY) >= ANNOUNCE_EVERY:
            self._command("SADD", self.keys.queues, queue)
            conn.announced[marker] = now

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        refuse_connection(self, connection)
        if not envelopes:
            return []
        self._check(envelopes)
        first = envelopes[0].queue
        if len(envelopes) == 1:  # one-by-one enqueue: the common case of a web request
            keys = self.keys.queue(first)
            self._announce(first)
            return self._enqueue_chunk(keys, list(envelopes))
        if all(env.queue == first for env in envelopes):
            groups = {first: list(range(len(envelopes)))}
        else:
            groups = {}
            for n, env in enumerate(envelopes):
                groups.setdefault(env.queue, []).append(n)
        results: list[Enqueued] = [Enqueued("", "duplicate")] * len(envelopes)
        for queue, indices in groups.items():
            keys = self.keys.queue(queue)
            self._announce(queue)
            for start in range(0, len(indices), CHUNK):
                part = indices[start : start + CHUNK]
                batch = [envelopes[n] for n in part]
                for n, result in zip(part, self._enqueue_chunk(keys, batch), strict=True):
                    results[n] = result
        return results

    def _check(self, envelopes: Sequence[Envelope]) -> None:
        """Refuse a bad batch before any of it is written."""
        limit = self.capabilities.max_message_size
        cluster = self._connection().cluster
        for env in envelopes:
            if len(env.body) > limit:
                raise MessageTooLarge(
                    f"message {env.id!r} is {len(env.body):,} bytes; the limit of "
                    f"{self.url} is {limit:,} (option max_message_size)"
                )
            claim = env.unique
            if cluster and claim is not None:
                lock_slot = key_slot(self.keys.lock(claim.key).encode())
                if lock_slot != key_slot(self.keys.queue(env.queue).waiting.encode()):
                    raise InvalidArgument(
                        f"unique key {claim.key!r} is not in the Redis Cluster slot of queue "
                        f"{env.queue!r}; start it with the queue's hash tag, "
                        f"e.g. '{{{env.queue}}}unique:...'"
                    )

    def _enqueue_chunk(self, keys: QueueKeys, batch: list[Envelope]) -> list[Enqueued]:
        """Store `batch` (one queue): one script call per PIPELINED messages, pipelined."""
        if len(batch) <= PIPELINED:
            script_keys, args = codec.enqueue_call(keys, self.keys.lock, batch, self.priority_aging)
            return codec.enqueued(batch, self._eval("enqueue", script_keys, args))
        parts = [batch[i : i + PIPELINED] for i in range(0, len(batch), PIPELINED)]
        calls = (
            codec.enqueue_call(keys, self.keys.lock, part, self.priority_aging) for part in parts
        )
        out: list[Enqueued] = []
        for part, reply in zip(parts, self._connection().run_each("enqueue", calls), strict=True):
            out += codec.enqueued(part, reply)
        return out

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
            block = min(remaining, self._max_block)
            if block < MIN_BLOCK:
                time.sleep(block)
            else:
                self._command("BLMOVE", notify, notify, "RIGHT", "LEFT", block)

    # -- workflows -------------------------------------------------------------------
    def _flow_home(self, flow_id: str) -> str | None:
        """A flow's home queue, where its keys are (`<prefix>flow:<id>` names it, for the
        flow's retention); None for a flow unknown, expired or never started."""
        home = self._homes.get(flow_id)
        if home is None:
            found = self._command("GET", self.keys.flow_home(flow_id))
            if found is None:
                return None
            home = found.decode()
            self._remember_home(flow_id, home)
        return home

    def _remember_home(self, flow_id: str, home: str) -> None:
        if len(self._homes) >= FLOW_HOMES:
            self._homes.clear()
        self._homes[flow_id] = home

    def _learn_homes(self, items: Sequence[Settle]) -> None:
        """The home queues of a settle's flows this process has not met yet, in one
        round trip, whatever the number of flows in the batch."""
        unknown: set[str] = set()
        for item in items:
            effects = item.effects
            if effects is None:
                continue
            flow_ids = [fill.flow for fill in effects.fills]
            if effects.flow is not None:
                flow_ids.append(effects.flow)
            unknown.update(f for f in flow_ids if f not in self._homes)
        if len(unknown) < 2:
            return  # none, or one: `_flow_home` reads it by itself
        names = sorted(unknown)
        found = self._connection().pipeline([("GET", self.keys.flow_home(f)) for f in names])
        for flow_id, home in zip(names, found, strict=True):
            if home is not None:
                self._remember_home(flow_id, home.decode())

    def _flow_keys(self, flow_id: str, fallback: str) -> FlowKeys:
        """A flow's keys; those of an unknown flow under `fallback`, the settling step's
        queue (its fills and successors still apply, as on every backend)."""
        home = self._flow_home(flow_id)
        return FlowKeys(self.keys.queue(fallback if home is None else home).base, flow_id)

    def _check_effects(self, items: Sequence[Settle]) -> None:
        """Refuse effects a settle could not apply atomically: on Redis Cluster, all of a
        step's keys (its queue, its flow's, its successors') must share one slot."""
        cluster = self._connection().cluster
        self._learn_homes(items)
        for item in items:
            effects = item.effects
            if effects is None or item.verdict == "release":
                continue
            self._check(effects.enqueue)
            for env in effects.enqueue:
                self._announce(env.queue)
            if cluster:
                queues = [env.queue for env in effects.enqueue]
                queue = item.receipt.queue
                home = None
                if effects.flow is not None:
                    home = self._flow_keys(effects.flow, queue).base
                self._same_slot(queue, queues, home)

    def _same_slot(self, queue: str, queues: Sequence[str], base: str | None = None) -> None:
        slot = key_slot(self.keys.queue(queue).base.encode())
        others = [q for q in queues if key_slot(self.keys.queue(q).base.encode()) != slot]
        if base is not None and key_slot(base.encode()) != slot:
            others.append(base)
        if others:
            raise InvalidArgument(
                f"a flow on Redis Cluster keeps all its steps in one hash slot, that of the "
                f"queue of its first step ({queue!r}): {sorted(set(others))} are elsewhere; "
                "run the flow's steps on that queue (or one of its slot)"
            )

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        """The record and the first steps in one start_flow.lua call, in the slot of the
        flow's home queue (its first step's), after `<prefix>flow:<id>` names that queue.
        On Redis Cluster every step (and on_failure) must be of that slot."""
        home = record.steps[0].queue if record.steps else envelopes[0].queue
        self._check(envelopes)
        if self._connection().cluster:
            queues = [step.queue for step in record.steps] + [env.queue for env in envelopes]
            if record.on_failure is not None:
                queues.append(record.on_failure.queue)
            self._same_slot(home, queues)
        locator = self.keys.flow_home(record.id)
        retention = ms(record.retention)
        if self._command("SET", locator, home, "NX", "PX", retention) is None:
            home = self._command("GET", locator).decode()
        for queue in dict.fromkeys(env.queue for env in envelopes):
            self._announce(queue)
        keys = FlowKeys(self.keys.queue(home).base, record.id)
        args = [record.static_json(), retention, us(self.priority_aging)]
        args += codec.sections(self.keys.queue, self.keys.lock, envelopes)
        started = bool(self._eval("start_flow", [keys.record], args) == 1)
        self._remember_home(record.id, home)
        return started

    def flow(self, flow_id: str) -> FlowRecord | None:
        home = self._flow_home(flow_id)
        if home is None:
            return None
        keys = FlowKeys(self.keys.queue(home).base, flow_id)
        static, result, failure, cancelled = self._command(
            "HMGET", keys.record, "static", "result", "failure", "cancelled"
        )
        if static is None:
            return None
        return FlowRecord.from_parts(static, result, failure, cancelled is not None)

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        """Block on the flow's notify list (`fn:<id>`, pushed when its result, its first
        failure or its cancelled flag is set) between reads, as `wait_result` does."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.flow(flow_id)
            remaining = deadline - time.monotonic()
            if found is None or remaining <= 0:
                return found
            if found.result is not None or found.failure is not None or found.cancelled:
                return found
            notify = self._flow_keys(flow_id, "").notify
            block = min(remaining, self._max_block)
            if block < MIN_BLOCK:
                time.sleep(block)
            else:
                self._command("BLMOVE", notify, notify, "RIGHT", "LEFT", block)

    def cancel_flow(self, flow_id: str) -> bool:
        home = self._flow_home(flow_id)
        if home is None:
            return False
        keys = FlowKeys(self.keys.queue(home).base, flow_id)
        return bool(self._eval("cancel_flow", [keys.record, keys.notify], []) == 1)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        home = self._flow_home(flow_id)
        if home is None:
            return None
        value: bytes | None = self._command(
            "GET", FlowKeys(self.keys.queue(home).base, flow_id).value(barrier)
        )
        return value

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        """`keep` without progress: keep.lua is the one script that extends a lease."""
        held = self.keep([Keep(r, visibility_timeout) for r in receipts])
        return [status == "held" for status in held]


def _receipt_of(item: Settle) -> Receipt:
    return item.receipt
