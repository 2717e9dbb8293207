"""Workflows on the SQL backends: flow records, barriers and their slots (`flows.sql`).

A flow's row is written with its first steps' messages in one transaction; everything
after happens in the settles of its steps, in the transaction whose `ack` (or `dead`)
statement passed the token check: a zombie's settle changes nothing, so it writes
nothing here either. A barrier is set membership by slot (one row per slot, first
writer wins), never a counter: a redelivered member finds its slot taken and goes no
further. The fills of one barrier take turns on its row (PostgreSQL locks it; SQLite has
one writer), so exactly one settle, the one whose slot makes the count reach the size,
sees it complete and carries the flow on. Waiters of a flow wake as result waiters do
(`Dialect.results_changed`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tasuki.backends.base import Envelope
from tasuki.backends.sql import producing
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows
from tasuki.core.flowrecords import Effects, FlowRecord, join_slots


class Applied:
    """What a settle's effects changed, for what follows its commit."""

    __slots__ = ("enqueued", "flows")

    def __init__(self) -> None:
        self.enqueued = False  # messages were enqueued: leasers are woken
        self.flows = False  # a flow's result or failure was written: its waiters are woken


def start(
    dialect: Dialect,
    record: FlowRecord,
    envelopes: Sequence[Envelope],
    clock: Callable[[], float],
    aging: float,
) -> bool:
    """The flow's row and its first steps' messages, in one transaction; False, and
    nothing enqueued, if a flow with that id is kept."""
    q = dialect.queries
    with dialect.write() as conn:
        now = clock()
        params = {
            "id": record.id,
            "static": record.static_json().decode(),
            "created_at": record.created_at,
            "expires_at": now + record.retention,
            "now": now,
        }
        if conn.execute(q["flow_start"], params).rowcount != 1:
            return False
        producing.enqueue_in(dialect, conn, q, envelopes, now, aging)
    dialect.committed()
    return True


def read(dialect: Dialect, flow_id: str, clock: Callable[[], float]) -> FlowRecord | None:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["flow"], {"id": flow_id, "now": clock()})
        rows = named_rows(cursor, "static", "result", "failure", "cancelled")
    if not rows:
        return None
    [(static, result, failure, cancelled)] = rows
    return FlowRecord.from_parts(static, _bytes(result), failure, bool(cancelled))


def wait(
    dialect: Dialect, flow_id: str, timeout: float, clock: Callable[[], float]
) -> FlowRecord | None:
    """The record once it has a result, a failure or is cancelled, or at `timeout`: woken
    by the settles that write them (`Dialect.results_changed`), read again after each."""
    deadline = time.monotonic() + timeout
    while True:
        hint = dialect.results_hint()
        found = read(dialect, flow_id, clock)
        remaining = deadline - time.monotonic()
        if found is None or remaining <= 0:
            return found
        if found.result is not None or found.failure is not None or found.cancelled:
            return found
        dialect.wait_results(remaining, hint)


def cancel(dialect: Dialect, flow_id: str, clock: Callable[[], float]) -> bool:
    with dialect.write() as conn:
        done = conn.execute(dialect.queries["flow_cancel"], {"id": flow_id, "now": clock()})
        cancelled = done.rowcount == 1
        if cancelled:
            dialect.results_changed(conn)
    if cancelled:
        dialect.committed()
    return cancelled


def group_value(
    dialect: Dialect, flow_id: str, barrier: str, clock: Callable[[], float]
) -> bytes | None:
    with dialect.read() as conn:
        params = {"flow": flow_id, "barrier": barrier, "now": clock()}
        rows = named_rows(conn.execute(dialect.queries["flow_group_value"], params), "value")
    return _bytes(rows[0][0]) if rows else None


def apply(
    conn: Connection,
    dialect: Dialect,
    effects: Effects,
    now: float,
    aging: float,
    applied: Applied,
) -> None:
    """A settle's effects, in its transaction, after its verdict passed the token check;
    in the order `Effects` gives."""
    q = dialect.queries
    flow = effects.flow
    if flow is not None and effects.failed is not None:
        params = {"id": flow, "failure": effects.failed.to_json().decode(), "now": now}
        applied.flows |= conn.execute(q["flow_fail"], params).rowcount == 1
    counted = dialect.cte_writes  # a fill's steps in one statement (`flow_fill_counted`)
    if flow is not None and not (counted and effects.fills):
        rows = named_rows(conn.execute(q["flow_cancelled"], {"id": flow, "now": now}), "cancelled")
        if rows and rows[0][0]:
            return
    value = b"null" if effects.result is None else effects.result
    expires_at = now + effects.ttl
    for fill in effects.fills:
        key = {"flow": fill.flow, "barrier": fill.barrier}
        slot = {**key, "slot": fill.slot, "value": value, "expires_at": expires_at}
        if counted:
            params = {**slot, "flow_id": flow or fill.flow, "size": fill.size, "now": now}
            [(cancelled, taken)] = named_rows(
                conn.execute(q["flow_fill_counted"], params), "cancelled", "filled"
            )
            if cancelled or taken is None:
                return  # cancelled, or the slot was filled before: that settle went on
            filled = taken
        else:
            conn.execute(q["flow_barrier"], {**key, "size": fill.size, "expires_at": expires_at})
            if conn.execute(q["flow_fill"], slot).rowcount != 1:
                return  # the slot was filled before: that settle went on, if any did
            [(filled,)] = named_rows(conn.execute(q["flow_slot_taken"], key), "filled")
        if filled < fill.size:
            return
        slots = named_rows(conn.execute(q["flow_slots"], key), "value")
        value = join_slots([_bytes(v) or b"" for (v,) in slots])
        conn.execute(q["flow_barrier_value"], {**key, "value": value})
    if effects.enqueue:
        producing.enqueue_in(dialect, conn, q, effects.enqueue, now, aging)
        applied.enqueued = True
    if effects.final and flow is not None:
        params = {"id": flow, "value": value, "now": now}
        applied.flows |= conn.execute(q["flow_finish"], params).rowcount == 1


def _bytes(value: bytes | memoryview | str | None) -> bytes | None:
    """A stored value as bytes (SQLite may hand back text, psycopg a memoryview)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)
