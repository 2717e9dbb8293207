"""The lease keeps its plan at depth: an ordered walk of the partial rank index (no sort
of the due rows, with or without priorities), whatever the queue holds and however stale
the planner's statistics are."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from tasuki.backends.postgres import PostgresBackend, from_url
from tasuki.testing.servers import PostgresServer

DEPTH = 100_000


@pytest.fixture
def backend(postgres_server: PostgresServer) -> Any:
    backend = from_url(postgres_server.url(f"t_{uuid.uuid4().hex[:12]}"))
    assert isinstance(backend, PostgresBackend)
    backend.migrate()
    yield backend
    backend.close()


def fill(backend: PostgresBackend, queue: str, count: int, now: float, levels: int = 1) -> None:
    """`count` ready messages, made by the server (generate_series), oldest first, of
    priorities 0 to `levels` - 1 in turn."""
    with backend.postgres.write() as conn:
        conn.execute(
            "INSERT INTO tasuki_messages"
            " (queue, id, body, headers, visible_at, enqueued_at, max_attempts,"
            "  priority, head_start)"
            " SELECT %(queue)s, 'm' || i, '{}'::bytea, '{}', %(now)s - 3600 + i * 0.001,"
            " %(now)s, 10, i %% %(levels)s, (i %% %(levels)s) * %(aging)s"
            " FROM generate_series(1, %(count)s) AS i",
            {
                "queue": queue,
                "now": now,
                "count": count,
                "levels": levels,
                "aging": backend.priority_aging,
            },
        )


def lease_plan(backend: PostgresBackend, queue: str, now: float) -> str:
    """EXPLAIN (ANALYZE) of the lease on one of the backend's own sessions, rolled back."""
    params = {
        "queue": queue,
        "now": now,
        "limit": 256,
        "nonce": "x",
        "visibility_timeout": 30.0,
    }
    with backend.postgres.read() as conn:
        cursor: Any = conn
        with cursor.transaction(force_rollback=True):
            rows = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS) " + backend.q["lease"], params
            ).fetchall()
    return "\n".join(row[0] for row in rows)


def assert_walks_the_rank_index(plan: str) -> None:
    # The part that picks the rows: the `due` CTE, up to where the update starts.
    picking = plan[plan.index("CTE due") : plan.index("CTE changed")]
    assert "Index Scan using tasuki_messages_rank on tasuki_messages" in picking, plan
    for bad in ("Seq Scan", "Bitmap", "Sort"):
        assert bad not in picking, plan
    # The walk stops after the 256 rows it leases: it does not visit the whole queue.
    walk = next(line for line in picking.splitlines() if "tasuki_messages_rank" in line)
    assert "rows=256 " in walk, walk
    # The update finds the rows it locked by their `ctid`, with no index of its own.
    updating = plan[plan.index("CTE changed") : plan.index("CTE unlocked")]
    assert "Tid Scan on tasuki_messages m" in updating, plan
    assert "Seq Scan" not in updating, plan


def test_the_lease_walks_the_rank_index_at_depth_even_with_stale_statistics(
    backend: PostgresBackend,
) -> None:
    now = time.time()
    with backend.postgres.write() as conn:
        conn.execute("ANALYZE tasuki_messages")  # statistics of an empty table
    fill(backend, "deep", DEPTH, now)
    fill(backend, "other", 1_000, now)
    assert_walks_the_rank_index(lease_plan(backend, "deep", now))

    with backend.postgres.write() as conn:
        conn.execute("ANALYZE tasuki_messages")  # and with up-to-date ones
    assert_walks_the_rank_index(lease_plan(backend, "deep", now))

    # The oldest come out first, and the queue next door is untouched.
    leased = backend.lease("deep", 5)
    assert [d.id for d in leased] == ["m1", "m2", "m3", "m4", "m5"]
    assert backend.stats("other").ready == 1_000
    assert backend.stats("deep").ready == DEPTH - 5


def test_with_mixed_priorities_the_lease_walks_the_rank_index_highest_first(
    backend: PostgresBackend,
) -> None:
    now = time.time()
    fill(backend, "mixed", DEPTH, now, levels=10)
    with backend.postgres.write() as conn:
        conn.execute("ANALYZE tasuki_messages")
    assert_walks_the_rank_index(lease_plan(backend, "mixed", now))
    # Level 9 first (m9, m19 ...), FIFO within it.
    assert [d.id for d in backend.lease("mixed", 3)] == ["m9", "m19", "m29"]


def test_parked_messages_cost_the_lease_nothing(backend: PostgresBackend) -> None:
    """100,000 messages parked over a concurrency limit (not due until their slot frees)
    ahead of the ready ones: the lease's walk starts past them, and leases the ready."""
    now = time.time()
    with backend.postgres.write() as conn:
        conn.execute(
            "INSERT INTO tasuki_messages"
            " (queue, id, body, headers, visible_at, enqueued_at, max_attempts, limits,"
            "  parked_on)"
            " SELECT 'deep', 'p' || i, '{}'::bytea, '{}', %(now)s + 3600, %(now)s - 7200, 10,"
            "  '[[\"concurrency:t\",\"concurrency\",1,0.0]]', 'concurrency:t'"
            " FROM generate_series(1, %(count)s) AS i",
            {"now": now, "count": DEPTH},
        )
    fill(backend, "deep", 1_000, now)
    for analyzed in (False, True):
        if analyzed:
            with backend.postgres.write() as conn:
                conn.execute("ANALYZE tasuki_messages")
        plan = lease_plan(backend, "deep", now)
        picking = plan[plan.index("CTE due") : plan.index("CTE changed")]
        assert "Seq Scan" not in picking and "Bitmap" not in picking, plan
        # Whichever index the planner takes (the rank walk, or the due range sorted when
        # it knows only 1,000 rows are due), it reads no parked row.
        [scan] = [line for line in picking.splitlines() if "Index Scan using" in line]
        read = int(re.search(r"actual time=\S+ rows=(\d+)", scan).group(1))  # type: ignore[union-attr]
        assert read <= 1_000, plan
    assert [d.id for d in backend.lease("deep", 3)] == ["m1", "m2", "m3"]


def test_admission_finds_its_messages_by_their_key_at_depth(backend: PostgresBackend) -> None:
    """The statements that lock, lease and park the messages a lease held for admission
    seek each by (queue, id), never a range of the queue's 100,000 due messages."""
    now = time.time()
    fill(backend, "deep", DEPTH, now)
    with backend.postgres.write() as conn:
        conn.execute("ANALYZE tasuki_messages")
    params = {
        "queue": "deep",
        "ids": ["m5", "m7"],
        "untils": [now + 60.0, now + 60.0],
        "keys": ["concurrency:k", None],
        "now": now,
        "nonce": "x",
        "visibility_timeout": 30.0,
    }
    with backend.postgres.read() as conn:
        cursor: Any = conn
        with cursor.transaction(force_rollback=True):
            for name in ("limit_candidates", "limit_lease", "limit_park"):
                rows = conn.execute("EXPLAIN " + backend.q[name], params).fetchall()
                plan = "\n".join(row[0] for row in rows)
                assert "Index Scan using tasuki_messages_id on tasuki_messages m" in plan, plan
                for bad in ("Seq Scan", "Bitmap", "tasuki_messages_due", "tasuki_messages_rank"):
                    assert bad not in plan, plan
