"""DBOS queues: `DBOSClient.enqueue` of workflow `shape` (or `noop`) onto queue `bench`,
its system database's `workflow_status` for the drain check. The system database is a
database of its own on the bench server (`<url>_dbos`), made on first use."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

import psycopg

from benchmarks.peers.base import ROOT, Context, SyncPeer, python_argv
from benchmarks.peers.dbos_app import APP, POLL, QUEUE, URL_ENV
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url

#: `worker_concurrency` of the queue: workflows one executor runs at once
CONCURRENCY = 32


def system_url() -> str:
    base, name = postgres_url().rsplit("/", 1)
    return f"{base}/{name}_dbos"


class DBOSPeer(SyncPeer):
    name = "dbos"
    title = "DBOS queues"
    package = "dbos"
    workflow = "noop"

    def __init__(self, ctx: Context, concurrency: int = CONCURRENCY) -> None:
        super().__init__(ctx)
        self.url = system_url()
        self.concurrency = concurrency
        self.settings = (
            f"`DBOS.register_queue({QUEUE!r}, worker_concurrency={concurrency}, "
            f"polling_interval_sec={POLL})` in `python -m benchmarks.peers.dbos_app`; "
            "sync workflow"
        )
        base, name = self.url.rsplit("/", 1)
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if found.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.url, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()
        if found is None or found[0] is None:
            subprocess.run(
                python_argv("-m", "benchmarks.peers.dbos_app", 0),
                env={**os.environ, URL_ENV: self.url}, cwd=ROOT, check=True, timeout=120,
            )  # fmt: skip
        from dbos import DBOSClient

        self.client = DBOSClient(system_database_url=self.url)
        self.conn = psycopg.connect(self.url, autocommit=True)
        self.options = {"queue_name": QUEUE, "workflow_name": self.workflow,
                        "application_name": APP}  # fmt: skip

    def enqueue(self, i: int) -> None:
        self.client.enqueue(self.options, i)  # type: ignore[arg-type]

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.enqueue(i)

    def worker_argv(self) -> list[str]:
        return python_argv("-m", "benchmarks.peers.dbos_app", self.concurrency)

    def worker_env(self) -> dict[str, str]:
        return {URL_ENV: self.url, POSTGRES_ENV: postgres_url()}

    def pending(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE status IN ('ENQUEUED', 'PENDING')"
        ).fetchone()
        return int(row[0]) if row else 0

    def reset(self) -> None:
        found = self.conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()
        if found is not None and found[0] is not None:
            self.conn.execute("TRUNCATE dbos.workflow_status CASCADE")

    def close(self) -> None:
        self.client.destroy()
        self.conn.close()
        super().close()
