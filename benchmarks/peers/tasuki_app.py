"""tasuki's side of the benchmark: the no-op job, and the job with one round trip of I/O
(PostgreSQL section). The worker runs
`python -m tasuki worker benchmarks.peers.tasuki_app:app -q default -c N`."""

from __future__ import annotations

import os
import threading
from typing import Any

import tasuki
from benchmarks.marks import mark
from benchmarks.shape_jobs import arun, run

URL_ENV = "BENCH_TASUKI_URL"
POSTGRES_ENV = "BENCH_POSTGRES_URL"
#: connections the SELECT 1 job shares between the worker's threads
IO_POOL = 4
_pool: Any = None
_pool_mutex = threading.Lock()


def noop(i: int) -> None:
    mark(i)


def select_one(i: int) -> None:
    """One round trip of I/O: `SELECT 1` on a connection from a pool of the worker's own
    (IO_POOL connections, whatever the worker's concurrency)."""
    global _pool
    if _pool is None:
        with _pool_mutex:
            if _pool is None:
                from psycopg_pool import ConnectionPool

                url = os.environ[POSTGRES_ENV]
                kwargs = {"autocommit": True}
                _pool = ConnectionPool(url, min_size=IO_POOL, max_size=IO_POOL, kwargs=kwargs)
    with _pool.connection() as conn:
        conn.execute("SELECT 1").fetchone()
    mark(i)


def shape(i: int) -> None:
    run(i)


async def shape_async(i: int) -> None:
    await arun(i)


def build(url: str) -> tuple[tasuki.App, tasuki.Job[[int], None]]:
    app = tasuki.App(url)
    app.job(name="select_one", queue="default")(select_one)
    app.job(name="shape", queue="default")(shape)
    app.job(name="shape_async", queue="default")(shape_async)
    return app, app.job(name="noop", queue="default")(noop)


app, job = build(os.environ.get(URL_ENV, "memory://"))
