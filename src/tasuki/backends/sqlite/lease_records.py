"""Lease and id records on SQLite (`tasuki.core.locks.LeaseRecords`): a table of their
own in the lock store's database (`tasuki_sqs_records`, its named queries in
`lease_records.sql`), one transaction per batch.

The records have a connection of their own, in WAL with synchronous=NORMAL: a power cut
may lose the last records, which makes the current holder's settle refused (the
message runs again: never lost) or lets an id be enqueued again (a duplicate, as
without records).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from tasuki.backends.sqlfiles import load_queries
from tasuki.core.locks import (
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
    grant,
)
from tasuki.core.records import Receipt

QUERY_NAMES = (
    "create_table",
    "columns",
    "add_copy",
    "add_receives",
    "sweep",
    "read_lease",
    "write_lease",
    "settle_acked",
    "settle_released",
    "renew_lease",
    "forget",
    "claim_id",
    "keep_id",
    "drop_id",
)
SQL = load_queries("tasuki.backends.sqlite", "lease_records.sql", QUERY_NAMES)
# Expired records are swept every this many writes.
SWEEP_EVERY = 2000

# Named parameters of one run of a query.
Params = Mapping[str, object]


class SQLiteLeaseRecords(LeaseRecords):
    def __init__(self, path: str, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(namespace, lifetimes)
        self._db = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SQL["create_table"])
        columns = {row["name"] for row in self._db.execute(SQL["columns"])}
        for column in ("copy", "receives"):
            if column not in columns:  # a table made before the column
                self._db.execute(SQL[f"add_{column}"])
        self._mutex = threading.Lock()
        self._writes = 0

    def _write(self, query: str, rows: Sequence[Params]) -> list[bool]:
        """Run the named query once per row in one transaction; True where it changed a
        row."""
        if not rows:
            return []
        with self._transaction(len(rows)) as db:
            return [db.execute(SQL[query], row).rowcount > 0 for row in rows]

    @contextmanager
    def _transaction(self, rows: int) -> Iterator[sqlite3.Connection]:
        """One write transaction of `rows` rows; every SWEEP_EVERY rows, expired ones go."""
        with self._mutex:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                self._writes += rows
                if self._writes >= SWEEP_EVERY:
                    self._writes = 0
                    db.execute(SQL["sweep"], {"now": time.time()})
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def take(self, takes: Sequence[LeaseTake]) -> list[Granted | None]:
        if not takes:
            return []
        now = time.time()
        granted: list[Granted | None] = []
        with self._transaction(len(takes)) as db:
            for take in takes:
                key = self.lease_key(take.queue, take.id)
                row = db.execute(SQL["read_lease"], {"key": key}).fetchone()
                if row is not None and row["expires"] <= now:
                    row = None  # expired: no record
                # A live lease holds it, or (no owner) this very copy was acked: either
                # way a duplicate delivery, not to run.
                if (
                    row is not None
                    and row["lease_until"] > now
                    and row["owner"] != take.token
                    and (row["owner"] or row["copy"] == take.copy)
                ):
                    granted.append(None)
                    continue
                last = (
                    None
                    if row is None
                    else (row["fence"], row["owner"], row["copy"], row["receives"])
                )
                fence, receives = grant(take, last)
                db.execute(
                    SQL["write_lease"],
                    {
                        "key": key,
                        "owner": take.token,
                        "expires": now + self.lifetimes.lease,
                        "fence": fence,
                        "lease_until": now + take.visibility,
                        "copy": take.copy,
                        "receives": receives,
                    },
                )
                lapsed = row is not None and row["owner"] != ""
                granted.append(Granted(fence, receives, lapsed))
        return granted

    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        if not ends:
            return []
        now = time.time()
        until = now + self.lifetimes.acked
        expires = now + self.lifetimes.lease
        with self._transaction(len(ends)) as db:
            out = []
            for receipt, acked in ends:
                key = self.lease_key(receipt.queue, receipt.id)
                params = {"key": key, "owner": receipt.token, "now": now}
                if acked:
                    cursor = db.execute(SQL["settle_acked"], {**params, "until": until})
                else:
                    cursor = db.execute(SQL["settle_released"], {**params, "expires": expires})
                out.append(cursor.rowcount > 0)
            return out

    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        now = time.time()
        expires, until = now + self.lifetimes.lease, now + visibility
        return self._write(
            "renew_lease",
            [
                {
                    "expires": expires,
                    "until": until,
                    "key": self.lease_key(q, i),
                    "owner": t,
                    "now": now,
                }
                for q, i, t in leases
            ],
        )

    def forget(self, messages: Sequence[tuple[str, str]]) -> None:
        self._write("forget", [{"key": self.lease_key(q, i)} for q, i in messages])

    def claim_ids(self, claims: Sequence[IdClaim]) -> list[bool]:
        now = time.time()
        expires = now + self.lifetimes.id
        return self._write(
            "claim_id",
            [
                {"key": self.id_key(q, i), "owner": owner, "expires": expires, "now": now}
                for q, i, owner in claims
            ],
        )

    def finish_ids(self, done: Sequence[IdFinish]) -> None:
        now = time.time()
        keep = [
            {"expires": now + d.keep, "key": self.id_key(d.queue, d.id), "owner": d.owner}
            for d in done
            if d.keep > 0
        ]
        drop = [{"key": self.id_key(d.queue, d.id), "owner": d.owner} for d in done if d.keep <= 0]
        self._write("keep_id", keep)
        self._write("drop_id", drop)

    def close(self) -> None:
        with self._mutex:
            self._db.close()
