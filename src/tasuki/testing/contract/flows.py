"""Workflows at the seam: a step's follow-ups happen in its settle, under its
lease; a group's barrier is set membership by slot, first writer wins, never a counter."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from tasuki.backends.base import (
    Backend,
    Delivery,
    Effects,
    Fill,
    FlowFailure,
    FlowRecord,
    FlowStep,
    Receipt,
    Settle,
)
from tasuki.core.message import FLOW_HEADER, ErrorInfo
from tasuki.testing.contract.helpers import env, lease_all, stats


def _record(flow_id: str, queue: str, *paths: str) -> FlowRecord:
    steps = tuple(FlowStep(p, "job", queue, f"{flow_id}.{p}") for p in paths)
    failure = FlowStep("failure", "alert", queue, f"{flow_id}.failure")
    return FlowRecord(flow_id, time.time(), 3600.0, steps, on_failure=failure)


def _step(queue: str, flow_id: str, path: str) -> object:
    return env(queue, f"{flow_id}.{path}", keep_id=3600.0)


def _ids(deliveries: list[Delivery]) -> list[str]:
    return sorted(d.id for d in deliveries)


def _members(backend: Backend, queue: str, flow_id: str, n: int) -> list[Delivery]:
    backend.start_flow(
        _record(flow_id, queue, *[f"0.{i}" for i in range(n)], "1"),
        [env(queue, f"{flow_id}.0.{i}", keep_id=3600.0) for i in range(n)],
    )
    leased = sorted(lease_all(backend, queue), key=lambda d: d.id)
    assert len(leased) == n
    return leased


@pytest.mark.requires("workflows")
class TestFlows:
    def test_a_flow_starts_once(self, backend: Backend, queue: str) -> None:
        record = _record("f1", queue, "0", "1")
        assert backend.start_flow(record, [_step(queue, "f1", "0")]) is True  # type: ignore[list-item]
        assert backend.start_flow(record, [_step(queue, "f1", "0")]) is False  # type: ignore[list-item]
        assert stats(backend, queue) == (1, 0, 0, 0)
        found = backend.flow("f1")
        assert found is not None
        assert (found.id, found.steps, found.on_failure) == ("f1", record.steps, record.on_failure)
        assert (found.result, found.failure, found.cancelled) == (None, None, False)
        assert backend.flow("no-such-flow") is None

    def test_a_flow_of_no_step_is_kept(self, backend: Backend, queue: str) -> None:
        # An empty group: a record with no step and nothing to enqueue (its value is in
        # its static part, which the backend stores as it is).
        record = FlowRecord("empty", time.time(), 3600.0, (), extra={"value": []})
        assert backend.start_flow(record, []) is True
        assert backend.start_flow(record, []) is False
        found = backend.flow("empty")
        assert found is not None and (found.steps, found.extra) == ((), record.extra)
        assert stats(backend, queue) == (0, 0, 0, 0)

    def test_a_step_enqueues_its_successor_with_its_ack(self, backend: Backend, queue: str) -> None:
        backend.start_flow(_record("f2", queue, "0", "1"), [_step(queue, "f2", "0")])  # type: ignore[list-item]
        [first] = backend.lease(queue, 10, 30.0)
        nxt = env(queue, "f2.1", keep_id=3600.0, body=b"second")
        effects = Effects(result=b"1", flow="f2", enqueue=(nxt,), ttl=3600.0)
        assert backend.settle([Settle.ack(first.receipt, effects)]) == [True]
        [second] = backend.lease(queue, 10, 30.0)
        assert (second.id, second.body) == ("f2.1", b"second")
        # The same follow-up again (a re-run after a crash would carry it): nothing new.
        backend.enqueue([env(queue, "x")])
        [x] = backend.lease(queue, 10, 30.0)
        assert backend.settle([Settle.ack(x.receipt, effects)]) == [True]
        assert backend.lease(queue, 10, 30.0) == []

    def test_successors_may_go_to_other_queues(self, backend: Backend, queue: str) -> None:
        other = queue + "-b"
        backend.start_flow(_record("f3", queue, "0", "1"), [_step(queue, "f3", "0")])  # type: ignore[list-item]
        [first] = backend.lease(queue, 10, 30.0)
        nxt = env(other, "f3.1", keep_id=3600.0)
        backend.settle([Settle.ack(first.receipt, Effects(flow="f3", enqueue=(nxt,)))])
        assert _ids(backend.lease(other, 10, 30.0)) == ["f3.1"]

    def test_the_settle_that_completes_a_group_enqueues_its_callback(
        self, backend: Backend, queue: str
    ) -> None:
        members = _members(backend, queue, "g", 3)
        callback = env(queue, "g.1", keep_id=3600.0, body=b"callback")

        def done(i: int) -> Effects:
            fill = Fill("g", "0", i, 3)
            return Effects(
                result=orjson.dumps(f"v{i}"), flow="g", fills=(fill,), enqueue=(callback,)
            )

        # In an order other than the slots': the value is still in slot order.
        assert backend.settle([Settle.ack(members[2].receipt, done(2))]) == [True]
        assert backend.settle([Settle.ack(members[0].receipt, done(0))]) == [True]
        assert backend.lease(queue, 10, 30.0) == []  # not early
        assert backend.group_value("g", "0") is None
        assert backend.settle([Settle.ack(members[1].receipt, done(1))]) == [True]
        [cb] = backend.lease(queue, 10, 30.0)
        assert (cb.id, cb.body) == ("g.1", b"callback")
        assert orjson.loads(backend.group_value("g", "0") or b"") == ["v0", "v1", "v2"]

    def test_first_writer_wins_a_slot_and_a_rerun_fires_nothing_twice(
        self, backend: Backend, queue: str
    ) -> None:
        members = _members(backend, queue, "h", 2)
        callback = env(queue, "h.1", keep_id=3600.0)
        fill0 = Effects(
            result=b'"first"', flow="h", fills=(Fill("h", "0", 0, 2),), enqueue=(callback,)
        )
        backend.settle([Settle.ack(members[0].receipt, fill0)])
        # A second run of member 0 (a duplicate delivery) writes another value: refused.
        backend.enqueue([env(queue, "dup")])
        [dup] = backend.lease(queue, 10, 30.0)
        again = fill0._replace(result=b'"second"')
        backend.settle([Settle.ack(dup.receipt, again)])
        assert backend.lease(queue, 10, 30.0) == []
        fill1 = Effects(
            result=b'"other"', flow="h", fills=(Fill("h", "0", 1, 2),), enqueue=(callback,)
        )
        backend.settle([Settle.ack(members[1].receipt, fill1)])
        assert orjson.loads(backend.group_value("h", "0") or b"") == ["first", "other"]
        [cb] = backend.lease(queue, 10, 30.0)
        assert cb.id == "h.1"
        # The completed set met again (a late duplicate of a member): the callback's id is
        # known, so no second callback.
        backend.enqueue([env(queue, "late")])
        [late] = backend.lease(queue, 10, 30.0)
        backend.settle([Settle.ack(late.receipt, fill1)])
        assert backend.lease(queue, 10, 30.0) == []

    def test_nested_groups_fill_outward_and_the_last_makes_the_flow_result(
        self, backend: Backend, queue: str
    ) -> None:
        # group(a, group(b, c)): b and c fill the inner barrier "1", whose array fills slot 1
        # of the outer barrier "" (the root); a fills slot 0; the root's array is final.
        backend.start_flow(
            _record("n", queue, "0", "1.0", "1.1"),
            [env(queue, f"n.{p}", keep_id=3600.0) for p in ("0", "1.0", "1.1")],
        )
        a, b, c = sorted(lease_all(backend, queue), key=lambda d: d.id)
        outer = Fill("n", "", 1, 2)
        for member, slot, value in ((b, 0, b'"b"'), (c, 1, b'"c"')):
            effects = Effects(
                result=value, flow="n", fills=(Fill("n", "1", slot, 2), outer), final=True
            )
            assert backend.settle([Settle.ack(member.receipt, effects)]) == [True]
        assert orjson.loads(backend.group_value("n", "1") or b"") == ["b", "c"]
        assert backend.group_value("n", "") is None
        assert backend.flow("n").result is None  # type: ignore[union-attr]
        last = Effects(result=b'"a"', flow="n", fills=(Fill("n", "", 0, 2),), final=True)
        assert backend.settle([Settle.ack(a.receipt, last)]) == [True]
        record = backend.flow("n")
        assert record is not None
        assert orjson.loads(record.result or b"") == ["a", ["b", "c"]]

    def test_a_group_settled_in_batches_completes_once(self, backend: Backend, queue: str) -> None:
        # A worker settles what finished together in one call: several members of one
        # group, a duplicate of one of them among them (the first in the batch wins).
        n = 12
        members = _members(backend, queue, "bt", n)
        callback = env(queue, "bt.1", keep_id=3600.0)

        def done(slot: int, value: bytes) -> Effects:
            fill = Fill("bt", "0", slot, n)
            return Effects(result=value, flow="bt", fills=(fill,), enqueue=(callback,))

        backend.enqueue([env(queue, "dup")])
        [dup] = backend.lease(queue, 10, 30.0)
        first = [Settle.ack(m.receipt, done(i, str(i).encode())) for i, m in enumerate(members)]
        assert (
            backend.settle([*first[:5], Settle.ack(dup.receipt, done(0, b'"dup"'))]) == [True] * 6
        )
        assert backend.lease(queue, 10, 30.0) == []
        assert backend.group_value("bt", "0") is None
        assert backend.settle(first[5:]) == [True] * (n - 5)
        assert _ids(backend.lease(queue, 10, 30.0)) == ["bt.1"]
        assert orjson.loads(backend.group_value("bt", "0") or b"") == list(range(n))

    def test_nested_groups_settled_in_one_batch_fill_outward(
        self, backend: Backend, queue: str
    ) -> None:
        # group(group(a, b), group(c, d)), all four settled in one call: both inner
        # barriers complete in it, and the second of them completes the root.
        paths = ("0.0", "0.1", "1.0", "1.1")
        backend.start_flow(
            _record("nb", queue, *paths), [env(queue, f"nb.{p}", keep_id=3600.0) for p in paths]
        )
        leased = sorted(lease_all(backend, queue), key=lambda d: d.id)
        settles = []
        for d, path in zip(leased, paths, strict=True):
            inner, slot = path.split(".")
            fills = (Fill("nb", inner, int(slot), 2), Fill("nb", "", int(inner), 2))
            value = orjson.dumps(d.id.rsplit(".", 2)[1] + slot)
            settles.append(Settle.ack(d.receipt, Effects(value, "nb", fills, final=True)))
        assert backend.settle(settles) == [True] * 4
        record = backend.flow("nb")
        assert record is not None
        assert orjson.loads(record.result or b"") == [["00", "01"], ["10", "11"]]
        assert backend.lease(queue, 10, 30.0) == []

    def test_a_final_step_sets_the_flow_result_and_wakes_its_waiter(
        self, backend: Backend, queue: str
    ) -> None:
        backend.start_flow(_record("w", queue, "0"), [_step(queue, "w", "0")])  # type: ignore[list-item]
        [d] = backend.lease(queue, 10, 30.0)
        timed_out = backend.wait_flow("w", 0.2)
        assert timed_out is not None and timed_out.result is None
        settled_at: list[float] = []

        def finish() -> None:
            time.sleep(0.3)
            backend.settle([Settle.ack(d.receipt, Effects(result=b"42", flow="w", final=True))])
            settled_at.append(time.monotonic())

        thread = threading.Thread(target=finish)
        thread.start()
        record = backend.wait_flow("w", 10.0)
        woke = time.monotonic()
        thread.join()
        assert record is not None and record.result == b"42"
        assert woke - settled_at[0] < 1.0

    def test_a_dead_step_records_the_first_failure_and_enqueues_on_failure_once(
        self, backend: Backend, queue: str
    ) -> None:
        members = _members(backend, queue, "x", 2)
        alert = env(queue, "x.failure", keep_id=3600.0, body=b"alert")
        successor = env(queue, "x.1", keep_id=3600.0)
        errors = [ErrorInfo("ValueError", f"bad {i}", "tb") for i in range(2)]
        for i, member in enumerate(members):
            failure = FlowFailure("x", f"0.{i}", "job", queue, member.id, errors[i], time.time())
            effects = Effects(flow="x", failed=failure, enqueue=(alert,))
            assert backend.settle([Settle.dead(member.receipt, "gave up", errors[i], effects)]) == [
                True
            ]
        [on_failure] = backend.lease(queue, 10, 30.0)
        assert (on_failure.id, on_failure.body) == ("x.failure", b"alert")
        record = backend.flow("x")
        assert record is not None and record.failure is not None
        assert (record.failure.step, record.failure.error) == ("0.0", errors[0])
        assert successor.id not in _ids(backend.lease(queue, 10, 30.0))

    @pytest.mark.parametrize("which", ["ids", "all"])
    def test_redriving_the_failed_step_puts_its_flow_back_to_running(
        self, backend: Backend, queue: str, which: str
    ) -> None:
        # Members 0 and 1 of a group die (0 first: the flow's failure); the redrive that
        # sends member 0 back resumes the flow in the same operation, and only that one.
        flow_id = "rd"
        header = {FLOW_HEADER: orjson.dumps({"f": flow_id}).decode()}
        backend.start_flow(
            _record(flow_id, queue, "0.0", "0.1"),
            [env(queue, f"{flow_id}.0.{i}", keep_id=3600.0, headers=header) for i in range(2)],
        )
        members = sorted(lease_all(backend, queue), key=lambda d: d.id)
        error = ErrorInfo("ValueError", "bad", "tb")
        for i, member in enumerate(members):
            failure = FlowFailure(flow_id, f"0.{i}", "job", queue, member.id, error, time.time())
            effects = Effects(flow=flow_id, failed=failure)
            assert backend.settle([Settle.dead(member.receipt, "gave up", error, effects)]) == [
                True
            ]
        assert backend.redrive(queue, [f"{flow_id}.0.1"]) == 1  # not the flow's failure
        record = backend.flow(flow_id)
        assert record is not None and record.failure is not None
        assert record.failure.message_id == f"{flow_id}.0.0"
        assert backend.redrive(queue, [f"{flow_id}.0.0"] if which == "ids" else None) == 1
        record = backend.flow(flow_id)
        assert record is not None and (record.failure, record.result) == (None, None)
        assert backend.wait_flow(flow_id, 0.2) == record  # running: nothing to wake for

    def test_a_cancelled_flow_enqueues_and_fills_nothing_but_the_ack_holds(
        self, backend: Backend, queue: str
    ) -> None:
        members = _members(backend, queue, "c", 2)
        assert backend.cancel_flow("c") is True
        assert backend.cancel_flow("no-such-flow") is False
        assert backend.flow("c").cancelled is True  # type: ignore[union-attr]
        callback = env(queue, "c.1", keep_id=3600.0)
        for i, member in enumerate(members):
            effects = Effects(
                result=b"1", flow="c", fills=(Fill("c", "0", i, 2),), enqueue=(callback,)
            )
            assert backend.settle([Settle.ack(member.receipt, effects)]) == [True]
        assert backend.lease(queue, 10, 30.0) == []
        assert backend.group_value("c", "0") is None
        assert stats(backend, queue) == (0, 0, 0, 0)

    def test_a_stale_settle_changes_nothing_of_the_flow(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        members = _members(backend, queue, "s", 1)
        callback = env(queue, "s.1", keep_id=3600.0)
        effects = Effects(
            result=b"1", flow="s", fills=(Fill("s", "0", 0, 1),), enqueue=(callback,), final=True
        )
        stale = Receipt(queue, members[0].id, "not-the-token")
        assert backend.settle([Settle.ack(stale, effects)]) == [False]
        assert backend.group_value("s", "0") is None
        assert backend.flow("s").result is None  # type: ignore[union-attr]
        assert backend.lease(queue, 10, 30.0) == []
        assert backend.settle([Settle.ack(members[0].receipt, effects)]) == [True]
        assert _ids(backend.lease(queue, 10, 30.0)) == ["s.1"]

    @pytest.mark.parametrize("final", [False, True], ids=["callback", "final"])
    def test_a_big_group_completes_exactly_once_from_racing_settles(
        self, backend: Backend, queue: str, final: bool
    ) -> None:
        # Its callback enqueued once; or, a group that ends its flow (every member's
        # settle may be the one that writes the flow's result), its result written once.
        n = 40
        members = _members(backend, queue, "big", n)
        callback = () if final else (env(queue, "big.1", keep_id=3600.0),)
        barrier = threading.Barrier(4)
        settled: list[bool] = []

        def settle_part(part: list[Delivery]) -> None:
            barrier.wait()
            for m in part:
                slot = int(m.id.rsplit(".", 1)[1])
                effects = Effects(
                    result=str(slot).encode(),
                    flow="big",
                    fills=(Fill("big", "0", slot, n),),
                    enqueue=callback,
                    final=final,
                )
                settled.extend(backend.settle([Settle.ack(m.receipt, effects)]))

        threads = [threading.Thread(target=settle_part, args=(members[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert settled == [True] * n
        assert _ids(backend.lease(queue, 10, 30.0)) == ([] if final else ["big.1"])
        assert orjson.loads(backend.group_value("big", "0") or b"") == list(range(n))
        if final:
            record = backend.flow("big")
            assert record is not None and orjson.loads(record.result or b"") == list(range(n))
