"""Uniqueness: every mode with every conflict strategy, on every backend."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tasuki
from tasuki.core.policies import UNIQUE_MODES
from tasuki.errors import DuplicateJob

ENQUEUE_MODES = ["until_executing", "until_executed", "until_and_while_executing", "until_expired"]
# Rewriting a waiting copy's arguments: refused where the claim is not atomic (SQS).
REPLACES = pytest.mark.requires("atomic_unique")


class Runs:
    """What ran, when, with which arguments; thread-safe."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.items: list[tuple[Any, float, float]] = []

    def record(self, value: Any, started: float) -> None:
        with self.mutex:
            self.items.append((value, started, time.monotonic()))

    @property
    def values(self) -> list[Any]:
        return [v for v, _, _ in sorted(self.items, key=lambda i: i[1])]

    def overlapping(self) -> bool:
        spans = sorted((s, e) for _, s, e in self.items)
        return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    a = tasuki.App(any_url)
    yield a
    a.close()


def make_job(
    app: tasuki.App,
    runs: Runs,
    mode: str,
    on_conflict: str,
    *,
    sleep: float = 0.0,
    started: threading.Event | None = None,
    **unique: Any,
) -> tasuki.core.job.Job[..., Any]:
    policy = tasuki.Unique(
        mode=mode,  # type: ignore[arg-type]
        on_conflict=on_conflict,  # type: ignore[arg-type]
        key=lambda m: "the-key",
        reschedule_delay=0.1,
        **unique,
    )

    @app.job(unique=policy, retry=tasuki.Retry(max_attempts=20, backoff=tasuki.constant(0.1)))
    def task(value: str) -> None:
        began = time.monotonic()
        if started is not None:
            started.set()
        time.sleep(sleep)
        runs.record(value, began)

    return task


