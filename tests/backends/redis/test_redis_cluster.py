"""The Redis backend on a real 3-master Redis Cluster.

The contract suite proves the semantics on a single server; this proves they survive
sharding: each queue's keys and its `{queue}`-tagged locks share one slot, scripts run
on the master that owns it, and calls spanning several queues reach several masters.
The queues used here are chosen so that each one provably lives on a different master.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from redis.crc import key_slot

import tasuki
from tasuki.backends.base import (
    Backend,
    Effects,
    Envelope,
    Fill,
    FlowFailure,
    FlowRecord,
    FlowStep,
    Keep,
    Limit,
    Progress,
    Receipt,
    Settle,
    StepRecord,
    Taken,
    UniqueClaim,
    Wait,
)
from tasuki.backends.sqs.records import listing_in, records_for
from tasuki.backends.sqs.records.base import (
    ACKED_TAKE,
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseTake,
    RecordLifetimes,
)
from tasuki.backends.sqs.records.listing import ListedAt, ListEntry
from tasuki.backends.urls import backend_from_url
from tasuki.core.console import JobTally, WorkerInfo
from tasuki.core.message import FLOW_HEADER, ErrorInfo
from tasuki.errors import InvalidArgument
from tasuki.testing.contract import TestActions as _Actions
from tasuki.testing.contract import TestBrowse as _Browse
from tasuki.testing.contract import TestJobStats as _JobStats
from tasuki.testing.contract import TestPause as _Pause
from tasuki.testing.contract import TestSteps as _Steps
from tasuki.testing.contract import TestWorkers as _Workers
from tasuki.testing.contract import (  # noqa: F401 - the suites' fixtures
    console_states,
    contract_requires,
    queue,
    short,
)
from tasuki.testing.contract.helpers import env, stats
from tasuki.testing.servers import RedisCluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c


def owner_port(c: RedisCluster, name: str) -> int:
    """The port of the master that serves the slot of queue `name`'s hash tag."""
    slot = key_slot(f"{{{name}}}".encode())
    client = redis.Redis(port=c.ports[0], protocol=2)
    try:
        for start, end, master, *_ in client.cluster("slots"):
            if start <= slot <= end:
                return int(master[1])
    finally:
        client.close()
    raise AssertionError(f"slot {slot} is not served")


@pytest.fixture
def queues(cluster: RedisCluster) -> list[str]:
    """One fresh queue name per master, so every test spans all three."""
    run = uuid.uuid4().hex[:8]
    chosen: dict[int, str] = {}
    for n in range(1000):
        name = f"q-{run}-{n}"
        chosen.setdefault(owner_port(cluster, name), name)
        if len(chosen) == len(cluster.ports):
            break
    assert sorted(chosen) == sorted(cluster.ports)
    return list(chosen.values())


@pytest.fixture
def backend(cluster: RedisCluster) -> Iterator[Backend]:
    b = backend_from_url(f"{cluster.url()}?prefix=c-{uuid.uuid4().hex[:8]}:")
    yield b
    b.close()


