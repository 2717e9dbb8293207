"""What the SQL backends share: the lifecycle in Python, once, over a small dialect.

SQLite and PostgreSQL store messages the same way (one row per message in every state,
`visible_at` meaning "ready at" while waiting and "lease expires at" while in flight, a
finished-ids table for the id window, a locks table), so everything above the SQL —
transactions around each operation, the lease loop that buries exhausted messages and
leases the rest, stats, dead letters, redrive, purge, the lock store — lives here. A
backend brings a `Dialect`: how to open connections and begin a write transaction, how
to pass a list of values to a query, how a waiting leaser is woken, and its `.sql` file
defining every name of `QueryName` (checked when the backend's module is imported).

Times passed to the queries (`:now`) come from `clock`, one instant per transaction.

Over 400 lines on purpose: it is the whole lifecycle of two backends plus their lock
store, one operation per method; splitting it would scatter what each dialect relies on.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from operator import itemgetter
from typing import Any, Literal, Protocol, get_args

import orjson

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    HistoryEntry,
    LockHolder,
    LockStore,
    MessageInfo,
    QueueStats,
    Receipt,
    Release,
    Reliability,
    SettledTotals,
)
from tasuki.backends.sqlfiles import check_names, load_queries
from tasuki.backends.waiting import lease_until
from tasuki.core import reliability
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.records import (
    HISTORY_LIMIT,
    HistoryEvent,
    MessageState,
    death_detail,
    release_event,
    waiting_state,
)

QueryName = Literal[
    "known_id",
    "insert_message",
    "replace_waiting_payload",
    "lease",
    "next_visible_at",
    "ack",
    "remember_finished",
    "extend",
    "release",
    "bury",
    "stats",
    "queues",
    "dead_letters",
    "dead_letter",
    "redrive_all",
    "redrive_ids",
    "purge_dead",
    "purge_waiting_locks",
    "purge",
    "forget_expired",
    "lock_acquire",
    "lock_renew",
    "lock_release",
    "lock_swap",
    "lock_holder",
    "lock_drop_owned",
    "locks_forget_expired",
    "record_history",
    "record_lost_leases",
    "prune_history",
    "forget_history",
    "inspect_message",
    "inspect_finished",
    "inspect_history",
    "count_settled",
    "settled_totals",
    "count_meters",
    "meters",
    "in_flight",
]
# Every SQL backend's query file defines exactly these names...
REQUIRED: frozenset[QueryName] = frozenset(get_args(QueryName))
# ... and may define these, where the engine can do in one statement what the shared
# layer otherwise does in several (`insert_batch`: a plain batch from parallel arrays),
# or for what only that engine offers (`ack_archive`, `prune_archive`: PostgreSQL's
# opt-in archive of acked messages).
OptionalQueryName = Literal["insert_batch", "insert_batch_new", "ack_archive", "prune_archive"]
OPTIONAL: frozenset[OptionalQueryName] = frozenset(get_args(OptionalQueryName))

Queries = Mapping[QueryName | OptionalQueryName, str]
CLEANUP_EVERY = 30.0
COUNT_SHARDS = 16
_SEQ = itemgetter(1)  # a `lease` row's seq


def load_dialect_queries(package: str, filename: str = "queries.sql") -> Queries:
    """A backend's named queries, checked against `REQUIRED` and `OPTIONAL` (raises at
    import on a typo)."""
    queries = load_queries(package, filename)
    check_names(queries, REQUIRED | (OPTIONAL & queries.keys()), f"{package}/{filename}")
    return queries  # type: ignore[return-value]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The little of a DB-API connection the shared layer uses (sqlite3 and psycopg agree)."""

    def execute(self, sql: Any, params: Any = ..., /) -> Cursor: ...


