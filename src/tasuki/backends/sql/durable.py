"""Durable steps on the SQL engines (DESIGN §4c): step records, signals and waits, in
the tables `tasuki_steps`, `tasuki_signals` and `tasuki_waits`, beside the messages.

Every write that needs the lease checks it in the same transaction as the write
(`step_record` in one statement, `step_hold` before a longer transaction), so a
zombie's record is refused. A suspended run's settle (`Settle.suspend`) stores its wait
in the settle's own transaction (`suspended`), and wakes the message at once there if
the signal it waits for is stored already: a signal can never fall between the run's
look for it and its settle. The records are dropped with the message by a maintenance
service (`maintenance/durable.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tasuki.backends.base import Receipt, Settle, SignalStatus, StepRecord, Taken, Waiting
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows

DEAD = 2


def steps(dialect: Dialect, queue: str, id: str) -> list[StepRecord]:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["steps_read"], {"queue": queue, "id": id})
        rows = named_rows(cursor, "name", "occurrence", "result", "started_at", "duration")
    return [StepRecord(n, int(o), bytes(r), float(s), float(d)) for n, o, r, s, d in rows]


def _step_params(receipt: Receipt, record: StepRecord) -> dict[str, Any]:
    return {
        "queue": receipt.queue,
        "id": receipt.id,
        "token": receipt.token,
        "name": record.name,
        "occurrence": record.occurrence,
        "result": record.result,
        "started_at": record.started_at,
        "duration": record.duration,
    }


def record_step(dialect: Dialect, receipt: Receipt, record: StepRecord) -> bool:
    with dialect.statements() as conn:
        cursor = conn.execute(dialect.queries["step_record"], _step_params(receipt, record))
        return cursor.rowcount == 1


def _held(conn: Connection, dialect: Dialect, receipt: Receipt) -> bool:
    params = {"queue": receipt.queue, "id": receipt.id, "token": receipt.token}
    return conn.execute(dialect.queries["step_hold"], params).fetchone() is not None


def take_signal(
    dialect: Dialect, receipt: Receipt, name: str, occurrence: int, now: float
) -> Taken:
    q = dialect.queries
    with dialect.write() as conn:
        if not _held(conn, dialect, receipt):
            return Taken(False, None)
        params = {"queue": receipt.queue, "id": receipt.id, "name": name}
        found = named_rows(conn.execute(q["signal_first"], params), "seq", "payload")
        if not found:
            return Taken(True, None)
        seq, payload = found[0][0], bytes(found[0][1])
        conn.execute(q["signal_consume"], {"seq": seq})
        record = StepRecord(f"tasuki:signal:{name}", occurrence, payload, now, 0.0)
        conn.execute(q["step_record"], _step_params(receipt, record))
        return Taken(True, payload)


def signal(
    dialect: Dialect, queue: str, id: str, name: str, payload: bytes, now: float
) -> SignalStatus:
    q = dialect.queries
    params = {"queue": queue, "id": id, "name": name, "payload": payload, "now": now}
    with dialect.write() as conn:
        row = conn.execute(q["signal_target"], params).fetchone()
        if row is None or row[0] == DEAD:
            return "unknown"
        conn.execute(q["signal_put"], params)
        if conn.execute(q["signal_wake"], params).fetchall():
            conn.execute(q["wait_end"], params)
            dialect.changed(conn, [queue])
            woken = True
        else:
            woken = False
    if woken:
        dialect.committed()
    return "delivered"


def waiting(dialect: Dialect, queue: str, id: str, now: float) -> Waiting | None:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["wait_read"], {"queue": queue, "id": id, "now": now})
        rows = named_rows(cursor, "signal", "until")
    return Waiting(rows[0][0], float(rows[0][1])) if rows else None


def suspended(conn: Connection, dialect: Dialect, items: Sequence[Settle], now: float) -> set[str]:
    """In a settle's transaction, after the releases of `items` (each `Settle.suspend`)
    were accepted: store what each waits for; the queues of those whose signal came
    already, made ready at once."""
    q = dialect.queries
    woken: set[str] = set()
    for item in items:
        assert item.wait is not None
        r = item.receipt
        params = {
            "queue": r.queue,
            "id": r.id,
            "signal": item.wait.signal,
            "until": now + item.delay,
            "now": now,
        }
        conn.execute(q["wait_put"], params)
        if item.wait.signal and conn.execute(q["wait_signalled"], params).fetchall():
            woken.add(r.queue)
    return woken


def in_transaction(
    dialect: Dialect, receipt: Receipt, work: Callable[[Any], StepRecord]
) -> StepRecord | None:
    """The step's work and its record in one transaction, under a lease held throughout
    (see `Backend.record_step_in_transaction`)."""
    q = dialect.queries
    with dialect.write() as conn:
        if "step_transaction" in q:
            conn.execute(q["step_transaction"])
        if not _held(conn, dialect, receipt):
            return None
        record = work(conn)
        if conn.execute(q["step_record"], _step_params(receipt, record)).rowcount != 1:
            raise _Stale()
    return record


class _Stale(Exception):
    """The lease was lost while the work ran: its transaction is rolled back."""


def in_transaction_or_none(
    dialect: Dialect, receipt: Receipt, work: Callable[[Any], StepRecord]
) -> StepRecord | None:
    try:
        return in_transaction(dialect, receipt, work)
    except _Stale:
        return None
