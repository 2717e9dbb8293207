"""Workflows on SQS (`locks=sqlite` and `locks=redis`): what the contract cannot see,
the crash windows between a step's settle in the lock store, the sends of what follows
it, and the delete of its message. A re-run of the same step sends what was not sent,
and nothing twice."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tasuki.backends.base import Delivery, Effects, Envelope, Fill, FlowRecord, FlowStep, Settle
from tasuki.backends.sqs.records.base import LeaseEnd
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import FLOW_HEADER
from tasuki.errors import InvalidArgument
from tasuki.testing.servers import MotoServer, free_port
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402

GRACE = 1.0  # how long an acked copy is refused, shortened from 300 s for the test


@pytest.fixture(params=["sqlite", "redis"])
def sqs(
    sqs_server: MotoServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[SqsBackend]:
    if request.param == "sqlite":
        locks = f"sqlite:///{tmp_path / 'locks.db'}"
    else:
        locks = request.getfixturevalue("redis_server").url()
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=f{uuid.uuid4().hex[:10]}-"
        f"&locks={locks}"
    )
    backend = backend_from_url(url)
    assert isinstance(backend, SqsBackend)
    records = backend.sqs.records
    assert records is not None
    records.lifetimes = replace(records.lifetimes, acked=GRACE)
    yield backend
    backend.close()


def _env(queue: str, id: str) -> Envelope:
    """A step's message: the worker reads its plan from FLOW_HEADER (here a stand-in)."""
    return Envelope(queue, id, b"x", {FLOW_HEADER: "step"}, keep_id=3600.0)


def _start(sqs: SqsBackend, queue: str, flow: str, paths: list[str]) -> list[Delivery]:
    steps = tuple(FlowStep(p, "job", queue, f"{flow}.{p}") for p in paths)
    sqs.start_flow(
        FlowRecord(flow, time.time(), 3600.0, steps), [_env(queue, s.message_id) for s in steps]
    )
    leased = sqs.lease(queue, 10, 30.0)
    assert len(leased) == len(paths)
    return sorted(leased, key=lambda d: d.id)


def _crash_after_records(sqs: SqsBackend, d: Delivery, effects: Effects) -> None:
    """The settle's lease-record step alone: the worker died before its sends."""
    assert sqs.sqs.records is not None
    [settled] = sqs.sqs.records.settle_steps([LeaseEnd(d.receipt, True, None, effects)])
    assert settled.current


def _redeliver(sqs: SqsBackend, queue: str, d: Delivery) -> Delivery:
    """The message SQS still has comes back once its lease is gone (and the records'
    grace for an acked copy is over)."""
    sqs.sqs.visibility(sqs.sqs.info(queue).url, [d.token], 0)
    time.sleep(GRACE + 0.1)
    [again] = sqs.lease(queue, 10, 30.0)
    assert again.id == d.id and again.token != d.token
    return again


def _count(sqs: SqsBackend, queue: str) -> int:
    """Copies SQS has of the queue's messages, waiting or leased (a copy the lease
    records refused to a receive is leased too, and counted)."""
    s = sqs.stats(queue)
    return s.ready + s.in_flight + s.delayed


def _ids(sqs: SqsBackend, queue: str) -> list[str]:
    return sorted(d.id for d in sqs.lease(queue, 10, 30.0, wait=1.0))


