"""`memory://`'s state: `Store`, one per backend, and in it a `Queue` per queue name,
its messages and the order the lease takes them in.

One record per message in any state. Two heaps find work without a scan: `timers` holds
what waits for a time (delayed and parked messages by their visible time, leases by
their expiry), `ready` holds what is due by rank (visible time - priority x aging, then
enqueue order), so priorities and aging cost one heap operation. A record is in at most
one heap at once; an entry whose `stamp` is not the record's current one is stale and
skipped (heaps have no cheap delete).

Every part of the backend (producing, leasing, settling, cancelling, operating) works on
a `Store` under its `mutex`; `changed` wakes the waiters (leases, results, flows). The
ends that several parts reach (a receipt's lease found, its slots freed, a message
dead-lettered) are the
store's own methods.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time

from tasuki.backends.base import Receipt
from tasuki.backends.memory.codec import DEAD, IN_FLIGHT, Record
from tasuki.backends.memory.flows import FlowStore
from tasuki.backends.memory.limits import Admission
from tasuki.backends.memory.locks import MemoryLockStore
from tasuki.core.message import ErrorInfo
from tasuki.core.records import HistoryEntry


class Queue:
    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.timers: list[tuple[float, int, str, int]] = []
        self.ready: list[tuple[float, int, str, int]] = []
        self.finished: dict[str, float] = {}
        self.finished_history: dict[str, tuple[HistoryEntry, ...]] = {}
        # Cancelled messages: id -> (until when the id is remembered, the token of the
        # lease that was running, "" if it was waiting).
        self.cancelled: dict[str, tuple[float, str]] = {}
        self.acked = 0
        self.dead = 0
        self.meters: dict[str, int] = {}

    def schedule(self, record: Record, visible_at: float) -> None:
        """Wait until `visible_at` (a delay, a park, or a lease's expiry)."""
        record.visible_at = visible_at
        record.stamp += 1
        heapq.heappush(self.timers, (visible_at, record.seq, record.envelope.id, record.stamp))

    def make_ready(self, record: Record, aging: float) -> None:
        """Due now: into the lease's order, by rank."""
        record.stamp += 1
        rank = record.visible_at - record.envelope.priority * aging
        heapq.heappush(self.ready, (rank, record.seq, record.envelope.id, record.stamp))

    def unschedule(self, record: Record) -> None:
        record.stamp += 1

    def current(self, entry: tuple[float, int, str, int]) -> Record | None:
        record = self.records.get(entry[2])
        if record is None or record.stamp != entry[3] or record.state == DEAD:
            return None
        return record

    def promote(self, now: float, aging: float) -> None:
        """Move what became due (delays passed, leases expired) into the ready heap."""
        timers = self.timers
        while timers and timers[0][0] <= now:
            entry = heapq.heappop(timers)
            record = self.current(entry)
            if record is not None:
                self.make_ready(record, aging)

    def next_due(self, now: float) -> float:
        """Seconds until something is due (0 if something is), inf if nothing waits."""
        if self.ready:
            return 0.0
        return self.timers[0][0] - now if self.timers else float("inf")

    def forget(self, msg_id: str) -> Record | None:
        record = self.records.pop(msg_id, None)
        if record is not None:
            record.stamp += 1
        return record


class Store:
    """All of one backend's state, and the one lock that guards it."""

    def __init__(self) -> None:
        self.mutex = threading.RLock()
        self.changed = threading.Condition(self.mutex)
        self.queues: dict[str, Queue] = {}
        self.seq = itertools.count()
        self.tokens = itertools.count()
        self.locks = MemoryLockStore(self.mutex)
        self.admission = Admission()
        self.flows = FlowStore(self.changed)

    def queue(self, name: str) -> Queue:
        """The queue called `name`, made on first use."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue()
        return queue

    def holding(self, receipt: Receipt) -> tuple[Queue, Record] | None:
        """The queue and record whose current lease `receipt` is, if it still is."""
        queue = self.queues.get(receipt.queue)
        record = queue.records.get(receipt.id) if queue else None
        if queue is None or record is None:
            return None
        if record.state != IN_FLIGHT or record.token != receipt.token:
            return None
        return queue, record

    def free(self, record: Record, aging: float) -> None:
        """A lease ended: its slots go to the next parked message of each key."""
        if record.envelope.limits:
            for key in self.admission.free(
                (record.envelope.queue, record.envelope.id), record.envelope.limits
            ):
                self.wake(key, time.time(), aging)

    def wake(self, key: str, now: float, aging: float) -> None:
        """Make due the next message parked on `key` that is still parked."""
        while (waiting := self.admission.wake(key)) is not None:
            queue_name, msg_id = waiting
            queue = self.queues.get(queue_name)
            record = queue.records.get(msg_id) if queue else None
            if queue is None or record is None or not record.parked:
                continue  # gone, or already due again by its own timer: try the next
            record.visible_at = now
            queue.make_ready(record, aging)
            self.changed.notify_all()
            return

    def dead_letter(
        self, queue: Queue, record: Record, reason: str, error: ErrorInfo | None, now: float
    ) -> None:
        """To the dead letters, by a lease (attempts spent) or a settle (its verdict)."""
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
            self.locks.drop_if_owned(env.unique.key, env.id)
        self.flows.settled(env, now, None, failed=True, error=error, reason=reason)
