"""What operators ask of the SQL backends — stats, dead letters, inspect, redrive, purge —
and how the rows that answer become `QueueStats`, `DeadLetter` and `MessageInfo`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tasuki.backends.base import HistoryEntry, MessageInfo, QueueStats, SettledTotals
from tasuki.backends.sql.dialect import Dialect, named_rows
from tasuki.backends.sql.steps import Depth
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import HISTORY_LIMIT, MessageState, Progress, waiting_state
from tasuki.core.reliability import Reliability

DEAD_LETTER_COLUMNS = (
    "id",
    "body",
    "headers",
    "attempt",
    "max_attempts",
    "reason",
    "error_type",
    "error_message",
    "error_traceback",
    "died_at",
    "enqueued_at",
)
IN_FLIGHT_COLUMNS = (
    "id",
    "attempt",
    "max_attempts",
    "fence",
    "enqueued_at",
    "visible_at",
    "priority",
    "progress",
)
MESSAGE_COLUMNS = (
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


def stats(dialect: Dialect, queue: str, now: float) -> QueueStats:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["stats"], {"queue": queue, "now": now})
        [(ready, in_flight, delayed, dead, oldest)] = named_rows(
            cursor, "ready", "in_flight", "delayed", "dead", "oldest_ready"
        )
    age = max(0.0, now - oldest) if oldest is not None else 0.0
    return QueueStats(int(ready), int(in_flight), int(delayed), int(dead), age)


def queues(dialect: Dialect) -> list[str]:
    with dialect.read() as conn:
        return [queue for (queue,) in named_rows(conn.execute(dialect.queries["queues"]), "queue")]


def dead_letters(dialect: Dialect, queue: str, limit: int, offset: int) -> list[DeadLetter]:
    params = {"queue": queue, "limit": limit, "offset": offset}
    with dialect.read() as conn:
        rows = named_rows(
            conn.execute(dialect.queries["dead_letters"], params), *DEAD_LETTER_COLUMNS
        )
    return [_dead_letter(queue, row) for row in rows]


def dead_letter(dialect: Dialect, queue: str, id: str) -> DeadLetter | None:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["dead_letter"], {"queue": queue, "id": id})
        rows = named_rows(cursor, *DEAD_LETTER_COLUMNS)
    return _dead_letter(queue, rows[0]) if rows else None


def _dead_letter(queue: str, row: tuple[Any, ...]) -> DeadLetter:
    (
        msg_id,
        body,
        headers,
        attempt,
        max_attempts,
        reason,
        etype,
        emessage,
        etb,
        died_at,
        enqueued,
    ) = row
    return DeadLetter(
        id=msg_id,
        queue=queue,
        body=bytes(body),
        headers=orjson.loads(headers),
        attempt=attempt,
        reason=describe(reason or "", attempt, max_attempts),
        error=ErrorInfo(etype, emessage or "", etb or "") if etype else None,
        died_at=died_at,
        enqueued_at=enqueued,
    )


def in_flight(dialect: Dialect, queue: str, limit: int, now: float) -> list[MessageInfo]:
    params = {"queue": queue, "now": now, "limit": limit}
    with dialect.read() as conn:
        rows = named_rows(conn.execute(dialect.queries["in_flight"], params), *IN_FLIGHT_COLUMNS)
    return [
        MessageInfo(
            queue,
            msg_id,
            "in_flight",
            attempt=attempt,
            max_attempts=max_attempts,
            fencing_token=int(fence),
            enqueued_at=float(enqueued),
            lease_expires_at=float(expires),
            progress=_progress(progress),
            priority=int(priority),
        )
        for msg_id, attempt, max_attempts, fence, enqueued, expires, priority, progress in rows
    ]


def _progress(stored: str | None) -> Progress | None:
    """A row's progress, as `settling.keep` stored it (`[fraction, text]`)."""
    return None if stored is None else Progress(*orjson.loads(stored))


