"""procrastinate's side of the benchmark (PostgreSQL). The worker runs
`procrastinate --app=benchmarks.peers.procrastinate_app.app worker --concurrency N`."""

from __future__ import annotations

import os

import procrastinate

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=URL))


@app.task(name="noop", queue="default")
async def noop(i: int) -> None:
    mark(i)


@app.task(name="shape", queue="default")
async def shape(i: int) -> None:
    await arun(i)
