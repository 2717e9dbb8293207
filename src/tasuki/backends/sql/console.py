"""The console on the SQL backends (`core/console.py`): pauses, listings by state,
actions that re-check each message's state, the worker registry and per-job stats.

A listing is one range of an index (`console.sql`): the state index for waiting and
in-flight messages, the dead index for dead letters, and one of each by job name. Where
a listing starts is its cursor (`Position`), or the edge of its state's range (ready:
up to now; delayed and in flight: after now); the query reads `limit + 1` rows to know
whether another page follows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tasuki.backends.sql import cancelling
from tasuki.backends.sql.dialect import Dialect, named_rows
from tasuki.backends.sql.steps import Depth
from tasuki.core.console import (
    WORKER_KEPT,
    BrowseState,
    JobStats,
    JobTally,
    Listed,
    Page,
    Position,
    WorkerInfo,
    check_limit,
    job_stats,
)
from tasuki.core.message import ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import MessageInfo, MessageState, Progress, waiting_state

INF = float("inf")
# A seq past every real one: (now, LAST) orders after every message visible at `now`.
LAST = 2**62
_BROWSED = (
    "seq",
    "id",
    "body",
    "headers",
    "state",
    "visible_at",
    "attempt",
    "max_attempts",
    "fence",
    "enqueued_at",
    "reason",
    "error_type",
    "error_message",
    "error_traceback",
    "died_at",
    "priority",
    "progress",
)


def bounds(state: BrowseState, now: float) -> tuple[int, float, float]:
    """The state's stored code and its range of `visible_at` (after lo, up to hi)."""
    if state == "ready":
        return 0, -INF, now
    if state == "delayed":
        return 0, now, INF
    return 1, now, INF  # in flight (dead letters are listed by when they died)


# -- pause ------------------------------------------------------------------------------
def pause(dialect: Dialect, queue: str, now: float) -> None:
    with dialect.statements() as conn:
        conn.execute(dialect.queries["console_pause"], {"queue": queue, "now": now})


def resume(dialect: Dialect, queue: str) -> None:
    with dialect.statements() as conn:
        conn.execute(dialect.queries["console_resume"], {"queue": queue})


def paused(dialect: Dialect) -> set[str]:
    with dialect.read() as conn:
        return {q for (q,) in named_rows(conn.execute(dialect.queries["console_paused"]), "queue")}


# -- browsing ---------------------------------------------------------------------------
def browse(
    dialect: Dialect,
    queue: str,
    state: BrowseState,
    job: str | None,
    newest_first: bool,
    limit: int,
    cursor: str | None,
    now: float,
) -> Page[Listed]:
    check_limit(limit)
    given = Position.parse(cursor)
    params: dict[str, Any] = {"queue": queue, "job": job, "limit": limit + 1}
    if state == "dead":
        edge = Position(INF, LAST) if newest_first else Position(-INF, -1)
        name = "browse_dead"
    else:
        code, lo, hi = bounds(state, now)
        if newest_first:
            edge = Position(hi, LAST)
        else:
            edge = Position(lo, LAST) if lo > -INF else Position(-INF, -1)
        params.update(state=code, lo=lo, hi=hi)
        name = "browse"
    start = edge if given is None else (min if newest_first else max)(given, edge)
    params.update(at=start.at, seq=start.seq)
    # One job's waiting or dead messages have an index of their own; its leases are
    # found among the queue's (as many as its workers run), their job checked.
    by_job = job is not None and state != "in_flight"
    query = f"{name}{'_job' if by_job else ''}_{'desc' if newest_first else 'asc'}"
    with dialect.read() as conn:
        rows = named_rows(conn.execute(dialect.queries[query], params), *_BROWSED)  # type: ignore[index]
    more = len(rows) > limit
    items = [_listed(queue, row, now, state == "dead") for row in rows[:limit]]
    return Page(items, items[-1].cursor if more else None)


def _listed(queue: str, row: tuple[Any, ...], now: float, by_death: bool) -> Listed:
    (
        seq,
        msg_id,
        body,
        headers,
        code,
        visible,
        attempt,
        max_attempts,
        fence,
        enqueued,
        reason,
        etype,
        emessage,
        etb,
        died_at,
        priority,
        progress,
    ) = row
    state: MessageState
    visible_at = lease_expires_at = None
    if code == 2:
        state = "dead"
    elif code == 1 and visible > now:
        state, lease_expires_at = "in_flight", float(visible)
    else:
        state, visible_at = waiting_state(visible, now), float(visible)
    info = MessageInfo(
        queue,
        msg_id,
        state,
        attempt=attempt,
        max_attempts=max_attempts,
        fencing_token=int(fence),
        enqueued_at=float(enqueued),
        visible_at=visible_at,
        lease_expires_at=lease_expires_at,
        reason=describe(reason or "", attempt, max_attempts),
        error=ErrorInfo(etype, emessage or "", etb or "") if etype else None,
        died_at=float(died_at) if state == "dead" and died_at is not None else None,
        progress=Progress(*orjson.loads(progress)) if progress and state == "in_flight" else None,
        priority=int(priority),
    )
    at = float(died_at if by_death else visible)
    return Listed(info, bytes(body), orjson.loads(headers), Position(at, int(seq)).cursor())


