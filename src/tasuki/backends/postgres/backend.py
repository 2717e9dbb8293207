"""`postgresql://user:pass@host:port/db?schema=tasuki` — many machines, one database.

The lifecycle is the shared SQL layer's (`tasuki.backends.sql.base`); this module is
PostgreSQL's dialect: a connection pool, write transactions, LISTEN/NOTIFY wake-ups and
`queries.sql` (the same query names as SQLite's).

- **Leasing** selects due rows `FOR UPDATE SKIP LOCKED` in batches, so concurrent
  leasers never wait on each other's rows, then buries the exhausted ones and leases the
  rest in the same transaction. Expired leases are found by the same index walk (a lease
  in flight is "visible" again once `visible_at` passes): there is no sweeper to die.
- **Wake-ups**: every write that makes messages ready sends `pg_notify` in its
  transaction (delivered on commit). One listener thread per backend holds a LISTEN
  session and wakes waiting leasers; if that session is lost, waits fall back to polling
  (logged once) while it reconnects.
- **Locks** live in a table with an expiry column, not in advisory locks: a lock must
  outlive the session that took it (a worker's lock is renewed over many connections
  from the pool, and a unique claim is taken by the producer's enqueue and released by
  the worker), must have a TTL, and must be taken atomically with the enqueue's insert —
  session advisory locks have none of the three.
- **Schema**: versioned migrations (`migrations/NNNN_*.sql`), applied on first use
  unless `?migrate=false`, or by `tasuki migrate --url ...`; a transaction-level
  advisory lock keeps two workers starting at once from racing. Like Redis's, the
  backend connects when first used, not when created: a worker can start while the
  server is down.
- **Size**: a little over 400 lines because the dialect, its migrations and its
  listener thread are one engine's concerns, read together.
- **Time**: `now` comes from the client's clock, like SQLite's; hosts sharing a database
  must keep their clocks in sync (NTP), as they must for any delay to mean the same.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    Receipt,
)
from tasuki.backends.postgres import connections
from tasuki.backends.sql.base import (
    CLEANUP_EVERY,
    Connection,
    Queries,
    SQLBackend,
    load_dialect_queries,
)
from tasuki.backends.urls import redact
from tasuki.errors import BackendError, BackendUnavailable, InvalidArgument, InvalidURL

Q = load_dialect_queries("tasuki.backends.postgres")
_ARBITER = "    ON CONFLICT (queue, id) DO NOTHING\n"
if Q["insert_batch"].count(_ARBITER) != 1:
    raise ImportError("queries.sql: insert_batch must have one ON CONFLICT (queue, id) line")
Q = {**Q, "insert_batch_new": Q["insert_batch"].replace(_ARBITER, "")}  # see queries.sql
MIGRATIONS = "tasuki.backends.postgres.migrations"

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
_TABLE = re.compile(r"\b(tasuki_(?:messages|finished|locks|history|counts|meters|archive))\b")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# A worker's GIL slice (`Capabilities.gil_slice`): at 0.5 ms instead of 5 the next
# lease's rows and the acks get through while the fetcher runs jobs, 12 % more no-op
# jobs a second in one worker (`./dev bench postgres --drain-only`, 4 interleaved pairs);
# Redis and SQLite gained nothing.
GIL_SLICE = 0.0005
# While the LISTEN session is down, waits poll at this interval.
FALLBACK_POLL = 0.25
# A pooled connection idle longer than this is checked before it is handed out.
IDLE_CHECK = 1.0

# Our sessions walk indexes in order rather than gather a bitmap of every match and sort
# it: with statistics gone stale after a burst of inserts the planner can think a queue
# holds 40 rows when it holds a million, and a bitmap plan for the lease then reads every
# due row to return 256. Both are costs added, not bans: a query with no index still runs.
PLANNER = "-c enable_bitmapscan=off -c enable_seqscan=off"

log = logging.getLogger("tasuki.postgres")
# URL options read by tasuki; any other (sslmode, connect_timeout ...) goes to libpq.
OPTIONS = {
    "schema",
    "migrate",
    "pool_size",
    "max_message_size",
    "pgbouncer",
    "listen_url",
    "archive",
    "archive_days",
}
# Archived rows pruned per statement, and how soon the next prune runs while a backlog
# of rows past their time remains.
PRUNE_BATCH = 10_000
PRUNE_BACKLOG_EVERY = 1.0


def _returns(cursor: Any) -> bool:
    return cursor.description is not None


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration, in order."""
    found = []
    for entry in resources.files(MIGRATIONS).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text("utf-8")))
    return sorted(found)


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Bring `schema` up to date; returns the names of the migrations applied.

    One transaction, under a transaction-level advisory lock on the schema's name, so
    two processes migrating at once run each migration exactly once.
    """
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tasuki-migrate:{schema}",))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}"')
        conn.execute(
            "CREATE TABLE IF NOT EXISTS tasuki_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM tasuki_migrations")}
        for version, name, sql in migrations():
            if version in done:
                continue
            conn.execute(sql.encode())
            conn.execute(
                "INSERT INTO tasuki_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied.append(name)
    return applied


class PostgresDialect:
    """A psycopg pool (remade after a fork), autocommit connections, explicit transactions."""

    queries = Q
    lease_records_lost = True  # in its `lease` CTE
    ack_counts = True  # in its `ack` CTE

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str,
        pool_size: int,
        max_message_size: int,
        display_url: str,
        pgbouncer: bool = False,
        listen_conninfo: str | None = None,
        archive: bool = False,
    ) -> None:
        self.conninfo = conninfo
        # Behind pgBouncer in transaction mode a session is not ours from one transaction
        # to the next: no startup options (search_path, planner settings), no prepared
        # statements, and LISTEN only on a direct connection (`listen_url`), else polling.
        self.pgbouncer = pgbouncer
        self.listen_conninfo = listen_conninfo if listen_conninfo else conninfo
        self.polls_only = pgbouncer and not listen_conninfo
        self.schema = schema
        self.channel = f"tasuki:{schema}"
        # What pg_stat_activity shows for our sessions (unless the URL names its own).
        self.application_name = f"tasuki {schema}"
        self.display_url = display_url
        self.capabilities = Capabilities(
            max_message_size=max_message_size, transactional_enqueue=True, gil_slice=GIL_SLICE
        )
        if archive:  # acks move the rows to the archive (`ack_archive`)
            self.queries = {**Q, "ack": Q["ack_archive"]}
        self.qualified: Queries = {
            name: _TABLE.sub(f'"{schema}".\\1', sql) for name, sql in self.queries.items()
        }
        if pgbouncer:  # no search_path of ours: every query names the schema
            self.queries = self.qualified
        self._pool_size = pool_size
        self._idle_since: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        # Run before the first connection is used (set by the backend: its migrations).
        self.first_use: Callable[[], object] | None = None
        self._first_use_mutex = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pid = 0
        self._mutex = threading.Lock()
        self._closed = False
        # Wake-ups: a counter bumped by the listener thread on every notification.
        self._changed = threading.Condition()
        self._version = 0
        self._listener: threading.Thread | None = None
        self._listener_pid = 0
        self._listening = False

    # -- connections -----------------------------------------------------------------
    def connect(self) -> psycopg.Connection[Any]:
        """A fresh connection of our own (migrations, the LISTEN session)."""
        try:
            return psycopg.connect(
                self.conninfo,
                autocommit=True,
                fallback_application_name=self.application_name,
                # behind pgBouncer a statement prepared here may already exist on the
                # server session it lends us (a migration's repeated INSERT was the 6th)
                prepare_threshold=None if self.pgbouncer else 5,
            )
        except psycopg.ProgrammingError as exc:  # libpq refused the URL itself
            raise InvalidURL(f"invalid PostgreSQL URL {self.display_url}: {exc}") from exc
        except psycopg.Error as exc:
            raise BackendUnavailable(f"cannot connect to {self.display_url}: {exc}") from exc

    def ready(self) -> None:
        """Run the first-use hook (the migrations) once; a failure is retried next time."""
        if self.first_use is None:
            return
        with self._first_use_mutex:
            hook = self.first_use
            if hook is not None:
                hook()
                self.first_use = None

    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        pool = self._pool
        if pool is not None and self._pid == os.getpid():
            return pool
        self.ready()
        with self._mutex:
            if self._closed:
                raise BackendError("the PostgreSQL backend is closed")
            if self._pool is None or self._pid != os.getpid():
                kwargs: dict[str, Any] = {
                    "autocommit": True,
                    "fallback_application_name": self.application_name,
                }
                if self.pgbouncer:
                    kwargs["prepare_threshold"] = None
                else:
                    kwargs["options"] = f"-c search_path={self.schema} {PLANNER}"
                connections.quiet()
                self._pool = connections.Pool(
                    self.conninfo,
                    min_size=1,
                    max_size=self._pool_size,
                    kwargs=kwargs,
                    open=True,
                    name=f"tasuki-{self.schema}",
                    timeout=connections.POOL_WAIT,
                    check=self._check,
                    reset=self._returned,
                )
                self._pid = os.getpid()
            return self._pool

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """A connection idle for a while is tried before use (one empty query), so a
        server restart costs a reconnect, not a failed operation; a busy one is not."""
        if time.monotonic() - self._idle_since.get(conn, 0.0) > IDLE_CHECK:
            ConnectionPool.check_connection(conn)

    def _returned(self, conn: psycopg.Connection[Any]) -> None:
        self._idle_since[conn] = time.monotonic()

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.pool().connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"PostgreSQL at {self.display_url}: {exc}") from exc
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL at {self.display_url}: {exc}") from exc

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        try:
            with self.pool().connection() as conn, conn.transaction():
                yield conn
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"PostgreSQL at {self.display_url}: {exc}") from exc
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL at {self.display_url}: {exc}") from exc

    @contextlib.contextmanager
    def statements(self) -> Iterator[Connection]:
        """An autocommit connection: a statement that does a whole step (the lease, a
        batch of acks) is its own transaction, one round trip without BEGIN and COMMIT."""
        try:
            with self.pool().connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"PostgreSQL at {self.display_url}: {exc}") from exc
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL at {self.display_url}: {exc}") from exc

    def joined(self, connection: object) -> tuple[Connection, Queries]:
        """The caller's psycopg connection; queries name our schema (its search_path is
        the caller's business) and read rows as tuples whatever its row factory."""
        if not isinstance(connection, psycopg.Connection):
            raise InvalidArgument(
                f"postgresql:// takes a psycopg.Connection as connection=, "
                f"got {type(connection).__name__}"
            )
        self.ready()
        return connection.cursor(row_factory=tuple_row), self.qualified

    @staticmethod
    def many(
        conn: Connection, sql: str, params: list[dict[str, Any]]
    ) -> list[tuple[int, list[Any]]]:
        """One pipelined `executemany`: a batch costs one round trip, not one per row."""
        if len(params) <= 1:
            out = []
            for p in params:
                cursor = conn.execute(sql, p)
                rows = cursor.fetchall() if _returns(cursor) else []
                out.append((cursor.rowcount, rows))
            return out
        pg: Any = conn
        cursor = pg.cursor() if isinstance(pg, psycopg.Connection) else pg
        cursor.executemany(sql, params, returning=True)
        out = []
        while True:
            out.append((cursor.rowcount, cursor.fetchall() if cursor.description else []))
            if not cursor.nextset():
                return out

    @staticmethod
    def values(items: list[Any]) -> object:
        return items  # an array parameter (`= ANY(%(seqs)s)`)

    # -- wake-ups --------------------------------------------------------------------
    def changed(self, conn: Connection, queues: Sequence[str]) -> None:
        for queue in queues:
            conn.execute("SELECT pg_notify(%s, %s)", (self.channel, queue))

    def committed(self) -> None:
        """Waiters, here and elsewhere, hear the NOTIFY sent with the commit."""

    def wait_hint(self) -> int:
        if self.polls_only:
            return self._version
        self._ensure_listener()
        return self._version

    def wait(self, queue: str, timeout: float, hint: object) -> None:
        until = time.monotonic() + timeout
        with self._changed:
            while self._version == hint:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return
                if not self._listening or self.polls_only:
                    remaining = min(remaining, FALLBACK_POLL)
                    self._changed.wait(remaining)
                    return
                self._changed.wait(remaining)

    def _ensure_listener(self) -> None:
        """Start the listener thread once per process (a forked child starts its own)."""
        if (self._listener is not None and self._listener_pid == os.getpid()) or self._closed:
            return
        with self._mutex:
            if self._listener is None or self._listener_pid != os.getpid():
                self._listener_pid = os.getpid()
                self._listening = False
                self._changed = threading.Condition()
                self._listener = threading.Thread(
                    target=self._listen, name="tasuki-postgres-listen", daemon=True
                )
                self._listener.start()

    def _bump(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    def _listen(self) -> None:
        """Hold a LISTEN session; on loss, poll (logged) while reconnecting every second."""
        lost_logged = False
        while not self._closed:
            try:
                with psycopg.connect(
                    self.listen_conninfo,
                    autocommit=True,
                    fallback_application_name=self.application_name,
                ) as conn:
                    conn.execute(f'LISTEN "{self.channel}"')
                    self._listening = True
                    if lost_logged:
                        log.warning("PostgreSQL notifications are back; polling stops")
                        lost_logged = False
                    self._bump()  # anything committed while we were away
                    while not self._closed:
                        for _ in conn.notifies(timeout=1.0):
                            self._bump()
            except psycopg.Error as exc:
                if self._closed:
                    return
                self._listening = False
                self._bump()
                if not lost_logged:
                    log.warning(
                        "PostgreSQL notification session lost (%s); polling every %.2fs "
                        "until it reconnects",
                        exc,
                        FALLBACK_POLL,
                    )
                    lost_logged = True
                time.sleep(1.0)
        self._listening = False

    # -- operating -------------------------------------------------------------------
    def ping(self) -> None:
        with self.read() as conn:
            conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()
        self._bump()


class PostgresBackend(SQLBackend):
    def __init__(
        self,
        url: str,
        *,
        schema: str = "tasuki",
        migrate: bool = True,
        pool_size: int = 8,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        pgbouncer: bool = False,
        listen_url: str | None = None,
        archive: bool = False,
        archive_days: float = 7.0,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise InvalidURL(f"bad schema name {schema!r}: lower-case letters, digits and _")
        conninfo, _ = split_options(url, OPTIONS)
        conninfo = urlunsplit(urlsplit(conninfo)._replace(scheme="postgresql"))
        self.schema = schema
        self.postgres = PostgresDialect(
            conninfo,
            schema=schema,
            pool_size=pool_size,
            max_message_size=max_message_size,
            display_url=redact(url),
            pgbouncer=pgbouncer,
            listen_conninfo=listen_url,
            archive=archive,
        )
        if self.postgres.polls_only:
            log.info(
                "%s: behind pgBouncer without listen_url: waiting workers poll every %.2fs",
                redact(url),
                FALLBACK_POLL,
            )
        super().__init__(redact(url), self.postgres)
        self._ahead: ThreadPoolExecutor | None = None
        self._ahead_pid = 0
        if archive_days < 0:
            raise InvalidURL(f"archive_days must be 0 (keep forever) or more, not {archive_days}")
        self.archive = archive
        self.archive_keep = archive_days * 86_400.0
        self._next_prune = 0.0
        if migrate:  # on first use, so a worker can start while the server is down
            self.postgres.first_use = self.migrate

    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        """Plain messages (no unique claim, no id twice: one message or a batch) take one
        statement, `insert_batch` (`insert_batch_new` when no id was given by the caller),
        which inserts and notifies the listeners: on its own in
        autocommit (one round trip, committed when it returns), or in the caller's open
        transaction with `connection=` (announced on its commit). The rest, and the odd
        call that is due for the periodic clean-up, take the shared layer's transaction."""
        now = self.clock()
        if not envelopes or now >= self._next_cleanup or not self._plain(envelopes):
            return super().enqueue(envelopes, connection)
        if connection is not None:
            conn, queries = self.postgres.joined(connection)
            return self._insert_batch(conn, queries["insert_batch"], envelopes, now)
        with self.postgres.statements() as conn:
            if all(e.keep_id == 0 for e in envelopes):  # ids of our own making
                try:
                    return self._insert_batch(conn, self.q["insert_batch_new"], envelopes, now)
                except psycopg.errors.UniqueViolation:
                    pass  # an id was stored already: nothing was written; ask properly
            return self._insert_batch(conn, self.q["insert_batch"], envelopes, now)

    def _batch_params(self, envelopes: Sequence[Envelope], now: float) -> dict[str, Any]:
        return {**super()._batch_params(envelopes, now), "channel": self.postgres.channel}

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        """With `?archive=true` the `ack` statement moves the rows to the archive; the
        acking workers also prune it, one batch at a time, every 30 s (every second
        while older rows remain)."""
        results = super().ack(receipts)
        if self.archive and self.archive_keep > 0 and self.clock() >= self._next_prune:
            self.prune_archive()
        return results

    def prune_archive(self, limit: int = PRUNE_BATCH) -> int:
        """Delete up to `limit` archived rows older than `archive_days`; returns how many."""
        now = self.clock()
        params = {"before": now - self.archive_keep, "limit": limit}
        with self.postgres.statements() as conn:
            pruned = int(conn.execute(self.q["prune_archive"], params).rowcount)
        self._next_prune = now + (PRUNE_BACKLOG_EVERY if pruned >= limit else CLEANUP_EVERY)
        return pruned

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """The next batch is leased on a helper thread while the worker runs the current
        one: the round trip and the server's work overlap the jobs (psycopg waits for the
        server without the GIL)."""
        future = self._ahead_pool().submit(self.lease, queue, max_messages, visibility_timeout)
        return future.result

    def _ahead_pool(self) -> ThreadPoolExecutor:
        if self._ahead is None or self._ahead_pid != os.getpid():  # a forked child: its own
            self._ahead = ThreadPoolExecutor(1, thread_name_prefix="tasuki-postgres-ahead")
            self._ahead_pid = os.getpid()
        return self._ahead

    def close(self) -> None:
        if self._ahead is not None and self._ahead_pid == os.getpid():
            self._ahead.shutdown(wait=True)
        super().close()

    def migrate(self) -> list[str]:
        """Apply the migrations this schema lacks; returns their names."""
        with self.postgres.connect() as conn:
            try:
                return migrate(conn, self.schema)
            except psycopg.Error as exc:
                raise BackendError(f"migrating {self.url} failed: {exc}") from exc


def split_options(url: str, names: set[str]) -> tuple[str, str]:
    """(URL without tasuki's options, tasuki's options as a query string)."""
    parts = urlsplit(url)
    ours: list[tuple[str, str]] = []
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours if name in names else theirs).append((name, value))
    rest: str = urlunsplit(parts._replace(query=urlencode(theirs)))
    return rest, urlencode(ours)
