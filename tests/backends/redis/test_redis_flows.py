"""Workflows on Redis beyond the contract: a flow's keys live under its home queue (its
first step's), found through `<prefix>flow:<id>` by a process that never saw the flow
start, and a settle of many flows' steps applies each step's effects to its own flow."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import orjson
import pytest

from tasuki.backends.base import Effects, Fill, FlowRecord, FlowStep, Settle
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import RedisServer


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def producer(url: str) -> Iterator[RedisBackend]:
    b = backend_from_url(url)
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


@pytest.fixture
def worker(url: str) -> Iterator[RedisBackend]:
    """Another process's backend: it knows no flow's home queue yet."""
    b = backend_from_url(url)
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def _record(flow_id: str, queue: str) -> FlowRecord:
    steps = (FlowStep("0.0", "job", queue, f"{flow_id}.0.0"), FlowStep("1", "job", "next", ""))
    return FlowRecord(flow_id, time.time(), 3600.0, steps)


def test_one_settle_moves_many_flows_on_each_in_its_own_home(
    producer: RedisBackend, worker: RedisBackend
) -> None:
    # Flow i is homed in queue "home-<i % 3>", its one step runs on "steps": the flows'
    # keys are in three different queues, none of them the settling step's.
    flows = [f"f{i}" for i in range(12)]
    for i, flow_id in enumerate(flows):
        record = _record(flow_id, f"home-{i % 3}")
        assert producer.start_flow(record, [env("steps", f"{flow_id}.0.0", keep_id=60.0)])
    leased = worker.lease("steps", 100, 30.0)
    assert len(leased) == len(flows)
    items = []
    for d in leased:
        flow_id = d.id.split(".", 1)[0]
        effects = Effects(
            result=orjson.dumps(flow_id),
            flow=flow_id,
            fills=(Fill(flow_id, "0", 0, 1),),
            enqueue=(env("next", f"{flow_id}.1", keep_id=60.0),),
            final=True,
        )
        items.append(Settle.ack(d.receipt, effects))
    assert worker.settle(items) == [True] * len(flows)
    nexts = sorted(d.id for d in worker.lease("next", 100, 30.0))
    assert nexts == sorted(f"{f}.1" for f in flows)
    for flow_id in flows:
        found = producer.flow(flow_id)
        assert found is not None and found.result == b'["' + flow_id.encode() + b'"]'
        assert worker.group_value(flow_id, "0") == found.result
    home = producer._command("GET", producer.keys.flow_home("f4"))
    assert home == b"home-1"
    assert producer._command("EXISTS", producer.keys.queue("home-1").base + "f:f4") == 1


def test_only_the_settle_that_completes_a_barrier_goes_on(producer: RedisBackend) -> None:
    """A late duplicate of a member meets the barrier complete and stops there, even once
    the callback ran and its id is forgotten (enqueued without keep_id)."""
    steps = tuple(FlowStep(f"0.{i}", "job", "q", f"g.0.{i}") for i in range(2))
    record = FlowRecord("g", time.time(), 3600.0, steps)
    producer.start_flow(record, [env("q", f"g.0.{i}", keep_id=60.0) for i in range(2)])
    members = sorted(producer.lease("q", 10, 30.0), key=lambda d: d.id)
    callback = env("q", "g.1")

    def fill(i: int) -> Effects:
        return Effects(result=b"1", flow="g", fills=(Fill("g", "0", i, 2),), enqueue=(callback,))

    for i, member in enumerate(members):
        assert producer.settle([Settle.ack(member.receipt, fill(i))]) == [True]
    [cb] = producer.lease("q", 10, 30.0)
    assert producer.ack([cb.receipt]) == [True]
    producer.enqueue([env("q", "late")])
    [late] = producer.lease("q", 10, 30.0)
    assert producer.settle([Settle.ack(late.receipt, fill(1))]) == [True]
    assert producer.lease("q", 10, 30.0) == []
