"""Rate and concurrency limits on SQS, admitted after the receive, in the `locks=` store.

SQS cannot hold a message back by a limit, so a lease receives first and admits each
received message that counts against a limit before its lease is recorded:

- a concurrency limit of n on key K is n slot locks, `limit:K:0` .. `limit:K:<n-1>`. An
  admitted lease holds one, owned by its lease token, for the lease's length: renewed by
  extend, released by its settle (ack, release, dead letter), lapsed with the lease when
  its worker died. A fenced-out holder's token no longer owns the slot: it frees nothing.
- a rate limit of n per s on key K is n token locks of the same names, each taken for s
  seconds by a start: at most n starts in any window of s seconds (a sliding log whose
  entries are the locks' lifetimes).

A message over a limit was received but never leased: its lease is not recorded, so it
costs no attempt (the attempt is what the records count, not SQS's receive count). It is
put back (ChangeMessageVisibility) until its token or slot is expected: the earliest
expiry among the key's holders. A message put back for a concurrency slot is also listed
under its key in the lock store (`parked:K`, one lock whose owner is the list, changed by
compare-and-swap), and the settle that frees a slot of K, in any process, takes the
oldest one off that list and makes it visible at once: a freed slot wakes the next one.
The list is short (a lock's owner string); the messages a process puts back beyond it
wait in that process's overflow, which tops the list up at each of its wakes and puts
(or, the list gone, wakes one of its own directly).

Cost: admitting a message tries the key's locks from a random one until one is free, so
about n / (free locks) lock-store calls, and n more (to read the holders' expiry) per key
and lease for messages over their limit; putting one back for a slot, 2 more (read and
swap the list); a settle that frees a slot, 2 (release, read the list) and, with one
waiting, a swap and one ChangeMessageVisibility. Calls are plain `LockStore` calls, so
any lock store works; the tuned batch scripts of the lease records are not used here.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

import orjson

from tasuki.backends.base import LockStore
from tasuki.core.records import Limit

# A message put back for a concurrency slot: (queue, level, receipt handle).
Parked = tuple[str, int, str]
# Messages listed per key for a wake (more still come back by themselves, when put back
# for): a receipt handle is some hundreds of bytes, and the list is one lock's owner.
PARKED_PER_KEY = 20
# Compare-and-swap rounds on a key's list before giving up (the message still returns).
SWAPS = 3
# Messages a process keeps per key beyond the shared list (the rest return by themselves).
OVERFLOW_PER_KEY = 10_000
# One listed message: (queue, level, receipt handle, put back until: epoch seconds).
Entry = tuple[str, int, str, float]
# How long a lease that lapsed is remembered: its keeper, late (a stopped or starved
# worker), is then told the lease is lost rather than keep it without its slots.
FORGET_AFTER = 300.0
# Shortest put-back: a holder seen expiring now is checked again after this long.
MIN_WAIT = 1.0


class Admission:
    """The limits of leases this process holds and the messages it put back."""

    def __init__(self, locks: LockStore, namespace: str) -> None:
        self._locks = locks
        self._namespace = namespace
        # lease token -> the slot locks it holds, and when its lease lapses at the latest
        self._held: dict[str, tuple[list[str], float]] = {}
        self._sweep_at = math.inf  # the earliest of those lapses (or earlier)
        self.clock: Callable[[], float] = time.time  # tests drive time by hand
        # concurrency key -> messages this process put back beyond the shared list
        self._overflow: dict[str, deque[Entry]] = {}
        self._mutex = threading.Lock()

    def _names(self, limit: Limit) -> list[str]:
        return [f"{self._namespace}limit:{limit.key}:{i}" for i in range(limit.limit)]

    def admit(
        self, token: str, limits: Sequence[Limit], visibility: float, waits: dict[str, float]
    ) -> tuple[float, str | None] | None:
        """None when the lease `token` may start: it now holds a slot of each concurrency
        limit and spent a token of each rate. Else nothing is taken, and the answer is how
        long to put the message back and the concurrency key a freed slot would wake it
        for. `waits` caches each key's wait over one lease's messages."""
        self._sweep()
        taken: list[str] = []
        slots: list[str] = []
        # Slots first: a message over its concurrency limit spends no rate token.
        for limit in sorted(limits, key=lambda lim: lim.kind != "concurrency"):
            concurrency = limit.kind == "concurrency"
            ttl = visibility if concurrency else limit.per
            name = None if limit.key in waits else self._take(limit, token, ttl)
            if name is None:
                for held in taken:
                    self._locks.release(held, token)
                if limit.key not in waits:
                    waits[limit.key] = self._next_free(limit)
                return waits[limit.key], limit.key if concurrency else None
            taken.append(name)
            if concurrency:
                slots.append(name)
        if slots:
            lapses = self.clock() + visibility  # not before the lease and its slots lapse
            with self._mutex:
                self._held[token] = (slots, lapses)
                self._sweep_at = min(self._sweep_at, lapses)
        return None

    def _sweep(self) -> None:
        """Forget the leases that lapsed without a settle `FORGET_AFTER` ago (their worker
        died, or lost them): their slots lapsed with them in the lock store, and a settle
        that comes late frees nothing (`free`), so the record would only grow."""
        before = self.clock() - FORGET_AFTER
        if before < self._sweep_at:
            return
        with self._mutex:
            for token in [t for t, (_, lapses) in self._held.items() if lapses <= before]:
                del self._held[token]
            self._sweep_at = min((lapses for _, lapses in self._held.values()), default=math.inf)

    def _take(self, limit: Limit, owner: str, ttl: float) -> str | None:
        names = self._names(limit)
        start = random.randrange(len(names))
        for name in names[start:] + names[:start]:
            if self._locks.acquire(name, owner, ttl):
                return name
        return None

    def _next_free(self, limit: Limit) -> float:
        """Seconds until the first of the key's holders lets go (its expiry)."""
        expiries = [h.expires_in for h in map(self._locks.holder, self._names(limit)) if h]
        return max(MIN_WAIT, min(expiries, default=MIN_WAIT))

    def _list(self, key: str) -> str:
        return f"{self._namespace}parked:{key}"

    def park(self, key: str, parked: list[Parked], wait: float) -> None:
        """List messages put back for `wait` seconds under concurrency key `key` (what
        the list has no room for waits in this process's overflow)."""
        until = time.time() + wait
        with self._mutex:
            overflow = self._overflow.setdefault(key, deque(maxlen=OVERFLOW_PER_KEY))
            overflow.extend((q, level, handle, until) for q, level, handle in parked)
        self._publish(key, take_first=False)

    def _wake(self, key: str) -> Parked | None:
        """Take the oldest message still put back for `key` off its list (topping the
        list up from this process's overflow), or from the overflow if none is listed."""
        return self._publish(key, take_first=True)

    def _publish(self, key: str, take_first: bool) -> Parked | None:
        """One compare-and-swap of `key`'s list: the first entry taken off if
        `take_first`, the room left filled from this process's overflow."""
        name = self._list(key)
        for _ in range(SWAPS):
            holder = self._locks.holder(name)
            now = time.time()
            entries = _entries(holder.owner if holder else None, now)
            first = entries.pop(0) if take_first and entries else None
            with self._mutex:
                overflow = self._overflow.get(key) or deque()
                while overflow and overflow[0][3] <= now:
                    overflow.popleft()  # back by itself already
                own = take_first and first is None and bool(overflow)
                if own:
                    first = overflow.popleft()
                moved = [
                    overflow.popleft()
                    for _ in range(min(len(overflow), PARKED_PER_KEY - len(entries)))
                ]
            entries += moved
            if entries:
                owner = orjson.dumps(entries).decode()
                ttl = max(e[3] for e in entries) - now
                if holder is None:
                    done = self._locks.acquire(name, owner, ttl)
                else:
                    done = self._locks.swap(name, holder.owner, owner, ttl)
            elif holder is not None:
                done = self._locks.release(name, holder.owner)
            else:
                done = True
            if done:
                return None if first is None else (first[0], first[1], first[2])
            with self._mutex:  # lost the race: the moved entries go back to wait here
                overflow.extendleft(reversed(moved))
                if own and first is not None:
                    overflow.appendleft(first)
        return None

    def extend(self, token: str, visibility: float) -> bool:
        """Before the lease is extended: so are its slots, and the time it lapses. False
        when the lease lapsed or lost a slot (the slot may be another's now): the lease
        must not be kept, and the slots it still had are freed."""
        held = self._held.get(token) if self._held else None
        if not held:
            return True  # holds no slot here
        now = self.clock()
        if held[1] > now and all(self._locks.renew(held[0], token, visibility)):
            with self._mutex:
                if token in self._held:
                    self._held[token] = (held[0], now + visibility)
            return True
        return False

    def free(self, tokens: Sequence[str], lapsed: bool = False) -> list[Parked]:
        """The leases ended: their slots go, and for each slot freed, one message put
        back for that key (to make visible now). `lapsed`: they lapsed, so each is
        remembered as holding nothing until swept, and never extended again."""
        woken: list[Parked] = []
        if not self._held:
            return woken
        for token in tokens:
            with self._mutex:
                held = self._held.pop(token, None)
                if lapsed and held:
                    self._held[token] = ([], min(held[1], self.clock()))
            for name in held[0] if held else ():
                if not self._locks.release(name, token):
                    continue  # lapsed and perhaps taken: not this lease's to free
                key = name[len(self._namespace) + len("limit:") :].rsplit(":", 1)[0]
                parked = self._wake(key)
                if parked is not None:
                    woken.append(parked)
        return woken

    def release(self, tokens: Sequence[str]) -> None:
        """Leases this process will not settle (purged with their queue): their slots go
        now, waking nobody (the messages waiting for them went with the queue)."""
        for token in tokens:
            with self._mutex:
                held = self._held.pop(token, None)
            for name in held[0] if held else ():
                self._locks.release(name, token)


def _entries(owner: str | None, now: float) -> list[Entry]:
    """The list a `parked:` lock's owner holds, (queue, level, handle, until) each,
    without entries whose put-back ended (those messages came back by themselves)."""
    if not owner:
        return []
    try:
        entries = [(str(q), int(lv), str(h), float(u)) for q, lv, h, u in orjson.loads(owner)]
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return []
    return [e for e in entries if e[3] > now]
