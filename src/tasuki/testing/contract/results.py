"""Result records: kept by the holder of the current lease only,
with their TTL, pending until the message settles."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from tasuki.backends.base import Backend, Effects, Receipt, Settle
from tasuki.core.message import ErrorInfo
from tasuki.testing.contract.helpers import env


def _ok(value: object) -> Effects:
    return Effects(result=orjson.dumps(value))


@pytest.mark.requires("results")
class TestResults:
    def test_a_kept_result_is_pending_then_ok_with_its_ttl(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "r", keep_result=60.0)])
        pending = backend.result(queue, "r")
        assert pending is not None and pending.state == "pending" and pending.value is None
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.result(queue, "r").state == "pending"  # type: ignore[union-attr]
        before = time.time()
        assert backend.settle([Settle.ack(d.receipt, _ok({"sum": 3}))]) == [True]
        done = backend.result(queue, "r")
        assert done is not None and done.state == "ok"
        assert orjson.loads(done.value or b"") == {"sum": 3}
        assert done.expires_at is not None
        assert before + 59.0 <= done.expires_at <= time.time() + 61.0

    def test_null_is_a_result(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "n", keep_result=60.0)])
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.ack(d.receipt, Effects(result=b"null"))])
        done = backend.result(queue, "n")
        assert done is not None and (done.state, done.value) == ("ok", b"null")

    def test_no_record_without_keep_result_or_for_an_unknown_id(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "plain")])
        assert backend.result(queue, "plain") is None
        [d] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.ack(d.receipt, _ok(1))]) == [True]
        assert backend.result(queue, "plain") is None
        assert backend.result(queue, "never-enqueued") is None

    def test_a_dead_letter_keeps_its_error_as_the_result(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "d", keep_result=60.0)])
        [d] = backend.lease(queue, 1, 30.0)
        error = ErrorInfo("KeyError", "'x'", "Traceback ...\nKeyError: 'x'\n")
        assert backend.settle([Settle.dead(d.receipt, "gave up", error)]) == [True]
        failed = backend.result(queue, "d")
        assert failed is not None and failed.state == "failed"
        assert failed.error == error
        assert failed.reason == "gave up"
        assert failed.expires_at is not None and failed.expires_at > time.time() + 50

    def test_dead_lettered_at_lease_time_the_result_is_failed(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "crash", keep_result=60.0, max_attempts=1)])
        backend.lease(queue, 1, short)  # its worker "dies": the lease lapses
        time.sleep(short + 0.1)
        assert backend.lease(queue, 1, 30.0) == []
        failed = backend.result(queue, "crash")
        assert failed is not None and failed.state == "failed"
        assert failed.error.type == ""
        assert failed.reason == "lease_expired"  # the code: rendered with the attempts

    def test_a_stale_settle_keeps_nothing_and_the_current_holder_wins(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "z", keep_result=60.0)])
        [zombie] = backend.lease(queue, 1, short)
        time.sleep(short + 0.1)
        [current] = backend.lease(queue, 1, 30.0)
        assert backend.settle([Settle.ack(zombie.receipt, _ok("late"))]) == [False]
        assert backend.result(queue, "z").state == "pending"  # type: ignore[union-attr]
        assert backend.settle([Settle.dead(zombie.receipt, "zombie")]) == [False]
        assert backend.result(queue, "z").state == "pending"  # type: ignore[union-attr]
        assert backend.settle([Settle.ack(current.receipt, _ok("mine"))]) == [True]
        assert backend.result(queue, "z").value == b'"mine"'  # type: ignore[union-attr]

    def test_release_keeps_it_pending_redrive_makes_it_pending_purge_forgets(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "p", keep_result=60.0)])
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.release(d.receipt, 0.0, penalty=True)])
        assert backend.result(queue, "p").state == "pending"  # type: ignore[union-attr]
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.dead(d.receipt, "no", ErrorInfo("E", "x"))])
        assert backend.result(queue, "p").state == "failed"  # type: ignore[union-attr]
        assert backend.redrive(queue, ["p"]) == 1
        assert backend.result(queue, "p").state == "pending"  # type: ignore[union-attr]
        backend.purge(queue)
        assert backend.result(queue, "p") is None

    def test_a_result_expires(self, backend: Backend, queue: str, short: float) -> None:
        backend.enqueue([env(queue, "e", keep_result=short)])
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.ack(d.receipt, _ok(1))])
        assert backend.result(queue, "e") is not None
        time.sleep(short + 0.3)
        assert backend.result(queue, "e") is None

    def test_wait_result_wakes_when_it_settles_and_times_out_pending(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "w", keep_result=60.0)])
        started = time.monotonic()
        still = backend.wait_result(queue, "w", 0.3)
        assert still is not None and still.state == "pending"
        assert 0.25 <= time.monotonic() - started < 2.0
        [d] = backend.lease(queue, 1, 30.0)
        settled_at: list[float] = []

        def settle_soon() -> None:
            time.sleep(0.3)
            backend.settle([Settle.ack(d.receipt, _ok("here"))])
            settled_at.append(time.monotonic())

        thread = threading.Thread(target=settle_soon)
        thread.start()
        got = backend.wait_result(queue, "w", 10.0)
        woke = time.monotonic()
        thread.join()
        assert got is not None and got.value == b'"here"'
        assert woke - settled_at[0] < 1.0  # woken by the settle, not at the timeout
        assert backend.wait_result(queue, "missing", 5.0) is None  # unknown: at once

    def test_results_in_a_mixed_batch(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, i, keep_result=60.0) for i in range(4)])
        a, b, c, d = sorted(backend.lease(queue, 4, 30.0), key=lambda x: x.id)
        stale = Receipt(queue, d.id, "not-the-token")
        outcome = backend.settle(
            [
                Settle.ack(a.receipt, _ok("a")),
                Settle.release(b.receipt, 0.0, penalty=False),
                Settle.dead(c.receipt, "no", ErrorInfo("E", "c")),
                Settle.ack(stale, _ok("d")),
            ]
        )
        assert outcome == [True, True, True, False]
        states = [backend.result(queue, x.id).state for x in (a, b, c, d)]  # type: ignore[union-attr]
        assert states == ["ok", "pending", "failed", "pending"]
