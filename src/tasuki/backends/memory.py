"""`memory://` — the whole lifecycle in one process, for the unit tests of users' code.

It is a real backend, not a mock: it passes the same contract suite as the others
(except the cross-process tests), so code tested against it behaves the same on SQLite
or Redis. `memory://name` shares one store between apps of the same process.

Longer than most modules on purpose: the whole lifecycle (enqueue, lease, settle, dead
letters, locks) of one backend, with no server to hand any of it to, reads best in one
place, as each other backend's does in its script or query files.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    HistoryEntry,
    LockHolder,
    LockStore,
    MessageInfo,
    QueueStats,
    Receipt,
    Release,
    Reliability,
    SettledTotals,
    refuse_connection,
)
from tasuki.backends.urls import query_options
from tasuki.backends.waiting import lease_until
from tasuki.core import reliability
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.records import (
    HISTORY_LIMIT,
    HistoryEvent,
    MessageState,
    death_detail,
    release_event,
    waiting_state,
)

WAITING, IN_FLIGHT, DEAD = 0, 1, 2


@dataclass(slots=True)
class _Record:
    envelope: Envelope
    seq: int
    enqueued_at: float
    visible_at: float
    state: int = WAITING
    attempt: int = 0
    fence: int = 0
    token: str | None = None
    stamp: int = 0
    reason: str = ""
    error: ErrorInfo | None = None
    died_at: float = 0.0
    history: tuple[HistoryEntry, ...] = ()

    def remember(self, now: float, event: HistoryEvent, detail: str = "") -> None:
        entry = HistoryEntry(now, event, self.fence, detail)
        self.history = (*self.history[-(HISTORY_LIMIT - 1) :], entry)


class _Queue:
    def __init__(self) -> None:
        self.records: dict[str, _Record] = {}
        self.heap: list[tuple[float, int, str, int]] = []
        self.finished: dict[str, float] = {}
        self.finished_history: dict[str, tuple[HistoryEntry, ...]] = {}
        self.acked = 0
        self.dead = 0
        self.meters: dict[str, int] = {}

    def schedule(self, record: _Record, visible_at: float) -> None:
        record.visible_at = visible_at
        record.stamp += 1
        heapq.heappush(self.heap, (visible_at, record.seq, record.envelope.id, record.stamp))


class MemoryLockStore(LockStore):
    def __init__(self, mutex: threading.RLock) -> None:
        self._mutex = mutex
        self.clock: Callable[[], float] = time.time  # tests drive time by hand
        self._locks: dict[str, tuple[str, float]] = {}

    def _live(self, key: str, now: float) -> tuple[str, float] | None:
        held = self._locks.get(key)
        if held is not None and held[1] <= now:
            del self._locks[key]
            return None
        return held

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            if held is not None and held[0] != owner:
                return False
            self._locks[key] = (owner, now + ttl)
            return True

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        with self._mutex:
            now = self.clock()
            results = []
            for key in keys:
                held = self._live(key, now)
                ok = held is not None and held[0] == owner
                if ok:
                    self._locks[key] = (owner, now + ttl)
                results.append(ok)
            return results

    def release(self, key: str, owner: str) -> bool:
        with self._mutex:
            held = self._live(key, self.clock())
            if held is None or held[0] != owner:
                return False
            del self._locks[key]
            return True

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            if held is None or held[0] != owner:
                return False
            self._locks[key] = (new_owner, now + ttl)
            return True

    def holder(self, key: str) -> LockHolder | None:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            return None if held is None else LockHolder(held[0], held[1] - now)

    def drop_if_owned(self, key: str, owner: str) -> None:
        held = self._locks.get(key)
        if held is not None and held[0] == owner:
            del self._locks[key]


_SHARED: dict[str, MemoryBackend] = {}
_SHARED_MUTEX = threading.Lock()


class MemoryBackend(Backend):
    capabilities = Capabilities(max_message_size=16 * 1024 * 1024, cross_process=False)

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self._queues: dict[str, _Queue] = {}
        self._seq = itertools.count()
        self._locks = MemoryLockStore(self._mutex)

    @classmethod
    def shared(cls, name: str) -> MemoryBackend:
        """The process-wide store called `name` (`memory://name`)."""
        with _SHARED_MUTEX:
            backend = _SHARED.get(name)
            if backend is None:
                backend = _SHARED[name] = cls(f"memory://{name}")
            return backend

    def _queue(self, name: str) -> _Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = _Queue()
        return queue

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        refuse_connection(self, connection)
        results: list[Enqueued] = []
        with self._mutex:
            now = time.time()
            for env in envelopes:
                results.append(self._enqueue_one(env, now))
            self._changed.notify_all()
        return results

    def _enqueue_one(self, env: Envelope, now: float) -> Enqueued:
        queue = self._queue(env.queue)
        if env.id in queue.records or queue.finished.get(env.id, 0.0) > now:
            return Enqueued(env.id, "duplicate")
        if env.unique is not None:
            holder = self._locks.holder(env.unique.key)
            if holder is not None and holder.owner != env.id:
                waiting = queue.records.get(holder.owner)
                if env.unique.replace and waiting is not None and waiting.state == WAITING:
                    waiting.envelope = _replace_payload(waiting.envelope, env)
                    return Enqueued(holder.owner, "replaced")
                return Enqueued(holder.owner, "conflict")
            self._locks.acquire(env.unique.key, env.id, env.unique.ttl)
        record = _Record(env, next(self._seq), now, now + env.delay)
        queue.records[env.id] = record
        queue.schedule(record, now + env.delay)
        return Enqueued(env.id, "enqueued")

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
            queue_state = self._queue(queue)
            leased = self._lease_now(queue_state, max_messages, visibility_timeout, now)
            heap = queue_state.heap
            return leased, (heap[0][0] - now if heap else float("inf"))

        def wait_for_change(remaining: float, next_due: float) -> None:
            self._changed.wait(max(0.001, min(remaining, next_due)))

        with self._mutex:  # the condition's wait releases it
            return lease_until(wait, try_lease, wait_for_change)

    def _lease_now(
        self, queue: _Queue, max_messages: int, default_vt: float, now: float
    ) -> list[Delivery]:
        leased: list[Delivery] = []
        heap = queue.heap
        while heap and len(leased) < max_messages and heap[0][0] <= now:
            _, _, msg_id, stamp = heapq.heappop(heap)
            record = queue.records.get(msg_id)
            if record is None or record.stamp != stamp or record.state == DEAD:
                continue
            env = record.envelope
            lost = record.state == IN_FLIGHT
            if lost:
                record.remember(record.visible_at, "lease lost")  # when it expired
                reliability.add(queue.meters, {reliability.LEASES_LOST: 1})
            if record.attempt >= env.max_attempts:
                reason = (
                    f"lease expired {record.attempt} times"
                    if record.state == IN_FLIGHT
                    else f"attempts exhausted ({record.attempt} of {env.max_attempts})"
                )
                self._bury(queue, record, reason, None, now)
                continue
            vt = env.visibility_timeout or default_vt
            if lost:
                reliability.observe(queue.meters, reliability.RECOVERY, now - record.visible_at)
            record.state = IN_FLIGHT
            record.attempt += 1
            if record.attempt > 1:
                reliability.add(queue.meters, {reliability.REDELIVERIES: 1})
            record.fence += 1
            record.token = os.urandom(8).hex()
            queue.schedule(record, now + vt)
            leased.append(
                Delivery(
                    queue=env.queue,
                    id=env.id,
                    body=env.body,
                    headers=dict(env.headers),
                    attempt=record.attempt,
                    max_attempts=env.max_attempts,
                    enqueued_at=record.enqueued_at,
                    token=record.token,
                    fencing_token=record.fence,
                    visibility_timeout=vt,
                )
            )
        return leased

    def _holding(self, receipt: Receipt) -> tuple[_Queue, _Record] | None:
        queue = self._queues.get(receipt.queue)
        record = queue.records.get(receipt.id) if queue else None
        if queue is None or record is None:
            return None
        if record.state != IN_FLIGHT or record.token != receipt.token:
            return None
        return queue, record

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        results = []
        with self._mutex:
            now = time.time()
            for receipt in receipts:
                held = self._holding(receipt)
                if held is not None:
                    queue, record = held
                    del queue.records[receipt.id]
                    queue.acked += 1
                    if record.envelope.keep_id > 0:
                        queue.finished[receipt.id] = now + record.envelope.keep_id
                        record.remember(now, "acked")
                        queue.finished_history[receipt.id] = record.history
                results.append(held is not None)
        return results

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        results = []
        with self._mutex:
            now = time.time()
            for receipt in receipts:
                held = self._holding(receipt)
                if held is not None:
                    held[0].schedule(held[1], now + visibility_timeout)
                results.append(held is not None)
        return results

    def release(self, releases: Sequence[Release]) -> list[bool]:
        results = []
        with self._mutex:
            now = time.time()
            for item in releases:
                held = self._holding(item.receipt)
                if held is not None:
                    queue, record = held
                    record.state = WAITING
                    record.token = None
                    if not item.penalty:
                        record.attempt -= 1
                    record.remember(now, *release_event(item.delay, item.penalty, item.error))
                    queue.schedule(record, now + item.delay)
                results.append(held is not None)
            self._changed.notify_all()
        return results

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        results = []
        with self._mutex:
            now = time.time()
            for item in burials:
                held = self._holding(item.receipt)
                if held is not None:
                    held[1].remember(now, "dead", death_detail(item.reason, item.error))
                    self._bury(held[0], held[1], item.reason, item.error, now)
                results.append(held is not None)
        return results

    def _bury(
        self, queue: _Queue, record: _Record, reason: str, error: ErrorInfo | None, now: float
    ) -> None:
        queue.dead += 1
        record.state = DEAD
        record.token = None
        record.reason = reason
        record.error = error
        record.died_at = now
        record.stamp += 1
        if record.envelope.unique is not None:
            self._locks.drop_if_owned(record.envelope.unique.key, record.envelope.id)

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        ready = in_flight = delayed = dead = 0
        oldest: float | None = None
        with self._mutex:
            now = time.time()
            for record in self._queue(queue).records.values():
                if record.state == DEAD:
                    dead += 1
                elif record.visible_at > now:
                    if record.state == IN_FLIGHT:
                        in_flight += 1
                    else:
                        delayed += 1
                else:
                    ready += 1
                    if oldest is None or record.visible_at < oldest:
                        oldest = record.visible_at
        age = max(0.0, now - oldest) if oldest is not None else 0.0
        return QueueStats(ready, in_flight, delayed, dead, age)

    def queues(self) -> list[str]:
        with self._mutex:
            return sorted(name for name, q in self._queues.items() if q.records)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        with self._mutex:
            dead = [r for r in self._queue(queue).records.values() if r.state == DEAD]
        dead.sort(key=lambda r: (-r.died_at, -r.seq))
        return [
            DeadLetter(
                id=r.envelope.id,
                queue=queue,
                body=r.envelope.body,
                headers=dict(r.envelope.headers),
                attempt=r.attempt,
                reason=r.reason,
                error=r.error,
                died_at=r.died_at,
                enqueued_at=r.enqueued_at,
            )
            for r in dead[offset : offset + limit]
        ]

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        with self._mutex:
            now = time.time()
            held = [
                r
                for r in self._queue(queue).records.values()
                if r.state == IN_FLIGHT and r.visible_at > now
            ]
        held.sort(key=lambda r: (r.visible_at, r.seq))
        return [
            MessageInfo(
                queue,
                r.envelope.id,
                "in_flight",
                attempt=r.attempt,
                max_attempts=r.envelope.max_attempts,
                fencing_token=r.fence,
                enqueued_at=r.enqueued_at,
                lease_expires_at=r.visible_at,
            )
            for r in held[:limit]
        ]

    def settled_totals(self, queue: str) -> SettledTotals:
        with self._mutex:
            q = self._queue(queue)
            return SettledTotals(q.acked, q.dead)

    def reliability(self, queue: str) -> Reliability:
        with self._mutex:
            return Reliability.from_meters(self._queue(queue).meters)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        with self._mutex:
            reliability.add(self._queue(queue).meters, increments)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        with self._mutex:
            now = time.time()
            q = self._queue(queue)
            record = q.records.get(id)
            if record is None:
                until = q.finished.get(id, 0.0)
                if until <= now:
                    return MessageInfo(queue, id, "unknown")
                history = q.finished_history.get(id, ())
                return MessageInfo(queue, id, "finished", finished_until=until, history=history)
            state: MessageState
            visible_at = lease_expires_at = None
            if record.state == DEAD:
                state = "dead"
            elif record.state == IN_FLIGHT and record.visible_at > now:
                state, lease_expires_at = "in_flight", record.visible_at
            else:
                state, visible_at = waiting_state(record.visible_at, now), record.visible_at
            return MessageInfo(
                queue,
                id,
                state,
                attempt=record.attempt,
                max_attempts=record.envelope.max_attempts,
                fencing_token=record.fence,
                enqueued_at=record.enqueued_at,
                visible_at=visible_at,
                lease_expires_at=lease_expires_at,
                reason=record.reason,
                error=record.error,
                died_at=record.died_at if state == "dead" else None,
                history=record.history,
            )

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        count = 0
        with self._mutex:
            now = time.time()
            q = self._queue(queue)
            chosen = q.records.values() if ids is None else [q.records.get(i) for i in ids]
            for record in list(chosen):
                if record is None or record.state != DEAD:
                    continue
                record.state = WAITING
                record.attempt = 0
                record.reason = ""
                record.error = None
                q.schedule(record, now)
                count += 1
            self._changed.notify_all()
        return count

    def purge_dead(self, queue: str) -> int:
        with self._mutex:
            q = self._queue(queue)
            dead = [i for i, r in q.records.items() if r.state == DEAD]
            for msg_id in dead:
                del q.records[msg_id]
            return len(dead)

    def purge(self, queue: str) -> int:
        with self._mutex:
            q = self._queue(queue)
            count = len(q.records)
            for record in q.records.values():
                if record.envelope.unique is not None and record.state == WAITING:
                    self._locks.drop_if_owned(record.envelope.unique.key, record.envelope.id)
            q.records.clear()
            q.heap.clear()
            return count

    @property
    def locks(self) -> MemoryLockStore:
        return self._locks


def _replace_payload(old: Envelope, new: Envelope) -> Envelope:
    return Envelope(
        queue=old.queue,
        id=old.id,
        body=new.body,
        headers=new.headers,
        delay=old.delay,
        max_attempts=old.max_attempts,
        visibility_timeout=old.visibility_timeout,
        keep_id=old.keep_id,
        unique=old.unique,
    )


def from_url(url: str) -> MemoryBackend:
    """`memory://` is private to the app; `memory://name` is shared within the process."""
    parts = urlsplit(url)
    query_options(url, {})
    name = (parts.netloc + parts.path).strip("/")
    return MemoryBackend.shared(name) if name else MemoryBackend(url)
