"""The lease and id records SQS keeps in its `locks=` store, as it cannot fence its own
leases: each store has them (`records_for`), batched with counts on SQLite and Redis, as
plain locks elsewhere. Real stores, no SQS needed."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import (
    Backend,
    Effects,
    Envelope,
    Fill,
    FlowRecord,
    FlowStep,
    Progress,
    Receipt,
)
from tasuki.backends.memory import MemoryBackend
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.sqs.records import records_for
from tasuki.backends.sqs.records.base import (
    ACKED_TAKE,
    CANCELLED_TAKE,
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
    ResultPut,
    Settled,
)
from tasuki.backends.sqs.records.plain import PlainLeaseRecords
from tasuki.backends.sqs.records.redis import result_slot_key
from tasuki.backends.sqs.records.redis_flows import RedisStepRecords
from tasuki.backends.sqs.records.sqlite import SQLiteLeaseRecords
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer

LIFETIMES = RecordLifetimes(lease=3600.0, id=3600.0, acked=300.0)


def take(id: str, token: str, count: int, vt: float, copy: str, fresh: bool = True) -> LeaseTake:
    return LeaseTake("q", id, token, copy, count, count, vt, fresh)


def end(id: str, token: str, acked: bool = False) -> LeaseEnd:
    return LeaseEnd(Receipt("q", id, token), acked)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, LeaseRecords]]:
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = f"{server.url()}?prefix=r-{uuid.uuid4().hex[:8]}:"
    else:
        url = f"sqlite:///{tmp_path / 'locks.db'}"
    backend = backend_from_url(url)
    records = records_for(backend, f"ns-{uuid.uuid4().hex[:6]}:", LIFETIMES)
    yield backend, records
    records.close()
    backend.close()


def test_each_store_offers_its_own_records(
    store: tuple[Backend, LeaseRecords], tmp_path: Path
) -> None:
    backend, records = store
    kind = SQLiteLeaseRecords if backend.url.startswith("sqlite") else RedisStepRecords
    assert type(records) is kind
    assert records.flows is True  # both keep workflows (Redis: on one server)
    plain = records_for(MemoryBackend(), "ns:", LIFETIMES)
    assert type(plain) is PlainLeaseRecords


def test_records_fence_count_and_refuse_stale_tokens(store: tuple[Backend, LeaseRecords]) -> None:
    _, records = store
    # a first lease: no record, the copy first received just now: its first receive
    assert records.take([take("m", "t1", 3, 0.2, "s1")]) == [Granted(3, 1, False)]
    # SQS delivering the message again while the lease is live: refused, not counted;
    # so is a second receive given the same receipt handle (the lease's very token)
    assert records.take([take("m", "dup", 4, 30.0, "s1")]) == [None]
    assert records.take([take("m", "t1", 4, 30.0, "s1")]) == [None]
    time.sleep(0.3)
    # after the lease lapsed, a later lease whose receive count came back lower still
    # gets a higher number; its receives are the leases granted on the copy; and the
    # lease before it lapsed
    assert records.take([take("m", "t2", 2, 30.0, "s1")]) == [Granted(4, 2, True)]
    assert records.renew([Receipt("q", "m", "t1"), Receipt("q", "m", "t2")], 30.0) == [
        False,
        True,
    ]
    assert records.settle([end("m", "t1")]) == [False]
    assert records.settle([end("m", "t2")]) == [True]
    # released: the record keeps counting the copy's leases, and nothing lapsed
    assert records.take([take("m", "t3", 6, 30.0, "s1")]) == [Granted(6, 3, False)]
    # no record of a copy first received long ago: its receive count
    assert records.take([take("old", "t1", 5, 30.0, "s9", fresh=False)]) == [Granted(5, 5, False)]
    # acked: the same copy delivered once more is refused, to be deleted (ACKED_TAKE); a
    # re-sent copy is not
    assert records.take([take("n", "t1", 1, 30.0, "s2")]) == [Granted(1, 1, False)]
    assert records.settle([end("n", "t1", acked=True)]) == [True]
    assert records.take([take("n", "late", 2, 30.0, "s2")]) == [ACKED_TAKE]
    assert records.take([take("n", "t3", 1, 30.0, "s3")]) == [Granted(2, 1, False)]
    # a dead message's record is forgotten: its next copy starts afresh
    records.forget([("q", "n")])
    assert records.take([take("n", "t4", 1, 30.0, "s4")]) == [Granted(1, 1, False)]


def test_one_settle_call_takes_acks_and_releases_together(
    store: tuple[Backend, LeaseRecords],
) -> None:
    _, records = store
    granted = records.take([take(f"m{i}", f"t{i}", 1, 30.0, f"s{i}") for i in range(4)])
    assert all(g is not None for g in granted)
    ends = [end("m0", "t0", True), end("m1", "t1"), end("m2", "stale", True), end("m3", "t3")]
    assert records.settle(ends) == [True, True, False, True]
    # m0 acked: the copy is refused again; m1 released: its copy counts on; m2 still held
    assert records.take([take("m0", "x", 2, 30.0, "s0")]) == [ACKED_TAKE]
    assert records.take([take("m1", "x", 2, 30.0, "s1")]) == [Granted(2, 2, False)]
    assert records.take([take("m2", "x", 2, 30.0, "s2")]) == [None]


def test_the_id_window(store: tuple[Backend, LeaseRecords]) -> None:
    _, records = store
    # a second claim of a live id fails; a finished one is kept `keep` s
    claims = [IdClaim("q", "a", "o1"), IdClaim("q", "a", "o2"), IdClaim("q", "b", "o1")]
    assert records.claim_ids(claims) == [True, False, True]
    records.finish_ids([IdFinish("q", "a", "o1", 60.0), IdFinish("q", "b", "someone", 0.0)])
    assert records.claim_ids([IdClaim("q", "a", "o3"), IdClaim("q", "b", "o3")]) == [False, False]
    records.finish_ids([IdFinish("q", "a", "", 0.0), IdFinish("q", "b", "o1", 0.0)])
    assert records.claim_ids([IdClaim("q", "a", "o4"), IdClaim("q", "b", "o4")]) == [True, True]


def test_cancel_marks_the_lease_record_and_finishes_the_id(
    store: tuple[Backend, LeaseRecords],
) -> None:
    _, records = store
    assert records.controls
    assert records.claim_ids([IdClaim("q", i, "o") for i in "wrad"]) == [True] * 4
    records.take([take("r", "t1", 1, 30.0, "s1")])
    records.take([take("a", "t2", 1, 30.0, "s2")])
    assert records.settle([end("a", "t2", acked=True)]) == [True]
    # waiting (never leased): removed; running: signalled; acked a moment ago: unknown
    assert records.cancel("q", "w") == "removed"
    assert records.cancel("q", "r") == "signalled"
    assert records.cancel("q", "a") == "unknown"
    assert records.cancel("q", "never") == "unknown"
    assert [records.cancel("q", i) for i in "wr"] == ["unknown", "unknown"]  # done already
    # the running lease is fenced out; keep tells it why
    assert records.keep([(Receipt("q", "r", "t1"), Progress(0.5))], 30.0) == ["cancelled"]
    assert records.keep([(Receipt("q", "r", "t0"), None)], 30.0) == ["lost"]
    assert records.renew([Receipt("q", "r", "t1")], 30.0) == [False]
    assert records.settle([end("r", "t1")]) == [False]
    # any copy received later is refused as cancelled, and is not counted
    got = records.take([take("w", "t3", 1, 30.0, "s3"), take("r", "t4", 2, 30.0, "s1")])
    assert got == [CANCELLED_TAKE, CANCELLED_TAKE]
    # their ids stay known; a finished id (kept) cannot be cancelled
    assert records.claim_ids([IdClaim("q", "w", "x"), IdClaim("q", "r", "x")]) == [False] * 2
    records.finish_ids([IdFinish("q", "d", "o", 60.0)])
    assert records.cancel("q", "d") == "unknown"
    assert records.claim_ids([IdClaim("q", "d", "x")]) == [False]


def test_cancel_leases_cancels_only_while_the_named_lease_holds_the_message(
    store: tuple[Backend, LeaseRecords],
) -> None:
    """The bulk cancel's step: each message cancelled only if the lease it names is its
    current, live lease; a lease released, lapsed or replaced is left alone."""
    _, records = store
    assert records.claim_ids([IdClaim("q", i, "o") for i in "hrlnw"]) == [True] * 5
    records.take([take(i, f"{i}1", 1, 30.0, f"s{i}") for i in "hrn"])
    records.take([take("l", "l1", 1, 0.05, "sl")])
    assert records.settle([end("r", "r1")]) == [True]  # released: back to waiting
    time.sleep(0.3)  # the lease of l lapsed
    assert records.settle([end("n", "n1")]) == [True]
    records.take([take("n", "n2", 2, 30.0, "sn")])  # leased again: another lease
    leases = [("h", "h1"), ("r", "r1"), ("l", "l1"), ("n", "n1"), ("w", ""), ("x", "x1")]
    assert records.cancel_leases("q", leases) == [True, False, False, False, False, False]
    assert records.cancel_leases("q", [("h", "h1")]) == [False]  # cancelled already
    # the named lease is fenced out; the others go on as they were
    assert records.keep([(Receipt("q", "h", "h1"), None)], 30.0) == ["cancelled"]
    assert records.keep([(Receipt("q", "n", "n2"), None)], 30.0) == ["held"]
    assert records.view("q", "r").lease_owner == ""
    assert records.claim_ids([IdClaim("q", i, "x") for i in "hrnw"]) == [False] * 4
    assert [records.cancel("q", i) for i in "rw"] == ["removed", "removed"]


def test_keep_stores_progress_for_the_current_lease(store: tuple[Backend, LeaseRecords]) -> None:
    _, records = store
    records.take([take("m", "t1", 1, 30.0, "s1")])
    current, stale = Receipt("q", "m", "t1"), Receipt("q", "m", "t0")
    assert records.keep([(current, Progress(0.5, "half")), (stale, Progress(1.0))], 30.0) == [
        "held",
        "lost",
    ]
    assert records.renew([current], 30.0) == [True]
    assert records.settle([end("m", "t1")]) == [True]
    assert records.keep([(current, None)], 30.0) == ["lost"]


def test_result_records_are_settled_by_the_current_lease_only(
    store: tuple[Backend, LeaseRecords],
) -> None:
    _, records = store
    records.put_results([ResultPut("q", i, "pending", None, 60.0) for i in "abc"])
    assert records.result("q", "a") == records.result("q", "b")
    assert records.result("q", "a").state == "pending"  # type: ignore[union-attr]
    records.take([take("a", "t1", 1, 30.0, "s1"), take("b", "t2", 1, 30.0, "s2")])
    ends = [
        LeaseEnd(Receipt("q", "a", "t0"), True, ("ok", b'"stale"')),
        LeaseEnd(Receipt("q", "b", "t2"), False, ("failed", b'{"reason":"no"}')),
        LeaseEnd(Receipt("q", "n", "t3"), True, ("ok", b"1")),
    ]
    assert records.settle(ends) == [False, True, False]
    assert records.result("q", "a").state == "pending"  # type: ignore[union-attr]
    before = time.time()
    assert records.settle([LeaseEnd(Receipt("q", "a", "t1"), True, ("ok", b"null"))]) == [True]
    a, b = records.result("q", "a"), records.result("q", "b")
    assert a is not None and (a.state, a.value) == ("ok", b"null")
    assert a.expires_at is not None and before + 59 < a.expires_at < time.time() + 61
    assert b is not None and (b.state, b.reason) == ("failed", "no")
    # settled without a lease (dead at receive time), made pending again, dropped
    records.put_results([ResultPut("q", "c", "failed", b"{}"), ResultPut("q", "n", "ok", b"1")])
    assert records.result("q", "c").state == "failed"  # type: ignore[union-attr]
    assert records.result("q", "n") is None  # keeps none: nothing made
    records.put_results([ResultPut("q", "b", "pending"), ResultPut("q", "n", "pending")])
    assert records.result("q", "b").state == "pending"  # type: ignore[union-attr]
    assert records.result("q", "n") is None
    records.drop_results([("q", "a"), ("q", "b")])
    assert records.result("q", "a") is None and records.result("q", "b") is None


@pytest.mark.parametrize("key", ["tasuki:lock:ns:lease:q:m", "{tasuki}:lock:ns:lease:q:m"])
def test_a_result_key_shares_its_lease_records_cluster_slot(key: str) -> None:
    assert key_slot(result_slot_key(key).encode()) == key_slot(key.encode())
    assert result_slot_key(key) != key


def test_a_steps_effects_apply_under_its_lease_and_its_group_completes_once(
    store: tuple[Backend, LeaseRecords],
) -> None:
    """The workflow records of both stores (`FlowRecords`, `settle_steps`): a stale
    token changes nothing of the flow, only the member that completes the group goes
    on, the last step writes the flow's result; on Redis every key of the flow keeps
    the flow's retention."""
    backend, records = store
    flows: Any = records
    steps = tuple(FlowStep(p, "job", "q", f"g.{p}") for p in ("0.0", "0.1", "1"))
    assert flows.start_flow(FlowRecord("g", time.time(), 600.0, steps)) is True
    assert flows.start_flow(FlowRecord("g", time.time(), 600.0, steps)) is False
    records.take([take("g.0.0", "a", 1, 30.0, "c0"), take("g.0.1", "b", 1, 30.0, "c1")])

    def member(id: str, token: str, slot: int, value: bytes) -> LeaseEnd:
        fill = Fill("g", "0", slot, 2)
        then = (Envelope("q", "g.1", b"x"),)
        effects = Effects(result=value, flow="g", fills=(fill,), enqueue=then, ttl=600.0)
        return LeaseEnd(Receipt("q", id, token), True, None, effects)

    assert flows.settle_steps([member("g.0.0", "stale", 0, b"9")]) == [Settled(False)]
    assert flows.settle_steps([member("g.0.0", "a", 0, b"1")]) == [Settled(True, False)]
    assert flows.group_value("g", "0") is None
    assert flows.settle_steps([member("g.0.1", "b", 1, b"2")]) == [Settled(True, True)]
    assert flows.group_value("g", "0") == b"[1,2]"
    records.take([take("g.1", "c", 1, 30.0, "c2")])
    last = Effects(result=b"3", flow="g", final=True, ttl=600.0)
    settled = flows.settle_steps([LeaseEnd(Receipt("q", "g.1", "c"), True, None, last)])
    assert settled == [Settled(True, False)]
    assert flows.flow("g").result == b"3"
    if isinstance(records, RedisStepRecords):
        redis: Any = backend
        for key in (records._flow_key("g"), records._key("fb:0:g")):
            assert 0 < redis._command("PTTL", key) <= 600_000