def test_lifecycle_on_every_master(backend: Backend, queues: list[str]) -> None:
    for q in queues:
        claim = UniqueClaim(f"{{{q}}}unique:job", 60.0, replace=True)
        assert backend.enqueue([env(q, "a", body=b"old", unique=claim, keep_id=60.0)]) == [
            ("a", "enqueued")
        ]
        assert backend.enqueue([env(q, "b", body=b"new", unique=claim)]) == [("a", "replaced")]
        assert backend.enqueue([env(q, "a")])[0].status == "duplicate"
        backend.enqueue([env(q, "later", delay=30.0)])
        assert stats(backend, q) == (1, 0, 1, 0)

        [d] = backend.lease(q, 10, 30.0)
        assert (d.id, d.body, d.attempt, d.fencing_token) == ("a", b"new", 1, 1)
        assert backend.enqueue([env(q, "c", unique=claim)]) == [("a", "conflict")]
        assert backend.extend([d.receipt], 60.0) == [True]
        assert backend.settle([Settle.release(d.receipt, 0.0, penalty=False)]) == [True]
        [d] = backend.lease(q, 10, 30.0)
        assert (d.attempt, d.fencing_token) == (1, 2)

        error = ErrorInfo("RuntimeError", "boom", "Traceback...")
        assert backend.settle([Settle.dead(d.receipt, "gave up", error)]) == [True]
        assert backend.locks.holder(claim.key) is None  # a dead message frees its lock
        assert stats(backend, q) == (0, 0, 1, 1)
        [dead] = backend.dead_letters(q)
        assert (dead.id, dead.reason, dead.error) == ("a", "gave up", error)
        found = backend.dead_letter(q, "a")
        assert found is not None and found.attempt == 1

        assert backend.redrive(q) == 1
        [d] = backend.lease(q, 10, 30.0)
        assert d.attempt == 1
        assert backend.ack([d.receipt]) == [True]
        assert backend.enqueue([env(q, "a")])[0].status == "duplicate"  # kept 60 s
        assert stats(backend, q) == (0, 0, 1, 0)
    assert set(queues) <= set(backend.queues())
    for q in queues:
        assert backend.purge(q) == 1
    assert not set(queues) & set(backend.queues())


def test_results_priorities_cancel_and_progress_on_every_master(
    backend: Backend, queues: list[str]
) -> None:
    """Every key these scripts touch (results, notify lists, cancelled ids, the delayed
    ZSET) is built from the queue's base, so each queue's calls stay in its slot."""
    for q in queues:
        backend.enqueue([env(q, "low", keep_result=60.0)])
        backend.enqueue([env(q, "high", priority=9, keep_result=60.0)])
        backend.enqueue([env(q, "later", priority=9, delay=30.0)])
        assert stats(backend, q) == (2, 0, 1, 0)
        assert backend.inspect(q, "later").priority == 9
        [high] = backend.lease(q, 1, 30.0)
        assert high.id == "high"
        progress = Progress(0.5, "half")
        assert backend.keep([Keep(high.receipt, 30.0, progress)]) == ["held"]
        assert backend.inspect(q, "high").progress == progress
        assert backend.settle([Settle.ack(high.receipt, Effects(result=b"[1,2]"))]) == [True]
        done = backend.wait_result(q, "high", 5.0)
        assert done is not None and (done.state, done.value) == ("ok", b"[1,2]")

        [low] = backend.lease(q, 1, 30.0)
        assert backend.cancel(q, "low") == "signalled"
        assert backend.keep([Keep(low.receipt, 30.0)]) == ["cancelled"]
        assert backend.settle([Settle.ack(low.receipt)]) == [False]
        assert backend.result(q, "low") is None
        assert backend.inspect(q, "low").state == "cancelled"
        assert backend.cancel(q, "later") == "removed"
        assert stats(backend, q) == (0, 0, 0, 0)


def test_durable_steps_on_every_master(backend: Backend, queues: list[str]) -> None:
    """Step records, signals and waits live in the message's hash, so every durable script
    (steps, record_step, take_signal, send_signal, waiting, settle's suspend) runs in its
    queue's slot: on each master here, with a priority so the wake-up crosses `delayed`."""
    for q in queues:
        backend.enqueue([env(q, "d", priority=3)])
        [d] = backend.lease(q, 1, 30.0)
        assert backend.record_step(d.receipt, StepRecord("a", 1, b'"x"', time.time(), 0.0))
        assert backend.take_signal(d.receipt, "go", 1) == Taken(True, None)
        assert backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("go"))]) == [True]
        waiting = backend.waiting(q, "d")
        assert waiting is not None and waiting.signal == "go"
        assert backend.lease(q, 1, 30.0) == []
        assert backend.signal(q, "d", "go", b"7") == "delivered"
        [again] = backend.lease(q, 1, 30.0, wait=5.0)
        assert backend.waiting(q, "d") is None
        assert backend.take_signal(again.receipt, "go", 1) == Taken(True, b"7")
        assert [(s.name, s.result) for s in backend.steps(q, "d")] == [
            ("a", b'"x"'),
            ("tasuki:signal:go", b"7"),
        ]
        assert backend.settle([Settle.ack(again.receipt)]) == [True]
        assert backend.steps(q, "d") == []
        assert backend.signal(q, "d", "go", b"1") == "unknown"


