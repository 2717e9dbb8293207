"""Priority levels on SQS: which levels of a queue are in use, and the order a lease
asks them in.

SQS has no priorities, so each level in use is an SQS queue of its own (queues.py:
level 0 is the queue itself). A lease asks the levels from the highest down, filling its
batch from the higher first; a queue whose only level is 0 is leased exactly as before
(one receive, no extra request). The levels in use are the level queues that exist:
listed once per REFRESH seconds (one ListQueues), plus every level this process sends
to, at once.

Aging is approximated from what the receives tell. Each level keeps `since`: the time
from which its oldest waiting message is counted, i.e. when the level was last found
drained (a receive that came back short), or the SentTimestamp of the newest message of
a receive that came back full (what is left was sent after it, SQS being roughly FIFO).
A lower level L counts as having waited `now - since[L]`; before asking level H, a
lease asks every lower level whose wait is at least `priority_aging x (H - L)` first
(the most aged first). So an old low message still reaches the front after
`(H - L)` periods, as on the other backends, but only as exactly as those estimates:
a standard SQS queue is not strictly FIFO, and another worker's receives are not seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Seconds between two listings of a queue's level queues (one ListQueues each).
REFRESH = 60.0


@dataclass(slots=True)
class _Levels:
    listed_at: float  # monotonic time of the last listing
    since: dict[int, float] = field(default_factory=dict)  # level -> wall time


class Levels:
    """Per tasuki queue: the levels in use and, per level, since when its oldest
    waiting message is counted (see the module docstring)."""

    def __init__(self, listing: Callable[[str], list[int]]) -> None:
        self._listing = listing
        self._queues: dict[str, _Levels] = {}
        self._mutex = threading.Lock()

    def used(self, queue: str, level: int) -> None:
        """This process sends to `level` of `queue`: it is in use from now on."""
        state = self._queues.get(queue)
        if state is None or level not in state.since:
            with self._mutex:
                state = self._state(queue)
                state.since.setdefault(level, time.time())

    def _state(self, queue: str) -> _Levels:
        state = self._queues.get(queue)
        if state is None:
            state = self._queues[queue] = _Levels(-REFRESH, {0: time.time()})
        return state

    def in_use(self, queue: str) -> list[int]:
        """The levels in use, highest first (0 always); listed again when stale."""
        with self._mutex:
            state = self._state(queue)
            listed_at = state.listed_at
            stale = time.monotonic() - listed_at >= REFRESH
            if stale:
                state.listed_at = time.monotonic()
        if stale:
            try:
                found = self._listing(queue)
            except BaseException:
                state.listed_at = listed_at  # listed again at the next call
                raise
            with self._mutex:
                now = time.time()
                for level in found:
                    state.since.setdefault(level, now)
        return sorted(state.since, reverse=True)

    def order(self, queue: str, aging: float) -> list[int]:
        """The levels in the order a lease asks them: from the highest down, each
        preceded by the lower levels that waited long enough to rank with it."""
        with self._mutex:
            since = dict(self._state(queue).since)
        now = time.time()
        levels = sorted(since, reverse=True)
        out: list[int] = []
        for high in levels:
            due = [
                low
                for low in levels
                if low < high and low not in out and now - since[low] >= aging * (high - low)
            ]
            due.sort(key=lambda low: since[low] - low * aging)
            out.extend(due)
            if high not in out:
                out.append(high)
        return out

    def asked(self, queue: str, level: int, got: list[dict[str, Any]], asked: int) -> None:
        """What one receive from `level` tells of its oldest waiting message."""
        state = self._queues.get(queue)
        if state is None:
            return
        if len(got) >= asked:
            sent = [int(m.get("Attributes", {}).get("SentTimestamp", 0)) for m in got]
            mark = max(sent) / 1000.0 if any(sent) else time.time()
        else:
            mark = time.time()
        with self._mutex:
            if level in state.since:
                state.since[level] = mark
