"""Cancel on the SQL backends: a state change in one transaction, not a message.

The message's row goes and its id is remembered among the finished ids, marked
cancelled with the token of the lease it was running under (`remember_cancelled`):
enqueued again it is a duplicate, `inspect` says cancelled, no settle of that lease
finds a row to change (its run is fenced out), it is never leased again, and the lease's
keeper hears "cancelled" at its next heartbeat (`settling.keep`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tasuki.backends.base import CancelStatus
from tasuki.backends.sql import limits
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows
from tasuki.backends.sql.steps import Depth, drop_unique_locks
from tasuki.core.records import CANCELLED_WINDOW


def cancel(dialect: Dialect, queue: str, id: str, clock: Callable[[], float]) -> CancelStatus:
    [status] = cancel_many(dialect, queue, [id], clock)
    return status


def cancel_many(
    dialect: Dialect,
    queue: str,
    ids: Sequence[str],
    clock: Callable[[], float],
    within: Callable[[float], tuple[int, float, float]] | None = None,
) -> list[CancelStatus]:
    """Cancel each message, in one transaction. `within`, given now, says the state each
    must still be in (its code and its range of `visible_at`: after lo, up to hi) for
    its cancel to happen: the console's actions on a listing never touch a message that
    changed state since."""
    with dialect.write() as conn:
        now = clock()
        bounds = None if within is None else within(now)
        depth = Depth()
        woken: set[str] = set()
        out = [_cancel_one(conn, dialect, queue, i, now, bounds, depth, woken) for i in ids]
        depth.write(conn, dialect)
        if woken:
            dialect.changed(conn, sorted(woken))
    if woken:
        dialect.committed()
    return out


def _cancel_one(
    conn: Connection,
    dialect: Dialect,
    queue: str,
    id: str,
    now: float,
    bounds: tuple[int, float, float] | None,
    depth: Depth,
    woken: set[str],
) -> CancelStatus:
    q = dialect.queries
    if bounds is None:
        cursor = conn.execute(q["cancel"], {"queue": queue, "id": id})
    else:
        code, lo, hi = bounds
        cursor = conn.execute(
            q["cancel_in_state"], {"queue": queue, "id": id, "state": code, "lo": lo, "hi": hi}
        )
    rows = named_rows(cursor, "state", "visible_at", "token", "keep_id", "unique_key", "limited")
    if not rows:
        return "unknown"
    [(state, visible_at, token, keep_id, unique_key, limited)] = rows
    running = state == 1 and visible_at > now
    conn.execute(
        q["remember_cancelled"],
        {
            "queue": queue,
            "id": id,
            "now": now,
            "window": max(float(keep_id), CANCELLED_WINDOW),
            "token": token if running else "",
        },
    )
    conn.execute(q["result_forget"], {"queue": queue, "id": id})  # nothing of it is kept
    if unique_key is not None:
        drop_unique_locks(conn, dialect, [(id, unique_key)])
    if state == 0:
        depth.add(queue, waiting=-1)
    if limited and token:  # a running holder's slots go with it
        woken |= limits.free(conn, dialect, [(queue, id, token)], now)
    return "signalled" if running else "removed"
