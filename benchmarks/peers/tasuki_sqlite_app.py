"""tasuki on SQLite, its defaults (WAL, `synchronous=full`) unless `$BENCH_EMBEDDED_QUERY`
says otherwise: what `./dev bench embedded` runs with `tasuki worker`."""

from __future__ import annotations

import os

import tasuki
from benchmarks.peers.embedded_jobs import DB_ENV, QUERY_ENV, run

app = tasuki.App(f"sqlite:///{os.environ[DB_ENV]}{os.environ.get(QUERY_ENV, '')}")


@app.job(name="job", queue="default")
def job(i: int) -> None:
    run(i)
