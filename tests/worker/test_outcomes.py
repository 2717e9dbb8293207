"""What the worker does with each kind of run: success, failure, timeout, poison, defer."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki.backends.base import QueueStats, Settle
from tasuki.backends.memory import MemoryBackend
from tasuki.core.message import JOB_HEADER
from tasuki.errors import JobTimeout
from tasuki.middleware.base import ExecuteHook, Middleware, Outgoing

FAST = tasuki.constant(0.0)


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    a = tasuki.App(any_url)
    yield a
    a.close()


def run(app: tasuki.App, **options: Any) -> tasuki.App:
    options.setdefault("concurrency", 4)
    app.worker(**options).run(until_idle=True, timeout=30)
    return app


def test_success_acks(app: tasuki.App) -> None:
    seen: list[int] = []

    @app.job
    def add(a: int, b: int) -> None:
        seen.append(a + b)

    add.enqueue(1, 2)
    add.enqueue_many([(3, 4), {"a": 5, "b": 6}])
    run(app)
    assert sorted(seen) == [3, 7, 11]
    assert app.stats()["ready"] == 0
    assert app.stats()["dead"] == 0


def test_retry_until_success_counts_attempts(app: tasuki.App) -> None:
    attempts: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=5, backoff=tasuki.constant(0.05)))
    def flaky() -> None:
        attempts.append(tasuki.current().attempt)
        if len(attempts) < 3:
            raise ConnectionError("try again")

    flaky.enqueue()
    run(app)
    assert attempts == [1, 2, 3]
    assert app.stats()["dead"] == 0


def test_backoff_delays_the_retry(app: tasuki.App) -> None:
    times: list[float] = []

    @app.job(retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.4)))
    def slow_retry() -> None:
        times.append(time.monotonic())
        if len(times) == 1:
            raise RuntimeError("once")

    slow_retry.enqueue()
    run(app)
    assert len(times) == 2
    assert times[1] - times[0] >= 0.38


def test_exponential_backoff_values() -> None:
    b = tasuki.exponential(base=1.0, cap=10.0, jitter=False)
    assert [b(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    jittered = tasuki.exponential(base=4.0, cap=300.0)
    assert all(2.0 <= jittered(1) <= 4.0 for _ in range(100))


def test_exhausted_retries_dead_letter_with_error(app: tasuki.App) -> None:
    @app.job(retry=tasuki.Retry(max_attempts=3, backoff=FAST))
    def doomed() -> None:
        raise RuntimeError("still broken")

    doomed.enqueue()
    run(app)
    [dead] = app.dead_letters()
    assert dead.attempt == 3
    assert "retries exhausted after 3 attempts" in dead.reason
    assert dead.error is not None
    assert str(dead.error).startswith("RuntimeError: still broken")
    assert "Traceback" in dead.error.traceback and "doomed" in dead.error.traceback
    assert dead.job == "doomed"


def test_give_up_on_is_final_at_once(app: tasuki.App) -> None:
    calls: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=5, backoff=FAST, give_up_on=(ValueError,)))
    def picky() -> None:
        calls.append(1)
        raise ValueError("bad input")

    picky.enqueue()
    run(app)
    assert calls == [1]
    [dead] = app.dead_letters()
    assert "gave up on ValueError" in dead.reason


def test_retry_on_limits_what_is_retried(app: tasuki.App) -> None:
    calls: list[str] = []

    @app.job(retry=tasuki.Retry(max_attempts=5, backoff=FAST, on=(TimeoutError,)))
    def narrow(kind: str) -> None:
        calls.append(kind)
        raise TimeoutError("slow") if kind == "t" and len(calls) < 2 else KeyError(kind)

    narrow.enqueue("t")
    run(app)
    assert calls == ["t", "t"]  # TimeoutError retried, then KeyError is final
    [dead] = app.dead_letters()
    assert dead.error is not None and dead.error.type == "KeyError"


def test_on_exhausted_returning_acks(app: tasuki.App) -> None:
    handled: list[tuple[str, str]] = []

    def handler(message: tasuki.Message, error: BaseException) -> None:
        handled.append((message.job or "", type(error).__name__))

    @app.job(retry=tasuki.Retry(max_attempts=2, backoff=FAST), on_exhausted=handler)
    def doomed() -> None:
        raise RuntimeError("x")

    doomed.enqueue()
    run(app)
    assert handled == [("doomed", "RuntimeError")]
    assert app.stats()["dead"] == 0


def test_on_exhausted_raising_dead_letters(app: tasuki.App) -> None:
    def handler(message: tasuki.Message, error: BaseException) -> None:
        raise LookupError("handler broke too")

    @app.job(retry=tasuki.Retry(max_attempts=1), on_exhausted=handler)
    def doomed() -> None:
        raise RuntimeError("x")

    doomed.enqueue()
    run(app)
    [dead] = app.dead_letters()
    assert "on_exhausted raised LookupError" in dead.reason
    assert dead.error is not None and dead.error.type == "LookupError"


def test_sync_timeout_interrupts_python_code(app: tasuki.App) -> None:
    stopped: list[bool] = []

    @app.job(timeout=0.3, retry=tasuki.Retry(max_attempts=1))
    def spin() -> None:
        ctx = tasuki.current()
        try:
            while True:  # pure Python: the JobTimeout lands inside the loop
                sum(range(100))
        finally:
            stopped.append(ctx.should_stop)

    spin.enqueue()
    started = time.monotonic()
    run(app)
    assert time.monotonic() - started < 5
    assert stopped == [True]
    [dead] = app.dead_letters()
    assert dead.error is not None and dead.error.type == "JobTimeout"
    assert "timeout of 0.3s" in str(dead.error)


def test_sync_timeout_is_retried_like_any_failure(app: tasuki.App) -> None:
    attempts: list[int] = []

    @app.job(timeout=0.2, retry=tasuki.Retry(max_attempts=3, backoff=FAST, on=(TimeoutError,)))
    def sometimes_slow() -> None:
        attempts.append(tasuki.current().attempt)
        if len(attempts) == 1:
            tasuki.current().wait_for_stop(5)  # cooperative: wakes on the timeout
            time.sleep(0.05)

    sometimes_slow.enqueue()
    run(app)
    assert attempts == [1, 2]
    assert app.stats()["dead"] == 0


def test_async_timeout_cancels(app: tasuki.App) -> None:
    cancelled: list[bool] = []

    @app.job(timeout=0.2, retry=tasuki.Retry(max_attempts=1))
    async def sleepy() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    sleepy.enqueue()
    started = time.monotonic()
    run(app)
    assert time.monotonic() - started < 5
    assert cancelled == [True]
    [dead] = app.dead_letters()
    assert dead.error is not None and dead.error.type == "JobTimeout"


def test_async_jobs_share_one_loop_concurrently(app: tasuki.App) -> None:
    loops: set[int] = set()

    @app.job
    async def io(n: int) -> None:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.3)

    io.enqueue_many([(n,) for n in range(20)])
    started = time.monotonic()
    run(app, concurrency=20)
    assert time.monotonic() - started < 3.0  # 20 x 0.3 s run together, not one by one
    assert len(loops) == 1


def test_defer_releases_without_penalty(app: tasuki.App) -> None:
    attempts: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def later() -> None:
        attempts.append(tasuki.current().attempt)
        if len(attempts) < 3:
            raise tasuki.Defer(delay=0.05)

    later.enqueue()
    run(app)
    assert attempts == [1, 1, 1]  # never counted: max_attempts=1 is not exhausted
    assert app.stats()["dead"] == 0


def test_context_exposes_message_and_fencing(app: tasuki.App) -> None:
    seen: dict[str, Any] = {}

    @app.job
    def look(x: int) -> None:
        ctx = tasuki.current()
        seen.update(
            attempt=ctx.attempt,
            fence=ctx.fencing_token,
            job=ctx.message.job,
            args=ctx.message.args,
            stop=ctx.should_stop,
        )
        ctx.extend(60)

    look.options(message_id="look-1").enqueue(5)
    run(app)
    assert seen == {"attempt": 1, "fence": 1, "job": "look", "args": (5,), "stop": False}
    with pytest.raises(tasuki.TasukiError):
        tasuki.current()


def test_poison_messages_are_dead_lettered_and_worker_continues(app: tasuki.App) -> None:
    ran: list[int] = []

    @app.job
    def good(n: int) -> None:
        ran.append(n)

    app.send("default", b"\xff\xfenot json", headers={JOB_HEADER: "good"})
    app.send("default", b'{"args": [], "kwargs": {}}', headers={JOB_HEADER: "nope"})
    app.send("default", b'{"args": [1, 2, 3], "kwargs": {}}', headers={JOB_HEADER: "good"})
    app.send("default", b"raw bytes, no job")
    good.enqueue(1)
    run(app)
    assert ran == [1]
    reasons = sorted(d.reason for d in app.dead_letters())
    assert reasons == [
        "arguments do not fit the job",
        "no consumer for raw messages on queue 'default'",
        "undecodable message",
        "unknown job 'nope'",
    ]


def test_consumer_gets_raw_messages(app: tasuki.App) -> None:
    bodies: list[Any] = []

    @app.consumer("s3-events")
    def on_event(message: tasuki.Message) -> None:
        bodies.append(message.json()["Records"])

    app.send("s3-events", b'{"Records": [1]}')
    app.send("s3-events", '{"Records": []}', delay=0)
    run(app, queues=["s3-events"])
    assert sorted(bodies) == [[], [1]]


def test_middleware_order_and_control(app: tasuki.App) -> None:
    trail: list[str] = []

    class Trace(Middleware):
        def __init__(self, name: str) -> None:
            self.name = name

        def enqueue(self, messages: list[Outgoing], call_next: Any) -> Any:
            trail.append(f"enqueue:{self.name}")
            return call_next(messages)

        def execute(self, ctx: tasuki.Context) -> ExecuteHook:
            trail.append(f"before:{self.name}")
            outcome = yield
            trail.append(f"after:{self.name}:{outcome.action}")

    class SkipOdd(Middleware):
        def execute(self, ctx: tasuki.Context) -> None:
            if ctx.message.args[0] % 2:
                raise tasuki.Skip("odd")

    app.middleware.insert_before("Logging", Trace("outer"))
    app.middleware.append(Trace("inner"))
    app.middleware.insert_after("Retries", SkipOdd())
    ran: list[int] = []

    @app.job
    def job(n: int) -> None:
        trail.append("job")
        ran.append(n)

    job.enqueue(2)
    assert trail == ["enqueue:outer", "enqueue:inner"]
    trail.clear()
    run(app, concurrency=1)
    assert trail == ["before:outer", "before:inner", "job", "after:inner:ack", "after:outer:ack"]
    trail.clear()
    job.enqueue(3)
    run(app, concurrency=1)
    assert ran == [2]
    assert trail == ["enqueue:outer", "enqueue:inner", "before:outer", "after:outer:skip"]
    app.middleware.remove("SkipOdd")
    assert "SkipOdd" not in app.middleware


def test_lease_lost_is_never_acked(app: tasuki.App) -> None:
    done: list[bool] = []
    thief: list[Any] = []

    @app.job(visibility_timeout=30.0)
    def held() -> None:
        ctx = tasuki.current()
        # Another worker takes the message over: this delivery's token is stale from now on.
        app.backend.settle([Settle.release(ctx.receipt, 0.0, penalty=False)])
        thief.extend(app.backend.lease("default", 1, 30.0))
        with pytest.raises(tasuki.errors.LeaseLost):
            ctx.extend(30)
        done.append(ctx.should_stop)

    held.enqueue()
    worker = app.worker(concurrency=1)
    worker.start()
    deadline = time.monotonic() + 10
    while not done and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop(grace=1)
    assert done == [True]
    assert worker.keeper.lost == 1
    # the job returned normally, but nothing was acked with its stale token
    assert (app.stats()["ready"], app.stats()["in_flight"]) == (0, 1)
    assert app.backend.ack([thief[0].receipt]) == [True]


def test_graceful_stop_releases_running_jobs(app: tasuki.App) -> None:
    started = threading.Event()

    @app.job
    def stubborn() -> None:
        started.set()
        time.sleep(1.5)

    stubborn.enqueue()
    worker = app.worker(concurrency=1)
    worker.start()
    assert started.wait(5)
    worker.stop(grace=0.1)
    assert worker.released_on_shutdown == 1
    s = app.stats()
    assert (s["ready"], s["in_flight"]) == (1, 0)
    [d] = app.backend.lease("default", 1, 30.0)
    assert d.attempt == 1  # given back


def test_signed_messages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    signer = tasuki.App(url, signing_key=b"secret")
    stranger = tasuki.App(url)
    ran: list[str] = []

    @signer.job
    def pay(who: str) -> None:
        ran.append(who)

    @stranger.job(name="pay")
    def forged(who: str) -> None: ...

    pay.enqueue("alice")
    forged.enqueue("mallory")
    run(signer)
    assert ran == ["alice"]
    [dead] = signer.dead_letters()
    assert dead.reason == "refused: bad signature"


def test_job_timeout_error_is_a_timeout() -> None:
    assert issubclass(JobTimeout, TimeoutError)
    assert issubclass(JobTimeout, tasuki.TasukiError)


def test_middleware_runs_only_for_jobs_it_applies_to(app: tasuki.App) -> None:
    seen: list[str] = []

    class OnlyTagged(Middleware):
        options = frozenset({"tagged"})

        def applies_to(self, job: tasuki.Job[..., Any]) -> bool:
            return bool(job.extra.get("tagged"))

        def execute(self, ctx: tasuki.Context) -> None:
            assert ctx.job is not None
            seen.append(ctx.job.name)

    app.middleware.append(OnlyTagged())

    @app.job(tagged=True)
    def tagged() -> None: ...

    @app.job
    def plain() -> None: ...

    tagged.enqueue()
    plain.enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=10)
    assert seen == ["tagged"]

    # A change to the chain is seen by the next run.
    app.middleware.remove(OnlyTagged)
    tagged.enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=10)
    assert seen == ["tagged"]


def test_failed_runs_reach_the_error_reporter(app: tasuki.App) -> None:
    from tasuki.middleware.errors import ReportErrors

    seen: list[tuple[str, str | None, int]] = []
    finals: list[str] = []

    def report(error: BaseException, ctx: tasuki.Context, outcome: Any) -> None:
        seen.append((type(error).__name__, outcome.action, ctx.attempt))

    def broken(error: BaseException, ctx: tasuki.Context, outcome: Any) -> None:
        raise RuntimeError("the tracker is down")

    app.middleware.insert_before("Logging", ReportErrors(report))
    app.middleware.insert_before("Logging", ReportErrors(broken))
    app.middleware.insert_before(
        "Logging", ReportErrors(lambda e, c, o: finals.append(c.message.id), only_final=True)
    )

    @app.job(retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.0)))
    def fails() -> None:
        raise KeyError("missing")

    @app.job
    def fine() -> None: ...

    failing = fails.enqueue()
    fine.enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=30)
    assert seen == [("KeyError", "retry", 1), ("KeyError", "dead", 2)]
    assert finals == [failing]
    assert app.stats()["dead"] == 1  # a reporter that raised changed nothing


class _ApproximateStats(MemoryBackend):
    """Stats that miss delayed and in-flight messages, as SQS's approximate counts may."""

    def stats(self, queue: str) -> QueueStats:
        s = super().stats(queue)
        return QueueStats(s.ready, 0, 0, s.dead, s.oldest_ready_age)


