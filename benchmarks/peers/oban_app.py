"""Oban's side of the benchmark (oban-py, the Oban team's Python port: Python 3.12 or
later, so this module runs in `.venv-bench-3.12`, never in the harness's interpreter).

    python -m benchmarks.peers.oban_app install          # its schema, once
    python -m benchmarks.peers.oban_app fill LO HI       # enqueue jobs LO..HI-1 (enqueue_many)
    python -m benchmarks.peers.oban_app worker LIMIT     # one node: queue `default` at LIMIT

The worker is what `oban start --queues default:LIMIT` runs, an `Oban` of one queue on a
psycopg `AsyncConnectionPool` (its default plugins: leader, stager, lifeline, pruner,
refresher), until SIGTERM. The jobs are functions under `@job`, async.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
#: connections of Oban's own pool (its default is 10; the jobs' SELECT 1 has its own)
POOL = 10

try:
    from oban import job
except ImportError:  # imported by the harness (3.11) only for its constants
    job = None

if job is not None:

    @job(queue="default", max_attempts=20)
    async def noop(i: int) -> None:
        mark(i)

    @job(queue="default", max_attempts=20)
    async def shape(i: int) -> None:
        await arun(i)


async def _pool() -> Any:
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(URL, min_size=1, max_size=POOL, open=False)
    await pool.open()
    return pool


async def install() -> None:
    from oban.schema import install as install_schema

    pool = await _pool()
    try:
        async with pool.connection() as conn:
            found = await (await conn.execute("SELECT to_regclass('oban_jobs')")).fetchone()
        if found is None or found[0] is None:
            await install_schema(pool)
    finally:
        await pool.close()


async def fill(lo: int, hi: int, name: str) -> None:
    from oban import Oban

    pool = await _pool()
    try:
        async with Oban(pool=pool) as oban:
            fn = {"noop": noop, "shape": shape}[name]
            for start in range(lo, hi, 1000):
                chunk = [fn.new(i=i) for i in range(start, min(start + 1000, hi))]
                await oban.enqueue_many(chunk)
    finally:
        await pool.close()


async def worker(limit: int) -> None:
    from oban import Oban

    pool = await _pool()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Oban(pool=pool, queues={"default": limit}):
            await stop.wait()
    finally:
        await pool.close()


def main(argv: list[str]) -> None:
    what = argv[0]
    if what == "install":
        asyncio.run(install())
    elif what == "fill":
        asyncio.run(fill(int(argv[1]), int(argv[2]), argv[3] if len(argv) > 3 else "noop"))
    elif what == "worker":
        asyncio.run(worker(int(argv[1])))
    else:
        raise SystemExit(f"unknown command {what!r}")


if __name__ == "__main__":
    # The jobs must be registered under this module's name, not `__main__`'s.
    import importlib

    importlib.import_module("benchmarks.peers.oban_app").main(sys.argv[1:])
