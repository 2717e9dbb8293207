"""PgQueuer: `SyncQueries.enqueue` (one, or lists for a batch), its queue table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import psycopg
from pgqueuer.db import PsycopgDriver, SyncPsycopgDriver
from pgqueuer.queries import Queries, SyncQueries

from benchmarks.peers.base import Context, SyncPeer, python_argv
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url

#: `--batch-size` of `pgq run` (jobs dequeued per round trip)
BATCH = 100


async def _install(url: str) -> None:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        queries = Queries(PsycopgDriver(conn))
        if not await queries.has_table("pgqueuer"):
            await queries.install()
    finally:
        await conn.close()


class PgQueuerPeer(SyncPeer):
    name = "pgqueuer"
    title = "PgQueuer"
    package = "pgqueuer"
    has_bulk = True

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.url = postgres_url()
        self.settings = (
            f"`pgq run`'s supervisor with `batch_size={BATCH}` (`python -m "
            "benchmarks.peers.pgqueuer_app`), psycopg driver, async job"
        )
        asyncio.run(_install(self.url))
        self.conn = psycopg.connect(self.url, autocommit=True)
        self.queries = SyncQueries(SyncPsycopgDriver(self.conn))

    entrypoint = "noop"

    def enqueue(self, i: int) -> None:
        self.queries.enqueue(self.entrypoint, str(i).encode())

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        n = len(indices)
        self.queries.enqueue([self.entrypoint] * n, [str(i).encode() for i in indices], [0] * n)

    def worker_argv(self) -> list[str]:
        return python_argv("-m", "benchmarks.peers.pgqueuer_app", BATCH)

    def worker_env(self) -> dict[str, str]:
        return {POSTGRES_ENV: self.url}

    def pending(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        return int(row[0]) if row else 0

    def reset(self) -> None:
        self.conn.execute("TRUNCATE pgqueuer")

    def close(self) -> None:
        self.conn.close()
        super().close()


class PgQueuerIO(PgQueuerPeer):
    """The job does one round trip of I/O: `SELECT 1` on the worker's own connection."""

    name = "pgqueuer-io"
    title = "PgQueuer, SELECT 1 job"
    entrypoint = "select_one"
