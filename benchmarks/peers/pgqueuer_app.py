"""PgQueuer's side of the benchmark. The worker runs
`pgq run benchmarks.peers.pgqueuer_app:main --batch-size N`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    conn = await psycopg.AsyncConnection.connect(URL, autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        mark(int(job.payload or b"0"))

    io = await psycopg.AsyncConnection.connect(URL, autocommit=True)

    @pgq.entrypoint("select_one")
    async def select_one(job: Job) -> None:
        """One round trip of I/O: `SELECT 1` on the worker's own connection."""
        await (await io.execute("SELECT 1")).fetchone()
        mark(int(job.payload or b"0"))

    @pgq.entrypoint("shape")
    async def shape(job: Job) -> None:
        await arun(int(job.payload or b"0"))

    try:
        yield pgq
    finally:
        await io.close()
        await conn.close()


def run(batch_size: int, max_tasks: int | None = None) -> None:
    """What `pgq run benchmarks.peers.pgqueuer_app:main --batch-size N` does. (`pgq run`
    itself fails at start in 1.6.0: its `--log-level` parser hands a str where an enum is
    used.)"""
    import asyncio

    from pgqueuer.adapters.cli.supervisor import run as supervise

    asyncio.run(supervise(main, batch_size=batch_size, max_concurrent_tasks=max_tasks))


if __name__ == "__main__":
    import sys

    run(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