class Dialect(Protocol):
    """What differs between SQL engines, below the shared lifecycle."""

    queries: Queries
    # What `SQLBackend` reports as its capabilities.
    capabilities: Capabilities
    # The `lease` statement itself records the leases it finds lost (PostgreSQL, in its
    # CTE); else `record_lost_leases` runs just before it, in the same transaction.
    lease_records_lost: bool
    # The `ack` statement adds what it deleted to the acked totals itself (PostgreSQL, in
    # its CTE, with the `shard` parameter); else `count_settled` runs after it.
    ack_counts: bool

    def read(self) -> AbstractContextManager[Connection]:
        """A connection for a read outside any transaction of ours."""

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction, committed when the block ends, rolled back on error."""

    def statements(self) -> AbstractContextManager[Connection]:
        """A connection for writes whose every statement is atomic on its own: no
        transaction around them where the engine can spare its round trips (PostgreSQL's
        autocommit), else `write()`."""

    def joined(self, connection: object) -> tuple[Connection, Queries]:
        """The caller's connection, checked, and the queries to run on it."""

    def many(
        self, conn: Connection, sql: str, params: list[dict[str, Any]]
    ) -> list[tuple[int, list[Any]]]:
        """Run `sql` once per parameter set, in order, in the open transaction: each
        run's row count and rows (pipelined into one round trip where the engine can)."""

    def values(self, items: list[Any]) -> object:
        """A list of values as the `.sql` files take it (`:seqs`, `:ids`)."""

    def changed(self, conn: Connection, queues: Sequence[str]) -> None:
        """Inside a write: messages of `queues` may have become ready (wake waiters)."""

    def committed(self) -> None:
        """After a write that called `changed` committed (in-process wake-ups)."""

    def wait_hint(self) -> object:
        """Read before a lease attempt; handed to `wait` so a change in between counts."""

    def wait(self, queue: str, timeout: float, hint: object) -> None:
        """Block up to `timeout` s, returning early when `queue` may have changed."""

    def ping(self) -> None: ...

    def close(self) -> None: ...


