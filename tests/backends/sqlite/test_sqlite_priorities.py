"""SQLite's priorities: the lease walks the rank index in its order (no sort of the due
rows, however deep the queue), and a database made before priorities gains their
columns and index when first opened."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from tasuki.backends.base import Envelope, Keep, Progress
from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.sqlite.dialect import Q


def lease_plan(backend: SQLiteBackend) -> str:
    params = {"queue": "q", "now": time.time(), "limit": 10, "nonce": "x"}
    conn = backend.sqlite.conn()
    rows = conn.execute("EXPLAIN QUERY PLAN " + Q["lease"], {**params, "visibility_timeout": 30})
    return "\n".join(row[3] for row in rows.fetchall())


def test_the_lease_walks_the_rank_index_without_sorting(tmp_path: Path) -> None:
    backend = SQLiteBackend(str(tmp_path / "plan.db"))
    backend.enqueue([Envelope("q", f"m{i}", b"x", priority=i % 10) for i in range(2_000)])
    backend.sqlite.conn().execute("ANALYZE")
    plan = lease_plan(backend)
    assert "USING INDEX tasuki_messages_rank" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # no ORDER BY sort of what it found
    assert "SCAN tasuki_messages" not in plan, plan
    assert [d.id for d in backend.lease("q", 3)] == ["m9", "m19", "m29"]
    backend.close()


def test_a_database_made_before_priorities_gains_them_when_first_opened(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "old.db")
    SQLiteBackend(path).close()
    conn = sqlite3.connect(path, isolation_level=None)  # as an older tasuki left it
    conn.execute("DROP INDEX tasuki_messages_rank")
    for column in ("priority", "head_start", "progress"):
        conn.execute(f"ALTER TABLE tasuki_messages DROP COLUMN {column}")
    conn.execute("ALTER TABLE tasuki_finished DROP COLUMN cancelled")
    conn.execute(
        "CREATE INDEX tasuki_messages_due ON tasuki_messages (queue, visible_at, seq)"
        " WHERE state < 2"
    )
    conn.execute(
        "INSERT INTO tasuki_messages (queue, id, body, headers, visible_at, enqueued_at,"
        " max_attempts) VALUES ('q', 'old', x'', '{}', :now, :now, 3)",
        {"now": time.time() - 60.0},  # a minute old: less than a level's worth of waiting
    )
    conn.close()

    again = SQLiteBackend(path)
    again.enqueue([Envelope("q", "urgent", b"x", priority=9)])
    [first] = again.lease("q", 1)
    assert first.id == "urgent"
    assert again.keep([Keep(first.receipt, 30.0, Progress(0.5, "half"))]) == ["held"]
    assert again.inspect("q", "urgent").progress == Progress(0.5, "half")
    assert again.cancel("q", "old") == "removed"
    assert again.inspect("q", "old").state == "cancelled"
    indexes = {row[1] for row in again.sqlite.conn().execute("PRAGMA index_list(tasuki_messages)")}
    assert "tasuki_messages_due" not in indexes and "tasuki_messages_rank" in indexes
    again.close()
