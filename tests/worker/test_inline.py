"""The inline lane: jobs that proved fast run on the fetcher's thread, the rest in the pool.

See `tasuki/runtime/pace.py`. These tests pin what a user can rely on: every message runs
once whichever lane it takes, a job that turns slow goes back to the pool, jobs with a
timeout or an async body never run inline, and a shutdown never runs a message that was
already handed back.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tasuki
from tasuki.runtime.finisher import Finisher
from tasuki.runtime.pace import JUDGE, QUALIFY, SAMPLE, Pace
from tasuki.runtime.worker import Worker

# Any job that does not sleep qualifies, however loaded the machine running the tests:
# these tests are about what the lanes do, not about where the line between them is.
LENIENT = 0.02


def worker(app: tasuki.App, **options: object) -> Worker:
    w = app.worker(**options)  # type: ignore[arg-type]
    w.pace = Pace(enabled=w.pace.enabled, fast=LENIENT)
    return w


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    a = tasuki.App(any_url)
    yield a
    a.close()


def lane() -> str:
    name = threading.current_thread().name
    return "inline" if name.startswith("tasuki-fetch") else "pool"


def wait_for(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def warmed_up(app: tasuki.App, job: tasuki.Job[..., None], done: Any, **options: Any) -> Worker:
    """A started worker that has run `job` until it runs inline (`done()` counts runs)."""
    w = worker(app, **options)
    w.start()
    job.enqueue_many([(n, 0.0) for n in range(2 * QUALIFY)])
    wait_for(lambda: done() == 2 * QUALIFY)
    wait_for(lambda: w.pace.inline(job))
    return w


def test_fast_jobs_move_to_the_fetcher_thread_and_each_runs_once(app: tasuki.App) -> None:
    runs: Counter[int] = Counter()
    lanes: Counter[str] = Counter()

    @app.job
    def tiny(n: int) -> None:
        runs[n] += 1
        lanes[lane()] += 1

    total = 3 * QUALIFY + 50
    tiny.enqueue_many([(n,) for n in range(total)])
    worker(app, concurrency=8).run(until_idle=True, timeout=60)
    assert runs == Counter(range(total))
    assert lanes["pool"] >= QUALIFY  # it has to prove itself first
    assert lanes["inline"] > 0
    s = app.stats()
    assert (s["ready"], s["in_flight"], s["dead"]) == (0, 0, 0)


def test_inline_can_be_turned_off(app: tasuki.App) -> None:
    lanes: Counter[str] = Counter()

    @app.job
    def tiny(n: int) -> None:
        lanes[lane()] += 1

    tiny.enqueue_many([(n,) for n in range(2 * QUALIFY + 20)])
    worker(app, concurrency=4, inline=False).run(until_idle=True, timeout=60)
    assert lanes == Counter({"pool": 2 * QUALIFY + 20})


def test_a_job_that_turns_slow_goes_back_to_the_pool(app: tasuki.App) -> None:
    lanes: list[tuple[int, str]] = []

    @app.job
    def sometimes(n: int, pause: float) -> None:
        if pause:
            time.sleep(pause)
        lanes.append((n, lane()))

    w = warmed_up(app, sometimes, lambda: len(lanes), concurrency=4)
    try:
        sometimes.enqueue(-1, 0.5)  # over 16 x LENIENT: out at once
        wait_for(lambda: len(lanes) == 2 * QUALIFY + 1)
        assert lanes[-1] == (-1, "inline")
        assert not w.pace.inline(sometimes)  # one slow run is enough
        sometimes.enqueue(-2, 0.0)
        wait_for(lambda: len(lanes) == 2 * QUALIFY + 2)
        assert lanes[-1] == (-2, "pool")
    finally:
        w.stop(grace=5)
    assert app.stats()["in_flight"] == 0


def test_jobs_with_a_timeout_or_async_never_run_inline(app: tasuki.App) -> None:
    lanes: Counter[str] = Counter()
    awaited: list[int] = []

    @app.job(timeout=30)
    def bounded(n: int) -> None:
        lanes[lane()] += 1

    @app.job
    async def later(n: int) -> None:
        awaited.append(n)

    bounded.enqueue_many([(n,) for n in range(2 * QUALIFY + 10)])
    later.enqueue_many([(n,) for n in range(2 * QUALIFY + 10)])
    w = worker(app, concurrency=4)
    w.run(until_idle=True, timeout=60)
    assert lanes == Counter({"pool": 2 * QUALIFY + 10})
    assert sorted(awaited) == list(range(2 * QUALIFY + 10))
    assert not w.pace.inline(bounded)
    assert not w.pace.inline(later)


def test_a_message_handed_back_at_shutdown_is_never_started(app: tasuki.App) -> None:
    """Shutdown releases every delivery it holds, started or not; one released before it
    started must not start afterwards (another worker may be running it by then)."""
    ran: list[int] = []

    @app.job
    def step(n: int) -> None:
        ran.append(n)

    w = worker(app, queues=["elsewhere"], concurrency=4)
    w.start()
    try:
        step.enqueue_many([(1,), (2,)])
        deliveries = app.backend.lease("default", 2, 30.0)
        first, second = w.receiver.receive_many(deliveries)
        assert w.finisher.release_on_shutdown(first)
        assert w.finisher.release_on_shutdown(second)
        assert w.runner.run_inline([first], w.pace, 1.0) == []
        w.runner.run(second)
    finally:
        w.stop(grace=1)
    assert ran == []
    assert app.stats()["ready"] == 2


def test_shutdown_with_an_inline_job_blocked_past_the_grace(app: tasuki.App) -> None:
    """The blocked job and the rest of its batch are handed back without penalty; nothing
    of the batch runs after the hand-back, nothing is lost."""
    events: list[tuple[int, str]] = []
    blocking = threading.Event()

    @app.job
    def step(n: int, block: float) -> None:
        events.append((n, "start"))
        if block:
            blocking.set()
            time.sleep(block)

    w = warmed_up(app, step, lambda: len(events), concurrency=8)
    try:
        events.clear()
        # Longer than the worker's wait for its fetchers (wait + 1 s) plus the grace.
        step.enqueue_many([(1000, 2.0)] + [(1000 + n, 0.0) for n in range(1, 6)])
        assert blocking.wait(10)
    finally:
        w.stop(grace=0.1)
    assert w.released_on_shutdown >= 1
    started_before = [n for n, _ in events]
    time.sleep(2.2)  # the blocked job has returned
    assert [n for n, _ in events] == started_before
    s = app.stats()
    assert s["in_flight"] == 0
    assert s["ready"] == 6 - (len(started_before) - 1)


def test_stopping_mid_backlog_leaves_nothing_in_flight(
    app: tasuki.App, volume: Callable[[int, int], int]
) -> None:
    """A busy fetcher always has the next lease under way; at a stop that lease is
    finished and its messages handed back unharmed, like every other held message."""
    ran: Counter[int] = Counter()
    total = volume(3000, 150)
    # Past a sixth of the backlog the jobs wait until the stop is asked for: a quick
    # machine would otherwise run it all before the stop took effect (a fresh-clone CI
    # run on memory:// did), and the test would prove nothing.
    stopping = threading.Event()

    @app.job
    def tiny(n: int) -> None:
        ran[n] += 1
        if sum(ran.values()) >= total // 6:
            stopping.wait(10.0)

    for start in range(0, total, 1000):
        tiny.enqueue_many([(n,) for n in range(start, min(total, start + 1000))])
    w = worker(app, concurrency=16)
    w.start()
    try:
        wait_for(lambda: sum(ran.values()) >= total // 6)
        w.request_stop(grace=5)
    finally:
        stopping.set()
        w.stop(grace=5)
    s = app.stats()
    assert s["in_flight"] == 0
    assert s["ready"] == total - len(ran)
    assert max(ran.values()) == 1
    # What was handed back kept its attempt: the next lease is its first.
    rest = app.backend.lease("default", 1000, 30.0)
    # (On SQS the local server sometimes hands one message to two racing receives: the
    # lease store refuses the second and does not count it as an attempt.)
    assert rest and Counter(d.attempt for d in rest) == {1: len(rest)}


def test_an_internal_error_loses_nothing(app: tasuki.App, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the runtime (here: settling a message raises once) must not stop the
    worker: the delivery's lease lapses and the message runs again."""
    ran: Counter[int] = Counter()

    @app.job(visibility_timeout=1.0)
    def tiny(n: int) -> None:
        ran[n] += 1

    tiny.enqueue_many([(n,) for n in range(3 * QUALIFY)])
    complete = Finisher.complete
    broken: list[int] = []

    def flaky_complete(self: Finisher, task: Any, outcome: Any) -> None:
        n = task.ctx.message.args[0]
        # Each breaks once, even if its lease lapses before the other is reached.
        if n in (5, 2 * QUALIFY) and n not in broken:
            broken.append(n)
            raise RuntimeError("a bug")
        complete(self, task, outcome)

    monkeypatch.setattr(Finisher, "complete", flaky_complete)
    worker(app, concurrency=4).run(until_idle=True, timeout=30)
    assert sorted(broken) == [5, 2 * QUALIFY]  # one in the pool, most likely one inline
    assert set(ran) == set(range(3 * QUALIFY))
    assert {n for n, times in ran.items() if times > 1} == {5, 2 * QUALIFY}
    s = app.stats()
    assert (s["ready"], s["in_flight"], s["dead"]) == (0, 0, 0)


