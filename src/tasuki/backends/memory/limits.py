"""`memory://`'s rate and concurrency limits, admitted at lease time (the reference).

A concurrency slot is a live lease: the holders of a key are the leases that hold it,
each with its expiry, and one whose expiry passed holds nothing whatever its worker
believes. A rate limit is a sliding log of the starts of the last `per` seconds: at most
`limit` in any such window. A message over a limit is parked, costing no attempt:
- over a rate: until its next token is due (the oldest start in the log plus `per`);
- over a concurrency limit: until a slot frees (a settle, a cancel, or a holder's lease
  found expired), one parked message per freed slot, and at the latest when the
  earliest current holder's lease expires.
A key holds state only while it is in use: a concurrency key's holders go when they are
freed or their leases lapse, a rate key's log when its last start is `per` old (checked
at the times `_idle` says, on each lease call), so per-tenant keys never pile up.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable

from tasuki.core.records import Limit

# A message, by (queue, id): ids are only unique within a queue, limits across queues.
Ident = tuple[str, str]
# What `admit` answers for a message over a limit: when to look at it again, and the
# concurrency key whose freed slot should wake it (None: a rate, or no better hint).
Parked = tuple[float, str | None]


class Admission:
    def __init__(self) -> None:
        # key -> {message: lease expiry}
        self._holders: dict[str, dict[Ident, float]] = {}
        # key -> start times within the last window
        self._starts: dict[str, deque[float]] = {}
        # key -> ids of messages waiting for a slot of it, oldest first
        self.parked: dict[str, deque[Ident]] = {}
        # (when, key, per): when the key's state may be all stale; per < 0: concurrency
        self._idle: list[tuple[float, str, float]] = []

    def admit(self, msg_id: Ident, limits: Iterable[Limit], now: float) -> Parked | None:
        """None when every limit lets the message start now; else why and until when."""
        for limit in limits:
            if limit.kind == "concurrency":
                holders = self._live(limit.key, now)
                if msg_id not in holders and len(holders) >= limit.limit:
                    return min(holders.values(), default=now), limit.key
            else:
                starts = self._window(limit.key, limit.per, now)
                if len(starts) >= limit.limit:
                    return starts[0] + limit.per, None
        return None

    def take(self, msg_id: Ident, limits: Iterable[Limit], now: float, expires_at: float) -> None:
        """The message was admitted and leased: it holds its slots and spent its tokens."""
        for limit in limits:
            if limit.kind == "concurrency":
                self._holders.setdefault(limit.key, {})[msg_id] = expires_at
                heapq.heappush(self._idle, (expires_at, limit.key, -1.0))
            else:
                self._starts.setdefault(limit.key, deque()).append(now)
                heapq.heappush(self._idle, (now + limit.per, limit.key, limit.per))

    def extend(self, msg_id: Ident, limits: Iterable[Limit], expires_at: float) -> None:
        for limit in limits:
            if limit.kind == "concurrency":
                holders = self._holders.get(limit.key)
                if holders is not None and msg_id in holders:
                    holders[msg_id] = expires_at
                    heapq.heappush(self._idle, (expires_at, limit.key, -1.0))

    def free(self, msg_id: Ident, limits: Iterable[Limit]) -> list[str]:
        """The lease ended (settled, cancelled): its slots go; the keys that freed one."""
        freed = []
        for limit in limits:
            if limit.kind == "concurrency":
                holders = self._holders.get(limit.key)
                if holders is not None and holders.pop(msg_id, None) is not None:
                    freed.append(limit.key)
                    if not holders:
                        del self._holders[limit.key]
        return freed

    def park(self, key: str, msg_id: Ident) -> None:
        self.parked.setdefault(key, deque()).append(msg_id)

    def wake(self, key: str) -> Ident | None:
        """The next parked message of `key`, for a freed slot."""
        waiting = self.parked.get(key)
        if not waiting:
            return None
        msg_id = waiting.popleft()
        if not waiting:
            del self.parked[key]
        return msg_id

    def expired_slots(self, now: float) -> list[str]:
        """Keys with parked messages whose holders' leases lapsed: one entry per slot freed
        that way (each lapsed holder is dropped, so it is counted once)."""
        freed = []
        for key in list(self.parked):
            holders = self._holders.get(key, {})
            for msg_id, expires_at in list(holders.items()):
                if expires_at <= now:
                    del holders[msg_id]
                    freed.append(key)
            if not holders:
                self._holders.pop(key, None)
        while self._idle and self._idle[0][0] <= now:
            _, key, per = heapq.heappop(self._idle)
            if per < 0:
                self._live(key, now)
            else:
                self._window(key, per, now)
        return freed

    def keys(self) -> int:
        """How many keys hold any state: what a key costs while it is in use."""
        return len(self._holders) + len(self._starts) + len(self.parked)

    def _live(self, key: str, now: float) -> dict[Ident, float]:
        holders = self._holders.get(key, {})
        for msg_id, expires_at in list(holders.items()):
            if expires_at <= now:
                del holders[msg_id]
        if not holders:
            self._holders.pop(key, None)
        return holders

    def _window(self, key: str, per: float, now: float) -> deque[float]:
        starts = self._starts.get(key, deque())
        while starts and starts[0] <= now - per:
            starts.popleft()
        if not starts:
            self._starts.pop(key, None)
        return starts
