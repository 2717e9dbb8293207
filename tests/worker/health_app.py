"""The app of the health-check tests: its jobs break the worker that runs them, from the
inside, through a wrapped backend (`FaultyBackend`), as a hung network call would."""

from __future__ import annotations

import os

import tasuki
from tasuki.backends.urls import backend_from_url
from tasuki.testing.faulty import OPERATIONS, FaultyBackend

URL = os.environ["TASUKI_URL"]
backend = FaultyBackend(backend_from_url(URL))
app = tasuki.App(URL, backend=backend)


@app.job(visibility_timeout=1.5)
def freeze_keeper() -> None:
    """From now on every lease extension hangs for an hour: the lease keeper, which
    extends this job's lease every 0.5 s, is stuck inside its backend call."""
    backend.stall("extend", seconds=3600)
    tasuki.current().wait_for_stop(60)


@app.job()
def cut_off_backend() -> None:
    """From now on every backend call fails at once, as with a server that is down."""
    for operation in OPERATIONS:
        backend.fail(operation, times=None)


@app.job()
def break_settler() -> None:
    """From now on the settler's loop itself raises (a bug in it, not in a backend call):
    the settle of this very job is the first to meet it."""
    from tasuki.runtime.settler import Settler

    def broken(self: Settler, batch: object) -> None:
        raise RuntimeError("a bug in the settler")

    Settler._send = broken  # type: ignore[method-assign]
