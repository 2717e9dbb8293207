"""The PostgreSQL schema: versioned migrations (`migrations/NNNN_*.sql`) and how they run."""

from __future__ import annotations

from importlib import resources
from typing import Any

import psycopg

MIGRATIONS = "tasuki.backends.postgres.migrations"


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration, in order."""
    found = []
    for entry in resources.files(MIGRATIONS).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text("utf-8")))
    return sorted(found)


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Bring `schema` up to date; returns the names of the migrations applied.

    One transaction, under a transaction-level advisory lock on the schema's name, so
    two processes migrating at once run each migration exactly once.
    """
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tasuki-migrate:{schema}",))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}"')
        conn.execute(
            "CREATE TABLE IF NOT EXISTS tasuki_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {version for (version,) in conn.execute("SELECT version FROM tasuki_migrations")}
        for version, name, sql in migrations():
            if version in done:
                continue
            conn.execute(sql.encode())
            conn.execute(
                "INSERT INTO tasuki_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied.append(name)
    return applied