def test_the_console_on_every_master(backend: Backend, queues: list[str]) -> None:
    """Listings, bulk actions and job stats stay in each queue's slot; pauses and the
    worker registry are keys of their own slots, reached from any queue's."""
    info = WorkerInfo("w-c", "h", 1, "1", tuple(queues), 2, time.time(), heartbeat=5.0)
    now = time.time()
    minute = now - now % 60.0
    tallies = [JobTally(q, "j", minute, {"succeeded": 2, "t3": 2}) for q in queues]
    assert backend.announce(info, tallies) is False
    for q in queues:
        backend.enqueue([env(q, "f"), env(q, "x")])
        leased = {d.id: d for d in backend.lease(q, 2, 30.0)}
        backend.settle([Settle.dead(leased["x"].receipt, "no")])
        backend.enqueue([env(q, "r"), env(q, "d", delay=600.0)])
        for state, ids in (("ready", ["r"]), ("delayed", ["d"]), ("in_flight", ["f"])):
            assert [i.info.id for i in backend.browse(q, state).items] == ids
        assert [i.info.id for i in backend.browse(q, "dead").items] == ["x"]
        assert backend.retry_many(q, ["d", "r"], "delayed") == [True, False]
        assert backend.cancel_many(q, ["f", "x"], "in_flight") == [True, False]
        assert backend.cancel_many(q, ["x"], "dead") == [True]
        assert backend.job_stats(q, 600.0)["j"].succeeded == 2
        backend.pause(q)
    assert backend.paused() >= set(queues)
    assert [w.id for w in backend.workers() if w.id == "w-c"] == ["w-c"]
    assert backend.stop_worker("w-c") and backend.announce(info) is True


def test_a_result_waiter_blocks_on_every_master(backend: Backend, queues: list[str]) -> None:
    for q in queues:
        backend.enqueue([env(q, "w", keep_result=60.0)])
        [d] = backend.lease(q, 1, 30.0)

        def settle_soon(receipt: Receipt = d.receipt) -> None:
            time.sleep(0.3)
            backend.settle([Settle.ack(receipt, Effects(result=b"7"))])

        thread = threading.Thread(target=settle_soon)
        started = time.monotonic()
        thread.start()
        found = backend.wait_result(q, "w", 10.0)
        thread.join()
        assert found is not None and found.value == b"7"
        assert time.monotonic() - started < 2.0


def test_limits_on_every_master(backend: Backend, queues: list[str]) -> None:
    """A limit's state lives under its queue's hash tag, so lease.lua admits on any master."""
    for q in queues:
        two = Limit(f"concurrency:{q}:job", "concurrency", 2)
        rate = Limit(f"rate:{q}:job", "rate", 3, 60.0)
        backend.enqueue([env(q, f"c{i}", limits=(two,)) for i in range(3)])
        backend.enqueue([env(q, f"r{i}", limits=(rate,)) for i in range(4)])
        leased = backend.lease(q, 10, 30.0)
        assert sorted(d.id for d in leased) == ["c0", "c1", "r0", "r1", "r2"]
        assert backend.ack([d.receipt for d in leased if d.id == "c0"]) == [True]
        assert [d.id for d in backend.lease(q, 10, 30.0, wait=2.0)] == ["c2"]
        assert stats(backend, q) == (0, 5, 1, 0)  # r3 waits for a token a minute away
        backend.purge(q)  # the purged holders' slots go at once, on any master
        backend.enqueue([env(q, f"n{i}", limits=(two,)) for i in range(3)])
        assert sorted(d.id for d in backend.lease(q, 10, 30.0)) == ["n0", "n1"]