def settled_totals(dialect: Dialect, queue: str) -> SettledTotals:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["settled_totals"], {"queue": queue})
        [(acked, dead)] = named_rows(cursor, "acked", "dead")
    return SettledTotals(int(acked), int(dead))


def reliability(dialect: Dialect, queue: str) -> Reliability:
    with dialect.read() as conn:
        rows = named_rows(
            conn.execute(dialect.queries["meters"], {"queue": queue}), "name", "value"
        )
    return Reliability.from_meters({name: int(value) for name, value in rows})


def inspect(dialect: Dialect, queue: str, id: str, now: float) -> MessageInfo:
    q = dialect.queries
    params = {"queue": queue, "id": id, "now": now}
    with dialect.read() as conn:
        # The message first: an ack between the two reads leaves it finished, not unknown.
        rows = named_rows(conn.execute(q["inspect_message"], params), *MESSAGE_COLUMNS)
        finished = []
        if not rows:
            cursor = conn.execute(q["inspect_finished"], params)
            finished = named_rows(cursor, "expires_at", "cancelled")
        cursor = conn.execute(q["inspect_history"], {**params, "limit": HISTORY_LIMIT})
        entries = named_rows(cursor, "at", "event", "fence", "detail")
    history = tuple(
        HistoryEntry(float(at), event, int(fence), detail)
        for at, event, fence, detail in reversed(entries)
    )
    if not rows:
        if not finished:
            return MessageInfo(queue, id, "unknown")
        [(until, cancelled)] = finished
        if cancelled is not None:
            return MessageInfo(queue, id, "cancelled", finished_until=float(until))
        return MessageInfo(queue, id, "finished", finished_until=float(until), history=history)
    (
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
    ) = rows[0]
    state: MessageState
    visible_at = lease_expires_at = None
    if code == 2:
        state = "dead"
    elif code == 1 and visible > now:
        state, lease_expires_at = "in_flight", float(visible)
    else:
        state, visible_at = waiting_state(visible, now), float(visible)
    return MessageInfo(
        queue,
        id,
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
        history=history,
        progress=_progress(progress) if state == "in_flight" else None,
        priority=int(priority),
    )


def redrive(
    dialect: Dialect, queue: str, ids: Sequence[str] | None, clock: Callable[[], float]
) -> int:
    with dialect.write() as conn:
        now = clock()
        q = dialect.queries
        if ids is None:
            conn.execute(q["results_redrive_all"], {"queue": queue})
            conn.execute(q["flows_redrive_all"], {"queue": queue, "now": now})
            count = conn.execute(q["redrive_all"], {"queue": queue, "now": now})
        else:
            params = {"queue": queue, "now": now, "ids": dialect.values(list(ids))}
            conn.execute(q["results_redrive_ids"], params)
            conn.execute(q["flows_redrive_ids"], params)
            count = conn.execute(q["redrive_ids"], params)
        redriven = count.rowcount
        if redriven:
            depth = Depth()
            depth.add(queue, waiting=redriven, dead=-redriven)
            depth.write(conn, dialect)
            dialect.changed(conn, [queue])
    dialect.committed()
    return redriven


def purge_dead(dialect: Dialect, queue: str) -> int:
    with dialect.write() as conn:
        purged = conn.execute(dialect.queries["purge_dead"], {"queue": queue}).rowcount
        depth = Depth()
        depth.add(queue, dead=-purged)
        depth.write(conn, dialect)
    return purged


def purge(dialect: Dialect, queue: str) -> int:
    q = dialect.queries
    with dialect.write() as conn:
        conn.execute(q["purge_waiting_locks"], {"queue": queue})
        conn.execute(q["results_purge"], {"queue": queue})
        purged = conn.execute(q["purge"], {"queue": queue}).rowcount
        if "reset_depth" in q:  # nothing of the queue is left to count
            conn.execute(q["reset_depth"], {"queue": queue})
    return purged
