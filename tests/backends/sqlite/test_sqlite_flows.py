"""SQLite's side of workflows that the contract suite cannot see: a database's upgrade."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tasuki.backends.sqlite import SQLiteBackend


def test_a_database_made_before_barrier_counts_counts_what_its_groups_filled(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "old.db")
    SQLiteBackend(path).close()
    conn = sqlite3.connect(path, isolation_level=None)  # as an older tasuki left it
    conn.execute("ALTER TABLE tasuki_flow_barriers DROP COLUMN filled")
    conn.execute(
        "INSERT INTO tasuki_flow_barriers (flow, barrier, size, expires_at)"
        " VALUES ('f', '0', 3, 9e9)"
    )
    for slot in (0, 2):
        conn.execute(
            "INSERT INTO tasuki_flow_slots (flow, barrier, slot, value, expires_at)"
            " VALUES ('f', '0', ?, x'31', 9e9)",
            (slot,),
        )
    conn.close()

    again = SQLiteBackend(path)
    [(filled,)] = (
        again.sqlite.conn()
        .execute("SELECT filled FROM tasuki_flow_barriers WHERE flow = 'f'")
        .fetchall()
    )
    assert filled == 2
    again.close()
