"""SQLite's dialect of the shared SQL layer (`tasuki.backends.sql`): one connection per
thread and per process, WAL, short IMMEDIATE writes, the wait on `PRAGMA data_version`,
and the named queries of `queries.sql` and its siblings. Why it is so: backend.py."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import orjson

from tasuki.backends.base import Capabilities
from tasuki.backends.sql.dialect import Connection, Queries, columns, load_dialect_queries
from tasuki.backends.sqlite import schema
from tasuki.errors import BackendError, BackendUnavailable, InvalidArgument

Q = load_dialect_queries(
    "tasuki.backends.sqlite",
    cte_writes=False,
    files=("queries.sql", "results.sql", "flows.sql", "limits.sql", "durable.sql", "console.sql"),
)


class _ThreadConnection(threading.local):
    conn: sqlite3.Connection | None = None
    pid: int = 0


class SQLiteDialect:
    """One connection per thread (and per process after a fork), WAL, IMMEDIATE writes."""

    queries = Q
    cte_writes = False
    leases_ahead = False  # a lease is a local call: nothing to overlap
    duplicate_key: type[Exception] = sqlite3.IntegrityError
    announce: Mapping[str, object] = {}

    def __init__(
        self,
        path: str,
        *,
        synchronous: str,
        busy_timeout: float,
        max_message_size: int,
        poll_interval: float,
    ) -> None:
        self.path = path
        self.capabilities = Capabilities(
            max_message_size=max_message_size,
            transactional_enqueue=True,
            priorities=True,
            cancel=True,
            results=True,
            progress=True,
            durable_steps=True,
            transactional_steps=True,
            workflows=True,
            rate_limits=True,
            concurrency_limits=True,
            pause=True,
            browsing=True,
            browse_waiting=True,
            worker_registry=True,
            job_stats=True,
        )
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._poll_interval = poll_interval
        self._local = _ThreadConnection()
        self._all: list[sqlite3.Connection] = []
        self._all_mutex = threading.Lock()
        self._changed = threading.Condition()
        self._closed = False

    def conn(self) -> sqlite3.Connection:
        local = self._local
        conn = local.conn
        if conn is not None and local.pid == os.getpid():
            return conn
        if self._closed:
            raise BackendError("the SQLite backend is closed")
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            schema.prepare(conn)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        local.conn, local.pid = conn, os.getpid()
        with self._all_mutex:
            self._all.append(conn)
        return conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        yield self.conn()

    @staticmethod
    def atomic(conn: Connection) -> AbstractContextManager[Connection]:
        """`statements()` is a transaction already."""
        return contextlib.nullcontext(conn)

    def statements(self) -> AbstractContextManager[Connection]:
        """SQLite's writes are local: the same short transaction as `write()`."""
        return self.write()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A short IMMEDIATE transaction: the write lock is taken up front, never upgraded."""
        conn = self.conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise BackendError(f"SQLite write failed to start on {self.path!r}: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise BackendError(f"SQLite commit failed on {self.path!r}: {exc}") from exc

    def joined(self, connection: object) -> tuple[Connection, Queries]:
        """A cursor on the caller's `sqlite3` connection, to the same database file."""
        if not isinstance(connection, sqlite3.Connection):
            raise InvalidArgument(
                f"sqlite:// takes a sqlite3.Connection as connection=, "
                f"got {type(connection).__name__}"
            )
        files = [row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "main"]
        ours = self.conn().execute("PRAGMA database_list").fetchone()[2]
        if not files or not files[0] or os.path.realpath(files[0]) != os.path.realpath(ours):
            raise InvalidArgument(
                f"the connection given opens {files[0] if files else '?'!r}, "
                f"not the backend's database {self.path!r}"
            )
        cursor = connection.cursor()
        cursor.row_factory = None  # rows as tuples, whatever the caller's factory
        return cursor, Q

    @staticmethod
    def many(
        conn: Connection, sql: str, params: list[dict[str, Any]], names: Sequence[str] = ()
    ) -> list[tuple[int, list[tuple[Any, ...]]]]:
        out: list[tuple[int, list[tuple[Any, ...]]]] = []
        for p in params:
            cursor = conn.execute(sql, p)
            rows = cursor.fetchall()  # all of them: the row count is final after the last
            out.append((cursor.rowcount, list(map(columns(cursor, *names), rows)) if names else []))
        return out

    @staticmethod
    def values(items: list[Any]) -> object:
        return orjson.dumps(items)  # read back with json_each(:ids)

    def changed(self, conn: Connection, queues: Sequence[str]) -> None:
        """Other processes notice the commit through `PRAGMA data_version`."""

    def committed(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_hint(self) -> int:
        row = self.conn().execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def wait(self, queue: str, timeout: float, hint: object) -> None:
        """Sleep until a commit of this process, another's (data version), or `timeout`.

        `hint` is the data version read before the failed lease, so a commit that
        landed in between is not missed.
        """
        until = time.monotonic() + timeout
        interval = 0.001  # quick right after activity, then backing off to poll_interval
        while True:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            with self._changed:
                if self._changed.wait(min(remaining, interval)):
                    return
            interval = min(interval * 1.5, self._poll_interval)
            if self.wait_hint() != hint:
                return

    # A result's waiter wakes as a leaser does: on this process's commits and on the
    # data version that other processes' commits move.
    def results_changed(self, conn: Connection) -> None:
        """The settle's commit is noticed as any other (`committed`, the data version)."""

    def results_hint(self) -> int:
        return self.wait_hint()

    def wait_results(self, timeout: float, hint: object) -> None:
        self.wait("", timeout, hint)

    def ping(self) -> None:
        try:
            self.conn().execute("SELECT 1").fetchone()
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"SQLite database {self.path!r} is unusable: {exc}") from exc

    def close(self) -> None:
        self._closed = True
        with self._all_mutex:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = _ThreadConnection()
