"""tasuki on SQLite with its defaults (WAL, `synchronous=full`): what
`./dev bench embedded` runs with `tasuki worker`."""

from __future__ import annotations

import os

import tasuki
from benchmarks.peers.embedded_jobs import DB_ENV, run

app = tasuki.App(f"sqlite:///{os.environ[DB_ENV]}")


@app.job(name="job", queue="default")
def job(i: int) -> None:
    run(i)
