"""`sqlite:///path.db` — the embedded default: one file, many processes, zero setup.

Safety across processes comes from SQLite itself: WAL so readers never block the
writer, a busy timeout so writers queue instead of failing, and short `BEGIN IMMEDIATE`
transactions so a lease is decided by exactly one writer at a time. The lease walks a
partial index ordered by visibility, so it stays O(log n) whatever the backlog.

There is no cross-process notification in SQLite, so an idle `lease(wait=...)` polls
`PRAGMA data_version` — a counter that changes when another connection commits, read
from shared memory without touching the database pages — backing off from 1 ms to
`poll_interval` (20 ms). Commits from the same process wake waiters at once.

The lifecycle itself is the shared SQL layer's (`tasuki.backends.sql`); this module is
SQLite's dialect: connections, transactions, wake-ups, and `queries.sql`. SQLite has no
data-modifying CTEs, so what PostgreSQL's lease and ack statements write beside their
own rows (lost leases, finished ids, totals) are statements of their own here, in the
same transaction: a local call each, not a round trip.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any

import orjson

from tasuki.backends.base import Capabilities
from tasuki.backends.sql.backend import SQLBackend
from tasuki.backends.sql.dialect import Connection, Queries, columns, load_dialect_queries
from tasuki.backends.sqlite.files import create_private
from tasuki.errors import BackendError, BackendUnavailable, InvalidArgument, InvalidURL

Q = load_dialect_queries(
    "tasuki.backends.sqlite",
    cte_writes=False,
    files=("queries.sql", "results.sql", "flows.sql", "limits.sql", "durable.sql"),
)
SCHEMA = resources.files("tasuki.backends.sqlite").joinpath("schema.sql").read_text("utf-8")

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
SYNCHRONOUS = ("off", "normal", "full", "extra")


# `PRAGMA user_version` of a database whose schema is up to date.
VERSION = 1


# Columns added since the first schema, by table: a database made before them gains them
# before the schema file runs (its rank index needs `head_start`).
ADDED_COLUMNS = {
    "tasuki_messages": (
        ("priority", "INTEGER NOT NULL DEFAULT 0"),
        ("head_start", "REAL NOT NULL DEFAULT 0"),
        ("progress", "TEXT"),
        ("limits", "TEXT"),
        ("parked_on", "TEXT"),
    ),
    "tasuki_finished": (("cancelled", "TEXT"),),
    "tasuki_flow_barriers": (("filled", "INTEGER NOT NULL DEFAULT 0"),),
}


BARRIER_FILLED = (
    "UPDATE tasuki_flow_barriers SET filled = (SELECT count(*) FROM tasuki_flow_slots s"
    " WHERE s.flow = tasuki_flow_barriers.flow AND s.barrier = tasuki_flow_barriers.barrier)"
)


def _missing_columns(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    missing = []
    for table, added in ADDED_COLUMNS.items():
        have = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
        if have:  # an existing table (a new one is made whole by the schema)
            missing += [(table, name, kind) for name, kind in added if name not in have]
    return missing


def _add_columns(conn: sqlite3.Connection) -> None:
    """Give a database made by an older tasuki the columns of priorities, progress and
    cancel, once, under the write lock; the due index the rank index replaces goes."""
    if not _missing_columns(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, name, kind in _missing_columns(conn):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            if name == "filled":  # the slots its groups' members filled so far
                conn.execute(BARRIER_FILLED)
        conn.execute("DROP INDEX IF EXISTS tasuki_messages_due")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _upgrade(conn: sqlite3.Connection) -> None:
    """Bring a database made by an older tasuki up to `VERSION`, once, under the write
    lock: version 1 fills the depth counts (`tasuki_depth`) from the messages."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < 1:
            conn.execute("DELETE FROM tasuki_depth")
            conn.execute(
                "INSERT INTO tasuki_depth (queue, waiting, dead)"
                " SELECT queue, sum(state = 0), sum(state = 2) FROM tasuki_messages"
                " GROUP BY queue"
            )
        conn.execute(f"PRAGMA user_version = {VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
            _add_columns(conn)
            conn.executescript(SCHEMA)
            _upgrade(conn)
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


class SQLiteBackend(SQLBackend):
    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        busy_timeout: float = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        poll_interval: float = 0.02,
        create: bool = True,
    ) -> None:
        if path in ("", ":memory:") or path.startswith("file::memory:"):
            raise InvalidURL(
                "sqlite needs a file that every worker process can open; "
                "use memory:// for an in-process store"
            )
        if synchronous not in SYNCHRONOUS:
            raise InvalidURL(
                f"sqlite synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}"
            )
        if not create and not os.path.isfile(path):
            raise BackendUnavailable(
                f"no SQLite database at {path!r} (from {os.getcwd()!r}): "
                "check the URL, $TASUKI_URL or the working directory"
            )
        self.path = path
        if create:
            create_private(path)
        self.sqlite = SQLiteDialect(
            path,
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            max_message_size=max_message_size,
            poll_interval=poll_interval,
        )
        super().__init__(f"sqlite:///{path}", self.sqlite)
        self.sqlite.conn()  # open now: a path that can't be opened fails at construction
