"""Huey on SQLite (`SqliteHuey`, its defaults: WAL, SQLite's own `synchronous`), results
off: what `./dev bench embedded` runs with `huey_consumer`. The harness fills the queue
through `make(fsync=False)`, a producer of its own on the same file (filling is not
timed); the task's registered name is this module's either way."""

from __future__ import annotations

import os
from typing import Any

from huey import SqliteHuey

from benchmarks.peers.embedded_jobs import DB_ENV, run


def _job(i: int) -> None:
    run(i)


def make(fsync: bool | None = None) -> tuple[SqliteHuey, Any]:
    huey = SqliteHuey("bench", filename=os.environ[DB_ENV], results=False, fsync=fsync)
    return huey, huey.task(name="job")(_job)


huey, job = make()