def _flow(flow_id: str, *steps: tuple[str, str]) -> FlowRecord:
    """A flow of steps (path, queue); its on_failure runs on the first step's queue."""
    on_failure = FlowStep("failure", "alert", steps[0][1], f"{flow_id}.failure")
    return FlowRecord(
        flow_id,
        time.time(),
        3600.0,
        tuple(FlowStep(path, "job", q, f"{flow_id}.{path}") for path, q in steps),
        on_failure=on_failure,
    )


def test_flows_run_in_their_slot_on_every_master(backend: Backend, queues: list[str]) -> None:
    """A flow's keys live under its first step's queue, so its settles stay in that slot:
    a group fills its barrier and the completing settle enqueues the callback, the last
    step's result wakes the waiter, a dead step enqueues on_failure, on each master."""
    for q in queues:
        record = _flow(f"g-{q}", ("0.0", q), ("0.1", q), ("1", q))
        members = [env(q, f"g-{q}.0.{i}", keep_id=60.0) for i in range(2)]
        assert backend.start_flow(record, members) is True
        assert backend.start_flow(record, members) is False
        leased = sorted(backend.lease(q, 10, 30.0), key=lambda d: d.id)
        assert [d.id for d in leased] == [f"g-{q}.0.0", f"g-{q}.0.1"]
        callback = env(q, f"g-{q}.1", keep_id=60.0)
        for i in (1, 0):
            effects = Effects(
                result=str(i).encode(),
                flow=record.id,
                fills=(Fill(record.id, "0", i, 2),),
                enqueue=(callback,),
            )
            assert backend.settle([Settle.ack(leased[i].receipt, effects)]) == [True]
        assert backend.group_value(record.id, "0") == b"[0,1]"
        [cb] = backend.lease(q, 10, 30.0)
        assert cb.id == callback.id

        def finish(receipt: Receipt = cb.receipt, flow_id: str = record.id) -> None:
            time.sleep(0.3)
            backend.settle([Settle.ack(receipt, Effects(result=b"7", flow=flow_id, final=True))])

        thread = threading.Thread(target=finish)
        started = time.monotonic()
        thread.start()
        done = backend.wait_flow(record.id, 10.0)
        thread.join()
        assert done is not None and done.result == b"7"
        assert time.monotonic() - started < 2.0

        failing = _flow(f"x-{q}", ("0", q))
        header = {FLOW_HEADER: orjson.dumps({"f": failing.id}).decode()}
        backend.start_flow(failing, [env(q, f"x-{q}.0", headers=header)])
        [step] = backend.lease(q, 10, 30.0)
        error = ErrorInfo("ValueError", "bad", "")
        failure = FlowFailure(failing.id, "0", "job", q, step.id, error)
        alert = env(q, f"x-{q}.failure", keep_id=60.0)
        effects = Effects(flow=failing.id, failed=failure, enqueue=(alert,))
        assert backend.settle([Settle.dead(step.receipt, "gave up", error, effects)]) == [True]
        assert [d.id for d in backend.lease(q, 10, 30.0)] == [alert.id]
        found = backend.flow(failing.id)
        assert found is not None and found.failure == failure
        # Re-driving the failed step resumes its flow in the same script, in its slot.
        assert backend.redrive(q, [step.id]) == 1
        assert backend.flow(failing.id).failure is None  # type: ignore[union-attr]
        assert backend.cancel_flow(failing.id) is True
        assert backend.flow(failing.id).cancelled is True  # type: ignore[union-attr]


def test_a_flow_across_slots_is_refused_on_cluster(backend: Backend, queues: list[str]) -> None:
    """A settle runs in one slot, so a flow whose steps are in queues of other slots could
    not move on atomically with their acks: it is refused before anything is stored."""
    a, b = queues[0], queues[1]
    record = _flow("across", ("0", a), ("1", b))
    with pytest.raises(InvalidArgument, match="one hash slot"):
        backend.start_flow(record, [env(a, "across.0")])
    assert backend.flow("across") is None
    assert stats(backend, a) == (0, 0, 0, 0)
    # Effects built by hand that would cross: refused before the ack.
    backend.enqueue([env(a, "m")])
    [m] = backend.lease(a, 10, 30.0)
    with pytest.raises(InvalidArgument, match="one hash slot"):
        backend.settle([Settle.ack(m.receipt, Effects(enqueue=(env(b, "n"),)))])
    assert backend.ack([m.receipt]) == [True]
    assert stats(backend, b) == (0, 0, 0, 0)


