"""Results on the SQL backends: one row per message that keeps its result (`results.sql`).

The row is written in the transactions that already change the message, so it can never
disagree with it: "pending" in the enqueue's, "ok" in the settle whose `ack` statement
deleted the message under its token (a zombie's ack deletes nothing, so it writes
nothing), "failed" wherever the message is dead-lettered (a settle or a lease), pending
again in a redrive's, gone in a cancel's or a purge's. Messages that keep no result cost
nothing here: the statements run only for the receipts that carry a result, or for the
rare dead letter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows
from tasuki.core.flowrecords import ResultRecord, ResultState


def pending(
    conn: Connection, dialect: Dialect, envelopes: Sequence[Envelope], stored: Sequence[Enqueued]
) -> None:
    """Each newly stored message that keeps its result starts with a pending record."""
    rows = [
        {"queue": env.queue, "id": env.id, "keep": env.keep_result}
        for env, result in zip(envelopes, stored, strict=True)
        if env.keep_result > 0 and result.status == "enqueued"
    ]
    if rows and "result_pending_batch" in dialect.queries:
        values = dialect.values
        params = {
            "queues": values([row["queue"] for row in rows]),
            "ids": values([row["id"] for row in rows]),
            "keeps": values([row["keep"] for row in rows]),
        }
        conn.execute(dialect.queries["result_pending_batch"], params)
    elif rows:
        dialect.many(conn, dialect.queries["result_pending"], rows)


def ok(
    conn: Connection, dialect: Dialect, kept: Sequence[tuple[str, str, bytes]], now: float
) -> None:
    """The acked messages' results: (queue, id, JSON value), acked by this transaction."""
    if kept and "result_ok_batch" in dialect.queries:
        values = dialect.values
        params = {
            "queues": values([q for q, _, _ in kept]),
            "ids": values([i for _, i, _ in kept]),
            "values": values([v for _, _, v in kept]),
            "now": now,
        }
        conn.execute(dialect.queries["result_ok_batch"], params)
    elif kept:
        rows = [{"queue": q, "id": i, "value": v, "now": now} for q, i, v in kept]
        dialect.many(conn, dialect.queries["result_ok"], rows)


def failed(conn: Connection, dialect: Dialect, queue: str, ids: Sequence[str], now: float) -> bool:
    """The results of messages this transaction dead-lettered, from their rows; whether
    any of them kept one."""
    if not ids:
        return False
    rows = [{"queue": queue, "id": i, "now": now} for i in ids]
    runs = dialect.many(conn, dialect.queries["result_failed"], rows)
    return any(count for count, _ in runs)


def wait(
    dialect: Dialect, queue: str, id: str, timeout: float, clock: Callable[[], float]
) -> ResultRecord | None:
    """The record once it is no longer pending, or at `timeout`: woken by the settles that
    write results (`Dialect.results_changed`), read again after each wake-up."""
    deadline = time.monotonic() + timeout
    while True:
        hint = dialect.results_hint()
        found = read(dialect, queue, id, clock)
        remaining = deadline - time.monotonic()
        if found is None or found.state != "pending" or remaining <= 0:
            return found
        dialect.wait_results(remaining, hint)


def read(dialect: Dialect, queue: str, id: str, clock: Callable[[], float]) -> ResultRecord | None:
    with dialect.read() as conn:
        cursor = conn.execute(dialect.queries["result"], {"queue": queue, "id": id, "now": clock()})
        rows = named_rows(cursor, "state", "value", "expires_at")
    if not rows:
        return None
    [(state, value, expires_at)] = rows
    if isinstance(value, str):  # SQLite's json_object() is text
        value = value.encode()
    kept: ResultState = state
    return ResultRecord(
        kept,
        None if value is None else bytes(value),
        None if expires_at is None else float(expires_at),
    )
