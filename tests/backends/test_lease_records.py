"""The lease and id records a lock store keeps for a backend that cannot fence its own
leases (SQS with `locks=`): each store offers them (`LockStore.lease_records`), batched
with counts on SQLite and Redis, as plain locks elsewhere. Real stores, no SQS needed."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasuki.backends.base import Backend, Receipt
from tasuki.backends.memory import MemoryBackend
from tasuki.backends.redis.lease_records import RedisLeaseRecords
from tasuki.backends.sqlite.lease_records import SQLiteLeaseRecords
from tasuki.backends.urls import backend_from_url
from tasuki.core.locks import (
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    PlainLeaseRecords,
    RecordLifetimes,
)
from tests.support.servers import RedisServer

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
    records = backend.locks.lease_records(f"ns-{uuid.uuid4().hex[:6]}:", LIFETIMES)
    yield backend, records
    records.close()
    backend.close()


def test_each_store_offers_its_own_records(
    store: tuple[Backend, LeaseRecords], tmp_path: Path
) -> None:
    backend, records = store
    kind = SQLiteLeaseRecords if backend.url.startswith("sqlite") else RedisLeaseRecords
    assert type(records) is kind
    plain = MemoryBackend().locks.lease_records("ns:", LIFETIMES)
    assert type(plain) is PlainLeaseRecords


def test_records_fence_count_and_refuse_stale_tokens(store: tuple[Backend, LeaseRecords]) -> None:
    _, records = store
    # a first lease: no record, the copy first received just now: its first receive
    assert records.take([take("m", "t1", 3, 0.2, "s1")]) == [Granted(3, 1, False)]
    # SQS delivering the message again while the lease is live: refused, not counted
    assert records.take([take("m", "dup", 4, 30.0, "s1")]) == [None]
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
    # acked: the same copy delivered once more is refused, a re-sent copy is not
    assert records.take([take("n", "t1", 1, 30.0, "s2")]) == [Granted(1, 1, False)]
    assert records.settle([end("n", "t1", acked=True)]) == [True]
    assert records.take([take("n", "late", 2, 30.0, "s2")]) == [None]
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
    assert records.take([take("m0", "x", 2, 30.0, "s0")]) == [None]
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
    records = MemoryBackend().locks.lease_records("p-", LIFETIMES)
    assert records.take([take("m", "t1", 3, 30.0, "s1")]) == [Granted(3, 3, False)]
    assert records.take([take("m", "t2", 4, 30.0, "s1")]) == [Granted(4, 4, True)]
    assert records.settle([end("m", "t0"), end("m", "t2")]) == [False, True]
    assert records.take([take("m", "t3", 5, 30.0, "s1")]) == [Granted(5, 5, False)]