def test_batches_spanning_masters(backend: Backend, queues: list[str]) -> None:
    batch = [Envelope(q, f"m{i}", f"{q}-{i}".encode()) for i in range(20) for q in queues]
    assert [r.status for r in backend.enqueue(batch)] == ["enqueued"] * len(batch)
    leased = [d for q in queues for d in backend.lease(q, 100, 30.0)]
    assert len(leased) == len(batch)
    receipts = [d.receipt for d in leased]
    receipts.sort(key=lambda r: r.id)  # interleave the queues in one call
    assert backend.extend(receipts, 60.0) == [True] * len(receipts)
    assert backend.ack(receipts) == [True] * len(receipts)
    assert backend.ack(receipts[:3]) == [False] * 3
    for q in queues:
        assert stats(backend, q) == (0, 0, 0, 0)


def test_locks_across_slots(backend: Backend, queues: list[str]) -> None:
    locks = backend.locks
    keys = [f"{{{q}}}dedup:job:1" for q in queues] + ["untagged-lock"]
    assert all(locks.acquire(k, "alice", 30.0) for k in keys)
    assert not locks.acquire(keys[0], "bob", 30.0)
    assert locks.renew([*keys, f"{{{queues[0]}}}other"], "alice", 60.0) == [True] * 4 + [False]
    assert locks.renew(keys, "bob", 60.0) == [False] * 4
    assert locks.swap(keys[1], "alice", "done", 90.0)
    holder = locks.holder(keys[1])
    assert holder is not None and holder.owner == "done" and holder.expires_in > 60.0
    assert not locks.release(keys[1], "alice")
    assert all(locks.release(k, "alice") for k in (keys[0], keys[2], keys[3]))
    assert locks.holder(keys[0]) is None


def test_lease_records_across_slots(backend: Backend) -> None:
    """The records SQS keeps in a `locks=` store (`LeaseRecords`), on a Cluster: a
    batch's keys live in many slots, and each is written by its slot's script call, with
    the counts a single server keeps."""
    records = records_for(backend, f"ns-{uuid.uuid4().hex[:6]}:", RecordLifetimes(60, 60))
    space: Any = backend
    keys = [space.keys.lock(records.lease_key("q", f"m{i}")) for i in range(20)]
    assert len({key_slot(k.encode()) for k in keys}) > 3
    takes = [LeaseTake("q", f"m{i}", f"t{i}", f"s{i}", 1, 1, 30.0, True) for i in range(20)]
    assert records.take(takes) == [Granted(1, 1, False)] * 20
    assert records.take([takes[5]._replace(token="twin")]) == [None]  # held: refused
    receipts = [Receipt("q", t.id, t.token) for t in takes]
    assert records.renew([*receipts, Receipt("q", "m0", "stale")], 30.0) == [True] * 20 + [False]
    ends = [LeaseEnd(r, n % 2 == 0) for n, r in enumerate(receipts)]
    assert records.settle(ends) == [True] * 20
    again = records.take([t._replace(token="u", receive_count=2) for t in takes])
    assert again == [ACKED_TAKE if n % 2 == 0 else Granted(2, 2, False) for n in range(20)]
    records.forget([("q", t.id) for t in takes])
    assert records.take(takes[:2]) == [Granted(1, 1, False)] * 2
    claims = [IdClaim("q", f"m{i}", "o") for i in range(20)]
    assert records.claim_ids(claims) == [True] * 20
    assert records.claim_ids(claims) == [False] * 20
    records.finish_ids([IdFinish("q", f"m{i}", "o", 0.0) for i in range(20)])
    assert records.claim_ids(claims) == [True] * 20


