"""Leasing on the SQL backends: the `lease` statement, its rows, and the wait between.

One `lease` statement leases the oldest due rows (ready messages and expired leases) and
dead-letters the exhausted ones in the same pass; it runs again only to fill the places the
dead ones took. What follows from it — the leases found lost written into their
messages' history, the dead messages' unique locks dropped — is taken by the statement
itself where the engine can (`Dialect.cte_writes`), else by statements beside it in the
same transaction; the dead are counted by a statement after it, when there are any.
The reliability meters (redeliveries, lost leases, how long a lost lease waited) are
counted from its rows. Rows with rate or concurrency limits it holds, unchanged
(`held`): `limits.admit` leases or parks them right after, in one transaction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import takewhile
from operator import itemgetter
from typing import Any

import orjson

from tasuki.backends.base import Delivery
from tasuki.backends.sql import limits, results
from tasuki.backends.sql.dialect import Connection, Dialect, columns, named_rows
from tasuki.backends.sql.steps import (
    Depth,
    add_meters,
    count_settled,
    drop_unique_locks,
)
from tasuki.backends.waiting import lease_until
from tasuki.core import reliability

# The columns of a `lease` row, in the order `_leased` reads them. `place` is where the
# row comes in the lease's order (rank, FIFO within a rank): SQLite's `seq`, which follows
# the rank at enqueue; PostgreSQL's [rank, seq].
LEASE_COLUMNS = (
    "dead",
    "place",
    "id",
    "body",
    "headers",
    "attempt",
    "max_attempts",
    "enqueued_at",
    "token",
    "fence",
    "visibility_timeout",
    "unique_key",
    "lost_at",
    "held",
)
_PLACE = itemgetter(LEASE_COLUMNS.index("place"))
# After a lease parked messages over their limits, how many due messages the next round
# looks at for limited ones to decide at once (`limit_due`): many messages parked
# together become due together (their slot's holder's lease expiry) and are parked again
# a few hundred per transaction, not a worker's batch at a time. Only those ahead of
# every unlimited one may be leased by it (the lease's order holds); the others over a
# limit are parked, the others within theirs left for the lease to take in its turn.
SWEEP = 256


def lease(
    dialect: Dialect,
    queue: str,
    max_messages: int,
    visibility_timeout: float,
    wait: float,
    clock: Callable[[], float],
) -> list[Delivery]:
    if max_messages <= 0:
        return []
    if wait <= 0:
        return lease_now(dialect, queue, max_messages, visibility_timeout, clock)

    def try_lease() -> tuple[list[Delivery], object]:
        hint = dialect.wait_hint()
        return lease_now(dialect, queue, max_messages, visibility_timeout, clock), hint

    def wait_for_change(remaining: float, hint: object) -> None:
        with dialect.read() as conn:
            cursor = conn.execute(dialect.queries["next_visible_at"], {"queue": queue})
            [(next_at,)] = named_rows(cursor, "next_at")
        due_in = next_at - clock() if next_at is not None else float("inf")
        dialect.wait(queue, min(remaining, max(0.0, due_in)), hint)

    return lease_until(wait, try_lease, wait_for_change)


def lease_now(
    dialect: Dialect, queue: str, max_messages: int, vt: float, clock: Callable[[], float]
) -> list[Delivery]:
    q = dialect.queries
    leased: list[Delivery] = []
    depth = Depth()
    sweep = False
    with dialect.statements() as conn:
        now = clock()
        while len(leased) < max_messages:
            params = {
                "queue": queue,
                "now": now,
                "limit": max_messages - len(leased),
                "nonce": os.urandom(6).hex(),
                "visibility_timeout": vt,
                "scan": SWEEP,
            }
            if sweep:  # the last round parked some: decide the run of limited ones ahead
                sweep = False
                cursor = conn.execute(q["limit_due"], params)
                due = named_rows(cursor, "id", "held")
                lead = sum(1 for _ in takewhile(itemgetter(1), due))
                ahead = [msg_id for msg_id, held in due if held]
                if ahead:  # those after an unlimited one are only parked, if over
                    with dialect.atomic(conn):
                        admitted = limits.admit(
                            conn, dialect, queue, ahead, params, LEASE_COLUMNS, clock,
                            room=max_messages - len(leased), lead=lead,
                        )  # fmt: skip
                    more, _, _ = _leased(queue, sorted(admitted.rows, key=_PLACE), {})
                    leased.extend(more)
                    depth.add(queue, waiting=admitted.to_waiting - admitted.from_waiting)
                    if redelivered := sum(1 for d in more if d.attempt > 1):
                        _count_lease_meters(conn, dialect, queue, more, {}, redelivered, now)
                    sweep = admitted.parked > 0
                    continue
            lost: dict[str, float] = {}
            if not dialect.cte_writes:
                cursor = conn.execute(q["record_lost_leases"], params)
                lost = dict(named_rows(cursor, "id", "lost_at"))
            cursor = conn.execute(q["lease"], params)
            rows = sorted(map(columns(cursor, *LEASE_COLUMNS), cursor.fetchall()), key=_PLACE)
            if not rows:
                break
            deliveries, dead, held = _leased(queue, rows, lost)
            # The rows changed that were not in flight (lost) were waiting.
            held_lost = sum(1 for msg_id in held if msg_id in lost)
            depth.add(queue, waiting=len(lost) - held_lost - len(rows) + len(held), dead=len(dead))
            parked = 0
            if held:  # rows with limits: admitted (leased) or parked, in one transaction
                with dialect.atomic(conn):
                    admitted = limits.admit(
                        conn, dialect, queue, held, params, LEASE_COLUMNS, clock
                    )
                more, _, _ = _leased(queue, sorted(admitted.rows, key=_PLACE), {})
                rank = {row[2]: n for n, row in enumerate(rows)}  # the lease's order
                deliveries = sorted(deliveries + more, key=lambda d: rank[d.id])
                depth.add(queue, waiting=admitted.to_waiting - admitted.from_waiting)
                parked = len(held) - len(more)
            leased.extend(deliveries)
            if dead:  # seldom: a statement or two after the lease, not inside it
                drop_unique_locks(conn, dialect, dead)
                count_settled(conn, dialect, queue, dead=len(dead))
                results.failed(conn, dialect, queue, [msg_id for msg_id, _ in dead], now)
            redelivered = sum(1 for d in deliveries if d.attempt > 1)
            if lost or redelivered:
                _count_lease_meters(conn, dialect, queue, deliveries, lost, redelivered, now)
            if not dead and not parked:  # else fill the places they took
                break
            sweep = parked > 0
        depth.write(conn, dialect)
    return leased


def _leased(
    queue: str, rows: list[tuple[Any, ...]], lost: dict[str, float]
) -> tuple[list[Delivery], list[tuple[str, str | None]], list[str]]:
    """The deliveries among a `lease` statement's rows (oldest first), the (id, unique
    key) of the messages it dead-lettered, and the ids of those it held for admission
    (oldest first); `lost` gains the leases it found lost."""
    loads = orjson.loads
    deliveries = [
        Delivery(queue, msg_id, bytes(body), loads(headers), attempt, max_attempts,
                 float(enqueued_at), token, fence, float(vt))
        for (dead, _place, msg_id, body, headers, attempt, max_attempts, enqueued_at, token,
             fence, vt, _key, _lost, held) in rows
        if not dead and not held
    ]  # fmt: skip
    lost.update((msg_id, at) for _dead, _place, msg_id, *_, at, _held in rows if at is not None)
    dead = [(msg_id, key) for dead, _place, msg_id, *_, key, _at, _held in rows if dead]
    return deliveries, dead, [msg_id for _d, _s, msg_id, *_, held in rows if held]


def _count_lease_meters(
    conn: Connection,
    dialect: Dialect,
    queue: str,
    deliveries: list[Delivery],
    lost: dict[str, float],
    redelivered: int,
    now: float,
) -> None:
    """Redeliveries, lost leases and, for each lost lease leased again, the time from
    its expiry to now (`tasuki.core.reliability`)."""
    meters: dict[str, int] = {}
    if redelivered:
        meters[reliability.REDELIVERIES] = redelivered
    if lost:
        meters[reliability.LEASES_LOST] = len(lost)
        for delivery in deliveries:
            expired_at = lost.get(delivery.id)
            if expired_at is not None:
                reliability.observe(meters, reliability.RECOVERY, now - float(expired_at))
    add_meters(conn, dialect, queue, meters)


class Ahead:
    """The helper thread a dialect with `leases_ahead` leases the next batch on, one per
    process (a forked child makes its own)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def submit(self, lease: Callable[[], list[Delivery]]) -> Callable[[], list[Delivery]]:
        if self._pool is None or self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tasuki-lease-ahead")
            self._pid = os.getpid()
        return self._pool.submit(lease).result

    def close(self) -> None:
        if self._pool is not None and self._pid == os.getpid():
            self._pool.shutdown(wait=True)
