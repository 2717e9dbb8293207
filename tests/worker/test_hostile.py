"""Nothing a message carries stops a worker's loops, and no backend bug in one settle or
keep leaves a worker running jobs it cannot settle (DESIGN §7)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence

import pytest

import tasuki
from tasuki.backends.base import Envelope, Settle
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import new_id
from tasuki.errors import BackendError
from tasuki.runtime.fatal import LoopFailed
from tasuki.runtime.health import WorkerHealth
from tasuki.runtime.settler import Settler
from tasuki.testing import FaultyBackend

HOSTILE_NOT_BEFORE = ["nan", "inf", "-inf", "1e400", "-5", "soon", "1" * 70, "٣"]


def _inject(app: tasuki.App, headers: dict[str, str], body: bytes) -> bool:
    """Straight to the backend, past the producer's checks: what a hostile writer does.
    False where the engine itself refuses to store it."""
    try:
        app.backend.enqueue([Envelope("default", new_id(), body, headers)])
    except tasuki.TasukiError:
        return False
    return True


@pytest.fixture
def faulty(any_url: str) -> Iterator[FaultyBackend]:
    backend = FaultyBackend(backend_from_url(any_url))
    yield backend
    backend.close()


def counting_app(url: str, runs: Counter[int], **options: object) -> tasuki.App:
    app = tasuki.App(url, **options)  # type: ignore[arg-type]
    mutex = threading.Lock()

    @app.job
    def work(n: int) -> None:
        with mutex:
            runs[n] += 1

    return app


def test_hostile_not_before_is_a_poison_message_and_the_rest_run_once(any_url: str) -> None:
    """`tasuki-not-before: nan` made the settle of the hop raise outside TasukiError: the
    settler thread died and every job after it ran again each lease."""
    runs: Counter[int] = Counter()
    app = counting_app(any_url, runs)
    try:
        stored = 0
        for n, value in enumerate(HOSTILE_NOT_BEFORE):
            body = b'{"args": [%d], "kwargs": {}}' % (100 + n)
            stored += _inject(app, {"tasuki-job": "work", "tasuki-not-before": value}, body)
        app.jobs["work"].enqueue_many([(n,) for n in range(20)])
        app.worker(concurrency=4).run(until_idle=True, timeout=30)
        assert runs == Counter(range(20)), "a good job was lost or ran twice"
        dead = app.dead_letters("default", limit=100)
        assert len(dead) == stored
        assert all(d.reason.startswith("refused: bad header tasuki-not-before") for d in dead)
        assert app.stats("default")["ready"] + app.stats("default")["in_flight"] == 0
    finally:
        app.close()


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_every_hostile_tasuki_header_is_dead_lettered_with_its_reason(
    any_url: str, signed: bool
) -> None:
    app = counting_app(any_url, Counter(), signing_key=b"k" if signed else None)
    hostile = {
        "tasuki-content-type": "ü" * 3,
        "tasuki-signature": "nan",
        "tasuki-group": "g" * 500,
        "tasuki-unique-pending": "inf",
        "tasuki-unique": "",
        "tasuki-flow": "nan",
        "tasuki-job": "w" * 2000,
        "tasuki-future": "x" * 70_000,
    }
    try:
        body = b'{"args": [1], "kwargs": {}}'
        expected = {}
        for name, value in hostile.items():
            headers = {"tasuki-job": "work", name: value}
            if signed:
                app.codec.sign("default", headers, body)
                headers[name] = value  # the header set after signing, as a writer would
            if _inject(app, headers, body):
                expected[name] = value
        app.worker(concurrency=2).run(until_idle=True, timeout=30)
        dead = app.dead_letters("default", limit=100)
        assert len(dead) == len(expected)
        for letter in dead:
            reasons = ("refused: bad header tasuki-", "refused: bad sig", "undecodable workflow")
            assert letter.reason.startswith(reasons), letter.reason
    finally:
        app.close()


def test_a_settle_raising_a_bug_is_split_and_every_message_settles_once(
    faulty: FaultyBackend,
) -> None:
    """The settler's twin of the fetcher's lease bug (test_faults): a RuntimeError from
    `settle` ended the settler thread, and the worker ran on without settling."""
    runs: Counter[int] = Counter()
    app = counting_app(faulty.inner.url, runs, backend=faulty)
    app.jobs["work"].enqueue_many([(n,) for n in range(30)])
    faulty.fail("ack", times=1, error=RuntimeError("a bug"))
    app.worker(concurrency=4).run(until_idle=True, timeout=30)
    assert faulty.injected["ack"] == 1
    assert runs == Counter(range(30))
    s = app.stats()
    assert (s["ready"], s["in_flight"], s["dead"]) == (0, 0, 0)


class OneBadSettle(FaultyBackend):
    """A backend whose settle always raises when one given message is acked in it."""

    bad_id = ""

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        if any(i.receipt.id == self.bad_id and i.verdict == "ack" for i in items):
            raise ValueError("cannot store this one")
        return super().settle(items)


def test_the_one_settle_the_backend_refuses_is_dead_lettered_with_why(any_url: str) -> None:
    backend = OneBadSettle(backend_from_url(any_url))
    runs: Counter[int] = Counter()
    app = counting_app(any_url, runs, backend=backend)
    try:
        ids = app.jobs["work"].enqueue_many([(n,) for n in range(12)])
        backend.bad_id = ids[5]
        app.worker(concurrency=4).run(until_idle=True, timeout=30)
        assert runs == Counter(range(12))
        dead = app.dead_letters("default")
        assert [d.id for d in dead] == [ids[5]]
        assert dead[0].reason == "could not be settled (ack): ValueError: cannot store this one"
        assert app.stats()["ready"] + app.stats()["in_flight"] == 0
    finally:
        app.close()


def test_a_keep_raising_a_bug_keeps_the_lease_and_the_keeper(faulty: FaultyBackend) -> None:
    """The keeper's twin: a RuntimeError from `keep` ended the keeper thread; every lease
    then lapsed and each running job was run again by another delivery."""
    runs: Counter[int] = Counter()
    app = tasuki.App(faulty.inner.url, backend=faulty)
    started = threading.Event()
    vt = max(0.6, faulty.capabilities.timer_resolution)

    @app.job(visibility_timeout=vt)
    def slow(n: int) -> None:
        runs[n] += 1
        started.set()
        time.sleep(3 * vt)

    slow.enqueue(1)
    worker = app.worker(concurrency=2)  # a free slot would re-lease a lapsed message
    worker.start()
    try:
        assert started.wait(5)
        faulty.fail("extend", times=1, error=RuntimeError("a bug"))
        deadline = time.monotonic() + 10 * vt + 5
        while (app.stats()["ready"] + app.stats()["in_flight"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert faulty.injected["extend"] == 1
        assert worker.keeper._thread.is_alive()
    finally:
        worker.stop(grace=5)
    assert runs == Counter({1: 1})
    assert app.stats()["dead"] == 0


def test_a_loop_that_cannot_go_on_stops_the_worker_with_readyz_red(
    any_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug escaping the settler's loop: the worker must not live on leasing jobs it can
    never settle. It says so, goes red, stops, and `run` raises (the CLI exits 1)."""
    runs: Counter[int] = Counter()
    app = counting_app(any_url, runs)

    def broken(self: Settler, batch: object) -> None:
        raise RuntimeError("the settler's own bug")

    monkeypatch.setattr(Settler, "_send", broken)
    app.jobs["work"].enqueue_many([(n,) for n in range(5)])
    worker = app.worker(concurrency=2)
    health = WorkerHealth(worker)
    try:
        with pytest.raises(LoopFailed, match="settler loop failed: RuntimeError"):
            worker.run(timeout=20)
        ready = health.ready()
        assert not ready.ok
        assert "status 1" in ready.checks["worker"].detail
        assert sum(runs.values()) <= 5
    finally:
        app.close()