def test_sqs_listings_on_a_cluster(backend: Backend) -> None:
    """The console's listings SQS keeps in a Redis lock store (`records/listing.py`): a
    queue's keys share one hash tag, so each call is one script on one slot, whatever
    the queues of a batch."""
    records = records_for(backend, f"ns-{uuid.uuid4().hex[:6]}:", RecordLifetimes(60, 60))
    listing = listing_in(records)
    assert listing is not None
    now = time.time()

    def entry(name: str, n: int, job: str = "a") -> ListEntry:
        return ListEntry(name, f"m{n}", now + 60 + n, job, f"t{n}", b"body", "{}", "{}")

    queues = [f"q{i}" for i in range(4)]
    listing.put(
        "in_flight", [entry(q, n, "b" if n == 1 else "a") for q in queues for n in range(3)]
    )
    for q in queues:
        got, more = listing.page(
            "in_flight", q, job=None, newest_first=False, limit=2, after=None, now=now
        )
        assert [e.id for e in got] == ["m0", "m1"] and more
        after = ListedAt(got[-1].at, got[-1].id)
        got, more = listing.page(
            "in_flight", q, job=None, newest_first=False, limit=2, after=after, now=now
        )
        assert [e.id for e in got] == ["m2"] and not more
        got, _ = listing.page(
            "in_flight", q, job="b", newest_first=True, limit=5, after=None, now=now
        )
        assert [e.id for e in got] == ["m1"]
    listing.renew([("q0", "m0", "t0"), ("q0", "m1", "stale")], now + 600)
    listing.drop("in_flight", [("q1", "m0", "t0"), ("q1", "m1", "stale")])
    got, _ = listing.page(
        "in_flight", "q0", job=None, newest_first=False, limit=5, after=None, now=now
    )
    assert [e.id for e in got] == ["m1", "m2", "m0"]
    got, _ = listing.page(
        "in_flight", "q1", job=None, newest_first=False, limit=5, after=None, now=now
    )
    assert [e.id for e in got] == ["m1", "m2"]
    found = listing.find("in_flight", "q2", "m1")
    assert found is not None and (found.job, found.body) == ("b", b"body")
    listing.clear("q2")
    assert listing.find("in_flight", "q2", "m1") is None


def test_sqs_refuses_workflows_on_a_cluster_lock_store(
    backend: Backend, cluster: RedisCluster, request: pytest.FixtureRequest
) -> None:
    """A step's settle must touch its lease record and its flow's keys in one script,
    and on a Cluster they live in different slots: the records keep no workflows there,
    and SQS says so by its capability, naming the Cluster."""
    records: Any = records_for(backend, "ns:", RecordLifetimes(60, 60))
    assert records.flows is False
    with pytest.raises(InvalidArgument, match="Cluster"):
        records.settle_steps([LeaseEnd(Receipt("q", "f.0", "t"), True)])
    with pytest.raises(InvalidArgument, match="Cluster"):
        records.start_flow(FlowRecord("f", time.time(), 60.0, ()))
    server = request.getfixturevalue("sqs_server")
    url = (
        f"sqs://us-east-1?endpoint_url={server.endpoint}&prefix=c{uuid.uuid4().hex[:8]}-"
        f"&locks={cluster.url()}"
    )
    sqs = backend_from_url(url)
    try:
        assert sqs.capabilities.workflows is False
        assert sqs.capabilities.results is True  # its lease records work as before
        with pytest.raises(InvalidArgument, match="Redis Cluster"):
            sqs.flow("any")
    finally:
        sqs.close()


def test_unique_key_outside_the_queue_slot_is_refused(backend: Backend, queues: list[str]) -> None:
    q, other = queues[0], queues[1]
    foreign = UniqueClaim(f"{{{other}}}unique:job", 60.0)
    with pytest.raises(InvalidArgument, match="hash tag"):
        backend.enqueue([env(other, "fine"), env(q, "x", unique=foreign)])
    assert stats(backend, q) == stats(backend, other) == (0, 0, 0, 0)  # nothing written