class SQLBackend(Backend):
    """The message lifecycle over a `Dialect`. See the module docstring."""

    def __init__(self, url: str, dialect: Dialect, clock: Callable[[], float] = time.time):
        self.url = url
        self.dialect = dialect
        self.capabilities = dialect.capabilities
        self.q = dialect.queries
        self.clock = clock
        self._next_cleanup = 0.0
        self._locks = SQLLockStore(self)

    def _maybe_cleanup(self, conn: Connection, q: Queries, now: float) -> None:
        if now >= self._next_cleanup:
            self._next_cleanup = now + CLEANUP_EVERY
            conn.execute(q["forget_expired"], {"now": now})
            conn.execute(q["locks_forget_expired"], {"now": now})
            conn.execute(q["forget_history"], {"now": now})

    def _count(self, conn: Connection, queue: str, acked: int = 0, dead: int = 0) -> None:
        if acked or dead:
            shard = random.randrange(COUNT_SHARDS)
            params = {"queue": queue, "shard": shard, "acked": acked, "dead": dead}
            conn.execute(self.q["count_settled"], params)

    def _remember(
        self,
        conn: Connection,
        receipt: Receipt,
        now: float,
        event: HistoryEvent,
        detail: str = "",
        q: Queries | None = None,
    ) -> None:
        """Write how a lease ended into the message's bounded history."""
        q = self.q if q is None else q
        params = {"queue": receipt.queue, "id": receipt.id, "now": now}
        conn.execute(
            q["record_history"],
            {**params, "event": event, "fence": _fence(receipt.token), "detail": detail},
        )
        conn.execute(q["prune_history"], {**params, "keep": HISTORY_LIMIT})

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        if connection is not None:
            # The caller's transaction: written now, visible (and announced) on its commit.
            conn, queries = self.dialect.joined(connection)
            return self.enqueue_in(conn, envelopes, queries)
        with self.dialect.write() as conn:
            results = self.enqueue_in(conn, envelopes)
        self.dialect.committed()
        return results

    def enqueue_in(
        self, conn: Connection, envelopes: Sequence[Envelope], queries: Queries | None = None
    ) -> list[Enqueued]:
        """Enqueue inside a transaction that is already open on `conn`."""
        q = self.q if queries is None else queries
        now = self.clock()
        if len(envelopes) > 1 and self._plain(envelopes):
            results = self._enqueue_plain(conn, q, envelopes, now)
        else:
            results = [self._enqueue_one(conn, q, env, now) for env in envelopes]
        queues = {
            env.queue
            for env, result in zip(envelopes, results, strict=True)
            if result.status != "duplicate"
        }
        if queues:
            self.dialect.changed(conn, sorted(queues))
        self._maybe_cleanup(conn, q, now)
        return results

    @staticmethod
    def _plain(envelopes: Sequence[Envelope]) -> bool:
        """No unique claims and no id twice: each message's fate is its own."""
        if any(env.unique is not None for env in envelopes):
            return False
        return len({(env.queue, env.id) for env in envelopes}) == len(envelopes)

    def _enqueue_plain(
        self, conn: Connection, q: Queries, envelopes: Sequence[Envelope], now: float
    ) -> list[Enqueued]:
        """A batch in one `insert_batch` statement where the dialect has one, else in two
        steps' worth of round trips: which ids are known, then the inserts of the others
        (`Dialect.many` pipelines them where the engine can)."""
        if "insert_batch" in q:
            return self._insert_batch(conn, q["insert_batch"], envelopes, now)
        many = self.dialect.many
        known = many(
            conn, q["known_id"], [{"queue": e.queue, "id": e.id, "now": now} for e in envelopes]
        )
        fresh = [env for env, (_, rows) in zip(envelopes, known, strict=True) if not rows]
        inserted = many(conn, q["insert_message"], [_insert_params(env, now) for env in fresh])
        stored = {env.id for env, (count, _) in zip(fresh, inserted, strict=True) if count}
        return [
            Enqueued(env.id, "enqueued" if env.id in stored else "duplicate") for env in envelopes
        ]

    def _insert_batch(
        self, conn: Connection, sql: str, envelopes: Sequence[Envelope], now: float
    ) -> list[Enqueued]:
        stored = {
            (queue, msg_id)
            for queue, msg_id in conn.execute(sql, self._batch_params(envelopes, now)).fetchall()
        }
        return [
            Enqueued(e.id, "enqueued" if (e.queue, e.id) in stored else "duplicate")
            for e in envelopes
        ]

    def _batch_params(self, envelopes: Sequence[Envelope], now: float) -> dict[str, Any]:
        """`insert_batch`'s parameters: parallel arrays, one element per envelope, except
        that a column with one value for the whole batch is sent as that one value."""
        values = self.dialect.values
        return {
            "now": now,
            "queues": values(_shared([e.queue for e in envelopes])),
            "ids": values([e.id for e in envelopes]),
            "bodies": values([e.body for e in envelopes]),
            "headers": values(_shared_headers(envelopes)),
            "delays": values(_shared([e.delay for e in envelopes])),
            "max_attempts": values(_shared([e.max_attempts for e in envelopes])),
            "visibility_timeouts": values(_shared([e.visibility_timeout for e in envelopes])),
            "keep_ids": values(_shared([e.keep_id for e in envelopes])),
        }

    def _enqueue_one(self, conn: Connection, q: Queries, env: Envelope, now: float) -> Enqueued:
        if conn.execute(q["known_id"], {"queue": env.queue, "id": env.id, "now": now}).fetchone():
            return Enqueued(env.id, "duplicate")
        headers = orjson.dumps(dict(env.headers)).decode()
        unique_key = None
        if env.unique is not None:
            unique_key = env.unique.key
            holder = self._unique_holder(conn, q, env, now)
            if holder is not None:
                if env.unique.replace:
                    replaced = conn.execute(
                        q["replace_waiting_payload"],
                        {"queue": env.queue, "id": holder, "body": env.body, "headers": headers},
                    ).rowcount
                    if replaced:
                        return Enqueued(holder, "replaced")
                return Enqueued(holder, "conflict")
        inserted = conn.execute(
            q["insert_message"], _insert_params(env, now, headers, unique_key)
        ).rowcount
        # 0 only where the engine lets a concurrent enqueue of the same id win the race
        # (PostgreSQL: ON CONFLICT DO NOTHING); SQLite's writes are serialized.
        return Enqueued(env.id, "enqueued" if inserted else "duplicate")

    def _unique_holder(self, conn: Connection, q: Queries, env: Envelope, now: float) -> str | None:
        """Take the unique claim for `env`, or return the id of the live holder."""
        assert env.unique is not None
        key = env.unique.key
        row = conn.execute(q["lock_holder"], {"key": key, "now": now}).fetchone()
        if row is not None and row[0] != env.id:
            return str(row[0])
        taken = conn.execute(
            q["lock_acquire"],
            {"key": key, "owner": env.id, "ttl": env.unique.ttl, "now": now},
        ).rowcount
        if taken:
            return None
        # A concurrent enqueue took the claim between the two statements.
        row = conn.execute(q["lock_holder"], {"key": key, "now": now}).fetchone()
        return None if row is None or row[0] == env.id else str(row[0])

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        if max_messages <= 0:
            return []
        if wait <= 0:
            return self._lease_now(queue, max_messages, visibility_timeout)

        def try_lease() -> tuple[list[Delivery], object]:
            hint = self.dialect.wait_hint()
            return self._lease_now(queue, max_messages, visibility_timeout), hint

        def wait_for_change(remaining: float, hint: object) -> None:
            with self.dialect.read() as conn:
                row = conn.execute(self.q["next_visible_at"], {"queue": queue}).fetchone()
            due_in = (row[0] - self.clock()) if row and row[0] is not None else float("inf")
            self.dialect.wait(queue, min(remaining, max(0.0, due_in)), hint)

        return lease_until(wait, try_lease, wait_for_change)

    def _lease_now(self, queue: str, max_messages: int, vt: float) -> list[Delivery]:
        """One `lease` statement leases the due rows and buries the exhausted ones; it runs
        again only to fill the places the buried ones took."""
        leased: list[Delivery] = []
        with self.dialect.statements() as conn:
            now = self.clock()
            while len(leased) < max_messages:
                params = {
                    "queue": queue,
                    "now": now,
                    "limit": max_messages - len(leased),
                    "nonce": os.urandom(6).hex(),
                    "visibility_timeout": vt,
                }
                if self.dialect.lease_records_lost:
                    rows = conn.execute(self.q["lease"], params).fetchall()
                    lost = {row[2]: row[12] for row in rows if row[12] is not None}
                else:
                    lost = dict(conn.execute(self.q["record_lost_leases"], params).fetchall())
                    rows = conn.execute(self.q["lease"], params).fetchall()
                if not rows:
                    break
                rows.sort(key=_SEQ)  # oldest first, whatever order the engine returned
                dead = [(row[2], row[11]) for row in rows if row[0]]
                if dead:
                    self._drop_unique_locks(conn, dead)
                    self._count(conn, queue, dead=len(dead))
                redelivered = sum(1 for row in rows if not row[0] and row[5] > 1)
                if lost or redelivered:
                    self._count_lease_meters(conn, queue, rows, lost, redelivered, now)
                leased.extend(
                    Delivery(
                        queue,
                        row[2],
                        bytes(row[3]),
                        orjson.loads(row[4]),
                        row[5],
                        row[6],
                        float(row[7]),
                        row[8],
                        row[9],
                        float(row[10]),
                    )
                    for row in rows
                    if not row[0]
                )
                if not dead:
                    break
        return leased

    def _count_lease_meters(
        self,
        conn: Connection,
        queue: str,
        rows: list[Any],
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
            for row in rows:
                expired_at = lost.get(row[2])
                if expired_at is not None and not row[0]:
                    reliability.observe(meters, reliability.RECOVERY, now - float(expired_at))
        self._add_meters(conn, queue, meters)

    def _add_meters(self, conn: Connection, queue: str, meters: Mapping[str, int]) -> None:
        values = self.dialect.values
        params = {
            "queue": queue,
            "shard": random.randrange(COUNT_SHARDS),
            "names": values(list(meters)),
            "values": values(list(meters.values())),
        }
        conn.execute(self.q["count_meters"], params)

    def _settle(self, query: str, params: list[dict[str, Any]]) -> list[bool]:
        with self.dialect.write() as conn:
            now = self.clock()
            for p in params:
                p["now"] = now
            return [count == 1 for count, _ in self.dialect.many(conn, query, params)]

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        """The whole batch in one `ack` statement; ids with a window are remembered by it,
        or after it where it returns their keep_id."""
        if not receipts:
            return []
        values = self.dialect.values
        with self.dialect.statements() as conn:
            now = self.clock()
            params = {
                "queues": values([r.queue for r in receipts]),
                "ids": values([r.id for r in receipts]),
                "tokens": values([r.token for r in receipts]),
                # The same as one list of triples, for engines without parallel arrays.
                "receipts": values([list(r) for r in receipts]),
                "now": now,
                "shard": random.randrange(COUNT_SHARDS),
            }
            rows = conn.execute(self.q["ack"], params).fetchall()
            remember = [
                {"queue": queue, "id": msg_id, "now": now, "keep_id": keep_id}
                for queue, msg_id, _, keep_id, remembered in rows
                if keep_id > 0 and not remembered
            ]
            if remember:
                self.dialect.many(conn, self.q["remember_finished"], remember)
            for queue, msg_id, token, keep_id, _ in rows:  # a caller-given id's history
                if keep_id > 0:  # outlives the message, for `inspect`
                    self._remember(conn, Receipt(queue, msg_id, token), now, "acked")
            if not self.dialect.ack_counts:
                acked: dict[str, int] = {}
                for queue, *_ in rows:
                    acked[queue] = acked.get(queue, 0) + 1
                for name, count in acked.items():
                    self._count(conn, name, acked=count)
        deleted = {(queue, msg_id, token) for queue, msg_id, token, *_ in rows}
        results = []
        for r in receipts:
            key = (r.queue, r.id, r.token)
            results.append(key in deleted)
            deleted.discard(key)  # the same receipt twice: only the first settles
        return results

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return self._settle(
            self.q["extend"],
            [
                {
                    "queue": r.queue,
                    "id": r.id,
                    "token": r.token,
                    "visibility_timeout": visibility_timeout,
                }
                for r in receipts
            ],
        )

    def release(self, releases: Sequence[Release]) -> list[bool]:
        with self.dialect.write() as conn:
            now = self.clock()
            params = [
                {
                    "queue": item.receipt.queue,
                    "id": item.receipt.id,
                    "token": item.receipt.token,
                    "delay": item.delay,
                    "refund": 0 if item.penalty else 1,
                    "now": now,
                }
                for item in releases
            ]
            results = [
                count == 1 for count, _ in self.dialect.many(conn, self.q["release"], params)
            ]
            for item, released in zip(releases, results, strict=True):
                if released:
                    event, detail = release_event(item.delay, item.penalty, item.error)
                    self._remember(conn, item.receipt, now, event, detail)
            queues = {item.receipt.queue for item, ok in zip(releases, results, strict=True) if ok}
            if queues:
                self.dialect.changed(conn, sorted(queues))
        self.dialect.committed()
        return results

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        results = []
        dead: dict[str, int] = {}
        with self.dialect.write() as conn:
            now = self.clock()
            for item in burials:
                r, err = item.receipt, item.error
                rows = conn.execute(
                    self.q["bury"],
                    {
                        "queue": r.queue,
                        "id": r.id,
                        "token": r.token,
                        "now": now,
                        "reason": item.reason,
                        "error_type": err.type if err else None,
                        "error_message": err.message if err else None,
                        "error_traceback": err.traceback if err else None,
                    },
                ).fetchall()
                self._drop_unique_locks(conn, rows)
                if rows:
                    self._remember(conn, r, now, "dead", death_detail(item.reason, err))
                    dead[r.queue] = dead.get(r.queue, 0) + 1
                results.append(bool(rows))
            for name, count in dead.items():
                self._count(conn, name, dead=count)
        return results

    def _drop_unique_locks(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> None:
        """A dead message gives up its uniqueness lock, so the job can be enqueued again."""
        for msg_id, unique_key in rows:
            if unique_key is not None:
                conn.execute(self.q["lock_drop_owned"], {"key": unique_key, "owner": msg_id})

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        now = self.clock()
        with self.dialect.read() as conn:
            row = conn.execute(self.q["stats"], {"queue": queue, "now": now}).fetchone()
        ready, in_flight, delayed, dead, oldest = row
        age = max(0.0, now - oldest) if oldest is not None else 0.0
        return QueueStats(ready, in_flight, delayed, dead, age)

    def queues(self) -> list[str]:
        with self.dialect.read() as conn:
            return [row[0] for row in conn.execute(self.q["queues"]).fetchall()]

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        params = {"queue": queue, "limit": limit, "offset": offset}
        with self.dialect.read() as conn:
            rows = conn.execute(self.q["dead_letters"], params).fetchall()
        return [_dead_letter(queue, row) for row in rows]

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        with self.dialect.read() as conn:
            row = conn.execute(self.q["dead_letter"], {"queue": queue, "id": id}).fetchone()
        return None if row is None else _dead_letter(queue, row)

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        params = {"queue": queue, "now": self.clock(), "limit": limit}
        with self.dialect.read() as conn:
            rows = conn.execute(self.q["in_flight"], params).fetchall()
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
            )
            for msg_id, attempt, max_attempts, fence, enqueued, expires in rows
        ]

    def settled_totals(self, queue: str) -> SettledTotals:
        with self.dialect.read() as conn:
            row = conn.execute(self.q["settled_totals"], {"queue": queue}).fetchone()
        return SettledTotals(int(row[0]), int(row[1]))

    def reliability(self, queue: str) -> Reliability:
        with self.dialect.read() as conn:
            rows = conn.execute(self.q["meters"], {"queue": queue}).fetchall()
        return Reliability.from_meters({name: int(value) for name, value in rows})

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        meters = {k: v for k, v in increments.items() if v}
        if meters:
            with self.dialect.statements() as conn:
                self._add_meters(conn, queue, meters)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        q, now = self.q, self.clock()
        params = {"queue": queue, "id": id, "now": now}
        with self.dialect.read() as conn:
            # The message first: an ack between the two reads leaves it finished, not unknown.
            row = conn.execute(q["inspect_message"], params).fetchone()
            finished = None if row else conn.execute(q["inspect_finished"], params).fetchone()
            rows = conn.execute(q["inspect_history"], {**params, "limit": HISTORY_LIMIT})
            history = tuple(
                HistoryEntry(float(at), event, int(fence), detail)
                for at, event, fence, detail in reversed(rows.fetchall())
            )
        if row is None:
            if finished is None:
                return MessageInfo(queue, id, "unknown")
            return MessageInfo(
                queue, id, "finished", finished_until=float(finished[0]), history=history
            )
        (state_code, visible, attempt, max_attempts, fence, enqueued, reason, etype) = row[:8]
        emessage, etb, died_at = row[8:]
        state: MessageState
        visible_at = lease_expires_at = None
        if state_code == 2:
            state = "dead"
        elif state_code == 1 and visible > now:
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
            reason=reason or "",
            error=ErrorInfo(etype, emessage or "", etb or "") if etype else None,
            died_at=float(died_at) if state == "dead" and died_at is not None else None,
            history=history,
        )

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        with self.dialect.write() as conn:
            now = self.clock()
            if ids is None:
                count = conn.execute(self.q["redrive_all"], {"queue": queue, "now": now}).rowcount
            else:
                params = {"queue": queue, "now": now, "ids": self.dialect.values(list(ids))}
                count = conn.execute(self.q["redrive_ids"], params).rowcount
            if count:
                self.dialect.changed(conn, [queue])
        self.dialect.committed()
        return count

    def purge_dead(self, queue: str) -> int:
        with self.dialect.write() as conn:
            return conn.execute(self.q["purge_dead"], {"queue": queue}).rowcount

    def purge(self, queue: str) -> int:
        with self.dialect.write() as conn:
            conn.execute(self.q["purge_waiting_locks"], {"queue": queue})
            return conn.execute(self.q["purge"], {"queue": queue}).rowcount

    @property
    def locks(self) -> SQLLockStore:
        return self._locks

    def ping(self) -> None:
        self.dialect.ping()

    def close(self) -> None:
        self.dialect.close()


