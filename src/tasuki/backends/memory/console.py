"""`memory://` for the console: pauses, listings by state, actions on a selection,
the worker registry and per-job stats (`core/console.py`).

A memory store holds what one process's tests put in it, so a listing sorts the queue's
records of that state rather than keep an index of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tasuki.backends.memory.codec import DEAD, IN_FLIGHT, WAITING, Record, message_info
from tasuki.backends.memory.store import Queue
from tasuki.core.console import (
    STATS_KEPT,
    WORKER_KEPT,
    BrowseState,
    JobStats,
    JobTally,
    Listed,
    Page,
    Position,
    WorkerInfo,
    check_limit,
    is_gone,
    job_stats,
)
from tasuki.core.message import JOB_HEADER
from tasuki.core.records import CancelStatus

if TYPE_CHECKING:
    from tasuki.backends.memory.flows import FlowStore


class Console:
    """The console's side of `MemoryBackend`, over the state it declares below."""

    _mutex: threading.RLock
    _changed: threading.Condition
    _queues: dict[str, Queue]
    _flows: FlowStore
    _paused: set[str]
    # worker id -> (seen at, its announce, a stop asked)
    _workers: dict[str, tuple[float, WorkerInfo, bool]]
    _tallies: dict[tuple[str, str, float], dict[str, int]]

    if TYPE_CHECKING:  # the backend's own, which this side calls

        def _queue(self, name: str) -> Queue: ...
        def cancel(self, queue: str, id: str) -> CancelStatus: ...
        def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int: ...

    # -- pause -------------------------------------------------------------------------
    def pause(self, queue: str) -> None:
        with self._mutex:
            self._paused.add(queue)

    def resume(self, queue: str) -> None:
        with self._mutex:
            self._paused.discard(queue)
            self._changed.notify_all()

    def paused(self) -> set[str]:
        with self._mutex:
            return set(self._paused)

    # -- browsing ----------------------------------------------------------------------
    def browse(
        self,
        queue: str,
        state: BrowseState,
        *,
        job: str | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Listed]:
        check_limit(limit)
        start = Position.parse(cursor)
        with self._mutex:
            now = time.time()
            chosen = []
            for record in self._queue(queue).records.values():
                at = _time_in(record, state, now)
                if at is None or (
                    job is not None and record.envelope.headers.get(JOB_HEADER) != job
                ):
                    continue
                if start is None or start.after(at, record.seq, newest_first):
                    chosen.append((at, record.seq, record))
            chosen.sort(key=lambda c: (c[0], c[1]), reverse=newest_first)
            page = chosen[:limit]
            items = [
                Listed(
                    message_info(r, now),
                    r.envelope.body,
                    dict(r.envelope.headers),
                    Position(at, seq).cursor(),
                )
                for at, seq, r in page
            ]
        more = len(chosen) > limit
        return Page(items, Position(page[-1][0], page[-1][1]).cursor() if more else None)

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        out = []
        with self._mutex:
            now = time.time()
            q = self._queue(queue)
            for msg_id in ids:
                record = q.records.get(msg_id)
                if record is None or _time_in(record, state, now) is None:
                    out.append(False)
                elif state == "delayed":
                    record.parked = False
                    q.schedule(record, now)
                    out.append(True)
                elif state == "dead":
                    out.append(self.redrive(queue, [msg_id]) == 1)
                else:
                    out.append(False)  # ready already, or running
            self._changed.notify_all()
        return out

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        out = []
        with self._mutex:
            now = time.time()
            q = self._queue(queue)
            for msg_id in ids:
                record = q.records.get(msg_id)
                if record is None or _time_in(record, state, now) is None:
                    out.append(False)
                elif state == "dead":
                    q.forget(msg_id)
                    self._flows.forget(queue, msg_id)
                    out.append(True)
                else:
                    out.append(self.cancel(queue, msg_id) != "unknown")
        return out

    # -- workers and job stats ----------------------------------------------------------
    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        with self._mutex:
            now = time.time()
            old = self._workers.get(info.id)
            stop = old is not None and old[2]
            self._workers[info.id] = (now, info, stop)
            for t in tallies:
                counts = self._tallies.setdefault((t.queue, t.job, t.minute), {})
                for name, n in t.counts.items():
                    counts[name] = counts.get(name, 0) + n
            self._prune(now)
            return stop

    def _prune(self, now: float) -> None:
        for key in [k for k in self._tallies if k[2] < now - STATS_KEPT]:
            del self._tallies[key]
        for wid in [w for w, (seen, _, _) in self._workers.items() if seen < now - WORKER_KEPT]:
            del self._workers[wid]

    def workers(self) -> list[WorkerInfo]:
        with self._mutex:
            now = time.time()
            self._prune(now)
            return [_seen(info, seen, now) for _, (seen, info, _) in sorted(self._workers.items())]

    def stop_worker(self, id: str) -> bool:
        with self._mutex:
            known = self._workers.get(id)
            if known is None:
                return False
            self._workers[id] = (known[0], known[1], True)
            return True

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        with self._mutex:
            since = time.time() - window
            sums: dict[str, dict[str, int]] = {}
            for (q, job, minute), counts in self._tallies.items():
                if q != queue or minute + 60.0 <= since:
                    continue
                total = sums.setdefault(job, {})
                for name, n in counts.items():
                    total[name] = total.get(name, 0) + n
        return job_stats(sums)


def _seen(info: WorkerInfo, seen: float, now: float) -> WorkerInfo:
    return replace(info, seen_at=seen, gone=is_gone(seen, info.heartbeat, now))


def _time_in(record: Record, state: BrowseState, now: float) -> float | None:
    """The record's time in the listing of `state`, or None if it is not in that state."""
    if record.state == DEAD:
        return record.died_at if state == "dead" else None
    held = record.state == IN_FLIGHT and record.visible_at > now
    if state == "in_flight":
        return record.visible_at if held else None
    if record.state != WAITING or state == "dead":
        return None  # a lapsed lease is listed again once it is leased or settled
    due = record.visible_at <= now
    return record.visible_at if (state == "ready") == due else None
