"""The worker against a misbehaving backend: failures are retried, nothing is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

import tasuki
from tasuki import logs
from tasuki.backends.urls import backend_from_url
from tasuki.testing import FaultyBackend


@pytest.fixture
def faulty(any_url: str) -> Iterator[FaultyBackend]:
    backend = FaultyBackend(backend_from_url(any_url))
    yield backend
    backend.close()


def counting_app(faulty: FaultyBackend, runs: Counter[int], **job: object) -> tasuki.App:
    app = tasuki.App(faulty.inner.url, backend=faulty)
    mutex = threading.Lock()

    @app.job(**job)  # type: ignore[arg-type]
    def work(n: int) -> None:
        with mutex:
            runs[n] += 1

    return app


def test_failed_acks_are_retried_until_they_land(faulty: FaultyBackend) -> None:
    runs: Counter[int] = Counter()
    app = counting_app(faulty, runs)
    app.jobs["work"].enqueue_many([(n,) for n in range(50)])
    faulty.fail("ack", times=5)
    app.worker(concurrency=4).run(until_idle=True, timeout=30)
    assert faulty.injected["ack"] == 5
    assert sorted(runs) == list(range(50))
    assert max(runs.values()) == 1  # retried acks, not re-runs
    assert app.stats() == {
        "ready": 0,
        "in_flight": 0,
        "delayed": 0,
        "dead": 0,
        "oldest_ready_age": 0.0,
    }


def test_lost_ack_reply_does_not_rerun(
    faulty: FaultyBackend, caplog: pytest.LogCaptureFixture
) -> None:
    runs: Counter[int] = Counter()
    app = counting_app(faulty, runs)
    app.jobs["work"].enqueue(1)
    faulty.lose_reply("ack", times=1)  # applied, but the worker sees an error and retries
    caplog.set_level("WARNING", logger="tasuki")
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    assert runs == Counter({1: 1})
    assert any(logs.event_name(r) == "ack refused" for r in caplog.records)
    assert app.stats()["ready"] + app.stats()["in_flight"] == 0


def test_lease_outage_then_recovery(faulty: FaultyBackend) -> None:
    runs: Counter[int] = Counter()
    app = counting_app(faulty, runs)
    faulty.fail("lease", times=None)  # down until recover()
    worker = app.worker(concurrency=2)
    worker.start()
    app.jobs["work"].enqueue_many([(n,) for n in range(10)])
    time.sleep(0.5)
    assert not runs
    faulty.recover()
    deadline = time.monotonic() + 10
    while sum(runs.values()) < 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.stop(grace=5)
    assert sorted(runs) == list(range(10))


def test_a_lease_that_raises_a_bug_leaves_the_worker_fetching(
    faulty: FaultyBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """A backend error that is no TasukiError (a bug: the SQS backend's listing of its
    priority levels let botocore's connection error through) is logged with its
    traceback and retried; it ended the fetch thread, and the worker, alive to every
    look, never fetched again."""
    runs: Counter[int] = Counter()
    app = counting_app(faulty, runs)
    app.jobs["work"].enqueue_many([(n,) for n in range(10)])
    faulty.fail("lease", times=2, error=RuntimeError("a bug"))
    caplog.set_level("ERROR", logger="tasuki")
    app.worker(concurrency=2).run(until_idle=True, timeout=30)
    assert faulty.injected["lease"] == 2
    assert sorted(runs) == list(range(10))
    assert any("internal error leasing" in r.getMessage() for r in caplog.records)


def test_heartbeat_outage_longer_than_the_lease_loses_it(
    faulty: FaultyBackend, caplog: pytest.LogCaptureFixture
) -> None:
    runs: Counter[int] = Counter()
    app = tasuki.App(faulty.inner.url, backend=faulty)
    started = threading.Event()
    # A lease of 0.6 s, or one timer step where leases count in whole seconds.
    vt = max(0.6, faulty.capabilities.timer_resolution)

    @app.job(visibility_timeout=vt)
    def slow(n: int) -> None:
        runs[n] += 1
        started.set()
        time.sleep(2.5 * vt)

    slow.enqueue(1)
    faulty.fail("extend", times=None)
    caplog.set_level("WARNING", logger="tasuki")
    worker = app.worker(concurrency=2)  # a free slot re-leases the lapsed message
    worker.start()
    assert started.wait(5)
    time.sleep(1.7 * vt)
    faulty.recover()
    deadline = time.monotonic() + 10
    while (app.stats()["ready"] + app.stats()["in_flight"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop(grace=5)
    # the lease lapsed during the outage: the message was delivered again (allowed:
    # at-least-once), the first run's result was never acked with its stale token
    assert "lease lost" in [logs.event_name(r) for r in caplog.records]
    assert runs[1] == 2


def test_slow_backend_only_slows(faulty: FaultyBackend) -> None:
    runs: Counter[int] = Counter()
    app = counting_app(faulty, runs)
    app.jobs["work"].enqueue_many([(n,) for n in range(20)])
    faulty.stall("ack", seconds=0.05)
    faulty.stall("lease", seconds=0.02)
    app.worker(concurrency=4).run(until_idle=True, timeout=30)
    assert sorted(runs) == list(range(20)) and max(runs.values()) == 1


def test_a_run_held_up_past_its_lease_before_it_began_does_not_run(
    shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQS chaos run's one unexplained duplicate (1,000 faults): a worker's lease call
    stalled (the lock store's writer frozen) past the lease's length, so the job began
    after its lease had lapsed; another worker leased the message meanwhile, and both
    ran it. A run that begins past its lease's deadline (counted from when the lease was
    asked for) asks the backend first, and does not begin if the lease is gone."""
    from tasuki.runtime.receiver import Receiver

    app = tasuki.App(shared_url, middleware=[])
    ran: list[str] = []

    @app.job(visibility_timeout=1.0)
    def once(n: int) -> None:
        ran.append(threading.current_thread().name)

    once.enqueue(1)
    held = app.worker(concurrency=1, wait=0.05)
    thawed, entered = threading.Event(), threading.Event()
    receive = Receiver.receive_many

    def receive_late(self: Receiver, deliveries: list[object], *args: object) -> object:
        if not entered.is_set():  # the first worker's first lease: held up before the run
            entered.set()
            thawed.wait(30)
        return receive(self, deliveries, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Receiver, "receive_many", receive_late)
    held.start()
    other = tasuki.App(shared_url, middleware=[])
    other.jobs["once"] = app.jobs["once"]
    try:
        assert entered.wait(20)
        time.sleep(2.2)  # the held-up run's lease lapses (SQS counts whole seconds)
        other.worker(concurrency=1, wait=0.05).run(until_idle=True, timeout=20)
        assert len(ran) == 1  # the other worker ran it
        thawed.set()
        deadline = time.monotonic() + 3.0  # time for the held-up run to begin, if it would
        while time.monotonic() < deadline and len(ran) == 1:
            time.sleep(0.05)
    finally:
        thawed.set()
        held.stop(grace=5.0)
        other.close()
        app.close()
    assert len(ran) == 1, "the run held up past its lease ran the job again"
