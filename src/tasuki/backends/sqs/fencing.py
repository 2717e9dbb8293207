"""What SQS cannot keep, kept in the lock store of `locks=`: lease records and the id window.

SQS cannot refuse a stale receipt handle: AWS documents that an old handle may still
delete a message, and the local test server always lets it. So, with `locks=`, every
lease writes a record `lease:QUEUE:ID -> receipt handle`, and ack, extend, release and
bury first compare-and-settle (or compare-and-renew) that record: a worker whose lease
lapsed and was taken by another lease finds someone else's handle there and is refused
before anything reaches SQS. The record outlives an expired lease (its TTL is SQS's
12-hour visibility limit plus a margin), which is also how a lease that finds a message
out of attempts knows its last lease expired rather than being released.

Each lease record also counts the leases granted on the SQS message it names (`copy`,
the MessageId): SQS's ApproximateReceiveCount also counts a receive this store refused
as a duplicate (a message handed to two racing receives), so a delivery's attempt is
`attempts_before + receives`, the leases this store granted on the copy. With no
record of the copy its lease is its first, or, where the store cannot know (see
`Take.fresh`), the receive count stands.
A settled record is kept (no owner) for that count, not deleted.

The id window (idempotent enqueue by id) is a second record, `id:QUEUE:ID`, taken with a
random owner at enqueue (so the same id offered twice meets a held record: duplicate),
kept while the message lives or is dead, and given the message's `keep_id` TTL at ack.

Every operation takes a batch. Three stores:
- `SqliteFences` (`locks=sqlite:///...`): a table of its own in the lock database, one
  transaction per batch (its named queries in `records.sql` beside this file);
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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tasuki.backends.base import LockStore
from tasuki.backends.luafiles import lua_source
from tasuki.backends.sqlfiles import load_queries
from tasuki.backends.sqs.options import SQS_MAX_RETENTION, SQS_MAX_VISIBILITY

LEASE_TTL = SQS_MAX_VISIBILITY + 600.0
ID_TTL = float(SQS_MAX_RETENTION)

# (queue, message id, lease token or id owner)
Record = tuple[str, str, str]
# Named parameters of one run of a query.
Params = Mapping[str, object]
# What a lease granted: (fencing number, leases granted on the SQS message so far).
Granted = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Take:
    """One received message whose lease is to be recorded."""

    queue: str
    id: str
    token: str  # the receipt handle: the lease token
    copy: str  # the SQS MessageId received
    count: int  # SQS's ApproximateReceiveCount of that copy
    fence: int  # the fencing number counted from the message (fence_before + count)
    visibility: float
    # The copy was first received less than LEASE_TTL ago: every lease granted on it
    # since then is still on record, so no record of it means none was (its first lease
    # is the first). Otherwise its record may have expired: the receive count it is.
    fresh: bool

    @property
    def record(self) -> Record:
        return (self.queue, self.id, self.token)

    def first(self) -> int:
        """The receives to count where the store has no record of this copy."""
        return 1 if self.fresh else self.count


class Fences(ABC):
    def __init__(self, locks: LockStore, prefix: str) -> None:
        self.locks = locks  # also the store of unique claims
        self._prefix = f"tasuki-sqs:{prefix}"

    def _lease(self, queue: str, id: str) -> str:
        return f"{self._prefix}lease:{queue}:{id}"

    def _id(self, queue: str, id: str) -> str:
        return f"{self._prefix}id:{queue}:{id}"

    @abstractmethod
    def take(self, takes: Sequence[Take]) -> list[Granted | None]:
        """Record each token as its message's current lease, replacing a lapsed or
        settled one, with its fencing number: the one counted from the message, or one
        more than the last lease's where that is higher (SQS's receive count is
        approximate), and the leases granted on its SQS message: one more than recorded
        for the same copy (at most its receive count), else `Take.first()`; where the
        last lease of another copy of the message was never settled, the receive count.
        Returns (fence, receives) per message; None where another lease of the message
        is still live, or where this very SQS message was acked a moment ago (SQS
        delivered it twice): not to be delivered, and not counted."""

    @abstractmethod
    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        """End each lease whose token is still current; False where stale. The record
        stays without an owner (plain locks: deleted): for its count of leases, or,
        `acked`, a while, as the message is gone and a late second delivery of it must
        not run."""

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

    def take(self, takes: Sequence[Take]) -> list[Granted | None]:
        for take in takes:
            queue, id, token = take.record
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
        # Plain locks keep no numbers: the message's counts they are.
        return [(take.fence, take.count) for take in takes]

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
    "lapsed",
    "forget",
    "claim_id",
    "keep_id",
    "drop_id",
)
# The SQLite records' queries, in records.sql beside this file.
SQL = load_queries("tasuki.backends.sqs", "records.sql", QUERY_NAMES)
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
        self._db.execute(SQL["create_table"])
        columns = {row[0] for row in self._db.execute(SQL["columns"])}
        for column in ("copy", "receives"):
            if column not in columns:  # a table made before the column
                self._db.execute(SQL[f"add_{column}"])
        self._mutex = threading.Lock()
        self._writes = 0

    def _write(self, query: str, rows: Sequence[Params]) -> list[bool]:
        """Run the named query once per row in one transaction; True where it changed
        a row."""
        if not rows:
            return []
        with self._transaction(len(rows)) as db:
            return [db.execute(SQL[query], row).rowcount > 0 for row in rows]

    @contextmanager
    def _transaction(self, rows: int) -> Iterator[sqlite3.Connection]:
        """One write transaction of `rows` rows; every SWEEP_EVERY rows, expired ones
        go."""
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

    def take(self, takes: Sequence[Take]) -> list[Granted | None]:
        if not takes:
            return []
        now = time.time()
        granted: list[Granted | None] = []
        with self._transaction(len(takes)) as db:
            for take in takes:
                key = self._lease(take.queue, take.id)
                row = db.execute(SQL["read_lease"], {"key": key}).fetchone()
                if row is not None and row[3] <= now:
                    row = None  # expired: no record
                # A live lease holds it, or (no owner) this very SQS message was acked:
                # either way a duplicate delivery, not to run.
                if (
                    row is not None
                    and row[2] > now
                    and row[1] != take.token
                    and (row[1] or row[4] == take.copy)
                ):
                    granted.append(None)
                    continue
                last = None if row is None else (row[0], row[1], row[4], row[5])
                fence, receives = _grant(take, last)
                db.execute(
                    SQL["write_lease"],
                    {
                        "key": key,
                        "owner": take.token,
                        "expires": now + LEASE_TTL,
                        "fence": fence,
                        "lease_until": now + take.visibility,
                        "copy": take.copy,
                        "receives": receives,
                    },
                )
                granted.append((fence, receives))
        return granted

    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        now = time.time()
        if acked:
            until = now + ACKED_GRACE
            return self._write(
                "settle_acked",
                [
                    {"until": until, "key": self._lease(q, i), "owner": t, "now": now}
                    for q, i, t in leases
                ],
            )
        expires = now + LEASE_TTL
        return self._write(
            "settle_released",
            [
                {"expires": expires, "key": self._lease(q, i), "owner": t, "now": now}
                for q, i, t in leases
            ],
        )

    def current(self, leases: Sequence[Record], visibility: float) -> list[bool]:
        now = time.time()
        return self._write(
            "renew_lease",
            [
                {
                    "expires": now + LEASE_TTL,
                    "until": now + visibility,
                    "key": self._lease(q, i),
                    "owner": t,
                    "now": now,
                }
                for q, i, t in leases
            ],
        )

    def lapsed(self, queue: str, id: str) -> bool:
        with self._mutex:
            row = self._db.execute(
                SQL["lapsed"], {"key": self._lease(queue, id), "now": time.time()}
            ).fetchone()
        return row is not None

    def forget_leases(self, queue: str, ids: Sequence[str]) -> None:
        self._write("forget", [{"key": self._lease(queue, i)} for i in ids])

    def claim_ids(self, claims: Sequence[Record]) -> list[bool]:
        now = time.time()
        return self._write(
            "claim_id",
            [
                {"key": self._id(q, i), "owner": owner, "expires": now + ID_TTL, "now": now}
                for q, i, owner in claims
            ],
        )

    def finish_ids(self, queue: str, done: Sequence[tuple[str, str, float]]) -> None:
        now = time.time()
        keep = [
            {"expires": now + k, "key": self._id(queue, i), "owner": o} for i, o, k in done if k > 0
        ]
        drop = [{"key": self._id(queue, i), "owner": o} for i, o, k in done if k <= 0]
        self._write("keep_id", keep)
        self._write("drop_id", drop)

    def close(self) -> None:
        with self._mutex:
            self._db.close()


# Records per script call: a bound on how long one call holds the Redis server.
REDIS_CHUNK = 500


def _script(name: str) -> str:
    return lua_source("tasuki.backends.sqs", name)


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

    def take(self, takes: Sequence[Take]) -> list[Granted | None]:
        if self._cluster():
            return super().take(takes)
        if not takes:
            return []
        keys = [self._lease(t.queue, t.id) for t in takes]
        args: list[Any] = []
        for t in takes:
            args += (t.token, _ms(t.visibility), t.copy, t.count, t.fence, t.first())
        taken = self._run("lease_take", keys, args, [_ms(LEASE_TTL)])
        pairs = zip(taken[0::2], taken[1::2], strict=True)
        return [(int(f), int(n)) if int(f) > 0 else None for f, n in pairs]

    def settle(self, leases: Sequence[Record], acked: bool = False) -> list[bool]:
        if not leases or self._cluster():
            return super().settle(leases, acked)
        keys = [self._lease(q, i) for q, i, _ in leases]
        grace = _ms(ACKED_GRACE) if acked else 0
        tokens = [t for _, _, t in leases]
        head = [grace, _ms(LEASE_TTL)]
        return [r == 1 for r in self._run("lease_settle", keys, tokens, head)]

    def lapsed(self, queue: str, id: str) -> bool:
        if self._cluster():
            return super().lapsed(queue, id)
        record = self._redis._command("GET", self._redis.keys.lock(self._lease(queue, id)))
        if isinstance(record, bytes):
            record = record.decode()
        # "owner\n...": a settled record has no owner
        return isinstance(record, str) and record.split("\n", 1)[0] != ""

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


def _grant(take: Take, last: tuple[int, str, str, int] | None) -> Granted:
    """The (fence, receives) of a lease taken over the message's record `last`
    (fence, owner, copy, receives), or over none. lua/lease_take.lua does the same."""
    if last is None:
        return take.fence, take.first()
    fence, owner, copy, receives = last
    if copy == take.copy:
        counted = receives + 1 if receives else take.count  # 0: a record before the count
    elif owner:  # another copy's lease never settled: it may have runs we cannot see
        counted = take.count
    else:  # a settled copy (the one re-sent as this one, typically)
        counted = take.first()
    return max(take.fence, fence + 1), counted


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
