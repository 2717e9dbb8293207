"""The one seam between the shared SQL layer and an engine: a `Dialect`.

A dialect brings what differs between SQLite and PostgreSQL — connections and
transactions, how a list of values is passed, how a waiting leaser is woken, what its
statements can do at once — and its `.sql` file, whose named queries the shared layer
runs (`sqlfiles`). Both files define the `REQUIRED` names; what only one engine needs is
an extra, declared below with its reason, and checked when the dialect's module is
imported (a missing or misspelt name fails there, not when the query first runs).

Rows are read by column name (`columns`), never by position: a query may return its
columns in any order, and one that lacks a column fails naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from operator import itemgetter
from typing import Any, Literal, Protocol, get_args

from tasuki.backends.base import Capabilities
from tasuki.backends.sqlfiles import QueryNamesError, check_names, load_queries
from tasuki.errors import BackendError

QueryName = Literal[
    "known_id",
    "insert_message",
    "replace_waiting_payload",
    "lease",
    "next_visible_at",
    "ack",
    "extend",
    "keep",
    "lease_cancelled",
    "cancel",
    "remember_cancelled",
    "release",
    "dead",
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
    # results.sql: a message's result record (`sql/results.py`)
    "result_pending",
    "result_ok",
    "result_failed",
    "result",
    "results_redrive_all",
    "results_redrive_ids",
    "result_forget",
    "results_purge",
    "results_forget_expired",
    # flows.sql: flow records, barriers and their slots (`sql/flows.py`)
    "flow_start",
    "flow",
    "flow_cancel",
    "flow_cancelled",
    "flow_fail",
    "flows_redrive_all",
    "flows_redrive_ids",
    "flow_finish",
    "flow_slots",
    "flow_barrier_value",
    "flow_group_value",
    "flow_slots_forget_expired",
    "flow_barriers_forget_expired",
    "flows_forget_expired",
    # limits.sql: admission of rate and concurrency limits, slots, wake-ups (`sql/limits.py`)
    "limit_candidates",
    "limit_due",
    "limit_lease",
    "limit_park",
    "slot_holders",
    "slots_prune",
    "slot_take",
    "slots_free",
    "limit_parked_keys",
    "limit_wake",
    "rate_window",
    "rate_take",
    "rate_prune",
    "slots_forget_dead",
    "rate_forget_expired",
    # console.sql: pauses, listings, actions, workers and job stats (`sql/console.py`)
    "console_pause",
    "console_resume",
    "console_paused",
    "browse_asc",
    "browse_desc",
    "browse_job_asc",
    "browse_job_desc",
    "browse_dead_asc",
    "browse_dead_desc",
    "browse_dead_job_asc",
    "browse_dead_job_desc",
    "retry_delayed",
    "cancel_in_state",
    "cancel_dead",
    "worker_announce",
    "workers",
    "worker_stop",
    "workers_forget",
    "job_stats_add",
    "job_stats",
    "job_stats_forget",
    # durable.sql: durable steps' records, signals and waits (`sql/durable.py`)
    "steps_read",
    "step_record",
    "step_hold",
    "signal_target",
    "signal_put",
    "signal_wake",
    "wait_end",
    "signal_first",
    "signal_consume",
    "wait_put",
    "wait_signalled",
    "wait_read",
    "steps_forget_orphans",
    "signals_forget_orphans",
    "waits_forget_orphans",
]
# Every SQL engine's query file defines these.
REQUIRED: frozenset[QueryName] = frozenset(get_args(QueryName))

# Steps that PostgreSQL's `lease`, `ack` and `flow_fills_counted` take inside their own
# statement (data-modifying CTEs: `Dialect.cte_writes`) and an engine without them runs as
# statements of their own, in the same transaction: recording the leases found lost,
# remembering finished ids, a group member's fill (its barrier's row, its slot, the count).
SeparateStep = Literal[
    "record_lost_leases", "remember_finished", "flow_barrier", "flow_fill", "flow_slot_taken"
]
SEPARATE_STEPS: frozenset[SeparateStep] = frozenset(get_args(SeparateStep))

# What only one engine does, in queries only its file defines.
# PostgreSQL: a plain batch enqueued (and announced) in one statement, `insert_batch`, and
# the same for ids of our own making without the id arbiter, `insert_batch_new`; the
# archive of acked messages, `ack_archive` and `prune_archive`; the locks that serialize
# the admissions and wake-ups of a limit's key, `limit_lock_keys` (SQLite's writes are
# serialized already); the fills of a flow in one statement, `flow_fills_counted`; a batch's
# pending results and acked results, one statement each (`result_pending_batch`,
# `result_ok_batch`), where `Dialect.many` would send one statement per row; a
# transactional step's own time limit for a quiet client (`step_transaction`: the job's
# code runs between its statements, for longer than ours ever do).
PostgresExtra = Literal[
    "insert_batch",
    "insert_batch_new",
    "ack_archive",
    "prune_archive",
    "limit_lock_keys",
    "flow_fills_counted",
    "result_pending_batch",
    "result_ok_batch",
    "step_transaction",
]
# SQLite: each queue's count of waiting and dead messages, kept with the writes that
# change them (`count_depth`, `reset_depth` on purge), so that its stats read two numbers
# instead of counting a million index entries. (Kept in PostgreSQL, a count row per queue
# would make every enqueue and lease wait on it; its stats count.) `insert_batch` is the
# whole of an enqueue: an engine keeping counts would need them in it.
SQLiteExtra = Literal["count_depth", "reset_depth"]
Extra = PostgresExtra | SQLiteExtra
POSTGRES_EXTRAS: frozenset[PostgresExtra] = frozenset(get_args(PostgresExtra))
SQLITE_EXTRAS: frozenset[SQLiteExtra] = frozenset(get_args(SQLiteExtra))
EXTRAS: frozenset[Extra] = POSTGRES_EXTRAS | SQLITE_EXTRAS

Queries = Mapping[QueryName | SeparateStep | Extra, str]


def load_dialect_queries(
    package: str, *, cte_writes: bool, files: Sequence[str] = ("queries.sql",)
) -> Queries:
    """A dialect's named queries from its `files`, checked: every `REQUIRED` name, the
    `SEPARATE_STEPS` exactly when its statements cannot take them (`cte_writes` False),
    extras at will; no name twice."""
    queries: dict[str, str] = {}
    for filename in files:
        more = load_queries(package, filename)
        if twice := sorted(queries.keys() & more.keys()):
            raise QueryNamesError(f"{package}/{filename}: defined again: {', '.join(twice)}")
        queries.update(more)
    expected: set[str] = set(REQUIRED) | (EXTRAS & queries.keys())
    if not cte_writes:
        expected |= SEPARATE_STEPS
    check_names(queries, expected, f"{package}/{'+'.join(files)}")
    return queries  # type: ignore[return-value]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Sequence[Any] | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The little of a DB-API connection the shared layer uses (sqlite3 and psycopg agree)."""

    def execute(self, sql: Any, params: Any = ..., /) -> Cursor: ...


