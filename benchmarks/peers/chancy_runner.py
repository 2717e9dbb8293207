"""Chancy: `sync_push` (one) and `sync_push_many` (a batch), its jobs table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import psycopg
from chancy import Chancy, Job, Queue

from benchmarks.peers.base import Context, SyncPeer, python_argv
from benchmarks.peers.chancy_app import app, noop
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url

#: jobs the async executor runs at once (also the most one fetch asks for)
CONCURRENCY = 500
#: seconds between polls when no notification came (Chancy's default is 5)
POLL = 1


async def _setup(chancy: Chancy) -> None:
    async with chancy:
        await chancy.migrate()
        await chancy.declare(
            Queue(
                "default",
                concurrency=CONCURRENCY,
                executor=Chancy.Executor.Async,
                polling_interval=POLL,
                eager_polling=True,
            ),
            upsert=True,
        )


class ChancyPeer(SyncPeer):
    name = "chancy"
    title = "Chancy"
    package = "chancy"
    has_bulk = True

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.url = postgres_url()
        self.settings = (
            f"`Worker` of `python -m benchmarks.peers.chancy_app`, default plugins; queue "
            f"with the async executor, `concurrency={CONCURRENCY}`, "
            f"`polling_interval={POLL}`, `eager_polling=True`; async job"
        )
        asyncio.run(_setup(app()))
        self.chancy = app().__enter__()
        self.conn = psycopg.connect(self.url, autocommit=True)

    def enqueue(self, i: int) -> None:
        self.chancy.sync_push(Job.from_func(noop, kwargs={"i": i}))

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        jobs = [Job.from_func(noop, kwargs={"i": i}) for i in indices]
        for _ in self.chancy.sync_push_many(jobs, batch_size=len(jobs)):
            pass

    def worker_argv(self) -> list[str]:
        return python_argv("-m", "benchmarks.peers.chancy_app")

    def worker_env(self) -> dict[str, str]:
        return {POSTGRES_ENV: self.url}

    def pending(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM chancy_jobs WHERE state IN ('pending', 'running', 'retrying')"
        ).fetchone()
        return int(row[0]) if row else 0

    def reset(self) -> None:
        self.conn.execute("TRUNCATE chancy_jobs")

    def close(self) -> None:
        self.chancy.__exit__(None, None, None)
        self.conn.close()
        super().close()