HOSTILE_TEXT = "nul\x00 lone\ud800 bell\x07 end"


def test_a_jobs_error_and_progress_with_any_text_reach_the_store(any_url: str) -> None:
    """Text some engine cannot store (NUL on PostgreSQL, a lone surrogate everywhere)
    failed the keep that carried the progress and the settle that carried the error."""
    app = tasuki.App(any_url)
    runs: list[int] = []
    noted = threading.Event()

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def noisy(n: int) -> None:
        runs.append(n)
        tasuki.current().progress(0.5, HOSTILE_TEXT)
        tasuki.current().extend(30.0)  # the progress goes with this keep, at once
        noted.set()
        raise RuntimeError(HOSTILE_TEXT)

    try:
        message_id = noisy.enqueue(1)
        app.worker(concurrency=1).run(until_idle=True, timeout=30)
        assert noted.is_set() and runs == [1]
        [letter] = app.dead_letters("default")
        assert letter.id == message_id and letter.error is not None
        assert letter.error.type == "RuntimeError"
        assert letter.error.message == "nul\\x00 lone\\ud800 bell\x07 end"
    finally:
        app.close()


class GroupValueFailsOnce(FaultyBackend):
    """A backend whose first read of a group's value fails, as in a short outage."""

    failed = 0

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        if not self.failed:
            self.failed += 1
            raise BackendError("the group's value could not be read")
        return super().group_value(flow_id, barrier)


