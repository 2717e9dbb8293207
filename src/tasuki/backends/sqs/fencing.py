"""What SQS cannot keep, kept in the lock store of `locks=`: lease records and the id window.

SQS cannot refuse a stale receipt handle: AWS documents that an old handle may still
delete a message, and the local test server always lets it. So, with `locks=`, every
lease writes a record `lease:QUEUE:ID -> receipt handle`, and ack, extend, release and
bury first compare-and-delete (or compare-and-renew) that record: a worker whose lease
lapsed and was taken by another lease finds someone else's handle there and is refused
before anything reaches SQS. The record outlives an expired lease (its TTL is SQS's
12-hour visibility limit plus a margin), which is also how a lease that finds a message
out of attempts knows its last lease expired rather than being released.

The id window (idempotent enqueue by id) is a second record, `id:QUEUE:ID`, taken with a
random owner at enqueue (so the same id offered twice meets a held record: duplicate),
kept while the message lives or is dead, and given the message's `keep_id` TTL at ack.

Every operation takes a batch. Three stores:
- `SqliteFences` (`locks=sqlite:///...`): a table of its own in the lock database, one
  transaction per batch;
- `RedisFences` (`locks=redis://...`, one server): one Lua script call per batch
  (`lua/*.lua` beside this file), the records being the lock store's own keys;
- `LockFences` (any other lock store, e.g. a Redis Cluster): plain `LockStore` calls
  (acquire/swap/release/renew/holder), one or two per record.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from tasuki.backends.base import LockStore
from tasuki.backends.sqs.options import SQS_MAX_RETENTION, SQS_MAX_VISIBILITY

LEASE_TTL = SQS_MAX_VISIBILITY + 600.0
ID_TTL = float(SQS_MAX_RETENTION)

# (queue, message id, lease token or id owner)
Record = tuple[str, str, str]


class Fences(ABC):
    def __init__(self, locks: LockStore, prefix: str) -> None:
        self.locks = locks  # also the store of unique claims
        self._prefix = f"tasuki-sqs:{prefix}"

    def _lease(self, queue: str, id: str) -> str:
        return f"{self._prefix}lease:{queue}:{id}"

    def _id(self, queue: str, id: str) -> str:
        return f"{self._prefix}id:{queue}:{id}"

    @abstractmethod
    def take(
        self,
        leases: Sequence[Record],
        fences: Sequence[int],
        visibility: Sequence[float],
        copies: Sequence[str],
    ) -> list[int | None]:
        """Record each token as its message's current lease, replacing a lapsed one, with
        its fencing number: the one counted from the message (`fences`), or one more than
        the lapsed lease's where that is higher (SQS's receive count is approximate).
        `copies` are the SQS MessageIds received. Returns the fencing numbers granted;
        None where another lease of the message is still live, or where this very SQS
        message was acked a moment ago (SQS delivered it twice): not to be delivered."""

    @abstractmethod
    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        """Delete each lease record whose token is still current; False where stale.
        `acked`: the message is gone, and a late second delivery of it must not run."""

    @abstractmethod
    def current(self, leases: Sequence[Record], visibility: float) -> list[bool]:
        """Renew each lease record whose token is still current; False where stale."""

    @abstractmethod
    def lapsed(self, queue: str, id: str) -> bool:
        """A lease of the message was taken and never settled (it expired)."""

    @abstractmethod
    def forget_leases(self, queue: str, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def claim_ids(self, claims: Sequence[Record]) -> list[bool]:
        """False for each id already known (queued, in flight, dead or kept)."""

    @abstractmethod
    def finish_ids(self, queue: str, done: Sequence[tuple[str, str, float]]) -> None:
        """(id, owner or '' for any, keep): keep the id `keep` s more, or forget it now."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class LockFences(Fences):
    """Records as plain locks: works on any lock store."""

    def take(
        self,
        leases: Sequence[Record],
        fences: Sequence[int],
        visibility: Sequence[float],
        copies: Sequence[str],
    ) -> list[int | None]:
        for queue, id, token in leases:
            key = self._lease(queue, id)
            for _ in range(5):
                holder = self.locks.holder(key)
                if holder is None:
                    if self.locks.acquire(key, token, LEASE_TTL):
                        break
                elif self.locks.swap(key, holder.owner, token, LEASE_TTL):
                    break
            else:
                raise RuntimeError(f"could not record the lease of {queue}/{id}")
        return list(fences)  # plain locks keep no number: the message's count it is

    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        return [self.locks.release(self._lease(q, i), t) for q, i, t in leases]

    def current(self, leases: Sequence[Record], visibility: float) -> list[bool]:
        return [self.locks.renew([self._lease(q, i)], t, LEASE_TTL)[0] for q, i, t in leases]

    def lapsed(self, queue: str, id: str) -> bool:
        return self.locks.holder(self._lease(queue, id)) is not None

    def forget_leases(self, queue: str, ids: Sequence[str]) -> None:
        for id in ids:
            key = self._lease(queue, id)
            holder = self.locks.holder(key)
            if holder is not None:
                self.locks.release(key, holder.owner)

    def claim_ids(self, claims: Sequence[Record]) -> list[bool]:
        return [self.locks.acquire(self._id(q, i), owner, ID_TTL) for q, i, owner in claims]

    def finish_ids(self, queue: str, done: Sequence[tuple[str, str, float]]) -> None:
        for id, given, keep in done:
            key = self._id(queue, id)
            owner = given
            if not owner:
                holder = self.locks.holder(key)
                if holder is None:
                    continue
                owner = holder.owner
            if keep > 0:
                self.locks.swap(key, owner, owner, keep)
            else:
                self.locks.release(key, owner)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasuki_sqs_records (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until REAL NOT NULL DEFAULT 0,
    copy TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID
"""
# How long an acked message's record stays, refusing a late second delivery of the same
# SQS message (standard queues deliver at least once; the local server does it when
# receives race). A copy re-sent under the same tasuki id is another SQS message.
ACKED_GRACE = 300.0
# Lapsed records are swept every this many writes.
SWEEP_EVERY = 2000


class SqliteFences(Fences):
    """Records in a table of the lock database (`locks=sqlite:///...`), a batch per
    transaction. WAL with synchronous=NORMAL: a power cut may lose the last records,
    which makes the current holder's settle refused (the message runs again: never
    lost) or lets an id be enqueued again (a duplicate, as without `locks=`)."""

    def __init__(self, locks: LockStore, prefix: str, path: str) -> None:
        super().__init__(locks, prefix)
        self._db = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(tasuki_sqs_records)")}
        if "copy" not in columns:  # a table made before the column
            self._db.execute(
                "ALTER TABLE tasuki_sqs_records ADD COLUMN copy TEXT NOT NULL DEFAULT ''"
            )
        self._mutex = threading.Lock()
        self._writes = 0

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> list[bool]:
        """Run `sql` once per row in one transaction; True where it changed a row."""
        if not rows:
            return []
        with self._mutex:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                changed = [db.execute(sql, row).rowcount > 0 for row in rows]
                self._writes += len(rows)
                if self._writes >= SWEEP_EVERY:
                    self._writes = 0
                    db.execute("DELETE FROM tasuki_sqs_records WHERE expires <= ?", (time.time(),))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return changed

    def take(
        self,
        leases: Sequence[Record],
        fences: Sequence[int],
        visibility: Sequence[float],
        copies: Sequence[str],
    ) -> list[int | None]:
        if not leases:
            return []
        now = time.time()
        granted: list[int | None] = []
        with self._mutex:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = zip(leases, fences, visibility, copies, strict=True)
                for (q, i, t), counted, vt, copy in rows:
                    key = self._lease(q, i)
                    row = db.execute(
                        "SELECT fence, owner, lease_until, expires, copy FROM tasuki_sqs_records"
                        " WHERE key = ?",
                        (key,),
                    ).fetchone()
                    live = row is not None and row[3] > now and row[2] > now
                    # A live lease holds it, or (no owner) this very SQS message was
                    # acked: either way a duplicate delivery, not to run.
                    if live and row[1] != t and (row[1] or row[4] == copy):
                        granted.append(None)
                        continue
                    fence = max(counted, row[0] + 1) if row is not None else counted
                    db.execute(
                        "INSERT OR REPLACE INTO tasuki_sqs_records"
                        " (key, owner, expires, fence, lease_until, copy)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (key, t, now + LEASE_TTL, fence, now + vt, copy),
                    )
                    granted.append(fence)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return granted

    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        now = time.time()
        if acked:  # kept a while, with no owner, as the record of what was acked
            until = now + ACKED_GRACE
            return self._write(
                "UPDATE tasuki_sqs_records SET owner = '', lease_until = ?, expires = ?"
                " WHERE key = ? AND owner = ? AND expires > ?",
                [(until, until, self._lease(q, i), t, now) for q, i, t in leases],
            )
        return self._write(
            "DELETE FROM tasuki_sqs_records WHERE key = ? AND owner = ? AND expires > ?",
            [(self._lease(q, i), t, now) for q, i, t in leases],
        )

    def current(self, leases: Sequence[Record], visibility: float) -> list[bool]:
        now = time.time()
        return self._write(
            "UPDATE tasuki_sqs_records SET expires = ?, lease_until = ?"
            " WHERE key = ? AND owner = ? AND expires > ?",
            [(now + LEASE_TTL, now + visibility, self._lease(q, i), t, now) for q, i, t in leases],
        )

    def lapsed(self, queue: str, id: str) -> bool:
        with self._mutex:
            row = self._db.execute(
                "SELECT 1 FROM tasuki_sqs_records WHERE key = ? AND expires > ? AND owner != ''",
                (self._lease(queue, id), time.time()),
            ).fetchone()
        return row is not None

    def forget_leases(self, queue: str, ids: Sequence[str]) -> None:
        self._write(
            "DELETE FROM tasuki_sqs_records WHERE key = ?", [(self._lease(queue, i),) for i in ids]
        )

    def claim_ids(self, claims: Sequence[Record]) -> list[bool]:
        now = time.time()
        return self._write(
            "INSERT INTO tasuki_sqs_records (key, owner, expires) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires"
            " WHERE tasuki_sqs_records.expires <= ?",
            [(self._id(q, i), owner, now + ID_TTL, now) for q, i, owner in claims],
        )

    def finish_ids(self, queue: str, done: Sequence[tuple[str, str, float]]) -> None:
        now = time.time()
        keep = [(now + k, self._id(queue, i), o, o) for i, o, k in done if k > 0]
        drop = [(self._id(queue, i), o, o) for i, o, k in done if k <= 0]
        self._write(
            "UPDATE tasuki_sqs_records SET expires = ? WHERE key = ? AND (owner = ? OR ? = '')",
            keep,
        )
        self._write("DELETE FROM tasuki_sqs_records WHERE key = ? AND (owner = ? OR ? = '')", drop)

    def close(self) -> None:
        with self._mutex:
            self._db.close()


# Records per script call: a bound on how long one call holds the Redis server.
REDIS_CHUNK = 500


@cache
def _script(name: str) -> str:
    return resources.files("tasuki.backends.sqs").joinpath("lua", f"{name}.lua").read_text("utf-8")


class RedisFences(LockFences):
    """Records as the lock store's own keys (so `holder` and `lapsed` read them as locks),
    written by one script call per batch instead of one or two calls per record. On a
    Redis Cluster a batch's keys live in many slots: there, the plain locks of
    `LockFences`, per record."""

    def __init__(self, locks: LockStore, prefix: str, redis: Any) -> None:
        super().__init__(locks, prefix)
        self._redis = redis  # the RedisBackend of `locks=`

    def _cluster(self) -> bool:
        return bool(self._redis._connection().cluster)  # connects on first use

    def _run(self, name: str, keys: list[str], args: list[Any], head: list[Any]) -> list[Any]:
        """Script `name` over `keys` (with per-key `args`, after the shared `head`), one
        call per REDIS_CHUNK keys; the replies joined."""
        full = [self._redis.keys.lock(k) for k in keys]
        per_key = len(args) // len(keys) if keys else 0
        out: list[Any] = []
        for start in range(0, len(full), REDIS_CHUNK):
            part = full[start : start + REDIS_CHUNK]
            part_args = args[start * per_key : (start + len(part)) * per_key]
            reply = self._redis._command("EVAL", _script(name), len(part), *part, *head, *part_args)
            if isinstance(reply, list):
                out.extend(reply)
        return out

    def take(
        self,
        leases: Sequence[Record],
        fences: Sequence[int],
        visibility: Sequence[float],
        copies: Sequence[str],
    ) -> list[int | None]:
        if self._cluster():
            return super().take(leases, fences, visibility, copies)
        if not leases:
            return []
        keys = [self._lease(q, i) for q, i, _ in leases]
        args: list[Any] = []
        for (_, _, token), vt, copy in zip(leases, visibility, copies, strict=True):
            args += (token, _ms(vt), copy)
        taken = self._run("lease_take", keys, args, [_ms(LEASE_TTL)])
        # The records keep no number: the message's count it is, where recorded.
        return [f if ok == 1 else None for f, ok in zip(fences, taken, strict=True)]

    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        if not leases or self._cluster():
            return super().settle(leases, acked)
        keys = [self._lease(q, i) for q, i, _ in leases]
        grace = _ms(ACKED_GRACE) if acked else 0
        tokens = [t for _, _, t in leases]
        return [r == 1 for r in self._run("lease_settle", keys, tokens, [grace])]

    def current(self, leases: Sequence[Record], visibility: float) -> list[bool]:
        if not leases or self._cluster():
            return super().current(leases, visibility)
        keys = [self._lease(q, i) for q, i, _ in leases]
        tokens = [t for _, _, t in leases]
        head = [_ms(LEASE_TTL), _ms(visibility)]
        return [r == 1 for r in self._run("lease_renew", keys, tokens, head)]

    def forget_leases(self, queue: str, ids: Sequence[str]) -> None:
        if self._cluster():
            super().forget_leases(queue, ids)
        elif ids:
            keys = [self._redis.keys.lock(self._lease(queue, i)) for i in ids]
            self._redis._command("DEL", *keys)

    def claim_ids(self, claims: Sequence[Record]) -> list[bool]:
        if not claims or self._cluster():
            return super().claim_ids(claims)
        keys = [self._id(q, i) for q, i, _ in claims]
        owners = [o for _, _, o in claims]
        return [r == 1 for r in self._run("id_claim", keys, owners, [_ms(ID_TTL)])]

    def finish_ids(self, queue: str, done: Sequence[tuple[str, str, float]]) -> None:
        if self._cluster():
            super().finish_ids(queue, done)
        elif done:
            keys = [self._id(queue, i) for i, _, _ in done]
            args: list[Any] = []
            for _, owner, keep in done:
                args += [owner, _ms(keep) if keep > 0 else 0]
            self._run("id_finish", keys, args, [])


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def fences_for(lock_backend: object, locks: LockStore, prefix: str) -> Fences:
    """Batched records on SQLite and on a single Redis server, plain locks otherwise."""
    path = getattr(lock_backend, "path", None)
    if type(lock_backend).__name__ == "SQLiteBackend" and isinstance(path, str):
        return SqliteFences(locks, prefix, path)
    if type(lock_backend).__name__ == "RedisBackend":
        return RedisFences(locks, prefix, lock_backend)
    return LockFences(locks, prefix)
