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
from typing import Any

from tasuki.backends.base import Envelope
from tasuki.backends.sql import producing
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows
from tasuki.core.flowrecords import Effects, Fill, FlowRecord, join_slots


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


def apply_many(
    conn: Connection,
    dialect: Dialect,
    effects: Sequence[Effects],
    now: float,
    aging: float,
    applied: Applied,
) -> None:
    """The effects of a settle batch's steps, in its transaction, by flow in id order (each
    locks its flow's row, so two batches take the rows they share in the same order).

    Where the engine can (PostgreSQL), the first fills of a flow's steps go in one
    statement: a group's members settled together take the flow's lock once, not once
    each (a chord of 10,000 members was that many statements in a row under it). The one
    whose fill completes its barrier carries the flow on (`_carry_on`); the others stop
    there, as `apply` would have."""
    by_flow: dict[str, list[Effects]] = {}
    for e in effects:
        by_flow.setdefault(e.flow or "", []).append(e)
    for flow in sorted(by_flow):
        together: list[Effects] = []
        for e in by_flow[flow]:
            if dialect.cte_writes and flow and e.fills and e.failed is None:
                together.append(e)
            else:
                apply(conn, dialect, e, now, aging, applied)
        if len(together) > 1:
            _fill_together(conn, dialect, flow, together, now, aging, applied)
        elif together:
            apply(conn, dialect, together[0], now, aging, applied)


def _fill_together(
    conn: Connection,
    dialect: Dialect,
    flow: str,
    steps: list[Effects],
    now: float,
    aging: float,
    applied: Applied,
) -> None:
    firsts = [e.fills[0] for e in steps]
    expires_at = now + max(e.ttl for e in steps)
    values = [_value(e) for e in steps]
    rows = _fills_counted(conn, dialect, flow, firsts, values, now, expires_at)
    completed: dict[str, int] = {}  # barrier -> the step that completes it
    for n, filled, size in rows:
        if n < 0:
            return  # cancelled: nothing was filled
        if filled >= size:
            barrier = firsts[n].barrier
            completed[barrier] = max(n, completed.get(barrier, n))
    for n in sorted(completed.values()):
        _carry_on(conn, dialect, steps[n], now, aging, applied)


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
    if flow is not None and not (dialect.cte_writes and effects.fills):
        # (`flow_fills_counted` reads it with the fill, under the same lock)
        rows = named_rows(conn.execute(q["flow_cancelled"], {"id": flow, "now": now}), "cancelled")
        if rows and rows[0][0]:
            return
    if not effects.fills:
        _finish(conn, dialect, effects, _value(effects), now, aging, applied)
        return
    first = effects.fills[0]
    filled = _fill(conn, dialect, effects, first, _value(effects), now)
    if filled is not None and filled >= first.size:
        _carry_on(conn, dialect, effects, now, aging, applied)


def _fill(
    conn: Connection, dialect: Dialect, effects: Effects, fill: Fill, value: bytes, now: float
) -> int | None:
    """Write `value` into the fill's slot: the barrier's count after it, or None when the
    slot was filled before (that settle went on, if any did) or the flow is cancelled."""
    q = dialect.queries
    expires_at = now + effects.ttl
    key = {"flow": fill.flow, "barrier": fill.barrier}
    slot = {**key, "slot": fill.slot, "value": value, "expires_at": expires_at}
    if dialect.cte_writes:  # one fill is a batch of one
        flow_id = effects.flow or fill.flow
        rows = _fills_counted(conn, dialect, flow_id, [fill], [value], now, expires_at)
        return None if not rows or rows[0][0] < 0 else int(rows[0][1])
    conn.execute(q["flow_barrier"], {**key, "size": fill.size, "expires_at": expires_at})
    if conn.execute(q["flow_fill"], slot).rowcount != 1:
        return None
    [(filled,)] = named_rows(conn.execute(q["flow_slot_taken"], key), "filled")
    return int(filled)


def _fills_counted(
    conn: Connection,
    dialect: Dialect,
    flow_id: str,
    fills: Sequence[Fill],
    values: Sequence[bytes],
    now: float,
    expires_at: float,
) -> list[tuple[Any, ...]]:
    """`flow_fills_counted` (PostgreSQL): `fills` of one flow's barriers, under the lock
    of flow `flow_id`, in one statement; its rows (n, filled, size)."""
    params = {
        "flow_id": flow_id,
        "flow": fills[0].flow,
        "now": now,
        "expires_at": expires_at,
        "ns": list(range(len(fills))),
        "barriers": [f.barrier for f in fills],
        "slots": [f.slot for f in fills],
        "sizes": [f.size for f in fills],
        "values": list(values),
    }
    cursor = conn.execute(dialect.queries["flow_fills_counted"], params)
    return named_rows(cursor, "n", "filled", "size")


def _carry_on(
    conn: Connection,
    dialect: Dialect,
    effects: Effects,
    now: float,
    aging: float,
    applied: Applied,
) -> None:
    """After the settle's first fill completed its barrier: the barrier's value, then the
    fills after it (each going on only if it completes its own), then what follows the
    last."""
    q = dialect.queries
    value = b""
    for n, fill in enumerate(effects.fills):
        if n > 0:
            filled = _fill(conn, dialect, effects, fill, value, now)
            if filled is None or filled < fill.size:
                return
        key = {"flow": fill.flow, "barrier": fill.barrier}
        slots = named_rows(conn.execute(q["flow_slots"], key), "value")
        value = join_slots([_bytes(v) or b"" for (v,) in slots])
        conn.execute(q["flow_barrier_value"], {**key, "value": value})
    _finish(conn, dialect, effects, value, now, aging, applied)


def _finish(
    conn: Connection,
    dialect: Dialect,
    effects: Effects,
    value: bytes,
    now: float,
    aging: float,
    applied: Applied,
) -> None:
    """What follows a settle's last fill, or its step when it fills none."""
    q = dialect.queries
    if effects.enqueue:
        producing.enqueue_in(dialect, conn, q, effects.enqueue, now, aging)
        applied.enqueued = True
    if effects.final and effects.flow is not None:
        params = {"id": effects.flow, "value": value, "now": now}
        applied.flows |= conn.execute(q["flow_finish"], params).rowcount == 1


def _value(effects: Effects) -> bytes:
    return b"null" if effects.result is None else effects.result


def _bytes(value: bytes | memoryview | str | None) -> bytes | None:
    """A stored value as bytes (SQLite may hand back text, psycopg a memoryview)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)
