"""`memory://`'s lifecycle: enqueue, lease, settle, keep and cancel, under one lock."""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Sequence

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    CancelStatus,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    Keep,
    LeaseStatus,
    Receipt,
    ResultRecord,
    Settle,
)
from tasuki.backends.memory.codec import (
    DEAD,
    IN_FLIGHT,
    WAITING,
    Record,
    delivery,
    stored,
)
from tasuki.backends.memory.durable import DurableSteps
from tasuki.backends.memory.flows import FlowStore
from tasuki.backends.memory.limits import Admission
from tasuki.backends.memory.locks import MemoryLockStore
from tasuki.backends.memory.operating import Operating
from tasuki.backends.memory.store import Queue
from tasuki.backends.waiting import lease_until
from tasuki.core import reliability
from tasuki.core.flowrecords import FlowRecord
from tasuki.core.message import ErrorInfo
from tasuki.core.reasons import ATTEMPTS_EXHAUSTED, LEASE_EXPIRED, exhausted
from tasuki.core.records import CANCELLED_WINDOW, death_detail, error_summary, release_event

_SHARED: dict[str, MemoryBackend] = {}
_SHARED_MUTEX = threading.Lock()


class MemoryBackend(DurableSteps, Operating, Backend):
    capabilities = Capabilities(
        max_message_size=16 * 1024 * 1024,
        cross_process=False,
        results=True,
        workflows=True,
        priorities=True,
        rate_limits=True,
        concurrency_limits=True,
        cancel=True,
        progress=True,
        durable_steps=True,
    )

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self._queues: dict[str, Queue] = {}
        self._seq = itertools.count()
        self._tokens = itertools.count()
        self._locks = MemoryLockStore(self._mutex)
        self._admission = Admission()
        self._flows = FlowStore(self._changed)

    @classmethod
    def shared(cls, name: str) -> MemoryBackend:
        """The process-wide store called `name` (`memory://name`)."""
        with _SHARED_MUTEX:
            backend = _SHARED.get(name)
            if backend is None:
                backend = _SHARED[name] = cls(f"memory://{name}")
            return backend

    def _queue(self, name: str) -> Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = Queue()
        return queue

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        self.refuse_connection(connection)
        with self._mutex:
            results = self._enqueue_many(envelopes, time.time())
            self._changed.notify_all()
        return results

    def _enqueue_many(self, envelopes: Sequence[Envelope], now: float) -> list[Enqueued]:
        return [self._enqueue_one(env, now) for env in envelopes]

    def _enqueue_one(self, env: Envelope, now: float) -> Enqueued:
        queue = self._queue(env.queue)
        if self._known(queue, env.id, now):
            return Enqueued(env.id, "duplicate")
        if env.unique is not None:
            holder = self._locks.holder(env.unique.key)
            if holder is not None and holder.owner != env.id:
                waiting = queue.records.get(holder.owner)
                if env.unique.replace and waiting is not None and waiting.state == WAITING:
                    waiting.envelope = waiting.envelope._replace(body=env.body, headers=env.headers)
                    return Enqueued(holder.owner, "replaced")
                return Enqueued(holder.owner, "conflict")
            self._locks.acquire(env.unique.key, env.id, env.unique.ttl)
        record = stored(env, next(self._seq), now)
        queue.records[env.id] = record
        queue.schedule(record, now + env.delay)
        if env.keep_result > 0:
            self._flows.pending(env.queue, env.id)
        return Enqueued(env.id, "enqueued")

    @staticmethod
    def _known(queue: Queue, msg_id: str, now: float) -> bool:
        if msg_id in queue.records or queue.finished.get(msg_id, 0.0) > now:
            return True
        cancelled = queue.cancelled.get(msg_id)
        return cancelled is not None and cancelled[0] > now

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        def try_lease() -> tuple[list[Delivery], float]:
            now = time.time()
            q = self._queue(queue)
            leased = self._lease_now(q, max_messages, visibility_timeout, now)
            return leased, q.next_due(now)

        def wait_for_change(remaining: float, next_due: float) -> None:
            self._changed.wait(max(0.001, min(remaining, next_due)))

        with self._mutex:  # the condition's wait releases it
            return lease_until(wait, try_lease, wait_for_change)

    def _lease_now(
        self, queue: Queue, max_messages: int, default_vt: float, now: float
    ) -> list[Delivery]:
        aging = self.priority_aging
        for key in self._admission.expired_slots(now):
            self._wake(key, now)
        queue.promote(now, aging)
        leased: list[Delivery] = []
        # One system call per lease, not per message (os.urandom releases the GIL, and a
        # busy worker then waits to get it back): a random prefix and a counter.
        prefix = os.urandom(4).hex()
        ready = queue.ready
        while ready and len(leased) < max_messages:
            record = queue.current(heapq.heappop(ready))
            if record is None:
                continue
            env = record.envelope
            lost = record.state == IN_FLIGHT
            if lost:
                record.remember(record.visible_at, "lease lost")  # when it expired
                reliability.add(queue.meters, {reliability.LEASES_LOST: 1})
                self._free(record)
            if exhausted(record.attempt, env.max_attempts):
                reason = LEASE_EXPIRED if lost else ATTEMPTS_EXHAUSTED
                self._dead_letter(queue, record, reason, None, now)
                continue
            if env.limits:
                parked = self._admission.admit((env.queue, env.id), env.limits, now)
                if parked is not None:
                    self._park(queue, record, parked, now)
                    continue
            vt = env.visibility_timeout or default_vt
            if lost:
                reliability.observe(queue.meters, reliability.RECOVERY, now - record.visible_at)
            record.state = IN_FLIGHT
            record.parked = False
            record.progress = None
            record.attempt += 1
            if record.attempt > 1:
                reliability.add(queue.meters, {reliability.REDELIVERIES: 1})
            record.fence += 1
            record.token = f"{prefix}{next(self._tokens):08x}"
            queue.schedule(record, now + vt)
            if env.limits:
                self._admission.take((env.queue, env.id), env.limits, now, now + vt)
            leased.append(delivery(record, vt))
        return leased

    def _park(
        self, queue: Queue, record: Record, parked: tuple[float, str | None], now: float
    ) -> None:
        """Over a limit: no attempt spent; due again when a token or a slot is expected."""
        until, key = parked
        record.state = WAITING
        record.token = None
        record.parked = True
        queue.schedule(record, max(until, now))
        if key is not None:
            self._admission.park(key, (record.envelope.queue, record.envelope.id))

    def _free(self, record: Record) -> None:
        """A lease ended: its slots go to the next parked message of each key."""
        if record.envelope.limits:
            for key in self._admission.free(
                (record.envelope.queue, record.envelope.id), record.envelope.limits
            ):
                self._wake(key, time.time())

    def _wake(self, key: str, now: float) -> None:
        while (waiting := self._admission.wake(key)) is not None:
            queue_name, msg_id = waiting
            queue = self._queues.get(queue_name)
            record = queue.records.get(msg_id) if queue else None
            if queue is None or record is None or not record.parked:
                continue  # gone, or already due again by its own timer: try the next
            record.visible_at = now
            queue.make_ready(record, self.priority_aging)
            self._changed.notify_all()
            return

    def _holding(self, receipt: Receipt) -> tuple[Queue, Record] | None:
        queue = self._queues.get(receipt.queue)
        record = queue.records.get(receipt.id) if queue else None
        if queue is None or record is None:
            return None
        if record.state != IN_FLIGHT or record.token != receipt.token:
            return None
        return queue, record

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        results = []
        with self._mutex:
            now = time.time()
            for item in items:
                held = self._holding(item.receipt)
                if held is not None:
                    self._settle_one(held[0], held[1], item, now)
                results.append(held is not None)
            self._changed.notify_all()
        return results

    def _settle_one(self, queue: Queue, record: Record, item: Settle, now: float) -> None:
        self._free(record)
        env = record.envelope
        effects = item.effects
        if item.verdict == "ack":
            self._ack(queue, record, now)
            self._flows.settled(env, now, effects.result if effects else None, failed=False)
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
                self._suspended(queue, record, item.wait, now + item.delay, now)
        else:
            record.remember(now, "dead", death_detail(item.reason, item.error))
            self._dead_letter(queue, record, item.reason, item.error, now)
        if effects is not None and item.verdict != "release":
            self._flows.apply(effects, now, lambda envs: self._enqueue_many(envs, now))

    def _ack(self, queue: Queue, record: Record, now: float) -> None:
        msg_id = record.envelope.id
        queue.forget(msg_id)
        queue.acked += 1
        if record.envelope.keep_id > 0:
            queue.finished[msg_id] = now + record.envelope.keep_id
            record.remember(now, "acked")
            queue.finished_history[msg_id] = record.history

    def _dead_letter(
        self, queue: Queue, record: Record, reason: str, error: ErrorInfo | None, now: float
    ) -> None:
        queue.dead += 1
        record.state = DEAD
        record.token = None
        record.parked = False
        record.reason = reason
        record.error = error
        record.died_at = now
        queue.unschedule(record)
        env = record.envelope
        if env.unique is not None:
            self._locks.drop_if_owned(env.unique.key, env.id)
        self._flows.settled(env, now, None, failed=True, error=error, reason=reason)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return [s == "held" for s in self.keep([Keep(r, visibility_timeout) for r in receipts])]

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        out: list[LeaseStatus] = []
        with self._mutex:
            now = time.time()
            for item in items:
                held = self._holding(item.receipt)
                if held is None:
                    out.append(self._why_not_held(item.receipt, now))
                    continue
                queue, record = held
                if record.envelope.limits and record.visible_at <= now:
                    out.append("lost")  # lapsed: the slot it held may be another's now
                    continue
                queue.schedule(record, now + item.visibility_timeout)
                if record.envelope.limits:
                    self._admission.extend(
                        (record.envelope.queue, record.envelope.id),
                        record.envelope.limits,
                        record.visible_at,
                    )
                if item.progress is not None:
                    record.progress = item.progress
                out.append("held")
        return out

    def _why_not_held(self, receipt: Receipt, now: float) -> LeaseStatus:
        queue = self._queues.get(receipt.queue)
        cancelled = queue.cancelled.get(receipt.id) if queue else None
        if cancelled is not None and cancelled[1] == receipt.token and cancelled[0] > now:
            return "cancelled"
        return "lost"

    def cancel(self, queue: str, id: str) -> CancelStatus:
        with self._mutex:
            now = time.time()
            q = self._queues.get(queue)
            record = q.records.get(id) if q else None
            if q is None or record is None or record.state == DEAD:
                return "unknown"
            running = record.state == IN_FLIGHT and record.visible_at > now
            env = record.envelope
            q.forget(id)
            window = max(env.keep_id, CANCELLED_WINDOW)
            q.cancelled[id] = (now + window, (record.token or "") if running else "")
            self._free(record)
            if env.unique is not None:
                self._locks.drop_if_owned(env.unique.key, env.id)
            self._flows.forget(queue, id)
            self._changed.notify_all()
            return "signalled" if running else "removed"

    # -- results and workflows -------------------------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        with self._mutex:
            return self._flows.result(queue, id, time.time())

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        deadline = time.monotonic() + timeout
        with self._mutex:
            while True:
                found = self._flows.result(queue, id, time.time())
                remaining = deadline - time.monotonic()
                if found is None or found.state != "pending" or remaining <= 0:
                    return found
                self._changed.wait(remaining)

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        with self._mutex:
            now = time.time()
            if not self._flows.start(record, now):
                return False
            self._enqueue_many(envelopes, now)
            self._changed.notify_all()
            return True

    def flow(self, flow_id: str) -> FlowRecord | None:
        with self._mutex:
            return self._flows.flow(flow_id, time.time())

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        deadline = time.monotonic() + timeout
        with self._mutex:
            while True:
                found = self._flows.flow(flow_id, time.time())
                remaining = deadline - time.monotonic()
                done = found is None or found.result is not None or found.failure is not None
                if done or (found is not None and found.cancelled) or remaining <= 0:
                    return found
                self._changed.wait(remaining)

    def cancel_flow(self, flow_id: str) -> bool:
        with self._mutex:
            return self._flows.cancel(flow_id, time.time())

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        with self._mutex:
            return self._flows.group_value(flow_id, barrier, time.time())

    @property
    def locks(self) -> MemoryLockStore:
        return self._locks
