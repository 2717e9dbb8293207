"""Cancel and progress as a running job sees them (DESIGN §4b): a cancel reaches the job
with its lease's next keep (`ctx.cancelled`, `ctx.should_stop`), nothing of that run is
settled, it is never retried; progress travels with the keep and `inspect` shows it."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import tasuki
from tasuki import logs
from tasuki.backends.base import Keep, LeaseStatus
from tasuki.backends.memory import MemoryBackend
from tasuki.core.context import Context
from tasuki.core.message import Message
from tasuki.errors import InvalidArgument, LeaseLost, TasukiError
from tasuki.runtime.heartbeat import WATCH_EVERY
from tests.worker.helpers import wait_until


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(any_url)
    yield app
    app.close()


class Running:
    """A worker started in the background, stopped when the test ends."""

    def __init__(self, app: tasuki.App, **options: Any) -> None:
        self.worker = app.worker(concurrency=4, **options)
        self.worker.start()

    def stop(self) -> None:
        self.worker.stop(grace=5.0)


@pytest.fixture
def running() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(app: tasuki.App, **options: Any) -> Running:
        started.append(Running(app, **options))
        return started[-1]

    yield start
    for r in started:
        r.stop()


def cancel_when_started(app: tasuki.App, started: threading.Event, mid: str) -> float:
    """Cancel message `mid` once its job has started; when the call was made."""
    assert started.wait(10)
    called = time.monotonic()
    assert app.cancel("default", mid) == "signalled"
    return called


@pytest.mark.requires("cancel")
def test_a_waiting_message_is_removed_and_never_runs(
    app: tasuki.App, running: Callable[..., Running]
) -> None:
    ran: list[int] = []

    @app.job
    def later(n: int) -> None:
        ran.append(n)

    waiting = later.options(delay=0.5).enqueue(1)
    other = later.options(delay=0.5).enqueue(2)
    assert app.cancel("default", waiting) == "removed"
    running(app)
    wait_until(lambda: ran == [2], 10)
    time.sleep(0.3)
    assert ran == [2]
    if app.backend.capabilities.inspection:
        assert app.inspect("default", waiting).state == "cancelled"
        assert app.inspect("default", other).state in ("finished", "unknown")
    assert app.cancel("default", waiting) == "unknown"


@pytest.mark.requires("cancel")
def test_a_running_job_sees_the_cancel_and_nothing_of_its_run_is_kept(
    app: tasuki.App, running: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict[str, Any]] = []
    started = threading.Event()

    @app.job(visibility_timeout=30.0, retry=tasuki.Retry(max_attempts=5))
    def long(n: int) -> str:
        ctx = tasuki.current()
        started.set()
        began = time.monotonic()
        while not ctx.wait_for_stop(5.0):
            pass
        seen.append(
            {
                "cancelled": ctx.cancelled,
                "should_stop": ctx.should_stop,
                "reason": ctx.stop_reason,
                "after": time.monotonic() - began,
                "attempt": ctx.attempt,
            }
        )
        return "a result nobody keeps"  # an ack the backend would refuse

    with caplog.at_level(logging.INFO, logger="tasuki"):
        running(app)
        mid = long.enqueue(1)
        called = cancel_when_started(app, started, mid)
        wait_until(lambda: bool(seen), 10)
        latency = time.monotonic() - called
        time.sleep(0.5)
    [run] = seen
    assert run["cancelled"] and run["should_stop"] and run["reason"] == "cancelled"
    # Learnt at the next keep of a job that looks for a stop, not a third of 30 s later.
    assert latency < WATCH_EVERY + 1.0, latency
    assert run["attempt"] == 1
    stats = app.stats()
    assert stats["ready"] + stats["in_flight"] + stats["delayed"] + stats["dead"] == 0
    if app.backend.capabilities.inspection:
        assert app.inspect("default", mid).state == "cancelled"
    events = [logs.event_name(r) for r in caplog.records if r.name == "tasuki"]
    assert "cancelled" in events
    assert "finished" not in events and "ack refused" not in events


@pytest.mark.requires("cancel")
def test_a_cancelled_run_is_never_retried_and_counts_as_no_success(
    app: tasuki.App, running: Callable[..., Running]
) -> None:
    """Its dedup guard is not marked done: the next message with that key runs."""
    runs: list[int] = []
    started = threading.Event()

    @app.job(dedup=tasuki.Dedup(key=lambda m: "the-one"), retry=tasuki.Retry(max_attempts=5))
    def charge(n: int) -> None:
        runs.append(n)
        started.set()
        if n == 1:
            tasuki.current().wait_for_stop(20.0)  # then returns as if it succeeded

    running(app)
    first = charge.enqueue(1)
    cancel_when_started(app, started, first)
    wait_until(lambda: app.stats()["in_flight"] == 0, 10)
    charge.enqueue(2)
    wait_until(lambda: runs == [1, 2], 10)
    time.sleep(0.3)
    assert runs == [1, 2]


@pytest.mark.requires("cancel")
def test_a_job_that_never_looks_learns_at_the_next_heartbeat(
    app: tasuki.App, running: Callable[..., Running]
) -> None:
    seen: list[bool] = []
    started = threading.Event()

    @app.job(visibility_timeout=1.5)
    def busy() -> None:
        started.set()
        time.sleep(1.5)  # never looks at ctx: the keeper keeps it every 0.5 s
        seen.append(tasuki.current().cancelled)

    running(app)
    mid = busy.enqueue()
    cancel_when_started(app, started, mid)
    wait_until(lambda: bool(seen), 10)
    assert seen == [True]


class CountingKeeps(MemoryBackend):
    """memory:// that counts the leases `keep` was asked to keep."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[str] = []

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        self.kept += [item.receipt.id for item in items]
        return super().keep(items)


