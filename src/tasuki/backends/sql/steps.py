"""The statements that follow a lease or a settle, in its transaction: the queue's totals
and meters, the unique locks of dead messages, the messages' history.

Where the engine's own `lease` and `ack` statements can take a step themselves
(`Dialect.cte_writes`), the shared layer leaves it to them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

from tasuki.backends.sql.dialect import Connection, Dialect
from tasuki.core.records import HISTORY_LIMIT, HistoryEvent

# Shards of the per-queue totals and meters rows, so concurrent writers seldom wait on
# the same row.
COUNT_SHARDS = 16


def count_settled(
    conn: Connection, dialect: Dialect, queue: str, acked: int = 0, dead: int = 0
) -> None:
    """Add to the queue's totals of acked and dead-lettered messages."""
    if acked or dead:
        params = {"queue": queue, "shard": random.randrange(COUNT_SHARDS)}
        conn.execute(dialect.queries["count_settled"], {**params, "acked": acked, "dead": dead})


class Depth:
    """Changes to queues' counts of waiting and dead messages, gathered in a transaction
    and written at its end, one `count_depth` per queue, where the dialect keeps them
    (SQLite); a no-op elsewhere."""

    def __init__(self) -> None:
        self.waiting: Counter[str] = Counter()
        self.dead: Counter[str] = Counter()

    def add(self, queue: str, waiting: int = 0, dead: int = 0) -> None:
        self.waiting[queue] += waiting
        self.dead[queue] += dead

    def write(self, conn: Connection, dialect: Dialect) -> None:
        sql = dialect.queries.get("count_depth")
        if sql is None:
            return
        for queue in sorted(self.waiting.keys() | self.dead.keys()):
            waiting, dead = self.waiting[queue], self.dead[queue]
            if waiting or dead:
                conn.execute(sql, {"queue": queue, "waiting": waiting, "dead": dead})


def add_meters(conn: Connection, dialect: Dialect, queue: str, meters: Mapping[str, int]) -> None:
    """Add to the queue's reliability meters (`tasuki.core.reliability`)."""
    values = dialect.values
    params = {
        "queue": queue,
        "shard": random.randrange(COUNT_SHARDS),
        "names": values(list(meters)),
        "values": values(list(meters.values())),
    }
    conn.execute(dialect.queries["count_meters"], params)


def drop_unique_locks(
    conn: Connection, dialect: Dialect, dead: Sequence[tuple[str, str | None]]
) -> None:
    """Dead messages (id, unique key) give up their uniqueness locks, so their jobs can
    be enqueued again."""
    drops = [{"key": key, "owner": msg_id} for msg_id, key in dead if key is not None]
    if drops:
        dialect.many(conn, dialect.queries["lock_drop_owned"], drops)


class History:
    """How leases ended, gathered during a settle and written at its end: one batch of
    `record_history`, then one of `prune_history` (each message keeps its last
    `HISTORY_LIMIT` entries)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.entries: list[dict[str, object]] = []

    def add(self, queue: str, msg_id: str, event: HistoryEvent, fence: int, detail: str) -> None:
        self.entries.append(
            {
                "queue": queue,
                "id": msg_id,
                "now": self.now,
                "event": event,
                "fence": fence,
                "detail": detail,
            }
        )

    def write(self, conn: Connection, dialect: Dialect) -> None:
        if not self.entries:
            return
        q = dialect.queries
        dialect.many(conn, q["record_history"], self.entries)
        messages = {(e["queue"], e["id"]) for e in self.entries}
        prune = [
            {"queue": queue, "id": msg_id, "keep": HISTORY_LIMIT} for queue, msg_id in messages
        ]
        dialect.many(conn, q["prune_history"], prune)
