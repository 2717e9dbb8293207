"""tasuki's side of the benchmark: the no-op job, and the job with one round trip of I/O
(PostgreSQL section). The worker runs
`python -m tasuki worker benchmarks.peers.tasuki_app:app -q default -c N`."""

from __future__ import annotations

import os
import threading
from typing import Any

import tasuki
from benchmarks.marks import mark

URL_ENV = "BENCH_TASUKI_URL"
POSTGRES_ENV = "BENCH_POSTGRES_URL"
_local = threading.local()


def noop(i: int) -> None:
    mark(i)


def select_one(i: int) -> None:
    """One round trip of I/O: `SELECT 1` on a connection of the worker thread's own."""
    conn: Any = getattr(_local, "conn", None)
    if conn is None:
        import psycopg

        conn = _local.conn = psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True)
    conn.execute("SELECT 1").fetchone()
    mark(i)


def build(url: str) -> tuple[tasuki.App, tasuki.Job[[int], None]]:
    app = tasuki.App(url)
    app.job(name="select_one", queue="default")(select_one)
    return app, app.job(name="noop", queue="default")(noop)


app, job = build(os.environ.get(URL_ENV, "memory://"))