def columns(cursor: Cursor, *names: str) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A getter of the named columns of `cursor`'s rows, as a tuple in the order named.

    Positions are looked up once per statement from the cursor's description, so reading
    a row costs what reading it by position does (sqlite3.Row, which looks each name up
    in every row, made the lease measurably slower).
    """
    found = {column[0]: n for n, column in enumerate(cursor.description or ())}
    missing = [name for name in names if name not in found]
    if missing:
        raise BackendError(f"the query returns no column {', '.join(missing)}")
    at = [found[name] for name in names]
    if len(at) == 1:
        only = at[0]
        return lambda row: (row[only],)
    return itemgetter(*at)


def named_rows(cursor: Cursor, *names: str) -> list[tuple[Any, ...]]:
    """Every row of `cursor`, as tuples of the named columns in the order named."""
    pick = columns(cursor, *names)
    return [pick(row) for row in cursor.fetchall()]


class Dialect(Protocol):
    """What differs between SQL engines, below the shared lifecycle."""

    queries: Queries
    # What `SQLBackend` reports as its capabilities.
    capabilities: Capabilities
    # The engine's statements can write to several tables at once (PostgreSQL's
    # data-modifying CTEs): its `lease` also records the leases it finds lost (returning
    # when each expired, `lost_at`) and drops the unique locks of the messages it buries;
    # its `ack` also remembers finished ids, writes their history and counts what it
    # deleted. Without (SQLite), the shared layer runs those as statements of their own
    # (`SEPARATE_STEPS`, `lock_drop_owned`, `record_history`, `count_settled`) in the
    # same transaction.
    cte_writes: bool
    # A lease is a network round trip: a busy worker's next lease starts while it runs
    # the current batch (`Backend.lease_soon`).
    leases_ahead: bool
    # Raised by `insert_batch_new` when an id it was given is stored already.
    duplicate_key: type[Exception]
    # Parameters of the statements that announce new messages themselves
    # (`insert_batch`: PostgreSQL's NOTIFY channel).
    announce: Mapping[str, object]

    def read(self) -> AbstractContextManager[Connection]:
        """A connection for a read outside any transaction of ours."""

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction, committed when the block ends, rolled back on error."""

    def statements(self) -> AbstractContextManager[Connection]:
        """A connection for writes whose every statement is atomic on its own: no
        transaction around them where the engine can spare its round trips (PostgreSQL's
        autocommit), else `write()`."""

    def atomic(self, conn: Connection) -> AbstractContextManager[Connection]:
        """Statements on a `statements()` connection as one transaction: PostgreSQL's
        BEGIN ... COMMIT on its autocommit connection; SQLite's is open already."""

    def joined(self, connection: object) -> tuple[Connection, Queries]:
        """The caller's connection, checked, and the queries to run on it."""

    def many(
        self,
        conn: Connection,
        sql: str,
        params: list[dict[str, Any]],
        names: Sequence[str] = (),
    ) -> list[tuple[int, list[tuple[Any, ...]]]]:
        """Run `sql` once per parameter set, in order, in the open transaction (pipelined
        into one round trip where the engine can): each run's row count and its rows'
        columns `names` (`named_rows`; no rows read when `names` is empty)."""

    def values(self, items: list[Any]) -> object:
        """A list of values as the `.sql` files take it (`:ids`, `:names`)."""

    def changed(self, conn: Connection, queues: Sequence[str]) -> None:
        """Inside a write: messages of `queues` may have become ready (wake waiters)."""

    def committed(self) -> None:
        """After a write that called `changed` committed (in-process wake-ups)."""

    def wait_hint(self) -> object:
        """Read before a lease attempt; handed to `wait` so a change in between counts."""

    def wait(self, queue: str, timeout: float, hint: object) -> None:
        """Block up to `timeout` s, returning early when `queue` may have changed."""

    def results_changed(self, conn: Connection) -> None:
        """Inside a write: result records were settled (wake their waiters on commit)."""

    def results_hint(self) -> object:
        """Read before a result is read; handed to `wait_results`."""

    def wait_results(self, timeout: float, hint: object) -> None:
        """Block up to `timeout` s, returning early when a result may have been settled."""

    def ping(self) -> None: ...

    def close(self) -> None: ...