# -- actions ----------------------------------------------------------------------------
def retry_many(
    dialect: Dialect,
    queue: str,
    ids: Sequence[str],
    state: BrowseState,
    clock: Callable[[], float],
) -> list[bool]:
    """In one transaction: each delayed message due now, or each dead one re-driven,
    only if still so."""
    if state not in ("delayed", "dead") or not ids:
        return [False] * len(ids)  # ready already, or running
    q = dialect.queries
    with dialect.write() as conn:
        now = clock()
        if state == "delayed":
            params = [{"queue": queue, "id": i, "now": now} for i in ids]
            done = [count == 1 for count, _ in dialect.many(conn, q["retry_delayed"], params)]
        else:
            done = []
            for i in ids:
                one = {"queue": queue, "now": now, "ids": dialect.values([i])}
                conn.execute(q["results_redrive_ids"], one)
                done.append(conn.execute(q["redrive_ids"], one).rowcount == 1)
            if any(done):
                depth = Depth()
                depth.add(queue, waiting=sum(done), dead=-sum(done))
                depth.write(conn, dialect)
        if any(done):
            dialect.changed(conn, [queue])
    if any(done):
        dialect.committed()
    return done


def cancel_many(
    dialect: Dialect,
    queue: str,
    ids: Sequence[str],
    state: BrowseState,
    clock: Callable[[], float],
) -> list[bool]:
    if state == "dead":
        return _cancel_dead(dialect, queue, ids)
    statuses = cancelling.cancel_many(
        dialect, queue, ids, clock, within=lambda now: bounds(state, now)
    )
    return [status != "unknown" for status in statuses]


def _cancel_dead(dialect: Dialect, queue: str, ids: Sequence[str]) -> list[bool]:
    q = dialect.queries
    with dialect.write() as conn:
        done = []
        for i in ids:
            gone = conn.execute(q["cancel_dead"], {"queue": queue, "id": i}).fetchall()
            if gone:
                conn.execute(q["result_forget"], {"queue": queue, "id": i})
            done.append(bool(gone))
        if any(done):
            depth = Depth()
            depth.add(queue, dead=-sum(done))
            depth.write(conn, dialect)
    return done


# -- workers and job stats --------------------------------------------------------------
def announce(dialect: Dialect, info: WorkerInfo, tallies: Sequence[JobTally], now: float) -> bool:
    q = dialect.queries
    with dialect.write() as conn:
        cursor = conn.execute(
            q["worker_announce"], {"id": info.id, "now": now, "info": info.to_json().decode()}
        )
        [(stop,)] = named_rows(cursor, "stop")
        counts = [(t, name, n) for t in tallies for name, n in t.counts.items() if n]
        if counts:
            conn.execute(
                q["job_stats_add"],
                {
                    "queues": dialect.values([t.queue for t, _, _ in counts]),
                    "minutes": dialect.values([t.minute for t, _, _ in counts]),
                    "jobs": dialect.values([t.job for t, _, _ in counts]),
                    "names": dialect.values([name for _, name, _ in counts]),
                    "values": dialect.values([n for _, _, n in counts]),
                },
            )
    return bool(stop)


def workers(dialect: Dialect, now: float) -> list[WorkerInfo]:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["workers"], {"since": now - WORKER_KEPT})
        rows = named_rows(cursor, "seen_at", "info")
    return [WorkerInfo.from_json(info, float(seen), now) for seen, info in rows]


def stop_worker(dialect: Dialect, id: str) -> bool:
    with dialect.statements() as conn:
        return conn.execute(dialect.queries["worker_stop"], {"id": id}).rowcount == 1


def stats(dialect: Dialect, queue: str, window: float, now: float) -> dict[str, JobStats]:
    since = now - window - 60.0  # whole minutes: one that started before the window too
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["job_stats"], {"queue": queue, "since": since})
        rows = named_rows(cursor, "job", "name", "value")
    sums: dict[str, dict[str, int]] = {}
    for job, name, value in rows:
        sums.setdefault(job, {})[name] = int(value)
    return job_stats(sums)