def test_until_idle_waits_for_its_own_retries_whatever_the_stats_say() -> None:
    # Fails without `runtime/returning.py`: the run ended after attempt 1, while the
    # retry it had just released was on its way back (CI saw it on SQS).
    app = tasuki.App("memory://", backend=_ApproximateStats())
    attempts: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=5, backoff=tasuki.constant(0.3)))
    def flaky() -> None:
        attempts.append(tasuki.current().attempt)
        if len(attempts) < 3:
            raise ConnectionError("try again")

    flaky.enqueue()
    run(app)
    assert attempts == [1, 2, 3]


def test_a_keep_that_meets_its_own_ack_is_no_lost_lease(app: tasuki.App) -> None:
    """A keep under way while the run ends and is acked finds the lease settled (on SQS,
    its visibility change is refused: the ack deleted the message). That is the run's own
    ack, not another delivery: no lease was lost (test_reliability_metrics[sqs] once
    counted two lost leases for one this way)."""
    backend = app.backend
    finishing, settled = threading.Event(), threading.Event()
    real_keep, real_settle = backend.keep, backend.settle
    raced: list[bool] = []

    def keep(items: Any) -> Any:
        if finishing.is_set() or raced:
            return real_keep(items)
        raced.append(True)
        assert finishing.wait(5.0)
        assert settled.wait(5.0)
        return ["lost"] * len(items)  # what the backend says once the ack went through

    def settle(items: Any) -> Any:
        out = real_settle(items)
        settled.set()
        return out

    @app.job(visibility_timeout=0.3)
    def short() -> None:
        time.sleep(0.2)  # a keep is due after 0.1 s
        finishing.set()

    short.enqueue()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(backend, "keep", keep)
        mp.setattr(backend, "settle", settle)
        worker = app.worker(concurrency=1)
        worker.run(until_idle=True, timeout=10)
    assert raced and settled.is_set()
    assert worker.keeper.lost == 0
    assert app.stats("default")["ready"] == 0