def test_blocked_lease_wakes_on_enqueue_and_on_delay(backend: Backend, queues: list[str]) -> None:
    q = queues[-1]

    def later() -> None:
        time.sleep(0.2)
        backend.enqueue([env(q, "x")])

    thread = threading.Thread(target=later)
    started = time.monotonic()
    thread.start()
    assert [d.id for d in backend.lease(q, 1, 30.0, wait=5.0)] == ["x"]
    thread.join()
    assert time.monotonic() - started < 2.0

    backend.enqueue([env(q, "y", delay=0.3)])
    started = time.monotonic()
    assert [d.id for d in backend.lease(q, 1, 30.0, wait=5.0)] == ["y"]
    assert 0.25 <= time.monotonic() - started < 2.0


def test_worker_drains_queues_on_every_master(
    cluster: RedisCluster, queues: list[str], tmp_path: Path
) -> None:
    app = tasuki.App(f"{cluster.url()}?prefix=w-{uuid.uuid4().hex[:8]}:")
    done: list[tuple[str, int]] = []
    mutex = threading.Lock()
    jobs = []
    for q in queues:

        @app.job(name=f"work-{q}", queue=q, dedup=True)
        def work(n: int, q: str = q) -> None:
            with mutex:
                done.append((q, n))

        jobs.append(work)

    @app.job(
        name="unique-work",
        queue=queues[0],
        unique=tasuki.Unique(mode="until_executed", key=lambda m: "same"),
    )
    def unique_work(n: int) -> None:
        with mutex:
            done.append(("unique", n))

    for job in jobs:
        job.enqueue_many([(n,) for n in range(50)])
    unique_work.enqueue(1)
    unique_work.enqueue(2)  # dropped: the first copy still waits
    app.worker(queues=queues, concurrency=8).run(until_idle=True, timeout=60)

    for q in queues:
        assert sorted(n for name, n in done if name == q) == list(range(50))
        assert app.stats(q) == {
            "ready": 0,
            "in_flight": 0,
            "delayed": 0,
            "dead": 0,
            "oldest_ready_age": 0.0,
        }
    assert [n for name, n in done if name == "unique"] == [1]
    app.close()


def test_hostile_text_and_names_on_every_master(backend: Backend, queues: list[str]) -> None:
    """The contract's hostile-text checks (`TestHostileText`) on each master's slots."""
    from tasuki.testing.contract.text import TestHostileText

    suite = TestHostileText()
    for q in queues:  # the refusals first: they check that the queue holds nothing
        for bad in ("a\x00b", "lone\ud800"):
            suite.test_names_no_engine_can_store_are_refused_at_enqueue(backend, q, bad)
        suite.test_a_retry_and_a_progress_note_with_any_text_are_stored(backend, q)
        suite.test_a_dead_letter_keeps_the_real_error_whatever_its_text(backend, q)


class TestStepsOnCluster(_Steps):
    """The contract's durable steps (`testing/contract/steps.py`) on the Cluster: a
    fresh queue each test, on whichever master owns its slot."""


class TestPauseOnCluster(_Pause):
    """The contract's pause (`testing/contract/console.py`): its SET in a slot of its own."""


class TestBrowseOnCluster(_Browse):
    """The contract's listings, each queue's in its slot."""


class TestActionsOnCluster(_Actions):
    """The contract's bulk actions, each queue's in its slot."""


class TestWorkersOnCluster(_Workers):
    """The contract's worker registry: its keys in a slot of their own."""


class TestJobStatsOnCluster(_JobStats):
    """The contract's job stats: each queue's rollups in its slot."""


def test_capabilities_on_a_cluster_are_those_of_one_server(backend: Backend) -> None:
    """The capabilities pin (tests/unit/test_capabilities_pinned.py) for Redis Cluster,
    which has no entry in the shared backend table: a capability turning False on a
    Cluster only would turn its tests there into skips."""
    import dataclasses

    from tests.unit.test_capabilities_pinned import DIFFERS, FULL

    want = {**FULL, **DIFFERS["redis"]}
    got = dataclasses.asdict(backend.capabilities)
    assert got == want, {k: (want.get(k), got.get(k)) for k in want if got.get(k) != want.get(k)}
