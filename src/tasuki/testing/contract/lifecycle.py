"""The message lifecycle, identical on every backend: lease, ack, expiry, release, dead letter."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Backend, Receipt, Settle
from tasuki.core.message import ErrorInfo
from tasuki.testing.contract.helpers import env, lease_all, put, stats


class TestLifecycle:
    def test_lease_grants_token_attempt_and_fence(self, backend: Backend, queue: str) -> None:
        put(backend, queue, 1)
        [d] = backend.lease(queue, 10, 30.0)
        assert (d.id, d.queue, d.body, d.attempt, d.fencing_token) == (
            "m0",
            queue,
            b"body-m0",
            1,
            1,
        )
        assert d.token
        assert d.visibility_timeout == 30.0
        assert backend.lease(queue, 10, 30.0) == []  # leased: invisible to others

    def test_lease_soon_leases_like_lease(self, backend: Backend, queue: str) -> None:
        """A lease started early and finished later grants what `lease` does; two under way
        at once get different messages."""
        put(backend, queue, 5)
        first = backend.lease_soon(queue, 2, 30.0)
        second = backend.lease_soon(queue, 2, 30.0)
        a, b = first(), second()
        assert (len(a), len(b)) == (2, 2)
        assert not {d.id for d in a} & {d.id for d in b}
        assert all(d.attempt == 1 and d.token and d.visibility_timeout == 30.0 for d in a + b)
        assert stats(backend, queue) == (1, 4, 0, 0)
        assert backend.ack([d.receipt for d in a + b]) == [True] * 4
        [last] = backend.lease_soon(queue, 10, 30.0)()
        assert backend.lease_soon(queue, 10, 30.0)() == []
        assert backend.lease_soon(queue, 0, 30.0)() == []
        assert backend.ack([last.receipt]) == [True]

    def test_ack_deletes_and_stale_ack_refused(self, backend: Backend, queue: str) -> None:
        put(backend, queue, 2)
        a, b = backend.lease(queue, 2, 30.0)
        assert backend.ack([a.receipt, Receipt(queue, b.id, "not-the-token")]) == [True, False]
        assert stats(backend, queue) == (0, 1, 0, 0)
        assert backend.ack([a.receipt]) == [False]  # already gone

    def test_expiry_redelivers_with_attempt_plus_one(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        put(backend, queue, 1)
        [first] = backend.lease(queue, 1, short)
        assert backend.lease(queue, 1, short) == []
        time.sleep(short + 0.05)
        [second] = backend.lease(queue, 1, 30.0)
        assert second.id == first.id
        assert second.attempt == 2
        assert second.fencing_token > first.fencing_token
        assert second.token != first.token

    def test_stale_token_refused_everywhere_and_changes_nothing(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        put(backend, queue, 1)
        [old] = backend.lease(queue, 1, short)
        time.sleep(short + 0.05)
        [new] = backend.lease(queue, 1, 30.0)
        stale = old.receipt
        assert backend.ack([stale]) == [False]
        assert backend.extend([stale], 60.0) == [False]
        assert backend.settle([Settle.release(stale, 0.0, penalty=False)]) == [False]
        assert backend.settle([Settle.dead(stale, "stale", None)]) == [False]
        assert stats(backend, queue) == (0, 1, 0, 0)
        # the current holder is untouched and can still settle
        assert backend.ack([new.receipt]) == [True]
        assert stats(backend, queue) == (0, 0, 0, 0)

    def test_extend_keeps_lease_alive(self, backend: Backend, queue: str, short: float) -> None:
        put(backend, queue, 1)
        [d] = backend.lease(queue, 1, short)
        for _ in range(3):
            time.sleep(short / 2)
            assert backend.extend([d.receipt], short) == [True]
        assert backend.lease(queue, 1, short) == []
        assert backend.ack([d.receipt]) == [True]

    def test_exhausted_attempts_dead_lettered_at_lease(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        put(backend, queue, 1, max_attempts=2)
        for attempt in (1, 2):
            [d] = backend.lease(queue, 1, short)
            assert d.attempt == attempt
            time.sleep(short + 0.05)
        assert backend.lease(queue, 1, short) == []
        assert stats(backend, queue) == (0, 0, 0, 1)
        [dead] = backend.dead_letters(queue)
        assert dead.id == "m0"
        assert dead.attempt == 2
        assert "lease expired 2 times" in dead.reason
        assert dead.body == b"body-m0"

    def test_max_attempts_one_never_runs_twice(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        put(backend, queue, 1, max_attempts=1)
        [d] = backend.lease(queue, 1, short)
        assert d.attempt == 1
        time.sleep(short + 0.05)
        assert backend.lease(queue, 1, short) == []
        assert stats(backend, queue) == (0, 0, 0, 1)

    def test_exhausted_messages_do_not_starve_the_batch(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, i, max_attempts=1) for i in range(3)])
        lease_all(backend, queue, short)
        time.sleep(short + 0.05)
        backend.enqueue([env(queue, "fresh")])
        got = backend.lease(queue, 2, 30.0)
        assert [d.id for d in got] == ["fresh"]
        assert stats(backend, queue) == (0, 1, 0, 3)

    def test_delay_honoured(self, backend: Backend, queue: str, short: float) -> None:
        backend.enqueue([env(queue, "later", delay=2 * short), env(queue, "now")])
        assert stats(backend, queue) == (1, 0, 1, 0)
        assert [d.id for d in backend.lease(queue, 10, 30.0)] == ["now"]
        assert backend.lease(queue, 10, 30.0) == []
        time.sleep(2 * short + 0.05)
        assert stats(backend, queue) == (1, 1, 0, 0)
        assert [d.id for d in backend.lease(queue, 10, 30.0)] == ["later"]

    def test_release_without_penalty_gives_attempt_back(self, backend: Backend, queue: str) -> None:
        put(backend, queue, 1)
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.release(d.receipt, 0.0, penalty=False)]) == [True]
        [again] = backend.lease(queue, 1, 30.0)
        assert again.attempt == 1
        assert again.fencing_token == d.fencing_token + 1  # fencing still grows

    def test_release_with_penalty_keeps_attempt_and_delays(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        put(backend, queue, 1)
        [d] = backend.lease(queue, 1, 30.0)
        started = time.monotonic()
        assert backend.settle([Settle.release(d.receipt, short, penalty=True)]) == [True]
        counted = stats(backend, queue)
        early = backend.lease(queue, 1, 30.0)
        if time.monotonic() - started < short:  # looked before the delay could run out
            if backend.capabilities.exact_stats:  # SQS counts a released message as in flight
                assert counted == (0, 0, 1, 0)
            assert early == []
        time.sleep(short + 0.1)
        [again] = early or backend.lease(queue, 1, 30.0)
        assert again.attempt == 2

    def test_release_after_last_attempt_dead_letters_on_next_lease(
        self, backend: Backend, queue: str
    ) -> None:
        put(backend, queue, 1, max_attempts=1)
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.release(d.receipt, 0.0, penalty=True)])
        assert backend.lease(queue, 1, 30.0) == []
        [dead] = backend.dead_letters(queue)
        assert "attempts exhausted" in dead.reason

    def test_dead_keeps_reason_and_error(self, backend: Backend, queue: str) -> None:
        put(backend, queue, 1)
        [d] = backend.lease(queue, 1, 30.0)
        error = ErrorInfo("RuntimeError", "boom", "Traceback...\nRuntimeError: boom\n")
        before = time.time()
        assert backend.settle([Settle.dead(d.receipt, "retries exhausted", error)]) == [True]
        [dead] = backend.dead_letters(queue)
        assert dead.reason == "retries exhausted"
        assert dead.error == error
        assert str(dead.error).startswith("RuntimeError: boom")
        assert dead.attempt == 1
        assert before - 1 <= dead.died_at <= time.time() + 1
        assert stats(backend, queue) == (0, 0, 0, 1)

    def test_message_visibility_timeout_overrides_lease_default(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "short", visibility_timeout=short)])
        [d] = backend.lease(queue, 1, 30.0)
        assert d.visibility_timeout == pytest.approx(short)
        time.sleep(short + 0.05)
        [again] = backend.lease(queue, 1, 30.0)
        assert again.attempt == 2

    def test_one_batch_of_messages_that_differ_in_every_field(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        """A batch whose messages differ in queue, delay, attempts, lease and headers keeps
        each message's own (a backend may send fields the batch shares only once), and one
        whose messages share them all keeps them too."""
        other = queue + "-other"
        backend.enqueue(
            [
                env(queue, "a", max_attempts=3, headers={"h": "1"}),
                env(other, "b", max_attempts=7, visibility_timeout=short, headers={"h": "2"}),
                env(queue, "c", delay=short, max_attempts=5),
                env(queue, "d", max_attempts=3, headers={"h": "1"}),
            ]
        )
        got = {d.id: d for d in lease_all(backend, queue) + lease_all(backend, other)}
        assert sorted(got) == ["a", "b", "d"]
        assert (got["a"].queue, got["a"].max_attempts, got["a"].headers) == (queue, 3, {"h": "1"})
        assert (got["b"].queue, got["b"].max_attempts, got["b"].headers) == (other, 7, {"h": "2"})
        assert got["b"].visibility_timeout == pytest.approx(short)
        assert got["a"].visibility_timeout == 30.0
        assert got["d"].body == b"body-d"
        time.sleep(short + 0.05)
        [c] = backend.lease(queue, 10, 30.0)
        assert (c.id, c.max_attempts, c.headers) == ("c", 5, {})
        backend.enqueue([env(queue, i, max_attempts=4, headers={"x": "y"}) for i in range(3)])
        same = lease_all(backend, queue)
        assert [(d.id, d.max_attempts, d.headers) for d in same] == [
            (f"m{i}", 4, {"x": "y"}) for i in range(3)
        ]

    def test_order_is_visible_time_then_enqueue_time(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, i) for i in range(5)])
        backend.enqueue([env(queue, "late", delay=short)])
        time.sleep(short + 0.05)
        backend.enqueue([env(queue, "after")])
        ids = [d.id for d in lease_all(backend, queue)]
        assert ids == ["m0", "m1", "m2", "m3", "m4", "late", "after"]

    def test_lease_wait_wakes_on_enqueue(self, backend: Backend, queue: str) -> None:
        import threading

        def later() -> None:
            time.sleep(0.2)
            backend.enqueue([env(queue, "x")])

        t = threading.Thread(target=later)
        started = time.monotonic()
        t.start()
        got = backend.lease(queue, 1, 30.0, wait=5.0)
        elapsed = time.monotonic() - started
        t.join()
        assert [d.id for d in got] == ["x"]
        assert elapsed < 2.0

    def test_lease_wait_wakes_when_delay_ends(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "x", delay=0.3)])
        started = time.monotonic()
        got = backend.lease(queue, 1, 30.0, wait=5.0)
        assert [d.id for d in got] == ["x"]
        assert 0.25 <= time.monotonic() - started < 2.0

    def test_lease_wait_returns_empty_after_wait(self, backend: Backend, queue: str) -> None:
        started = time.monotonic()
        assert backend.lease(queue, 1, 30.0, wait=0.3) == []
        assert time.monotonic() - started >= 0.28
