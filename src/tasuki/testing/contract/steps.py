"""Durable steps (DESIGN §4c): step records fenced by the lease, sleeps that hold
nothing, signals kept until consumed once, and transactional steps on the SQL engines.

The seam's tests speak to the backend; the others run a real worker of a real App on
it, since a step's guarantee is what a job sees across its runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tasuki.app import App
from tasuki.backends.base import Backend, Limit, Settle, StepRecord, Taken, Wait
from tasuki.core.policies import Constant, Retry
from tasuki.errors import InvalidArgument, SignalTimeout
from tasuki.middleware.retry import Retries
from tasuki.testing.contract.helpers import env, eventually, stats


def _record(name: str, occurrence: int = 1, result: bytes = b"1") -> StepRecord:
    return StepRecord(name, occurrence, result, time.time(), 0.01)


def _drain(app: App, queue: str, timeout: float = 20.0) -> None:
    app.worker(queues=[queue], concurrency=2, wait=0.05).run(until_idle=True, timeout=timeout)


def _app(backend: Backend) -> App:
    return App(backend=backend, middleware=[Retries()])


def _maintain(backend: Backend) -> None:
    for service in backend.maintenance():
        while service.run():
            pass


@pytest.mark.requires("durable_steps")
class TestSteps:
    # -- the seam ------------------------------------------------------------------------
    def test_a_step_is_recorded_under_the_lease_and_read_back(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "s")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.steps(queue, "s") == []
        assert backend.record_step(d.receipt, _record("a", 1, b'{"x":1}'))
        assert backend.record_step(d.receipt, _record("a", 2, b"[1,2]"))
        read = backend.steps(queue, "s")
        assert [(r.name, r.occurrence, r.result) for r in read] == [
            ("a", 1, b'{"x":1}'),
            ("a", 2, b"[1,2]"),
        ]
        assert backend.steps(queue, "never") == []

    def test_a_zombies_step_record_is_refused(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "z")])
        [zombie] = backend.lease(queue, 1, short)
        time.sleep(short + 0.1)
        [current] = backend.lease(queue, 1, 30.0, wait=2.0)
        assert not backend.record_step(zombie.receipt, _record("late"))
        assert backend.record_step(current.receipt, _record("now"))
        assert [r.name for r in backend.steps(queue, "z")] == ["now"]
        assert backend.take_signal(zombie.receipt, "x", 1) == Taken(False, None)

    def test_a_sleeping_message_holds_no_lease_and_costs_no_attempt(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "sl", max_attempts=1)])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, short * 2, Wait())]) == [True]
        assert backend.stats(queue).in_flight == 0
        assert stats(backend, queue) == (0, 0, 1, 0)
        waiting = backend.waiting(queue, "sl")
        assert waiting is not None and waiting.signal == ""
        [again] = backend.lease(queue, 1, 30.0, wait=short * 2 + 3.0)
        assert again.attempt == 1  # the sleep gave its attempt back: max_attempts=1 holds
        assert backend.waiting(queue, "sl") is None

    def test_an_early_signal_is_kept_and_consumed_once(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "e")])
        assert backend.signal(queue, "e", "go", b'{"ok":true}') == "delivered"
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.take_signal(d.receipt, "go", 1) == Taken(True, b'{"ok":true}')
        assert backend.take_signal(d.receipt, "go", 2) == Taken(True, None)
        [rec] = [r for r in backend.steps(queue, "e") if r.name == "tasuki:signal:go"]
        assert (rec.occurrence, rec.result) == (1, b'{"ok":true}')

    def test_a_signal_to_a_waiting_message_makes_it_ready_at_once(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "w")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("go"))]) == [True]
        waiting = backend.waiting(queue, "w")
        assert waiting is not None and waiting.signal == "go" and waiting.until > time.time()
        assert backend.lease(queue, 1, 30.0) == []
        assert backend.signal(queue, "w", "other", b"1") == "delivered"
        assert backend.lease(queue, 1, 30.0) == []  # not the signal it waits for
        started = time.monotonic()
        assert backend.signal(queue, "w", "go", b"2") == "delivered"
        [again] = backend.lease(queue, 1, 30.0, wait=5.0)
        assert time.monotonic() - started < 2.0
        assert backend.take_signal(again.receipt, "go", 1) == Taken(True, b"2")

    def test_a_signal_stored_before_the_wait_is_settled_wakes_it(
        self, backend: Backend, queue: str
    ) -> None:
        """The race: the signal comes between the run's look for it and its suspend."""
        backend.enqueue([env(queue, "r")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.take_signal(d.receipt, "go", 1) == Taken(True, None)
        assert backend.signal(queue, "r", "go", b"3") == "delivered"
        assert backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("go"))]) == [True]
        assert len(backend.lease(queue, 1, 30.0, wait=5.0)) == 1

    def test_a_wait_that_ended_is_no_longer_waited_for(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "t")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, short, Wait("go"))]) == [True]
        [woke] = backend.lease(queue, 1, 30.0, wait=short + 3.0)  # timed out
        assert backend.settle([Settle.release(woke.receipt, 3600.0)]) == [True]  # a retry
        assert backend.waiting(queue, "t") is None
        assert backend.signal(queue, "t", "go", b"1") == "delivered"  # kept for a wait
        assert backend.lease(queue, 1, 30.0) == []  # but the retry keeps its time

    def test_a_signal_to_no_message_is_unknown(self, backend: Backend, queue: str) -> None:
        assert backend.signal(queue, "nobody", "go", b"1") == "unknown"
        backend.enqueue([env(queue, "d")])
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.dead(d.receipt, "no")])
        assert backend.signal(queue, "d", "go", b"1") == "unknown"

    def test_step_records_are_dropped_with_the_message(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "a1"), env(queue, "p1"), env(queue, "x1")])
        leased = {d.id: d for d in backend.lease(queue, 3, 30.0)}
        for d in leased.values():
            assert backend.record_step(d.receipt, _record("one"))
        backend.settle([Settle.ack(leased["a1"].receipt), Settle.dead(leased["x1"].receipt, "no")])
        assert backend.purge_dead(queue) == 1
        backend.settle([Settle.release(leased["p1"].receipt, penalty=False)])
        assert backend.signal(queue, "p1", "go", b"1") == "delivered"
        assert backend.purge(queue) == 1
        # An id used again at once is a new message: nothing of its namesake's is read,
        # dropped or not, and its own records replace what is left.
        backend.enqueue([env(queue, "p1")])
        assert backend.steps(queue, "p1") == []
        [again] = backend.lease(queue, 1, 30.0)
        assert backend.take_signal(again.receipt, "go", 1) == Taken(True, None)
        assert backend.record_step(again.receipt, _record("one", 1, b"2"))
        assert [r.result for r in backend.steps(queue, "p1")] == [b"2"]
        backend.settle([Settle.ack(again.receipt)])
        _maintain(backend)
        for msg_id in ("a1", "p1", "x1"):
            assert backend.steps(queue, msg_id) == []

    def test_a_redriven_message_keeps_its_step_records(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "rd")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.record_step(d.receipt, _record("kept", 1, b'"v"'))
        backend.settle([Settle.dead(d.receipt, "no")])
        _maintain(backend)
        assert backend.redrive(queue, ["rd"]) == 1
        [again] = backend.lease(queue, 1, 30.0, wait=2.0)
        assert [(r.name, r.result) for r in backend.steps(queue, "rd")] == [("kept", b'"v"')]
        assert again.id == "rd"

    @pytest.mark.requires("cancel")
    def test_cancel_removes_a_sleeping_message(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "c")])
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.record_step(d.receipt, _record("one"))
        assert backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("go"))]) == [True]
        assert backend.cancel(queue, "c") == "removed"  # waiting, not running
        assert backend.signal(queue, "c", "go", b"1") == "unknown"
        _maintain(backend)
        assert backend.steps(queue, "c") == []

    @pytest.mark.requires("concurrency_limits")
    def test_a_sleeping_message_holds_no_concurrency_slot(
        self, backend: Backend, queue: str
    ) -> None:
        one = Limit(f"concurrency:{queue}", "concurrency", 1)
        backend.enqueue([env(queue, "s0", limits=(one,)), env(queue, "s1", limits=(one,))])
        [first] = backend.lease(queue, 10, 30.0)
        assert backend.lease(queue, 10, 30.0) == []  # the slot is taken
        assert backend.settle([Settle.suspend(first.receipt, 3600.0, Wait())]) == [True]
        [second] = backend.lease(queue, 10, 30.0, wait=2.0)
        assert second.id != first.id

    # -- through a worker ------------------------------------------------------------------
    def test_a_failed_attempt_replays_what_was_recorded(self, backend: Backend, queue: str) -> None:
        app = _app(backend)
        ran: list[str] = []

        def once(name: str) -> str:
            ran.append(name)
            return name.upper()

        @app.job(queue=queue, retry=Retry(3, Constant(0.0)))
        def flaky() -> list[str]:
            import tasuki

            ctx = tasuki.current()
            a = ctx.step("a", once, "a")
            if ctx.attempt == 1:
                raise RuntimeError("boom after step a")
            return [a, ctx.step("b", once, "b")]

        flaky.options(message_id="f1").enqueue()
        _drain(app, queue)
        assert ran == ["a", "b"]
        assert stats(backend, queue) == (0, 0, 0, 0)

    def test_a_sleep_with_one_attempt_completes_and_goes_on_past_it(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        app = _app(backend)
        seen: list[str] = []
        in_flight_while_asleep: list[int] = []

        def mark(what: str) -> str:
            seen.append(what)
            return what

        @app.job(queue=queue, retry=Retry(1))
        def sleeper() -> None:
            import tasuki

            ctx = tasuki.current()
            ctx.step("before", mark, "before")
            ctx.sleep(short * 2)
            mark("after")

        sleeper.options(message_id="s1").enqueue()
        worker = app.worker(queues=[queue], concurrency=1, wait=0.05)
        worker.start()
        try:
            eventually(lambda: backend.waiting(queue, "s1") is not None, timeout=10.0)
            in_flight_while_asleep.append(backend.stats(queue).in_flight)
            info = app.inspect(queue, "s1")
            assert info.waiting.startswith("sleeping until ")
            assert [s.name for s in info.steps][:1] == ["before"]
            eventually(lambda: "after" in seen, timeout=short * 2 + 10.0)
        finally:
            worker.stop()
        assert seen == ["before", "after"]
        assert in_flight_while_asleep == [0]
        assert backend.dead_letters(queue) == []

    def test_a_wait_gets_the_signal_and_a_timeout_raises_signal_timeout(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        app = _app(backend)
        got: dict[str, Any] = {}

        @app.job(queue=queue, retry=Retry(1))
        def waiter(key: str, timeout: float) -> None:
            import tasuki

            try:
                got[key] = tasuki.current().wait_for_signal("go", timeout=timeout)
            except SignalTimeout:
                got[key] = "timed out"

        waiter.options(message_id="w-sent").enqueue("sent", 60.0)
        waiter.options(message_id="w-late").enqueue("late", short * 2)
        worker = app.worker(queues=[queue], concurrency=2, wait=0.05)
        worker.start()
        try:
            eventually(lambda: backend.waiting(queue, "w-sent") is not None, timeout=10.0)
            assert app.inspect(queue, "w-sent").waiting.startswith("waiting for signal 'go'")
            assert app.signal(queue, "w-sent", "go", {"ok": True}) == "delivered"
            eventually(lambda: len(got) == 2, timeout=short * 2 + 10.0)
        finally:
            worker.stop()
        assert got == {"sent": {"ok": True}, "late": "timed out"}

    @pytest.mark.requires("workflows")
    def test_a_durable_job_is_a_step_of_a_chain(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        app = _app(backend)
        ran: list[str] = []

        def double(n: int) -> int:
            ran.append("double")
            return n * 2

        @app.job(queue=queue)
        def durable(n: int) -> int:
            import tasuki

            ctx = tasuki.current()
            got = ctx.step("double", double, n)
            ctx.sleep(short)
            return int(got)

        @app.job(queue=queue)
        def plus_one(n: int) -> int:
            return n + 1

        import tasuki

        flow_id = tasuki.chain(durable.step(5), plus_one.step()).enqueue()
        _drain(app, queue)
        assert app.flow_result(flow_id, timeout=10.0) == 11
        assert ran == ["double"]

    def test_limits_refuse_clearly(self, backend: Backend, queue: str) -> None:
        app = App(backend=backend, middleware=[Retries()], max_steps=2)
        errors: list[BaseException] = []
        big = "x" * (backend.capabilities.max_message_size + 1)

        @app.job(queue=queue, retry=Retry(1))
        def greedy(what: str) -> None:
            import tasuki

            ctx = tasuki.current()
            try:
                if what == "many":
                    for n in range(3):
                        ctx.step("n", int, n)
                else:
                    ctx.step("big", lambda: big)
            except Exception as exc:
                errors.append(exc)

        greedy.enqueue("many")
        greedy.enqueue("big")
        _drain(app, queue)
        text = sorted(str(e) for e in errors)
        assert len(text) == 2
        assert any("max_steps=2" in t for t in text)
        assert any("over the backend's message size limit" in t for t in text)

    def test_step_in_transaction_where_it_is_missing_names_the_capability(
        self, backend: Backend, queue: str
    ) -> None:
        if backend.capabilities.transactional_steps:
            pytest.skip("the backend has transactional_steps")
        app = _app(backend)
        errors: list[BaseException] = []

        @app.job(queue=queue, retry=Retry(1))
        def tx() -> None:
            import tasuki

            try:
                tasuki.current().step_in_transaction("t", lambda conn: 1)
            except InvalidArgument as exc:
                errors.append(exc)

        tx.enqueue()
        _drain(app, queue)
        assert len(errors) == 1 and "transactional_steps" in str(errors[0])

    @pytest.mark.requires("transactional_steps")
    def test_step_in_transaction_writes_once(self, backend: Backend, queue: str) -> None:
        app = _app(backend)
        table = f"effects_{queue.replace('-', '_')}"
        ensure: Callable[[Any], None] = lambda conn: conn.execute(  # noqa: E731
            f"CREATE TABLE IF NOT EXISTS {table} (n integer)"
        )

        def write(conn: Any, n: int) -> int:
            ensure(conn)
            conn.execute(f"INSERT INTO {table} (n) VALUES ({int(n)})")
            return n

        @app.job(queue=queue, retry=Retry(3, Constant(0.0)))
        def charge() -> None:
            import tasuki

            ctx = tasuki.current()
            ctx.step_in_transaction("charge", write, 7)
            if ctx.attempt == 1:
                raise RuntimeError("after the charge")

        charge.options(message_id="c1").enqueue()
        _drain(app, queue)
        counts: list[int] = []

        def count(conn: Any) -> int:
            ensure(conn)
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

        backend.enqueue([env(queue, "probe")])
        [d] = backend.lease(queue, 1, 30.0)
        done = backend.record_step_in_transaction(
            d.receipt,
            lambda conn: StepRecord("probe", 1, str(count(conn)).encode(), time.time(), 0.0),
        )
        assert done is not None
        counts.append(int(done.result))
        assert counts == [1]

    @pytest.mark.requires("transactional_steps")
    def test_a_stale_lease_rolls_the_transactional_step_back(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        table = f"rollback_{queue.replace('-', '_')}"
        backend.enqueue([env(queue, "t")])
        [zombie] = backend.lease(queue, 1, short)
        time.sleep(short + 0.1)
        [current] = backend.lease(queue, 1, 30.0, wait=2.0)
        ran: list[str] = []

        def work(conn: Any, fail: bool = False) -> StepRecord:
            ran.append("fails" if fail else "runs")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (n integer)")
            conn.execute(f"INSERT INTO {table} (n) VALUES (1)")
            if fail:
                raise RuntimeError("the step's own error")
            return StepRecord("t", 1, b"1", time.time(), 0.0)

        def rows(conn: Any) -> StepRecord:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (n integer)")
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            return StepRecord("rows", 1, str(count).encode(), time.time(), 0.0)

        assert backend.record_step_in_transaction(zombie.receipt, work) is None
        assert ran == []  # a stale lease runs nothing
        with pytest.raises(RuntimeError, match="own error"):
            backend.record_step_in_transaction(current.receipt, lambda c: work(c, fail=True))
        assert backend.steps(queue, "t") == []  # the failed step's write rolled back too
        done = backend.record_step_in_transaction(current.receipt, work)
        assert done is not None and [r.name for r in backend.steps(queue, "t")] == ["t"]
        counted = backend.record_step_in_transaction(current.receipt, rows)
        assert counted is not None and counted.result == b"1"  # one write: the step's
        assert ran == ["fails", "runs"]