class SQLLockStore(LockStore):
    """Locks in the same database as the messages, so enqueue can take one in its transaction."""

    def __init__(self, backend: SQLBackend) -> None:
        self._backend = backend
        self.clock: Callable[[], float] = time.time  # tests drive time by hand

    def _one(self, query: QueryName, params: dict[str, Any]) -> int:
        with self._backend.dialect.write() as conn:
            params["now"] = self.clock()
            return int(conn.execute(self._backend.q[query], params).rowcount)

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return self._one("lock_acquire", {"key": key, "owner": owner, "ttl": ttl}) == 1

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        query = self._backend.q["lock_renew"]
        with self._backend.dialect.write() as conn:
            now = self.clock()
            params = [{"key": k, "owner": owner, "ttl": ttl, "now": now} for k in keys]
            return [count == 1 for count, _ in self._backend.dialect.many(conn, query, params)]

    def release(self, key: str, owner: str) -> bool:
        return self._one("lock_release", {"key": key, "owner": owner}) == 1

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        params = {"key": key, "owner": owner, "new_owner": new_owner, "ttl": ttl}
        return self._one("lock_swap", params) == 1

    def holder(self, key: str) -> LockHolder | None:
        now = self.clock()
        with self._backend.dialect.read() as conn:
            row = conn.execute(self._backend.q["lock_holder"], {"key": key, "now": now}).fetchone()
        return None if row is None else LockHolder(row[0], row[1] - now)