def test_the_completing_member_that_died_before_its_send_sends_on_its_rerun(
    sqs: SqsBackend,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    a, b = _start(sqs, queue, "g", ["0.0", "0.1"])
    callback = _env(queue, "g.1")

    def member(slot: int) -> Effects:
        return Effects(result=b"1", flow="g", fills=(Fill("g", "0", slot, 2),), enqueue=(callback,))

    assert sqs.settle([Settle.ack(a.receipt, member(0))]) == [True]
    _crash_after_records(sqs, b, member(1))  # completed the set, sent nothing
    assert sqs.cancel(queue, b.id) == "unknown"  # acked: nothing to cancel, sends or not
    assert sqs.lease(queue, 10, 30.0) == []
    # Met again within the records' grace for an acked copy: refused, and kept, for its
    # sends were cut short (an acked copy is deleted once its step's sends are made).
    sqs.sqs.visibility(sqs.sqs.info(queue).url, [b.token], 0)
    assert sqs.lease(queue, 10, 30.0, wait=1.0) == []
    assert _count(sqs, queue) == 1
    b2 = _redeliver(sqs, queue, b)
    assert sqs.settle([Settle.ack(b2.receipt, member(1))]) == [True]
    assert _ids(sqs, queue) == ["g.1"]
    # The other member met again (a late duplicate): its slot is its own, the set is
    # complete, but the callback's id is the completing member's: nothing is sent.
    sqs.enqueue([_env(queue, a.id)])  # a twin of member 0, as a redrive would make
    twins = sqs.lease(queue, 10, 30.0, wait=1.0)
    for twin in twins:
        sqs.settle([Settle.ack(twin.receipt, member(0))])
    assert _ids(sqs, queue) == []
    assert _count(sqs, queue) == 1  # the callback, leased above


def test_a_step_that_died_between_its_sends_and_its_delete_is_not_run_again(
    sqs: SqsBackend,
) -> None:
    """Its copy met again is deleted, as an acked plain message's is. It was refused
    until the record's grace ran out, then ran again (a long chaos run met two chord
    members run a second time 298 s after their acks, their deletes lost)."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    [first] = _start(sqs, queue, "c", ["0"])
    effects = Effects(result=b"1", flow="c", enqueue=(_env(queue, "c.1"),))
    # The settle's records and sends, then the worker dies before the delete.
    _, go_on = sqs.settling._claim([sqs.settling._end(Settle.ack(first.receipt, effects))])
    assert go_on == [True]
    sqs.settling._go_on([Settle.ack(first.receipt, effects)], go_on)
    [sent] = sqs.lease(queue, 10, 30.0)
    assert sent.id == "c.1"
    sqs.sqs.visibility(sqs.sqs.info(queue).url, [first.token], 0)
    assert sqs.lease(queue, 10, 30.0, wait=1.0) == []  # met again: deleted, not run
    assert _count(sqs, queue) == 1  # c.1, leased above
    time.sleep(GRACE + 0.1)
    assert _ids(sqs, queue) == []  # nothing comes back once the grace is over
    assert sqs.ack([sent.receipt]) == [True]


def test_a_step_that_died_after_its_sends_before_it_said_so_is_not_run_again(
    sqs: SqsBackend,
) -> None:
    """Its worker sent what it enqueues, then died before its record said so: the copy
    met again finds every send made and is deleted. It was refused until the record's
    grace ran out, then ran a second time (a long chaos run met a worker killed 5 ms
    after sending a chord's callback)."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    [first] = _start(sqs, queue, "d", ["0"])
    effects = Effects(result=b"1", flow="d", enqueue=(_env(queue, "d.1"), _env(queue, "d.2")))
    _, go_on = sqs.settling._claim([sqs.settling._end(Settle.ack(first.receipt, effects))])
    assert go_on == [True]
    sqs.flows.send_steps(effects.enqueue, f"{queue}:{first.id}")  # then the worker dies
    sent = sqs.lease(queue, 10, 30.0)
    assert sorted(d.id for d in sent) == ["d.1", "d.2"]
    sqs.sqs.visibility(sqs.sqs.info(queue).url, [first.token], 0)
    assert sqs.lease(queue, 10, 30.0, wait=1.0) == []  # met again: deleted, not run
    assert _count(sqs, queue) == 2  # d.1 and d.2, leased above
    time.sleep(GRACE + 0.1)
    assert _ids(sqs, queue) == []  # nothing comes back once the grace is over
    assert sqs.ack([d.receipt for d in sent]) == [True, True]


def test_a_step_that_died_between_two_of_its_sends_is_run_again(sqs: SqsBackend) -> None:
    """One of its sends was made, the other not: its copy is kept, to run again after
    the grace, and that run sends only what is missing."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    [first] = _start(sqs, queue, "e", ["0"])
    effects = Effects(result=b"1", flow="e", enqueue=(_env(queue, "e.1"), _env(queue, "e.2")))
    _, go_on = sqs.settling._claim([sqs.settling._end(Settle.ack(first.receipt, effects))])
    assert go_on == [True]
    sqs.flows.send_steps(effects.enqueue[:1], f"{queue}:{first.id}")  # then the worker dies
    [one] = sqs.lease(queue, 10, 30.0)
    assert one.id == "e.1"
    sqs.sqs.visibility(sqs.sqs.info(queue).url, [first.token], 0)
    assert sqs.lease(queue, 10, 30.0, wait=1.0) == []  # met again: refused, kept
    assert _count(sqs, queue) == 2
    again = _redeliver(sqs, queue, first)
    assert again.attempt > first.attempt
    assert sqs.settle([Settle.ack(again.receipt, effects)]) == [True]
    assert _ids(sqs, queue) == ["e.2"]  # e.1 was sent already


def test_a_flow_whose_start_stopped_before_its_sends_sends_them_when_started_again(
    sqs: SqsBackend,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    step = FlowStep("0", "job", queue, "s.0")
    record = FlowRecord("s", time.time(), 3600.0, (step,))
    assert sqs.sqs.flow_store().start_flow(record)  # the record, then the producer died,
    assert sqs.sqs.flow_store().claim_sends(queue, ["s.0"], "flow:s") == [True]  # after its claim
    assert sqs.start_flow(record, [_env(queue, "s.0")]) is False  # started again
    assert _ids(sqs, queue) == ["s.0"]
    assert sqs.start_flow(record, [_env(queue, "s.0")]) is False
    assert _ids(sqs, queue) == []
    assert _count(sqs, queue) == 1  # sent once: a third start sends nothing


def test_flows_need_a_lock_store(sqs_server: MotoServer) -> None:
    url = f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=r{uuid.uuid4().hex[:8]}-"
    backend = backend_from_url(url)
    try:
        assert backend.capabilities.workflows is False
        with pytest.raises(InvalidArgument, match="workflows"):
            backend.flow("any")
    finally:
        backend.close()


def test_a_redis_lock_store_down_when_sqs_starts_is_taken_for_one_server(
    sqs_server: MotoServer,
) -> None:
    """Finding out whether the store is a Cluster connects to it; a worker may start
    before its lock store does, so one that cannot be reached then is taken for one
    server (each workflow call checks again) rather than failing the start."""
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=d{uuid.uuid4().hex[:8]}-"
        f"&locks=redis://127.0.0.1:{free_port()}/0"
    )
    backend = backend_from_url(url)
    try:
        assert backend.capabilities.workflows is True
    finally:
        backend.close()
