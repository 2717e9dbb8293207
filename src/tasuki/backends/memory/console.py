"""`memory://` for the console: pauses, listings by state, actions on a selection,
the worker registry and per-job stats (`core/console.py`), over the `Store` and a
`Registry` of its own, under the store's one lock.

A memory store holds what one process's tests put in it, so a listing sorts the queue's
records of that state rather than keep an index of its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tasuki.backends.memory import cancelling, operating
from tasuki.backends.memory.codec import DEAD, IN_FLIGHT, WAITING, Record, message_info
from tasuki.backends.memory.store import Store
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


@dataclass
class Registry:
    """The console's state beside the messages: paused queues, workers, job tallies."""

    paused: set[str] = field(default_factory=set)
    # worker id -> (seen at, its announce, a stop asked)
    workers: dict[str, tuple[float, WorkerInfo, bool]] = field(default_factory=dict)
    tallies: dict[tuple[str, str, float], dict[str, int]] = field(default_factory=dict)

    def prune(self, now: float) -> None:
        for key in [k for k in self.tallies if k[2] < now - STATS_KEPT]:
            del self.tallies[key]
        for wid in [w for w, (seen, _, _) in self.workers.items() if seen < now - WORKER_KEPT]:
            del self.workers[wid]


# -- pause ----------------------------------------------------------------------------
def pause(store: Store, registry: Registry, queue: str) -> None:
    with store.mutex:
        registry.paused.add(queue)


def resume(store: Store, registry: Registry, queue: str) -> None:
    with store.mutex:
        registry.paused.discard(queue)
        store.changed.notify_all()


def paused(store: Store, registry: Registry) -> set[str]:
    with store.mutex:
        return set(registry.paused)


# -- browsing -------------------------------------------------------------------------
def browse(
    store: Store,
    queue: str,
    state: BrowseState,
    job: str | None,
    newest_first: bool,
    limit: int,
    cursor: str | None,
) -> Page[Listed]:
    check_limit(limit)
    start = Position.parse(cursor)
    with store.mutex:
        now = time.time()
        chosen = []
        for record in store.queue(queue).records.values():
            at = _time_in(record, state, now)
            if at is None or (job is not None and record.envelope.headers.get(JOB_HEADER) != job):
                continue
            if start is None or start.after(at, record.seq, newest_first):
                chosen.append((at, record.seq, record))
        chosen.sort(key=lambda c: (c[0], c[1]), reverse=newest_first)
        items = [
            Listed(
                message_info(r, now),
                r.envelope.body,
                dict(r.envelope.headers),
                Position(at, seq).cursor(),
            )
            for at, seq, r in chosen[:limit]
        ]
    return Page(items, items[-1].cursor if len(chosen) > limit else None)


def retry_many(store: Store, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
    out = []
    with store.mutex:
        now = time.time()
        q = store.queue(queue)
        for msg_id in ids:
            record = q.records.get(msg_id)
            if record is None or _time_in(record, state, now) is None:
                out.append(False)
            elif state == "delayed":
                record.parked = False
                q.schedule(record, now)
                out.append(True)
            elif state == "dead":
                out.append(operating.redrive(store, queue, [msg_id]) == 1)
            else:
                out.append(False)  # ready already, or running
        store.changed.notify_all()
    return out


def cancel_many(
    store: Store, queue: str, ids: Sequence[str], state: BrowseState, aging: float
) -> list[bool]:
    out = []
    with store.mutex:
        now = time.time()
        q = store.queue(queue)
        for msg_id in ids:
            record = q.records.get(msg_id)
            if record is None or _time_in(record, state, now) is None:
                out.append(False)
            elif state == "dead":
                q.forget(msg_id)
                store.flows.forget(queue, msg_id)
                out.append(True)
            else:
                out.append(cancelling.cancel(store, queue, msg_id, aging) != "unknown")
    return out


# -- workers and job stats ------------------------------------------------------------
def announce(
    store: Store, registry: Registry, info: WorkerInfo, tallies: Sequence[JobTally]
) -> bool:
    with store.mutex:
        now = time.time()
        old = registry.workers.get(info.id)
        stop = old is not None and old[2]
        registry.workers[info.id] = (now, info, stop)
        for t in tallies:
            counts = registry.tallies.setdefault((t.queue, t.job, t.minute), {})
            for name, n in t.counts.items():
                counts[name] = counts.get(name, 0) + n
        registry.prune(now)
        return stop


def workers(store: Store, registry: Registry) -> list[WorkerInfo]:
    with store.mutex:
        now = time.time()
        registry.prune(now)
        return [_seen(info, seen, now) for _, (seen, info, _) in sorted(registry.workers.items())]


def stop_worker(store: Store, registry: Registry, id: str) -> bool:
    with store.mutex:
        known = registry.workers.get(id)
        if known is None:
            return False
        registry.workers[id] = (known[0], known[1], True)
        return True


def stats(store: Store, registry: Registry, queue: str, window: float) -> dict[str, JobStats]:
    with store.mutex:
        since = time.time() - window
        sums: dict[str, dict[str, int]] = {}
        for (q, job, minute), counts in registry.tallies.items():
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
