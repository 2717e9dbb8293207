"""The console's listings keep their plan at depth: an ordered walk of one index each
(no sort, no scan of the table), stopping after the page it reads."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tasuki.backends.postgres import PostgresBackend, from_url
from tasuki.backends.sql.console import INF, LAST
from tasuki.testing.servers import PostgresServer

DEPTH = 100_000


@pytest.fixture
def backend(postgres_server: PostgresServer) -> Any:
    backend = from_url(postgres_server.url(f"t_{uuid.uuid4().hex[:12]}"))
    assert isinstance(backend, PostgresBackend)
    backend.migrate()
    yield backend
    backend.close()


def fill(backend: PostgresBackend, now: float) -> None:
    """DEPTH messages of jobs "a" and "b" in turn: ready, but every tenth delayed and
    every hundredth dead."""
    with backend.postgres.write() as conn:
        conn.execute(
            "INSERT INTO tasuki_messages"
            " (queue, id, body, headers, state, visible_at, enqueued_at, max_attempts, died_at)"
            " SELECT 'q', 'm' || i, '{}'::bytea,"
            " '{\"tasuki-job\":\"' || CASE WHEN i %% 2 = 0 THEN 'a' ELSE 'b' END || '\"}',"
            " CASE WHEN i %% 100 = 0 THEN 2 ELSE 0 END,"
            " CASE WHEN i %% 10 = 1 THEN %(now)s + i ELSE %(now)s - 3600 + i * 0.001 END,"
            " %(now)s, 10, CASE WHEN i %% 100 = 0 THEN %(now)s - i END"
            " FROM generate_series(1, %(count)s) AS i",
            {"now": now, "count": DEPTH},
        )


def plan(backend: PostgresBackend, query: str, params: dict[str, Any]) -> str:
    with backend.postgres.read() as conn:
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + backend.q[query], params).fetchall()
    return "\n".join(row[0] for row in rows)


CASES = [
    # query, state code, its range of visible_at (lo, hi), a job, the index it walks
    ("browse_asc", 0, (-INF, "now"), None, "tasuki_messages_due"),
    ("browse_desc", 0, ("now", INF), None, "tasuki_messages_due"),
    # One job's leases: among the queue's (the job's index holds waiting messages only).
    ("browse_asc", 1, ("now", INF), "b", "tasuki_messages_due"),
    ("browse_job_asc", 0, ("now", INF), "b", "tasuki_messages_job"),
    ("browse_job_desc", 0, (-INF, "now"), "b", "tasuki_messages_job"),
    ("browse_dead_asc", 2, (-INF, INF), None, "tasuki_messages_dead"),
    ("browse_dead_desc", 2, (-INF, INF), None, "tasuki_messages_dead"),
    ("browse_dead_job_asc", 2, (-INF, INF), "a", "tasuki_messages_job_dead"),
    ("browse_dead_job_desc", 2, (-INF, INF), "a", "tasuki_messages_job_dead"),
]


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
def test_each_listing_walks_its_index(backend: PostgresBackend, analyzed: bool) -> None:
    now = time.time()
    fill(backend, now)
    if analyzed:
        with backend.postgres.write() as conn:
            conn.execute("ANALYZE tasuki_messages")
    for query, state, bounds, job, index in CASES:
        lo, hi = (now if v == "now" else v for v in bounds)
        desc = query.endswith("desc")
        params = {
            "queue": "q",
            "job": job,
            "state": state,
            "lo": lo,
            "hi": hi,
            "at": (hi if hi < INF else INF) if desc else (lo if lo > -INF else -INF),
            "seq": LAST if desc or lo > -INF else -1,
            "limit": 51,
        }
        found = plan(backend, query, params)
        assert f"using {index} on tasuki_messages" in found, (query, found)
        for bad in ("Seq Scan", "Bitmap", "Sort"):
            assert bad not in found, (query, found)
        walk = next(line for line in found.splitlines() if index in line)
        if state != 1:  # (no message is in flight here)
            assert "rows=51 " in walk, (query, walk)
