"""`memory://`'s messages and the order the lease takes them in.

One record per message in any state. Two heaps find work without a scan: `timers` holds
what waits for a time (delayed and parked messages by their visible time, leases by
their expiry), `ready` holds what is due by rank (visible time - priority x aging, then
enqueue order), so priorities and aging cost one heap operation. A record is in at most
one heap at once; an entry whose `stamp` is not the record's current one is stale and
skipped (heaps have no cheap delete).
"""

from __future__ import annotations

import heapq

from tasuki.backends.memory.codec import DEAD, Record
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