def test_a_records_table_made_before_the_counts_gains_its_columns(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE tasuki_sqs_records (key TEXT PRIMARY KEY, owner TEXT NOT NULL,"
        " expires REAL NOT NULL, fence INTEGER NOT NULL DEFAULT 0,"
        " lease_until REAL NOT NULL DEFAULT 0) WITHOUT ROWID"
    )
    db.execute("INSERT INTO tasuki_sqs_records VALUES ('tasuki-sqs:p-lease:q:m', 't0', 1e12, 7, 0)")
    db.commit()
    db.close()
    records = SQLiteLeaseRecords(path, "tasuki-sqs:p-", LIFETIMES)
    # the old record counted no receives (and named no copy): the receive count stands
    assert records.take([take("m", "t1", 3, 30.0, "s1")]) == [Granted(8, 3, True)]
    assert records.take([take("n", "t1", 2, 30.0, "s2")]) == [Granted(2, 1, False)]
    records.close()


def test_plain_lock_records_count_nothing_of_their_own() -> None:
    """On plain locks (a store without records of its own) the numbers are SQS's."""
    records = records_for(MemoryBackend(), "p-", LIFETIMES)
    assert records.take([take("m", "t1", 3, 30.0, "s1")]) == [Granted(3, 3, False)]
    assert records.take([take("m", "t2", 4, 30.0, "s1")]) == [Granted(4, 4, True)]
    assert records.settle([end("m", "t0"), end("m", "t2")]) == [False, True]
    assert records.take([take("m", "t3", 5, 30.0, "s1")]) == [Granted(5, 5, False)]
