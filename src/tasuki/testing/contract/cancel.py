"""Cancel and progress: cancel is a state change, not a message."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Backend, Keep, Limit, Progress, Receipt, Settle, UniqueClaim
from tasuki.testing.contract.helpers import env, stats


@pytest.mark.requires("cancel")
class TestCancel:
    def test_a_waiting_message_is_removed(self, backend: Backend, queue: str, short: float) -> None:
        backend.enqueue([env(queue, "w", keep_id=60.0), env(queue, "later", delay=30.0)])
        assert backend.cancel(queue, "w") == "removed"
        assert backend.cancel(queue, "later") == "removed"
        assert backend.lease(queue, 10, 30.0) == []
        if backend.capabilities.exact_stats:
            # SQS cannot delete a message it did not receive: the delayed one is counted
            # until it is received (then deleted, never run).
            assert stats(backend, queue) == (0, 0, 0, 0)
        if backend.capabilities.inspection:
            assert backend.inspect(queue, "w").state == "cancelled"
        # Its id stays known: enqueueing it again is a no-op.
        assert backend.enqueue([env(queue, "w", keep_id=60.0)])[0].status == "duplicate"
        assert backend.cancel(queue, "w") == "unknown"

    def test_a_running_message_is_signalled_fenced_and_never_redelivered(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "r", keep_id=60.0)])
        [d] = backend.lease(queue, 1, short * 2)
        assert backend.keep([Keep(d.receipt, short * 2)]) == ["held"]
        assert backend.cancel(queue, "r") == "signalled"
        assert backend.keep([Keep(d.receipt, short * 2)]) == ["cancelled"]
        assert backend.settle([Settle.ack(d.receipt)]) == [False]  # nothing of that run kept
        time.sleep(short * 2 + 0.1)
        assert backend.lease(queue, 10, 30.0) == []  # its old lease lapsed: not redelivered
        if backend.capabilities.inspection:
            assert backend.inspect(queue, "r").state == "cancelled"
        assert backend.cancel(queue, "r") == "unknown"

    def test_cancel_of_what_cannot_be_cancelled(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "done", keep_id=60.0), env(queue, "dead")])
        a, b = sorted(backend.lease(queue, 2, 30.0), key=lambda d: d.id)
        backend.settle([Settle.ack(b.receipt), Settle.dead(a.receipt, "no")])
        assert backend.cancel(queue, "done") == "unknown"
        assert backend.cancel(queue, "dead") == "unknown"
        assert backend.cancel(queue, "never") == "unknown"

    def test_a_cancelled_message_frees_its_unique_key(
        self, backend: Backend, queue: str, key_prefix: str
    ) -> None:
        now, later = UniqueClaim(key_prefix + "now", 60.0), UniqueClaim(key_prefix + "later", 60.0)
        backend.enqueue([env(queue, "a", unique=now), env(queue, "b", unique=later, delay=30.0)])
        assert backend.cancel(queue, "a") == "removed"
        assert backend.cancel(queue, "b") == "removed"
        # Its key went with it: a new copy is a new message, not a duplicate of none.
        assert backend.locks.holder(now.key) is None
        assert backend.locks.holder(later.key) is None
        assert backend.enqueue([env(queue, "a2", unique=now)])[0] == ("a2", "enqueued")
        assert backend.enqueue([env(queue, "b2", unique=later)])[0] == ("b2", "enqueued")
        assert sorted(d.id for d in backend.lease(queue, 10, 30.0, wait=1.0)) == ["a2", "b2"]

    @pytest.mark.requires("concurrency_limits")
    def test_cancelling_a_holder_frees_its_slot(self, backend: Backend, queue: str) -> None:
        one = Limit("concurrency:c", "concurrency", 1)
        backend.enqueue([env(queue, "c0", limits=(one,)), env(queue, "c1", limits=(one,))])
        [held] = backend.lease(queue, 10, 30.0)
        assert backend.lease(queue, 10, 30.0) == []
        assert backend.cancel(queue, held.id) == "signalled"
        assert len(backend.lease(queue, 10, 30.0, wait=2.0)) == 1

    @pytest.mark.requires("results")
    def test_a_cancelled_message_keeps_no_result(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "k", keep_result=60.0)])
        assert backend.cancel(queue, "k") == "removed"
        assert backend.result(queue, "k") is None

    @pytest.mark.requires("progress")
    def test_progress_is_kept_by_the_current_lease_only(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "p")])
        [old] = backend.lease(queue, 1, short)
        assert backend.keep([Keep(old.receipt, short, Progress(0.25, "1 of 4"))]) == ["held"]
        if backend.capabilities.inspection:
            assert backend.inspect(queue, "p").progress == Progress(0.25, "1 of 4")
        time.sleep(short + 0.1)
        [new] = backend.lease(queue, 1, 30.0)
        stale = Receipt(queue, "p", old.token)
        assert backend.keep([Keep(stale, 30.0, Progress(0.9, "zombie"))]) == ["lost"]
        assert backend.keep([Keep(new.receipt, 30.0, Progress(0.5, "2 of 4"))]) == ["held"]
        if backend.capabilities.inspection:
            assert backend.inspect(queue, "p").progress == Progress(0.5, "2 of 4")
            [held] = backend.in_flight(queue)
            assert held.progress == Progress(0.5, "2 of 4")
            # A lease that lapsed shows no progress: nothing runs it now.
            assert backend.keep([Keep(new.receipt, short, None)]) == ["held"]
            time.sleep(short + 0.1)
            assert backend.inspect(queue, "p").progress is None
