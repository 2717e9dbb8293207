"""Settling on the SQL backends: a batch of verdicts in one transaction, and extend.

`settle` takes the batch whatever its mix: the acks in one `ack` statement, the
releases and the burials in one pipelined batch of statements each, then what follows
from them (history, totals, unique locks given up, waiters woken), all in one
transaction, so a batch settles whole or not at all; more steps per item (a result, a
successor) join the same transaction. A batch of acks alone, where the engine's `ack`
statement takes every step itself (`Dialect.cte_writes`), is that one statement in
autocommit: the round trip of the hot path.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

import orjson

from tasuki.backends.base import Effects, Keep, LeaseStatus, Progress, Receipt, Settle
from tasuki.backends.sql import durable, flows, limits
from tasuki.backends.sql import results as kept_results
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows
from tasuki.backends.sql.steps import (
    COUNT_SHARDS,
    Depth,
    History,
    count_settled,
    drop_unique_locks,
)
from tasuki.core.records import HISTORY_LIMIT, death_detail, error_summary, release_event
from tasuki.errors import BackendUnavailable


def settle(
    dialect: Dialect, items: Sequence[Settle], clock: Callable[[], float], aging: float
) -> list[bool]:
    """`aging`: the backend's `priority_aging`, for the messages a settle's effects
    enqueue."""
    results = [False] * len(items)
    verdicts: dict[str, list[int]] = {"ack": [], "release": [], "dead": []}
    seen: set[Receipt] = set()
    for n, item in enumerate(items):
        if item.receipt not in seen:  # a receipt repeated: its later copies are refused
            seen.add(item.receipt)
            verdicts[item.verdict].append(n)
    acks, releases, deaths = verdicts["ack"], verdicts["release"], verdicts["dead"]
    if not seen:
        return results
    # Acks alone are one statement in autocommit where the engine's `ack` takes every
    # step itself; a result, or any effect, must be written in the same transaction as
    # its ack.
    kept = any(items[n].effects is not None for n in acks)
    alone = dialect.cte_writes and not releases and not deaths and not kept
    for attempt in (1, 2):
        body_done = False
        try:
            with dialect.statements() if alone else dialect.write() as conn:
                batch = _Batch(dialect, conn, clock(), aging)
                steps = ((acks, batch.ack), (releases, batch.release), (deaths, batch.dead))
                for indexes, step in steps:
                    if indexes:
                        settled = step([items[n] for n in indexes])
                        for n, one in zip(indexes, settled, strict=True):
                            results[n] = one
                batch.finish()
                body_done = True
            break
        except BackendUnavailable:
            # A transaction whose connection was lost before its COMMIT changed nothing
            # (PostgreSQL ends one left idle in a transaction for a second: a client
            # stalled that long, on a loaded machine, mid-batch): run it once more on
            # another connection. An autocommit statement, or a COMMIT whose fate is not
            # known, is not repeated: the caller hears of it.
            if alone or body_done or attempt == 2:
                raise
            results = [False] * len(items)
    if batch.woken or batch.results or batch.applied.enqueued:
        dialect.committed()
    return results


class _Batch:
    """One settle's transaction: the verdicts' statements, then what follows from them."""

    def __init__(self, dialect: Dialect, conn: Connection, now: float, aging: float) -> None:
        self.dialect = dialect
        self.conn = conn
        self.now = now
        self.aging = aging
        # The effects of the items acked or dead-lettered under their token.
        self.effects: list[Effects] = []
        self.applied = flows.Applied()  # what their effects changed
        self.history = History(now)
        self.depth = Depth()
        self.acked: Counter[str] = Counter()
        self.died: Counter[str] = Counter()
        self.woken: set[str] = set()
        self.results = False  # a result record was written: its waiters are woken
        # The leases ended here whose messages have limits: their slots are freed.
        self.freeing: list[tuple[str, str, str]] = []

    def ack(self, items: list[Settle]) -> list[bool]:
        """One `ack` statement deletes the batch's messages whose lease is current;
        caller-given ids (an id window) are remembered, their history kept."""
        dialect, now = self.dialect, self.now
        receipts = [item.receipt for item in items]
        values = dialect.values
        params = {
            "queues": values([r.queue for r in receipts]),
            "ids": values([r.id for r in receipts]),
            "tokens": values([r.token for r in receipts]),
            # The same as one list of triples, for engines without parallel arrays.
            "receipts": values([list(r) for r in receipts]),
            "now": now,
            # For an `ack` that takes every step itself: the totals' shard, how many
            # entries of history a message keeps.
            "shard": random.randrange(COUNT_SHARDS),
            "keep": HISTORY_LIMIT,
        }
        cursor = self.conn.execute(dialect.queries["ack"], params)
        rows = named_rows(cursor, "queue", "id", "token", "keep_id", "limited")
        self.freeing += [(queue, msg_id, token) for queue, msg_id, token, _, lim in rows if lim]
        if not dialect.cte_writes:
            kept = [(q, i, t, keep) for q, i, t, keep, _ in rows if keep > 0]
            remember = [{"queue": q, "id": i, "now": now, "keep_id": k} for q, i, _, k in kept]
            if remember:
                dialect.many(self.conn, dialect.queries["remember_finished"], remember)
            for queue, msg_id, token, _ in kept:  # a caller-given id's history outlives
                self.history.add(queue, msg_id, "acked", fence(token), "")  # the message
            self.acked.update(queue for queue, *_ in rows)
        deleted = {Receipt(queue, msg_id, token) for queue, msg_id, token, *_ in rows}
        acked_values = [
            (item.receipt.queue, item.receipt.id, item.effects.result)
            for item in items
            if item.effects is not None
            and item.effects.result is not None
            and item.receipt in deleted
        ]
        kept_results.ok(self.conn, dialect, acked_values, now)
        self.results |= bool(acked_values)
        self.effects += [i.effects for i in items if i.effects is not None and i.receipt in deleted]
        return [r in deleted for r in receipts]

    def release(self, items: list[Settle]) -> list[bool]:
        params = [
            {
                "queue": item.receipt.queue,
                "id": item.receipt.id,
                "token": item.receipt.token,
                "delay": item.delay,
                "refund": 0 if item.penalty else 1,
                "now": self.now,
            }
            for item in items
        ]
        runs = self.dialect.many(self.conn, self.dialect.queries["release"], params, ("limited",))
        results = [bool(rows) for _, rows in runs]
        for item, (_, rows) in zip(items, runs, strict=True):
            if rows:
                r = item.receipt
                if rows[0][0]:
                    self.freeing.append((r.queue, r.id, r.token))
                event, detail = release_event(item.delay, item.penalty, error_summary(item.error))
                self.history.add(r.queue, r.id, event, fence(r.token), detail)
                self.depth.add(r.queue, waiting=1)
                self.woken.add(r.queue)
        suspending = [
            item for item, (_, rows) in zip(items, runs, strict=True) if rows and item.wait
        ]
        if suspending:  # durable runs at a sleep or a wait (`sql/durable.py`)
            self.woken |= durable.suspended(self.conn, self.dialect, suspending, self.now)
        return results

    def dead(self, items: list[Settle]) -> list[bool]:
        params = []
        for item in items:
            r, err = item.receipt, item.error
            params.append(
                {
                    "queue": r.queue,
                    "id": r.id,
                    "token": r.token,
                    "now": self.now,
                    "reason": item.reason,
                    "error_type": err.type if err else None,
                    "error_message": err.message if err else None,
                    "error_traceback": err.traceback if err else None,
                }
            )
        q = self.dialect.queries
        runs = self.dialect.many(self.conn, q["dead"], params, ("id", "unique_key", "limited"))
        results = []
        for item, (_, rows) in zip(items, runs, strict=True):
            results.append(bool(rows))
            if rows:
                r = item.receipt
                drop_unique_locks(self.conn, self.dialect, [(i, key) for i, key, _ in rows])
                if rows[0][2]:
                    self.freeing.append((r.queue, r.id, r.token))
                self.history.add(
                    r.queue, r.id, "dead", fence(r.token), death_detail(item.reason, item.error)
                )
                self.died[r.queue] += 1
                self.depth.add(r.queue, dead=1)
                self.results |= kept_results.failed(
                    self.conn, self.dialect, r.queue, [r.id], self.now
                )
                if item.effects is not None:
                    self.effects.append(item.effects)
        return results

    def finish(self) -> None:
        conn, dialect = self.conn, self.dialect
        self.history.write(conn, dialect)
        self.depth.write(conn, dialect)
        for queue in sorted(self.acked.keys() | self.died.keys()):
            count_settled(conn, dialect, queue, acked=self.acked[queue], dead=self.died[queue])
        if self.freeing:  # after the verdicts: see `limits` for the order of the locks
            with dialect.atomic(conn):
                self.woken |= limits.free(conn, dialect, self.freeing, self.now)
        # The follow-ups of the steps settled (`sql/flows.py`). Last, so that the flows'
        # locks are held for as little as the commit: a group's member settles take
        # turns on them.
        flows.apply_many(conn, dialect, self.effects, self.now, self.aging, self.applied)
        if self.woken:
            dialect.changed(conn, sorted(self.woken))
        if self.results or self.applied.flows:
            dialect.results_changed(conn)


def extend(
    dialect: Dialect, receipts: Sequence[Receipt], vt: float, clock: Callable[[], float]
) -> list[bool]:
    with dialect.write() as conn:
        now = clock()
        params = [
            {"queue": r.queue, "id": r.id, "token": r.token, "visibility_timeout": vt, "now": now}
            for r in receipts
        ]
        return [count == 1 for count, _ in dialect.many(conn, dialect.queries["extend"], params)]


def keep(dialect: Dialect, items: Sequence[Keep], clock: Callable[[], float]) -> list[LeaseStatus]:
    """Extend each lease and store its progress where the token is still the message's
    lease (a fenced-out run's progress is refused with it), in one transaction; of the
    leases refused, those whose message was cancelled while they ran are told so."""
    if not items:
        return []
    q = dialect.queries
    with dialect.write() as conn:
        now = clock()
        params = [
            {
                "queue": item.receipt.queue,
                "id": item.receipt.id,
                "token": item.receipt.token,
                "visibility_timeout": item.visibility_timeout,
                "progress": _progress_json(item.progress),
                "now": now,
            }
            for item in items
        ]
        runs = dialect.many(conn, q["keep"], params)
        out: list[LeaseStatus] = ["held" if count == 1 else "lost" for count, _ in runs]
        refused = [n for n, status in enumerate(out) if status == "lost"]
        if refused:
            told = dialect.many(
                conn, q["lease_cancelled"], [params[n] for n in refused], ("cancelled",)
            )
            for n, (_, rows) in zip(refused, told, strict=True):
                if rows:
                    out[n] = "cancelled"
    return out


def _progress_json(progress: Progress | None) -> str | None:
    """A progress as the row keeps it, `[fraction, text]` (operating.inspect reads it)."""
    return None if progress is None else orjson.dumps(list(progress)).decode()


def fence(token: str) -> int:
    """The fencing number a lease token ends with (`<nonce>.<fence>`, see `lease`)."""
    tail = token.rpartition(".")[2]
    return int(tail) if tail.isdigit() else 0
