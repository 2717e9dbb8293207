"""procrastinate: `task.defer`, `task.batch_defer`, its jobs table for the drain check."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from benchmarks.peers.base import Context, SyncPeer, bin_path
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url

#: `--concurrency` of the worker (async jobs on one event loop)
CONCURRENCY = 32


class ProcrastinatePeer(SyncPeer):
    name = "procrastinate"
    title = "procrastinate"
    package = "procrastinate"
    has_bulk = True
    #: a quarter of the messages: at ~100-450 jobs/s here, 20,000 would take minutes
    drain_share = 0.25

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.url = postgres_url()
        from benchmarks.peers import procrastinate_app

        self.settings = (
            f"`procrastinate worker --concurrency {CONCURRENCY} --queues default`, "
            "PsycopgConnector, async job"
        )
        self.app = procrastinate_app.app
        self.task = procrastinate_app.noop
        self.app.open()
        with psycopg.connect(self.url, autocommit=True) as conn:
            installed = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if installed is None or installed[0] is None:
            self.app.schema_manager.apply_schema()

    def enqueue(self, i: int) -> None:
        self.task.defer(i=i)

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        self.task.batch_defer(*({"i": i} for i in indices))

    def worker_argv(self) -> list[str]:
        return [
            bin_path("procrastinate"),
            "--app=benchmarks.peers.procrastinate_app.app",
            "worker",
            "--concurrency",
            str(CONCURRENCY),
            "--queues",
            "default",
        ]

    def worker_env(self) -> dict[str, str]:
        return {POSTGRES_ENV: self.url}

    def pending(self) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            ).fetchone()
        return int(row[0]) if row else 0

    def reset(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("TRUNCATE procrastinate_jobs CASCADE")

    def close(self) -> None:
        self.app.close()
        super().close()
