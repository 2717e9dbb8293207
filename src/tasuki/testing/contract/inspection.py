"""`inspect`: one message's state, lease, fencing number and the ends of its last leases;
`settled_totals`: how many messages of a queue were acked and dead-lettered."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Backend, Settle
from tasuki.core.message import ErrorInfo
from tasuki.core.records import HISTORY_LIMIT
from tasuki.testing.contract.helpers import env


class TestInspect:
    pytestmark = pytest.mark.requires("inspection")

    def test_unknown_id(self, backend: Backend, queue: str) -> None:
        info = backend.inspect(queue, "never-enqueued")
        assert (info.state, info.id, info.queue, info.history) == (
            "unknown",
            "never-enqueued",
            queue,
            (),
        )

    def test_waiting_messages_are_delayed_then_ready(self, backend: Backend, queue: str) -> None:
        before = time.time()
        backend.enqueue([env(queue, "later", delay=60.0, max_attempts=4), env(queue, "now")])
        later = backend.inspect(queue, "later")
        assert later.state == "delayed"
        assert later.visible_at is not None and later.visible_at == pytest.approx(
            before + 60, abs=2
        )
        assert (later.attempt, later.max_attempts, later.fencing_token) == (0, 4, 0)
        assert later.enqueued_at == pytest.approx(before, abs=2)
        assert later.lease_expires_at is None
        ready = backend.inspect(queue, "now")
        assert ready.state == "ready"
        assert ready.history == ()

    def test_in_flight_shows_the_lease(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "a")])
        [d] = backend.lease(queue, 1, 30.0)
        info = backend.inspect(queue, "a")
        assert info.state == "in_flight"
        assert info.attempt == 1
        assert info.fencing_token == d.fencing_token
        assert info.lease_expires_at == pytest.approx(time.time() + 30, abs=2)
        assert info.visible_at is None

    def test_history_of_retries_releases_and_burial(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "b", max_attempts=5)])
        [first] = backend.lease(queue, 1, 30.0)
        backend.settle(
            [
                Settle.release(
                    first.receipt, 0.0, penalty=True, error=ErrorInfo("ValueError", "boom")
                )
            ]
        )
        [second] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.release(second.receipt, 0.0, penalty=False)])
        [third] = backend.lease(queue, 1, 30.0)
        error = ErrorInfo("KeyError", "'x'", "Traceback (most recent call last):\n  ...\nKeyError")
        backend.settle([Settle.dead(third.receipt, "failed", error)])

        info = backend.inspect(queue, "b")
        assert info.state == "dead"
        assert info.reason == "failed"
        assert info.error == error
        assert info.died_at == pytest.approx(time.time(), abs=2)
        assert info.attempt == 2  # the release without penalty gave its attempt back
        assert info.fencing_token == third.fencing_token
        events = [(h.event, h.fencing_token) for h in info.history]
        assert events == [
            ("retried", first.fencing_token),
            ("released", second.fencing_token),
            ("dead", third.fencing_token),
        ]
        assert "ValueError: boom" in info.history[0].detail
        assert "failed" in info.history[2].detail and "KeyError" in info.history[2].detail
        assert [h.at for h in info.history] == sorted(h.at for h in info.history)

        # a re-drive keeps the story; the message waits again
        assert backend.redrive(queue, ["b"]) == 1
        again = backend.inspect(queue, "b")
        assert again.state == "ready"
        assert (again.reason, again.error, again.died_at) == ("", None, None)
        assert [h.event for h in again.history] == ["retried", "released", "dead"]

    def test_a_lost_lease_is_recorded(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "c")])
        leased_at = time.time()
        [lost] = backend.lease(queue, 1, 0.2)
        time.sleep(0.3)
        assert backend.inspect(queue, "c").state == "ready"  # an expired lease is deliverable
        [again] = backend.lease(queue, 1, 30.0)
        info = backend.inspect(queue, "c")
        assert info.state == "in_flight"
        assert info.fencing_token == again.fencing_token > lost.fencing_token
        assert [(h.event, h.fencing_token) for h in info.history] == [
            ("lease lost", lost.fencing_token)
        ]
        # recorded at the lease's expiry, not when it was found expired
        assert info.history[0].at == pytest.approx(leased_at + 0.2, abs=0.08)

    def test_finished_within_its_window(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "kept", keep_id=60.0), env(queue, "plain")])
        leased = {d.id: d for d in backend.lease(queue, 2, 30.0)}
        backend.settle([Settle.release(leased["kept"].receipt, 0.0, penalty=True)])
        [retry] = backend.lease(queue, 1, 30.0)
        before = time.time()
        assert backend.ack([retry.receipt, leased["plain"].receipt]) == [True, True]

        info = backend.inspect(queue, "kept")
        assert info.state == "finished"
        assert info.finished_until is not None
        assert before + 58 <= info.finished_until <= time.time() + 62  # acked in between
        assert [(h.event, h.fencing_token) for h in info.history] == [
            ("retried", leased["kept"].fencing_token),
            ("acked", retry.fencing_token),
        ]
        # an id without a window is forgotten when acked
        assert backend.inspect(queue, "plain").state == "unknown"

    def test_history_is_bounded(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "d", max_attempts=100)])
        fences = []
        for _ in range(HISTORY_LIMIT + 3):
            [d] = backend.lease(queue, 1, 30.0)
            fences.append(d.fencing_token)
            backend.settle([Settle.release(d.receipt, 0.0, penalty=True)])
        info = backend.inspect(queue, "d")
        assert len(info.history) == HISTORY_LIMIT
        assert [h.fencing_token for h in info.history] == fences[-HISTORY_LIMIT:]
        assert all(h.event == "retried" and h.detail == "again in 0s" for h in info.history)

    @pytest.mark.requires("settled_counts")
    def test_settled_totals_count_acks_and_deaths(self, backend: Backend, queue: str) -> None:
        assert backend.settled_totals(queue) == (0, 0)
        backend.enqueue([env(queue, i, max_attempts=1) for i in range(5)])
        leased = backend.lease(queue, 5, 0.2)
        backend.ack([d.receipt for d in leased[:2]])
        backend.ack([leased[0].receipt])  # stale: not counted again
        backend.settle([Settle.dead(leased[2].receipt, "no")])
        time.sleep(0.3)
        assert backend.lease(queue, 5, 30.0) == []  # the two expired leases were the last attempt
        assert backend.settled_totals(queue) == (2, 3)
        assert backend.settled_totals(f"{queue}-other") == (0, 0)

    def test_in_flight_lists_current_leases(self, backend: Backend, queue: str) -> None:
        assert backend.in_flight(queue) == []
        backend.enqueue([env(queue, i, max_attempts=7) for i in range(4)])
        short = backend.lease(queue, 1, 0.2)
        long = backend.lease(queue, 2, 60.0)
        time.sleep(0.3)  # the short lease expired: no longer in flight
        held = backend.in_flight(queue)
        assert [m.id for m in held] == [d.id for d in long]
        assert short[0].id not in {m.id for m in held}
        for info, d in zip(held, long, strict=True):
            assert info.state == "in_flight"
            assert (info.attempt, info.max_attempts, info.fencing_token) == (1, 7, d.fencing_token)
            assert info.lease_expires_at == pytest.approx(time.time() + 59.7, abs=2)
            assert info.enqueued_at is not None
        assert [m.id for m in backend.in_flight(queue, limit=1)] == [long[0].id]
