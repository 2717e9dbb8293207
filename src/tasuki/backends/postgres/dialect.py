"""PostgreSQL's dialect: a psycopg pool (remade after a fork), autocommit connections,
explicit transactions, LISTEN/NOTIFY wake-ups (`listener.py`) and `queries.sql`."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from tasuki.backends.base import Capabilities
from tasuki.backends.postgres import connections
from tasuki.backends.postgres.listener import Listener
from tasuki.backends.sql.dialect import Connection, Queries, columns, load_dialect_queries
from tasuki.errors import BackendError, BackendUnavailable, InvalidArgument, InvalidURL

Q = load_dialect_queries(
    "tasuki.backends.postgres",
    cte_writes=True,
    files=(
        "queries.sql",
        "archive.sql",
        "results.sql",
        "flows.sql",
        "limits.sql",
        "durable.sql",
        "console.sql",
    ),
)

_TABLE = re.compile(
    r"\b(tasuki_(?:messages|finished|locks|history|counts|meters|archive|results|flows"
    r"|flow_barriers|flow_slots|slots|rate_starts|steps|signals|waits))\b"
)
# A worker's GIL slice (`Backend.gil_slice`): at 0.5 ms instead of 5 the next
# lease's rows and the acks get through while the fetcher runs jobs, 12 % more no-op
# jobs a second in one worker (`./dev bench postgres --drain-only`, 4 interleaved pairs);
# Redis and SQLite gained nothing.
GIL_SLICE = 0.0005
# A pooled connection idle longer than this is checked before it is handed out.
IDLE_CHECK = 1.0
# Our sessions walk indexes in order rather than gather a bitmap of every match and sort
# it: with statistics gone stale after a burst of inserts the planner can think a queue
# holds 40 rows when it holds a million, and a bitmap plan for the lease then reads every
# due row to return 256. Both are costs added, not bans: a query with no index still runs.
PLANNER = "-c enable_bitmapscan=off -c enable_seqscan=off"
# A transaction of ours whose client goes quiet between two statements for this long is
# ended by the server. Ours send their statements back to back, so only a frozen or
# starved worker gets there, and until then it holds the row locks other workers' settles
# wait on (a flow's row, a count shard): a long chaos run met two acks held up 2.5 s by a
# stopped worker, past their leases. The one cut off finds its transaction gone and
# retries, its locks freed after a second instead of after its freeze.
IDLE_IN_TRANSACTION = "-c idle_in_transaction_session_timeout=1000"


class PostgresDialect:
    """A psycopg pool (remade after a fork), autocommit connections, explicit transactions."""

    queries: Queries = Q
    cte_writes = True  # `lease` and `ack` take their steps in their own CTEs
    leases_ahead = True
    duplicate_key: type[Exception] = psycopg.errors.UniqueViolation

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
        self.schema = schema
        self.channel = f"tasuki:{schema}"
        self.announce: Mapping[str, object] = {"channel": self.channel}
        # What pg_stat_activity shows for our sessions (unless the URL names its own).
        self.application_name = f"tasuki {schema}"
        self.display_url = display_url
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
        if archive:  # acks move the rows to the archive (`ack_archive`)
            self.queries = {**Q, "ack": Q["ack_archive"]}
        self.qualified: Queries = {
            name: _TABLE.sub(f'"{schema}".\\1', sql) for name, sql in self.queries.items()
        }
        if pgbouncer:  # no search_path of ours: every query names the schema
            self.queries = self.qualified
        self.listener = Listener(
            listen_conninfo or conninfo,
            self.channel,
            self.application_name,
            polls_only=pgbouncer and not listen_conninfo,
        )
        self.results_listener = Listener(
            listen_conninfo or conninfo,
            f"tasuki-results:{schema}",
            self.application_name,
            polls_only=pgbouncer and not listen_conninfo,
        )
        self._pool_size = pool_size
        self._idle_since: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self._suspect_since = 0.0  # the last time an operation met a broken connection
        # Run before the first connection is used (set by the backend: its migrations).
        self.first_use: Callable[[], object] | None = None
        self._first_use_mutex = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pid = 0
        self._mutex = threading.Lock()
        self._closed = False

    @property
    def polls_only(self) -> bool:
        return self.listener.polls_only

    # -- connections -----------------------------------------------------------------
    def connect(self) -> psycopg.Connection[Any]:
        """A fresh connection of our own (migrations)."""
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
                    kwargs["options"] = (
                        f"-c search_path={self.schema} {PLANNER} {IDLE_IN_TRANSACTION}"
                    )
                connections.quiet()
                self._pool = connections.Pool(
                    self.conninfo,
                    min_size=1,
                    max_size=self._pool_size,
                    kwargs=kwargs,
                    open=True,
                    name=f"tasuki-{self.schema}",
                    timeout=connections.POOL_WAIT,
                )
                self._pid = os.getpid()
            return self._pool

    def _usable(self, conn: psycopg.Connection[Any]) -> bool:
        """A connection idle for a while, or given back before the last failure seen, is
        tried before use (one empty query), so a server restart costs a reconnect, not a
        failed operation; a busy one is not."""
        since = self._idle_since.get(conn, 0.0)
        if since > self._suspect_since and time.monotonic() - since <= IDLE_CHECK:
            return True
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            return False
        return True

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection that answers, within the pool's wait. One that does not
        is handed back (the pool closes it and connects anew) and the next is tried at
        once: psycopg_pool's own `check=` sleeps 1, 2, 4 s between failed checks, so a
        worker whose six idle connections a restart had broken waited out the whole 5 s
        and failed, with the server back all along
        (tests/backends/postgresql/test_postgres_faults.py)."""
        pool = self.pool()
        deadline = time.monotonic() + connections.POOL_WAIT
        while True:
            conn = pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
            if self._usable(conn):
                break
            pool.putconn(conn)
        try:
            yield conn
        finally:
            # Stamped here, in the caller's thread: a `reset=` hook would make psycopg_pool
            # hand every connection given back to its maintenance thread (a queue put and
            # a thread woken per lease and per settle; the connection unusable until that
            # thread ran): a fifth of a worker's CPU per job on one-query jobs.
            self._idle_since[conn] = time.monotonic()
            pool.putconn(conn)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout) as exc:
            # The connection is gone (the second: the server ended a transaction left
            # idle past IDLE_IN_TRANSACTION). Those given back before this may be broken
            # alike (a restart): each is tried before its next use.
            self._suspect_since = time.monotonic()
            raise BackendUnavailable(f"PostgreSQL at {self.display_url}: {exc}") from exc
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL at {self.display_url}: {exc}") from exc

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self._errors(), self._connection() as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        with self._errors(), self._connection() as conn, conn.transaction():
            yield conn

    def statements(self) -> contextlib.AbstractContextManager[Connection]:
        """An autocommit connection: a statement that does a whole step (the lease, a
        batch of acks) is its own transaction, one round trip without BEGIN and COMMIT."""
        return self.read()

    @contextlib.contextmanager
    def atomic(self, conn: Connection) -> Iterator[Connection]:
        pg: Any = conn
        with pg.transaction():
            yield conn

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
        conn: Connection, sql: str, params: list[dict[str, Any]], names: Sequence[str] = ()
    ) -> list[tuple[int, list[tuple[Any, ...]]]]:
        """The batch as one message of statements, their values bound here: one round
        trip, and the server has every statement before it runs the first.

        Not a pipelined `executemany`, which sends its statements one by one and the
        Sync after their results: a client frozen in between (a SIGSTOP, a stalled VM)
        left the server waiting for the rest while holding what the first statements
        locked (a count shard, a limit's key) for the whole freeze: the server's
        idle-in-transaction timeout only starts after a Sync. Binding here costs more per
        statement than a prepared pipeline, so the hot batches have statements over
        arrays of their own (`result_ok_batch`)."""
        pg: Any = conn
        connection = pg if isinstance(pg, psycopg.Connection) else pg.connection
        out: list[tuple[int, list[tuple[Any, ...]]]] = []
        if len(params) == 1:
            cursor = pg.cursor() if pg is connection else pg
            cursor.execute(sql, params[0])
        elif params:
            cursor = psycopg.ClientCursor(connection, row_factory=tuple_row)
            statement = sql.rstrip().rstrip(";")
            cursor.execute(";\n".join(cursor.mogrify(statement, p) for p in params))
        else:
            return out
        while True:
            rows = cursor.fetchall() if names and cursor.description else []
            out.append((cursor.rowcount, list(map(columns(cursor, *names), rows)) if rows else []))
            if not cursor.nextset():
                return out

    @staticmethod
    def values(items: list[Any]) -> object:
        return items  # an array parameter (`= ANY(%(ids)s)`)

    # -- wake-ups --------------------------------------------------------------------
    def changed(self, conn: Connection, queues: Sequence[str]) -> None:
        for queue in queues:
            conn.execute("SELECT pg_notify(%s, %s)", (self.channel, queue))

    def committed(self) -> None:
        """Waiters, here and elsewhere, hear the NOTIFY sent with the commit."""

    def wait_hint(self) -> int:
        return self.listener.hint()

    def wait(self, queue: str, timeout: float, hint: object) -> None:
        self.listener.wait(timeout, hint)

    # Results have a channel and a LISTEN session of their own (started by the first
    # waiter in a process): a settled result never wakes the idle leasers.
    def results_changed(self, conn: Connection) -> None:
        conn.execute("SELECT pg_notify(%s, '')", (self.results_listener.channel,))

    def results_hint(self) -> int:
        return self.results_listener.hint()

    def wait_results(self, timeout: float, hint: object) -> None:
        self.results_listener.wait(timeout, hint)

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
        self.listener.close()
        self.results_listener.close()