_EMPTY_HEADERS_JSON = "{}"


def _shared(column: list[Any]) -> list[Any]:
    """`[value]` when every element is that value (`insert_batch` reads a one-element
    array as the value of every row), else the column as it is."""
    first = column[0]
    if column.count(first) == len(column):
        return [first]
    return column


def _shared_headers(envelopes: Sequence[Envelope]) -> list[str]:
    """`_shared` for the headers, encoded once when every envelope has the same dict (a
    batch of one job's calls does: it is often the very same object)."""
    first = envelopes[0].headers
    if all(e.headers is first or e.headers == first for e in envelopes):
        return [_headers_json(first)]
    return [_headers_json(e.headers) for e in envelopes]


def _headers_json(headers: Mapping[str, str]) -> str:
    return orjson.dumps(dict(headers)).decode() if headers else _EMPTY_HEADERS_JSON


def _insert_params(
    env: Envelope, now: float, headers: str | None = None, unique_key: str | None = None
) -> dict[str, Any]:
    return {
        "queue": env.queue,
        "id": env.id,
        "body": env.body,
        "headers": _headers_json(env.headers) if headers is None else headers,
        "now": now,
        "delay": env.delay,
        "max_attempts": env.max_attempts,
        "visibility_timeout": env.visibility_timeout,
        "keep_id": env.keep_id,
        "unique_key": unique_key,
    }


def _fence(token: str) -> int:
    """The fencing number a lease token ends with (`<nonce>.<fence>`, see `lease_rows`)."""
    tail = token.rpartition(".")[2]
    return int(tail) if tail.isdigit() else 0


def _dead_letter(queue: str, row: Sequence[Any]) -> DeadLetter:
    (msg_id, body, headers, attempt, reason, etype, emessage, etb, died_at, enqueued_at) = row
    error = ErrorInfo(etype, emessage or "", etb or "") if etype else None
    return DeadLetter(
        id=msg_id,
        queue=queue,
        body=bytes(body),
        headers=orjson.loads(headers),
        attempt=attempt,
        reason=reason or "",
        error=error,
        died_at=died_at,
        enqueued_at=enqueued_at,
    )


__all__ = [
    "REQUIRED",
    "Connection",
    "Dialect",
    "QueryName",
    "SQLBackend",
    "SQLLockStore",
]
