"""The bodies of the real-shape jobs (`python -m benchmarks.shapes`), the same in every
system's worker: `$BENCH_SHAPE` picks one when the worker imports its app module.

- `redis` (shape a): one round trip of the job's own, `INCR` on a counter key with
  redis-py, on a client per process (its connection pool gives each thread its own
  connection, as a user's module-level client would); async jobs use `redis.asyncio`.
  The counter tells the harness how many runs there were.
- `sleep` (shape c): an I/O wait of 10 ms, `time.sleep` or `asyncio.sleep`.
- `io50`: an I/O wait of 50 ms, the same way, for the concurrency I/O jobs are run at
  (256-1,024): a slow HTTP call's or a slow query's shape.
- `pg` (shape b): `SELECT 1` on a connection from a pool of `PG_POOL` of the process's
  own (psycopg_pool; `AsyncConnectionPool` per event loop for async jobs).
- `cpu` (shape d): about 1 ms of pure-Python CPU, `$BENCH_SPIN` steps of `spin`,
  calibrated once by the harness and handed to every worker.

Then the job marks its slot on the scoreboard, as the no-op job does. Nothing here is
imported by a no-op run's job: `noop` stays `mark(i)` alone, and asyncio and redis-py
are imported only by the jobs that use them, so no worker starts slower for this module.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from benchmarks.marks import mark

SHAPE_ENV = "BENCH_SHAPE"
SPIN_ENV = "BENCH_SPIN"
REDIS_ENV = "BENCH_REDIS_URL"
POSTGRES_ENV = "BENCH_POSTGRES_URL"
#: connections in each process's pool for shape (b), whatever its concurrency
PG_POOL = 8
#: the key shape (a) increments: its value after a drain is the number of runs
COUNTER = "bench:shape:runs"
SLEEP = 0.010
#: shape io50's wait
IO_SLEEP = 0.050

_shape = os.environ.get(SHAPE_ENV, "redis")
_steps = int(os.environ.get(SPIN_ENV, "10000"))
_client: Any = None
_client_pid = 0
_aclients: dict[int, Any] = {}
_pg: Any = None
_pg_pid = 0
_apgs: dict[int, Any] = {}
_mutex = threading.Lock()


def spin(steps: int) -> int:
    """Pure-Python CPU: the interpreter's own work, holding the GIL throughout."""
    total = 0
    for i in range(steps):
        total += i * i % 7
    return total


def client() -> Any:
    """This process's redis-py client (made after any fork: a prefork child's own)."""
    global _client, _client_pid
    if _client is None or _client_pid != os.getpid():
        with _mutex:
            if _client is None or _client_pid != os.getpid():
                import redis

                _client = redis.Redis.from_url(os.environ[REDIS_ENV])
                _client_pid = os.getpid()
    return _client


def aclient() -> Any:
    """This event loop's `redis.asyncio` client (a pool is bound to its loop)."""
    import asyncio

    key = id(asyncio.get_running_loop())
    found = _aclients.get(key)
    if found is None:
        import redis.asyncio

        found = _aclients[key] = redis.asyncio.Redis.from_url(os.environ[REDIS_ENV])
    return found


def pg_pool() -> Any:
    """This process's psycopg pool (made after any fork)."""
    global _pg, _pg_pid
    if _pg is None or _pg_pid != os.getpid():
        with _mutex:
            if _pg is None or _pg_pid != os.getpid():
                from psycopg_pool import ConnectionPool

                url, kwargs = os.environ[POSTGRES_ENV], {"autocommit": True}
                _pg = ConnectionPool(url, min_size=PG_POOL, max_size=PG_POOL, kwargs=kwargs)
                _pg_pid = os.getpid()
    return _pg


async def apg_pool() -> Any:
    """This event loop's psycopg `AsyncConnectionPool`, opened once (the first caller's
    task opens it; the others await that same task)."""
    import asyncio

    key = id(asyncio.get_running_loop())
    opening = _apgs.get(key)
    if opening is None:

        async def make() -> Any:
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(
                os.environ[POSTGRES_ENV],
                min_size=PG_POOL,
                max_size=PG_POOL,
                kwargs={"autocommit": True},
                open=False,
            )
            await pool.open()
            return pool

        opening = _apgs[key] = asyncio.ensure_future(make())
    return await opening


def run(i: int) -> None:
    """The sync job."""
    if _shape == "redis":
        client().incr(COUNTER)
    elif _shape == "sleep":
        time.sleep(SLEEP)
    elif _shape == "io50":
        time.sleep(IO_SLEEP)
    elif _shape == "pg":
        with pg_pool().connection() as conn:
            conn.execute("SELECT 1").fetchone()
    else:
        spin(_steps)
    mark(i)


async def arun(i: int) -> None:
    """The async job."""
    if _shape == "redis":
        await aclient().incr(COUNTER)
    elif _shape == "sleep":
        import asyncio

        await asyncio.sleep(SLEEP)
    elif _shape == "io50":
        import asyncio

        await asyncio.sleep(IO_SLEEP)
    elif _shape == "pg":
        async with (await apg_pool()).connection() as conn:
            await (await conn.execute("SELECT 1")).fetchone()
    else:
        spin(_steps)
    mark(i)