def test_a_fast_job_that_mostly_waits_goes_back_to_the_pool(app: tasuki.App) -> None:
    """Fast in wall time but spent waiting (here a 0.3 ms sleep, as a round trip to a
    cache would be): inline runs show it, and the pool, which overlaps waits, gets it."""
    lanes: list[str] = []

    @app.job
    def waits(n: int) -> None:
        time.sleep(0.0003)
        lanes.append(lane())

    total = 2 * QUALIFY + 4 * SAMPLE * JUDGE
    w = worker(app, concurrency=4)
    w.start()
    try:
        waits.enqueue_many([(n,) for n in range(total)])
        wait_for(lambda: len(lanes) == total)
        assert w.pace.waits(waits)
        assert not w.pace.inline(waits)
        assert "inline" in lanes  # it was given its chance
        lanes.clear()
        waits.enqueue_many([(n,) for n in range(20)])
        wait_for(lambda: len(lanes) == 20)
        assert set(lanes) == {"pool"}
    finally:
        w.stop(grace=5)


def test_a_fast_job_that_computes_stays_inline(app: tasuki.App) -> None:
    lanes: list[str] = []

    @app.job
    def computes(n: int, pause: float) -> None:
        sum(range(3000))
        lanes.append(lane())

    w = warmed_up(app, computes, lambda: len(lanes), concurrency=4)
    try:
        lanes.clear()
        computes.enqueue_many([(n, 0.0) for n in range(3 * SAMPLE * JUDGE)])
        wait_for(lambda: len(lanes) == 3 * SAMPLE * JUDGE)
        assert not w.pace.waits(computes)
        assert lanes.count("inline") > len(lanes) // 2
    finally:
        w.stop(grace=5)