def drain(app: tasuki.App, concurrency: int = 4, until: Callable[[], bool] | None = None) -> None:
    """Run until idle. Where stats are approximate (SQS) idle can be seen while a retry is
    on its way back, so with `until` the worker runs again until it holds (up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        app.worker(concurrency=concurrency).run(until_idle=True, timeout=30)
        exact = app.backend.capabilities.exact_stats
        if until is None or exact or until() or time.monotonic() > deadline:
            return


@pytest.mark.parametrize("mode", ENQUEUE_MODES)
def test_drop_returns_the_waiting_copy(app: tasuki.App, mode: str) -> None:
    runs = Runs()
    task = make_job(app, runs, mode, "drop")
    first = task.enqueue("a")
    assert task.enqueue("b") == first
    assert app.stats()["ready"] == 1
    drain(app)
    assert runs.values == ["a"]


@pytest.mark.parametrize("mode", ENQUEUE_MODES)
def test_raise_at_enqueue(app: tasuki.App, mode: str) -> None:
    runs = Runs()
    task = make_job(app, runs, mode, "raise")
    first = task.enqueue("a")
    with pytest.raises(DuplicateJob) as info:
        task.enqueue("b")
    assert info.value.existing_id == first
    assert app.stats()["ready"] == 1


@REPLACES
@pytest.mark.parametrize("mode", ENQUEUE_MODES)
def test_replace_newest_payload_wins(app: tasuki.App, mode: str) -> None:
    runs = Runs()
    task = make_job(app, runs, mode, "replace")
    first = task.enqueue("a")
    assert task.enqueue("b") == first
    assert task.enqueue("c") == first
    drain(app)
    assert runs.values == ["c"]


@pytest.mark.parametrize("mode", ["until_executing", "until_executed", "until_and_while_executing"])
def test_reschedule_runs_the_duplicate_later(app: tasuki.App, mode: str) -> None:
    runs = Runs()
    task = make_job(app, runs, mode, "reschedule", sleep=0.2)
    task.enqueue("a")
    task.enqueue("b")
    s = app.stats()
    assert (s["ready"], s["delayed"]) == (1, 1)
    drain(app, until=lambda: len(runs.items) >= 2)  # "b" may be on its way back again
    assert sorted(runs.values) == ["a", "b"]
    assert runs.values[0] == "a"
    if mode != "until_executing":
        assert not runs.overlapping()


def test_until_expired_holds_after_success(app: tasuki.App) -> None:
    runs = Runs()
    # A drain takes over a second where the backend long-polls in whole seconds (SQS),
    # and most of one on a loaded machine: the lock must outlive the first one for "b"
    # to meet it.
    ttl = 2.0 + 3 * app.backend.capabilities.timer_resolution
    task = make_job(app, runs, "until_expired", "drop", ttl=ttl)
    before = time.monotonic()
    task.enqueue("a")
    claimed = time.monotonic()  # the lock was taken between the two
    drain(app)
    task.enqueue("b")  # still locked although "a" finished
    assert time.monotonic() - before < ttl, "the lock lapsed before b: the test proves nothing"
    drain(app)
    time.sleep(max(0.0, claimed + ttl + 0.05 - time.monotonic()))
    task.enqueue("c")
    drain(app)
    assert runs.values == ["a", "c"]


def test_until_executing_frees_the_key_when_it_starts(app: tasuki.App) -> None:
    runs = Runs()
    started = threading.Event()
    task = make_job(app, runs, "until_executing", "drop", sleep=0.5, started=started)
    task.enqueue("a")
    # One slot, held by "a" while "b" and "c" are enqueued: with a free slot "b" could
    # start (and free the key) before "c" is enqueued.
    worker = app.worker(concurrency=1)
    worker.start()
    assert started.wait(10), "a never started"
    task.enqueue("b")  # "a" is running, not waiting: "b" may wait
    task.enqueue("c")  # but only one may wait
    worker.stop(grace=5)
    drain(app)
    assert sorted(runs.values) == ["a", "b"]


def test_until_executed_keeps_the_key_through_retries(app: tasuki.App) -> None:
    calls: list[str] = []

    @app.job(
        unique=tasuki.Unique(mode="until_executed", key=lambda m: "k"),
        retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(0.3)),
    )
    def flaky(value: str) -> None:
        calls.append(value)
        if len(calls) == 1:
            raise RuntimeError("once")

    first = flaky.enqueue("a")
    worker = app.worker(concurrency=1)
    worker.start()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert flaky.enqueue("b") == first  # waiting for its retry: still the unique copy
    worker.stop(grace=5)
    drain(app)
    assert calls == ["a", "a"]
    assert flaky.enqueue("c") != first  # succeeded: the key is free


def test_dead_letter_frees_until_executed(app: tasuki.App) -> None:
    @app.job(unique=tasuki.Unique(mode="until_executed"), retry=tasuki.Retry(max_attempts=1))
    def doomed(n: int) -> None:
        raise RuntimeError("no")

    first = doomed.enqueue(1)
    drain(app)
    assert app.stats()["dead"] == 1
    assert doomed.enqueue(1) != first


@pytest.mark.parametrize("on_conflict", ["drop", "raise", "reschedule", "replace"])
def test_while_executing_conflicts_at_run_time(app: tasuki.App, on_conflict: str) -> None:
    runs = Runs()
    task = make_job(app, runs, "while_executing", on_conflict, sleep=0.3)
    task.enqueue("a")
    task.enqueue("b")  # no enqueue-time lock: both wait
    assert app.stats()["ready"] == 2
    drain(app, concurrency=2, until=lambda: on_conflict == "drop" or len(runs.values) == 2)
    assert not runs.overlapping()
    if on_conflict == "drop":
        assert len(runs.values) == 1
    else:
        assert sorted(runs.values) == ["a", "b"]
    assert app.stats()["dead"] == 0


def test_three_jobs_a_runs_b_waits_c_dropped(app: tasuki.App) -> None:
    runs = Runs()
    task = make_job(app, runs, "until_and_while_executing", "drop", sleep=2.0)
    worker = app.worker(concurrency=3)
    worker.start()
    task.enqueue("A")
    deadline = time.monotonic() + 5
    while not app.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # A holds the execution lock now
    b = task.enqueue("B")
    assert task.enqueue("C") == b  # conflicts with the waiting B: dropped
    deadline = time.monotonic() + 15
    while len(runs.items) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop(grace=5)
    assert runs.values == ["A", "B"]
    assert not runs.overlapping()


def test_default_key_is_job_and_arguments(app: tasuki.App) -> None:
    @app.job(unique=tasuki.Unique(mode="until_executed"))
    def resize(image_id: int, size: str = "small") -> None: ...

    a = resize.enqueue(1)
    assert resize.enqueue(1) == a
    assert resize.enqueue(image_id=1) != a  # spelled as a keyword: another key
    assert resize.enqueue(2) != a


def test_purge_frees_waiting_unique_locks(app: tasuki.App) -> None:
    @app.job(unique=tasuki.Unique(mode="until_executed"))
    def job(n: int) -> None: ...

    first = job.enqueue(1)
    app.purge()
    assert job.enqueue(1) != first


def test_every_mode_is_covered() -> None:
    assert set(UNIQUE_MODES) == {*ENQUEUE_MODES, "while_executing"}
