"""tasuki's side of the benchmark: the no-op job. The worker runs
`python -m tasuki worker benchmarks.peers.tasuki_app:app -q default -c N`."""

from __future__ import annotations

import os

import tasuki
from benchmarks.marks import mark

URL_ENV = "BENCH_TASUKI_URL"


def noop(i: int) -> None:
    mark(i)


def build(url: str) -> tuple[tasuki.App, tasuki.Job[[int], None]]:
    app = tasuki.App(url)
    return app, app.job(name="noop", queue="default")(noop)


app, job = build(os.environ.get(URL_ENV, "memory://"))
