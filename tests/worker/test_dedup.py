"""The duplicate-delivery guard, on every backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import tasuki
from tasuki import logs


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    a = tasuki.App(any_url, id_window=0)
    yield a
    a.close()


def drain(app: tasuki.App, concurrency: int = 4) -> None:
    app.worker(concurrency=concurrency).run(until_idle=True, timeout=30)


def test_two_deliveries_at_once_run_once(app: tasuki.App) -> None:
    runs: list[str] = []
    mutex = threading.Lock()

    @app.job(dedup=tasuki.Dedup(key=lambda m: f"{m.args[0]}/{m.args[1]}"))
    def on_upload(bucket: str, key: str, n: int) -> None:
        with mutex:
            runs.append(tasuki.current().message.id)
        time.sleep(0.3)

    # Two different messages about the same object, e.g. two S3 notifications.
    on_upload.enqueue_many([("photos", "cat.jpg", 1), ("photos", "cat.jpg", 2)])
    on_upload.enqueue("photos", "dog.jpg", 3)
    drain(app)
    assert len(runs) == 2  # cat once, dog once
    assert app.stats()["dead"] == 0


def test_failure_releases_the_guard_so_the_retry_runs(app: tasuki.App) -> None:
    outcomes: list[str] = []

    @app.job(
        dedup=tasuki.Dedup(key=lambda m: "same-thing"),
        retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(0.05)),
    )
    def once(n: int) -> None:
        if not outcomes:
            outcomes.append("failed")
            raise RuntimeError("first run fails")
        outcomes.append("ok")

    once.enqueue(1)
    drain(app, concurrency=1)
    once.enqueue(2)  # a duplicate after the success: skipped
    drain(app, concurrency=1)
    assert outcomes == ["failed", "ok"]


def test_duplicate_within_window_skipped_after_window_runs(app: tasuki.App) -> None:
    runs: list[int] = []
    # A drain ends with one idle poll, a whole second where timers count in seconds.
    window = 0.6 if app.backend.capabilities.timer_resolution < 0.1 else 4.0

    @app.job(dedup=tasuki.Dedup(window=window))
    def charge(n: int) -> None:
        runs.append(n)

    charge.options(message_id="charge-1").enqueue(1)
    drain(app)
    charge.options(message_id="charge-1").enqueue(1)  # same id again: a duplicate delivery
    drain(app)
    assert runs == [1]
    time.sleep(window + 0.1)
    charge.options(message_id="charge-1").enqueue(1)
    drain(app)
    assert runs == [1, 1]


def test_skipped_duplicate_is_acked_and_logged(
    app: tasuki.App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.job(dedup=True)
    def job() -> None: ...

    job.options(message_id="x").enqueue()
    drain(app)
    caplog.set_level("INFO", logger="tasuki")
    job.options(message_id="x").enqueue()
    drain(app)
    skipped = [r for r in caplog.records if logs.event_name(r) == "skipped"]
    assert len(skipped) == 1
    assert skipped[0].tasuki["reason"] == "duplicate: already done"  # type: ignore[attr-defined]
    assert app.stats() == {
        "ready": 0,
        "in_flight": 0,
        "delayed": 0,
        "dead": 0,
        "oldest_ready_age": 0.0,
    }


def test_exhausted_failure_is_not_done(app: tasuki.App) -> None:
    runs: list[int] = []

    @app.job(
        dedup=tasuki.Dedup(key=lambda m: "k"),
        retry=tasuki.Retry(max_attempts=1),
        on_exhausted=lambda m, e: None,
    )
    def flaky(n: int) -> None:
        runs.append(n)
        if n == 1:
            raise RuntimeError("no")

    flaky.enqueue(1)
    drain(app)
    flaky.enqueue(2)  # the first never succeeded: this one must run
    drain(app)
    assert runs == [1, 2]


def test_a_lost_ack_leaves_the_guard_undone_so_the_redelivery_keeps_its_result(
    any_url: str,
) -> None:
    """The guard turned done before the ack landed: with the ack lost (failing until the
    lease lapsed), the redelivery was skipped as a duplicate and its kept result read
    `null`. Done now follows the ack the backend took."""
    from tasuki.backends.urls import backend_from_url
    from tasuki.testing import FaultyBackend

    faulty = FaultyBackend(backend_from_url(any_url))
    app = tasuki.App(any_url, backend=faulty, id_window=0)
    runs: list[int] = []
    vt = max(1.0, faulty.capabilities.timer_resolution)

    @app.job(dedup=True, keep_result=60, visibility_timeout=vt)
    def double(n: int) -> int:
        runs.append(n)
        return 2 * n

    try:
        message_id = double.enqueue(21)
        faulty.fail("ack", times=None)  # every ack fails: the first lease lapses
        worker = app.worker(concurrency=2)
        worker.start()
        deadline = time.monotonic() + 8 * vt + 10
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        faulty.recover()
        assert len(runs) == 2, "the redelivery was skipped as a duplicate"
        assert app.result("default", message_id, timeout=20) == 42
        worker.stop(grace=5)
    finally:
        app.close()
        faulty.close()
