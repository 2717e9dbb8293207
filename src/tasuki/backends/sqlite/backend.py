"""`sqlite:///path.db` — the embedded default: one file, many processes, zero setup.

Safety across processes comes from SQLite itself: WAL so readers never block the
writer, a busy timeout so writers queue instead of failing, and short `BEGIN IMMEDIATE`
transactions so a lease is decided by exactly one writer at a time. The lease walks a
partial index ordered by visibility, so it stays O(log n) whatever the backlog.

There is no cross-process notification in SQLite, so an idle `lease(wait=...)` polls
`PRAGMA data_version` — a counter that changes when another connection commits, read
from shared memory without touching the database pages — backing off from 1 ms to
`poll_interval` (20 ms). Commits from the same process wake waiters at once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from typing import Any

import orjson

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    LockHolder,
    LockStore,
    QueueStats,
    Receipt,
    Release,
)
from tasuki.backends.sqlfiles import load_queries
from tasuki.errors import BackendError, BackendUnavailable, InvalidURL
from tasuki.message import DeadLetter, ErrorInfo

Q = load_queries("tasuki.backends.sqlite", "queries.sql")
SCHEMA = resources.files("tasuki.backends.sqlite").joinpath("schema.sql").read_text("utf-8")

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
SYNCHRONOUS = ("off", "normal", "full", "extra")
CLEANUP_EVERY = 30.0


class _ThreadConnection(threading.local):
    conn: sqlite3.Connection | None = None
    pid: int = 0


class SQLiteBackend(Backend):
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
        self.url = f"sqlite:///{path}"
        self.capabilities = Capabilities(max_message_size=max_message_size)
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._poll_interval = poll_interval
        self._local = _ThreadConnection()
        self._all: list[sqlite3.Connection] = []
        self._all_mutex = threading.Lock()
        self._changed = threading.Condition()
        self._next_cleanup = 0.0
        self._locks = SQLiteLockStore(self)
        self._closed = False
        self._conn()  # open now: a path that can't be opened fails at construction

    # -- connections -----------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
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
            conn.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        local.conn, local.pid = conn, os.getpid()
        with self._all_mutex:
            self._all.append(conn)
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A short IMMEDIATE transaction: the write lock is taken up front, never upgraded."""
        conn = self._conn()
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

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _maybe_cleanup(self, conn: sqlite3.Connection, now: float) -> None:
        if now >= self._next_cleanup:
            self._next_cleanup = now + CLEANUP_EVERY
            conn.execute(Q["forget_expired"], {"now": now})
            conn.execute(Q["locks_forget_expired"], {"now": now})

    # -- producing -------------------------------------------------------------------
    def enqueue(self, envelopes: Sequence[Envelope]) -> list[Enqueued]:
        results: list[Enqueued] = []
        with self._write() as conn:
            now = time.time()
            for env in envelopes:
                results.append(self._enqueue_one(conn, env, now))
            self._maybe_cleanup(conn, now)
        self._notify()
        return results

    def _enqueue_one(self, conn: sqlite3.Connection, env: Envelope, now: float) -> Enqueued:
        if conn.execute(Q["known_id"], {"queue": env.queue, "id": env.id, "now": now}).fetchone():
            return Enqueued(env.id, "duplicate")
        headers = orjson.dumps(dict(env.headers)).decode()
        unique_key = None
        if env.unique is not None:
            unique_key = env.unique.key
            row = conn.execute(Q["lock_holder"], {"key": unique_key, "now": now}).fetchone()
            if row is not None and row[0] != env.id:
                holder = row[0]
                if env.unique.replace:
                    replaced = conn.execute(
                        Q["replace_waiting_payload"],
                        {"queue": env.queue, "id": holder, "body": env.body, "headers": headers},
                    ).rowcount
                    if replaced:
                        return Enqueued(holder, "replaced")
                return Enqueued(holder, "conflict")
            conn.execute(
                Q["lock_acquire"],
                {"key": unique_key, "owner": env.id, "ttl": env.unique.ttl, "now": now},
            )
        conn.execute(
            Q["insert_message"],
            {
                "queue": env.queue,
                "id": env.id,
                "body": env.body,
                "headers": headers,
                "now": now,
                "delay": env.delay,
                "max_attempts": env.max_attempts,
                "visibility_timeout": env.visibility_timeout,
                "keep_id": env.keep_id,
                "unique_key": unique_key,
            },
        )
        return Enqueued(env.id, "enqueued")

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
        deadline = time.monotonic() + wait
        while True:
            version = self._data_version() if wait > 0 else 0
            leased = self._lease_now(queue, max_messages, visibility_timeout)
            if leased or time.monotonic() >= deadline:
                return leased
            self._wait_for_change(queue, deadline, version)

    def _data_version(self) -> int:
        row = self._conn().execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def _lease_now(self, queue: str, max_messages: int, vt: float) -> list[Delivery]:
        leased: list[Delivery] = []
        with self._write() as conn:
            now = time.time()
            while len(leased) < max_messages:
                rows = conn.execute(
                    Q["due_candidates"],
                    {"queue": queue, "now": now, "limit": max_messages - len(leased)},
                ).fetchall()
                if not rows:
                    break
                exhausted = [seq for seq, done in rows if done]
                fresh = [seq for seq, done in rows if not done]
                if exhausted:
                    buried = conn.execute(
                        Q["bury_exhausted"], {"seqs": orjson.dumps(exhausted), "now": now}
                    ).fetchall()
                    self._drop_unique_locks(conn, buried)
                if fresh:
                    params = {
                        "seqs": orjson.dumps(fresh),
                        "now": now,
                        "nonce": os.urandom(6).hex(),
                        "visibility_timeout": vt,
                    }
                    for row in conn.execute(Q["lease_rows"], params).fetchall():
                        leased.append(
                            Delivery(
                                queue=queue,
                                id=row[0],
                                body=bytes(row[1]),
                                headers=orjson.loads(row[2]),
                                attempt=row[3],
                                max_attempts=row[4],
                                enqueued_at=float(row[5]),
                                token=row[6],
                                fencing_token=row[7],
                                visibility_timeout=float(row[8]),
                            )
                        )
                if not exhausted:
                    break
        return leased

    def _wait_for_change(self, queue: str, deadline: float, version: int) -> None:
        """Sleep until the next delayed message is due, another commit lands, or `deadline`.

        `version` was read before the failed lease, so a commit that landed in between
        is not missed.
        """
        conn = self._conn()
        row = conn.execute(Q["next_visible_at"], {"queue": queue}).fetchone()
        due_in = (row[0] - time.time()) if row and row[0] is not None else float("inf")
        until = min(deadline, time.monotonic() + max(0.0, due_in))
        interval = 0.001  # quick right after activity, then backing off to poll_interval
        while True:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            with self._changed:
                if self._changed.wait(min(remaining, interval)):
                    return
            interval = min(interval * 1.5, self._poll_interval)
            if self._data_version() != version:
                return

    def _settle(self, query: str, params: list[dict[str, Any]]) -> list[bool]:
        with self._write() as conn:
            now = time.time()
            results = []
            for p in params:
                p["now"] = now
                results.append(conn.execute(query, p).rowcount == 1)
        return results

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        results = []
        with self._write() as conn:
            now = time.time()
            for r in receipts:
                row = conn.execute(
                    Q["ack"], {"queue": r.queue, "id": r.id, "token": r.token}
                ).fetchone()
                if row is not None and row[0] > 0:
                    conn.execute(
                        Q["remember_finished"],
                        {"queue": r.queue, "id": r.id, "now": now, "keep_id": row[0]},
                    )
                results.append(row is not None)
        return results

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return self._settle(
            Q["extend"],
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
        results = self._settle(
            Q["release"],
            [
                {
                    "queue": item.receipt.queue,
                    "id": item.receipt.id,
                    "token": item.receipt.token,
                    "delay": item.delay,
                    "refund": 0 if item.penalty else 1,
                }
                for item in releases
            ],
        )
        self._notify()
        return results

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        results = []
        with self._write() as conn:
            now = time.time()
            for item in burials:
                r, err = item.receipt, item.error
                rows = conn.execute(
                    Q["bury"],
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
                results.append(bool(rows))
        return results

    @staticmethod
    def _drop_unique_locks(conn: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> None:
        """A dead message gives up its uniqueness lock, so the job can be enqueued again."""
        for msg_id, unique_key in rows:
            if unique_key is not None:
                conn.execute(Q["lock_drop_owned"], {"key": unique_key, "owner": msg_id})

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        now = time.time()
        conn = self._conn()
        ready, in_flight, delayed, dead, oldest = conn.execute(
            Q["stats"], {"queue": queue, "now": now}
        ).fetchone()
        age = max(0.0, now - oldest) if oldest is not None else 0.0
        return QueueStats(ready, in_flight, delayed, dead, age)

    def queues(self) -> list[str]:
        return [row[0] for row in self._conn().execute(Q["queues"]).fetchall()]

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        rows = (
            self._conn()
            .execute(Q["dead_letters"], {"queue": queue, "limit": limit, "offset": offset})
            .fetchall()
        )
        return [_dead_letter(queue, row) for row in rows]

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        row = self._conn().execute(Q["dead_letter"], {"queue": queue, "id": id}).fetchone()
        return None if row is None else _dead_letter(queue, row)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        with self._write() as conn:
            now = time.time()
            if ids is None:
                count = conn.execute(Q["redrive_all"], {"queue": queue, "now": now}).rowcount
            else:
                count = conn.execute(
                    Q["redrive_ids"], {"queue": queue, "now": now, "ids": orjson.dumps(list(ids))}
                ).rowcount
        self._notify()
        return count

    def purge_dead(self, queue: str) -> int:
        with self._write() as conn:
            return conn.execute(Q["purge_dead"], {"queue": queue}).rowcount

    def purge(self, queue: str) -> int:
        with self._write() as conn:
            conn.execute(Q["purge_waiting_locks"], {"queue": queue})
            return conn.execute(Q["purge"], {"queue": queue}).rowcount

    @property
    def locks(self) -> SQLiteLockStore:
        return self._locks

    def ping(self) -> None:
        try:
            self._conn().execute("SELECT 1").fetchone()
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


class SQLiteLockStore(LockStore):
    """Locks in the same file as the messages, so enqueue can take one in its transaction."""

    def __init__(self, backend: SQLiteBackend) -> None:
        self._backend = backend
        self.clock: Callable[[], float] = time.time  # tests drive time by hand

    def _one(self, query: str, params: dict[str, Any]) -> int:
        with self._backend._write() as conn:
            params["now"] = self.clock()
            return conn.execute(query, params).rowcount

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return self._one(Q["lock_acquire"], {"key": key, "owner": owner, "ttl": ttl}) == 1

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        with self._backend._write() as conn:
            now = self.clock()
            return [
                conn.execute(
                    Q["lock_renew"], {"key": k, "owner": owner, "ttl": ttl, "now": now}
                ).rowcount
                == 1
                for k in keys
            ]

    def release(self, key: str, owner: str) -> bool:
        return self._one(Q["lock_release"], {"key": key, "owner": owner}) == 1

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        params = {"key": key, "owner": owner, "new_owner": new_owner, "ttl": ttl}
        return self._one(Q["lock_swap"], params) == 1

    def holder(self, key: str) -> LockHolder | None:
        now = self.clock()
        row = self._backend._conn().execute(Q["lock_holder"], {"key": key, "now": now}).fetchone()
        return None if row is None else LockHolder(row[0], row[1] - now)


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
