"""SQLite at depth: stats read counts kept with the writes (`tasuki_depth`) instead of
counting every waiting message, and the statements a deep queue meets walk the index
that stops early."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

import pytest

from tasuki.backends.base import Envelope, Limit, QueueStats, Settle, UniqueClaim
from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.sqlite.dialect import Q
from tasuki.core.message import ErrorInfo


def counted(backend: SQLiteBackend, queue: str) -> QueueStats:
    """The stats as the messages themselves tell, counted row by row."""
    now = backend.clock()
    conn = backend.sqlite.conn()
    [(ready, in_flight, delayed, dead)] = conn.execute(
        "SELECT count(*) FILTER (WHERE state < 2 AND visible_at <= :now),"
        " count(*) FILTER (WHERE state = 1 AND visible_at > :now),"
        " count(*) FILTER (WHERE state = 0 AND visible_at > :now),"
        " count(*) FILTER (WHERE state = 2) FROM tasuki_messages WHERE queue = :queue",
        {"queue": queue, "now": now},
    ).fetchall()
    stats = backend.stats(queue)
    return QueueStats(ready, in_flight, delayed, dead, stats.oldest_ready_age)


@pytest.fixture
def backend(tmp_path: Path) -> SQLiteBackend:
    return SQLiteBackend(str(tmp_path / "depth.db"))


def test_stats_keep_up_with_every_kind_of_write(backend: SQLiteBackend, tmp_path: Path) -> None:
    """Enqueues (plain, batched, unique, replacing, in the caller's transaction committed
    or rolled back, with limits or without), leases (dead-lettering the exhausted, finding
    lost leases, admitting and parking limited messages), settles of every verdict,
    extends, cancels, redrives and purges, in a random order: after each, the stats read
    from the counts are what counting the messages says."""
    slot = Limit("concurrency:c", "concurrency", 2)
    rate = Limit("rate:r", "rate", 3, 2.0)
    rng = random.Random(20)
    now = [1_000.0]
    backend.clock = lambda: now[0]
    error = ErrorInfo("RuntimeError", "boom", "")
    held: list[Settle] = []
    ids = iter(range(1_000_000))
    queues = ["a", "b"]

    def enqueue() -> None:
        queue = rng.choice(queues)
        batch = [
            Envelope(
                queue,
                f"m{next(ids)}" if rng.random() < 0.9 else "again",
                b"x",
                delay=rng.choice([0.0, 0.0, 5.0]),
                max_attempts=rng.choice([1, 2, 5]),
                visibility_timeout=rng.choice([None, 1.0]),
                unique=UniqueClaim("u", 3.0, rng.random() < 0.5) if rng.random() < 0.2 else None,
                limits=rng.choice([(), (), (slot,), (rate,), (slot, rate)]),
            )
            for _ in range(rng.choice([1, 1, 3]))
        ]
        if rng.random() < 0.2:
            conn = sqlite3.connect(tmp_path / "depth.db")
            backend.enqueue(batch, connection=conn)
            (conn.commit if rng.random() < 0.5 else conn.rollback)()
            conn.close()
        else:
            backend.enqueue(batch)

    def lease() -> None:
        leased = backend.lease(rng.choice(queues), rng.choice([1, 4]), rng.choice([1.0, 30.0]))
        held.extend(Settle.ack(d.receipt) for d in leased)

    def settle() -> None:
        rng.shuffle(held)
        batch = [
            item._replace(verdict=rng.choice(["ack", "release", "dead"]))._replace(
                delay=rng.choice([0.0, 2.0]), penalty=rng.random() < 0.5, error=error
            )
            for item in held[: rng.choice([1, 3])]
        ]
        del held[: len(batch)]
        backend.settle(batch + batch[:1])  # a repeat is refused, not counted twice

    def extend() -> None:
        backend.extend([item.receipt for item in held[:2]], 5.0)

    def operate() -> None:
        queue = rng.choice(queues)
        action = rng.choice(["redrive_all", "redrive_one", "purge_dead", "purge", "cancel"])
        if action == "cancel":  # a waiting, a running, a lapsed or an unknown message
            backend.cancel(queue, f"m{rng.randrange(next(ids))}")
        elif action == "redrive_all":
            backend.redrive(queue)
        elif action == "redrive_one":
            letters = backend.dead_letters(queue, limit=1)
            backend.redrive(queue, [letter.id for letter in letters] + ["nobody"])
        elif action == "purge_dead":
            backend.purge_dead(queue)
        elif rng.random() < 0.2:
            backend.purge(queue)

    steps = [enqueue] * 6 + [lease] * 5 + [settle] * 4 + [extend, operate]
    for _ in range(600):
        rng.choice(steps)()
        now[0] += rng.choice([0.0, 0.5, 1.5])
        for queue in queues:
            assert backend.stats(queue) == counted(backend, queue)


def test_a_database_made_before_the_counts_gets_them_when_first_opened(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    backend = SQLiteBackend(path)
    backend.enqueue([Envelope("q", f"m{i}", b"x", max_attempts=1) for i in range(5)])
    backend.enqueue([Envelope("r", "late", b"x", delay=60.0)])
    backend.settle([Settle.dead(d.receipt, "failed") for d in backend.lease("q", 2)])
    before = (backend.stats("q"), backend.stats("r"))
    backend.close()
    conn = sqlite3.connect(path, isolation_level=None)  # as an older tasuki left it
    conn.execute("DROP TABLE tasuki_depth")
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    again = SQLiteBackend(path)
    assert [s.as_dict() for s in (again.stats("q"), again.stats("r"))] == [
        {**s.as_dict(), "oldest_ready_age": pytest.approx(s.oldest_ready_age, abs=5.0)}
        for s in before
    ]
    assert before[0].dead == 2 and before[0].ready == 3 and before[1].delayed == 1
    again.close()


def plan(backend: SQLiteBackend, name: str) -> str:
    params = {"queue": "q", "now": time.time()}
    rows = backend.sqlite.conn().execute("EXPLAIN QUERY PLAN " + Q[name], params).fetchall()
    return "\n".join(row[3] for row in rows)


def test_stats_and_the_idle_wait_never_walk_the_waiting_messages(backend: SQLiteBackend) -> None:
    """What counted every waiting message's index entry (50 ms at a million): the ready
    count of stats, and the due time an idle lease waits for (the planner took the
    state index's whole `state < 2` range for its min)."""
    backend.enqueue([Envelope("q", f"m{i}", b"x") for i in range(50)])
    backend.sqlite.conn().execute("ANALYZE")
    stats = plan(backend, "stats")
    assert "state<?" not in stats, stats  # only the state = 0 and state = 1 ranges
    assert "SCAN tasuki_messages" not in stats, stats
    wait = plan(backend, "next_visible_at")
    assert "state<?" not in wait, wait  # the first entry of each state's range
    assert "SCAN tasuki_messages" not in wait, wait