@pytest.mark.requires("workflows")
def test_a_step_whose_reading_meets_a_backend_error_is_retried_not_dead(any_url: str) -> None:
    backend = GroupValueFailsOnce(backend_from_url(any_url))
    app = tasuki.App(any_url, backend=backend)

    @app.job()
    def square(n: int) -> int:
        return n * n

    @app.job()
    def total(squares: list[int]) -> int:
        return sum(squares)

    try:
        flow_id = tasuki.chain(
            tasuki.group(square.step(n) for n in range(3)), total.step()
        ).enqueue()
        app.worker(concurrency=2).run(until_idle=True, timeout=30)
        assert backend.failed == 1
        assert app.flow_result(flow_id, timeout=5.0) == 5
        assert app.stats()["dead"] == 0
    finally:
        app.close()


def test_a_started_worker_whose_loop_fails_stops_itself(
    any_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `run` to return to, the worker shuts itself down: no fetcher leases on."""
    app = counting_app(any_url, Counter())

    def broken(self: Settler, batch: object) -> None:
        raise RuntimeError("the settler's own bug")

    monkeypatch.setattr(Settler, "_send", broken)
    app.jobs["work"].enqueue(1)
    worker = app.worker(concurrency=1)
    worker.start()
    try:
        assert worker.join(20), "the worker did not stop"
        assert worker.fatal.reason is not None and "settler" in worker.fatal.reason
        assert not any(f._thread.is_alive() for f in worker.fetchers)
    finally:
        worker.stop()
        app.close()


def test_an_async_jobs_system_exit_is_its_error_and_the_worker_goes_on() -> None:
    """As on a thread: a SystemExit raised by an async job fails that job (here: dead
    after its one attempt); the event loop the other async jobs run on lives on."""
    import tasuki

    app = tasuki.App("memory://")

    @app.job(retry=tasuki.Retry(max_attempts=1))
    async def leave() -> None:
        raise SystemExit(3)

    @app.job()
    async def stay() -> int:
        return 1

    leave.enqueue()
    stay.enqueue()
    try:
        app.worker(concurrency=2).run(until_idle=True, timeout=20)
        [dead] = app.dead_letters("default")
        assert dead.error is not None and dead.error.type == "SystemExit"
        assert app.stats()["ready"] == 0 and app.stats()["dead"] == 1
    finally:
        app.close()


def test_an_event_loop_that_cannot_go_on_stops_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever escapes asyncio's `run_forever` leaves every async job without a loop:
    the worker stops with status 1 instead of leasing async jobs nothing can run."""
    import tasuki
    from tasuki.runtime.eventloop import EventLoopThread

    def broken(self: EventLoopThread) -> None:
        raise SystemExit("the loop's own bug")

    monkeypatch.setattr(EventLoopThread, "_beat", broken)
    app = tasuki.App("memory://")

    @app.job()
    async def stay() -> int:
        return 1

    stay.enqueue()
    worker = app.worker(concurrency=2)
    try:
        with pytest.raises(LoopFailed, match="asyncio loop failed: SystemExit"):
            worker.run(timeout=20)
    finally:
        app.close()
