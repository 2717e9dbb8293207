"""The console's listings of SQS on a SQLite lock store (`Listing`, listing.py): a table
beside the lease records in the lock database (`sqlite_listing.sql`), indexed per queue
and state by time (and by job and time), each write one transaction of the lease
records' connection, each page one range of an index."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from tasuki.backends.sqlfiles import load_queries
from tasuki.backends.sqs.records.listing import (
    FLIGHT_SLACK,
    ListedAt,
    ListedState,
    ListEntry,
    Listing,
)
from tasuki.backends.sqs.records.sqlite import SQLiteLeaseRecords

QUERY_NAMES = (
    "create_listed",
    "create_listed_at",
    "create_listed_job",
    "put",
    "drop",
    "renew",
    "clear",
    "sweep_listed",
    "page_oldest",
    "page_newest",
    "page_job_oldest",
    "page_job_newest",
    "find",
)
SQL = load_queries("tasuki.backends.sqs.records", "sqlite_listing.sql", QUERY_NAMES)
# Expired entries are swept every this many writes.
SWEEP_EVERY = 2000


class SQLiteListing(Listing):
    def __init__(self, records: SQLiteLeaseRecords) -> None:
        super().__init__(records.namespace, records.lifetimes.id)
        self.records = records
        db = records._db
        for name in ("create_listed", "create_listed_at", "create_listed_job"):
            db.execute(SQL[name])
        self._writes = 0

    def _run(self, query: str, rows: list[dict[str, object]]) -> None:
        if not rows:
            return
        with self.records._transaction(0) as db:
            db.executemany(SQL[query], rows)
            self._writes += len(rows)
            if self._writes >= SWEEP_EVERY:
                self._writes = 0
                db.execute(SQL["sweep_listed"], {"now": time.time()})

    def put(self, state: ListedState, entries: Sequence[ListEntry]) -> None:
        ns = self.namespace
        self._run(
            "put",
            [
                {
                    "queue": ns + e.queue,
                    "state": state,
                    "id": e.id,
                    "at": e.at,
                    "job": e.job,
                    "token": e.token,
                    "body": e.body,
                    "headers": e.headers,
                    "info": e.info,
                    "expires": self._expires(state, e.at),
                }
                for e in entries
            ],
        )

    def _expires(self, state: ListedState, at: float) -> float:
        return at + FLIGHT_SLACK if state == "in_flight" else time.time() + self.dead_kept

    def drop(self, state: ListedState, items: Sequence[tuple[str, str, str]]) -> None:
        ns = self.namespace
        self._run(
            "drop",
            [{"queue": ns + q, "state": state, "id": i, "token": t} for q, i, t in items],
        )

    def renew(self, items: Sequence[tuple[str, str, str]], until: float) -> None:
        ns = self.namespace
        expires = until + FLIGHT_SLACK
        self._run(
            "renew",
            [
                {"queue": ns + q, "id": i, "token": t, "until": until, "expires": expires}
                for q, i, t in items
            ],
        )

    def clear(self, queue: str, states: Sequence[ListedState] = ("in_flight", "dead")) -> None:
        self._run("clear", [{"queue": self.namespace + queue, "state": s} for s in states])

    def find(self, state: ListedState, queue: str, id: str) -> ListEntry | None:
        params = {"queue": self.namespace + queue, "state": state, "id": id}
        with self.records._mutex:
            row = self.records._db.execute(SQL["find"], params).fetchone()
        return None if row is None else _entry(queue, row)

    def page(
        self,
        state: ListedState,
        queue: str,
        *,
        job: str | None,
        newest_first: bool,
        limit: int,
        after: ListedAt | None,
        now: float,
    ) -> tuple[list[ListEntry], bool]:
        name = ("page_job_" if job is not None else "page_") + (
            "newest" if newest_first else "oldest"
        )
        if after is None:
            after = ListedAt(float("inf"), "") if newest_first else ListedAt(float("-inf"), "")
        params = {
            "queue": self.namespace + queue,
            "state": state,
            "job": job,
            "floor": now if state == "in_flight" else float("-inf"),
            "at": after.at,
            "id": after.id,
            "limit": limit + 1,
        }
        with self.records._mutex:
            rows = self.records._db.execute(SQL[name], params).fetchall()
        return [_entry(queue, row) for row in rows[:limit]], len(rows) > limit


def _entry(queue: str, row: sqlite3.Row) -> ListEntry:
    return ListEntry(
        queue,
        row["id"],
        row["at"],
        row["job"],
        row["token"],
        bytes(row["body"]),
        row["headers"],
        row["info"],
    )