def test_only_jobs_that_look_for_a_stop_are_kept_more_often() -> None:
    backend = CountingKeeps()
    app = tasuki.App(backend=backend)

    @app.job(visibility_timeout=30.0)
    def looks() -> None:
        ctx = tasuki.current()
        deadline = time.monotonic() + 3.2
        while time.monotonic() < deadline and not ctx.should_stop:
            time.sleep(0.05)

    @app.job(visibility_timeout=30.0)
    def never_looks() -> None:
        time.sleep(3.2)

    watched, plain = looks.enqueue(), never_looks.enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=20)
    assert backend.kept.count(plain) == 0  # a third of 30 s never came
    # Kept about every WATCH_EVERY while it ran (3.2 s): a late keeper thread may miss one.
    assert 2 <= backend.kept.count(watched) <= 3.2 / WATCH_EVERY + 1


@pytest.mark.requires("cancel")
def test_ctx_extend_on_a_cancelled_message_raises(
    app: tasuki.App, running: Callable[..., Running]
) -> None:
    errors: list[str] = []
    go = threading.Event()

    @app.job
    def extending() -> None:
        go.wait(10)
        try:
            tasuki.current().extend(30.0)
        except LeaseLost as exc:
            errors.append(str(exc))

    running(app)
    mid = extending.enqueue()
    wait_until(lambda: app.stats()["in_flight"] == 1, 10)
    assert app.cancel("default", mid) == "signalled"
    go.set()
    wait_until(lambda: bool(errors), 10)
    assert "was cancelled" in errors[0]


@pytest.mark.requires("cancel", "progress", "inspection")
def test_progress_travels_with_the_keep_and_inspect_shows_it(
    app: tasuki.App, running: Callable[..., Running]
) -> None:
    step = threading.Event()
    done = threading.Event()

    @app.job(visibility_timeout=0.9)
    def pages() -> None:
        ctx = tasuki.current()
        ctx.progress(0.25, "1 of 4 pages")
        step.wait(10)
        ctx.progress(1, "4 of 4 pages")
        done.wait(10)

    running(app)
    mid = pages.enqueue()

    def shown() -> tasuki.MessageInfo:
        return app.inspect("default", mid)

    wait_until(lambda: shown().progress is not None, 5)
    progress = shown().progress
    assert progress is not None and (progress.fraction, progress.text) == (0.25, "1 of 4 pages")
    step.set()
    wait_until(lambda: getattr(shown().progress, "fraction", 0) == 1.0, 5)
    assert shown().as_dict()["progress"] == {"fraction": 1.0, "text": "4 of 4 pages"}
    done.set()


@pytest.mark.parametrize(
    "args, needle",
    [
        ((1.5,), "from 0 to 1"),
        ((-0.1,), "from 0 to 1"),
        ((float("nan"),), "from 0 to 1"),
        (("half",), "must be a number"),
        ((True,), "must be a number"),
        ((0.5, 3), "progress text must be a str"),
        ((0.5, "x" * 300), "at most 256"),
    ],
)
def test_progress_is_validated(args: tuple[Any, ...], needle: str) -> None:
    ctx = Context(Message("m", "q", b""), extender=lambda seconds: True)
    with pytest.raises(InvalidArgument, match=needle):
        ctx.progress(*args)
    assert ctx.last_progress is None


def test_progress_needs_a_lease_keeper() -> None:
    """A process job's context (a copy in the child) has none: it says so."""
    with pytest.raises(TasukiError, match="progress cannot be reported here"):
        Context(Message("m", "q", b"")).progress(0.5)


def test_a_backend_that_stores_no_progress_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    backend = MemoryBackend()
    backend.capabilities = dataclasses.replace(backend.capabilities, progress=False)  # type: ignore[misc]
    app = tasuki.App(backend=backend)

    @app.job(visibility_timeout=0.6)
    def reports() -> None:
        for n in range(3):
            tasuki.current().progress(n / 3)
            time.sleep(0.3)

    reports.enqueue()
    reports.enqueue()
    with caplog.at_level(logging.WARNING, logger="tasuki"):
        app.worker(concurrency=2).run(until_idle=True, timeout=10)
    warned = [r for r in caplog.records if "lacks the progress capability" in r.getMessage()]
    assert len(warned) == 1


@pytest.mark.requires("cancel")
def test_cancel_input_is_checked(app: tasuki.App) -> None:
    with pytest.raises(InvalidArgument, match="queue"):
        app.cancel("", "x")
    with pytest.raises(InvalidArgument, match="message_id"):
        app.cancel("default", "")
    assert app.cancel("default", "never-enqueued") == "unknown"


def test_cancel_is_refused_where_the_backend_lacks_it() -> None:
    backend = MemoryBackend()
    backend.capabilities = dataclasses.replace(backend.capabilities, cancel=False)  # type: ignore[misc]
    with pytest.raises(InvalidArgument, match="lacks the cancel capability"):
        tasuki.App(backend=backend).cancel("default", "x")
