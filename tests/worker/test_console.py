"""The worker's side of the console: the pause watch and the announcer through a backend
that fails, then recovers."""

from __future__ import annotations

import threading
import time

import tasuki
from tasuki.backends.urls import backend_from_url
from tasuki.testing.faulty import FaultyBackend
from tests.worker.helpers import wait_until


def test_tallies_of_a_failed_announce_are_written_by_the_next(sqlite_url: str) -> None:
    backend = FaultyBackend(backend_from_url(sqlite_url))
    app = tasuki.App(sqlite_url, backend=backend)

    @app.job()
    def work() -> None: ...

    backend.fail("announce", times=None)
    worker = app.worker(announce_every=0.1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            work.enqueue()
        wait_until(lambda: worker.processed == 3, 10)
        time.sleep(0.3)  # announces fail meanwhile
        assert backend.injected["announce"] >= 2
        assert app.workers() == [] and app.job_stats() == {}
        backend.recover()
        wait_until(lambda: "work" in app.job_stats(), 10)
        assert app.job_stats()["work"].succeeded == 3
        assert [w.id for w in app.workers()] == [worker.announcer.id]
    finally:
        worker.stop(grace=1.0)
        thread.join(10)
    assert app.job_stats()["work"].succeeded == 3  # counted once, not once per try
    app.close()


def test_a_failing_pause_read_keeps_the_last_answer(sqlite_url: str) -> None:
    backend = FaultyBackend(backend_from_url(sqlite_url))
    app = tasuki.App(sqlite_url, backend=backend)
    ran: list[int] = []

    @app.job()
    def note(n: int) -> None:
        ran.append(n)

    app.pause("default")
    worker = app.worker(announce_every=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        note.enqueue(1)
        time.sleep(1.0)
        backend.fail("paused", times=None)
        backend.inner.resume("default")
        time.sleep(1.0)
        assert ran == []  # the last answer read said paused
        backend.recover()
        wait_until(lambda: ran == [1], 10)
    finally:
        worker.stop(grace=1.0)
        thread.join(10)
    app.close()
