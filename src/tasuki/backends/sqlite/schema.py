"""The SQLite schema: `schema.sql` (every statement idempotent), run on each new
connection, after the columns added since the first schema, before the upgrades of data
`PRAGMA user_version` counts."""

from __future__ import annotations

import sqlite3
from importlib import resources

SCHEMA = resources.files("tasuki.backends.sqlite").joinpath("schema.sql").read_text("utf-8")


# `PRAGMA user_version` of a database whose schema is up to date.
VERSION = 1


# Columns added since the first schema, by table: a database made before them gains them
# before the schema file runs (its rank index needs `head_start`).
ADDED_COLUMNS = {
    "tasuki_messages": (
        ("priority", "INTEGER NOT NULL DEFAULT 0"),
        ("head_start", "REAL NOT NULL DEFAULT 0"),
        ("progress", "TEXT"),
        ("limits", "TEXT"),
        ("parked_on", "TEXT"),
    ),
    "tasuki_finished": (("cancelled", "TEXT"),),
    "tasuki_flow_barriers": (("filled", "INTEGER NOT NULL DEFAULT 0"),),
}


BARRIER_FILLED = (
    "UPDATE tasuki_flow_barriers SET filled = (SELECT count(*) FROM tasuki_flow_slots s"
    " WHERE s.flow = tasuki_flow_barriers.flow AND s.barrier = tasuki_flow_barriers.barrier)"
)


def _missing_columns(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    missing = []
    for table, added in ADDED_COLUMNS.items():
        have = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
        if have:  # an existing table (a new one is made whole by the schema)
            missing += [(table, name, kind) for name, kind in added if name not in have]
    return missing


def add_columns(conn: sqlite3.Connection) -> None:
    """Give a database made by an older tasuki the columns of priorities, progress and
    cancel, once, under the write lock; the due index the rank index replaces goes."""
    if not _missing_columns(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, name, kind in _missing_columns(conn):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            if name == "filled":  # the slots its groups' members filled so far
                conn.execute(BARRIER_FILLED)
        conn.execute("DROP INDEX IF EXISTS tasuki_messages_due")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a database made by an older tasuki up to `VERSION`, once, under the write
    lock: version 1 fills the depth counts (`tasuki_depth`) from the messages."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < 1:
            conn.execute("DELETE FROM tasuki_depth")
            conn.execute(
                "INSERT INTO tasuki_depth (queue, waiting, dead)"
                " SELECT queue, sum(state = 0), sum(state = 2) FROM tasuki_messages"
                " GROUP BY queue"
            )
        conn.execute(f"PRAGMA user_version = {VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def prepare(conn: sqlite3.Connection) -> None:
    """Make or bring up to date the schema of the database `conn` opens."""
    add_columns(conn)
    conn.executescript(SCHEMA)
    upgrade(conn)
