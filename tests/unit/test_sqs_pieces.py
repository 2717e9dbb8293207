"""The SQS backend's pure pieces: URL options, body encoding, the `tasuki` attribute."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tasuki.backends.sqs.codec import (
    Meta,
    attributes,
    decode_body,
    encode_body,
    received_meta,
)
from tasuki.backends.sqs.fencing import Take
from tasuki.backends.sqs.options import parse_url
from tasuki.backends.sqs.queues import sqs_names, tasuki_name
from tasuki.core.message import ErrorInfo
from tasuki.errors import InvalidURL


def test_url_options() -> None:
    o = parse_url(
        "sqs://eu-west-1?endpoint_url=http://127.0.0.1:5000&prefix=app-&locks=sqlite:///l.db"
    )
    assert (o.region, o.endpoint_url, o.prefix, o.locks) == (
        "eu-west-1",
        "http://127.0.0.1:5000",
        "app-",
        "sqlite:///l.db",
    )
    assert parse_url("sqs://us-east-1").prefix == "tasuki-"
    assert parse_url("sqs://us-east-1?max_delay=2").max_delay == 2.0


@pytest.mark.parametrize(
    "url",
    [
        "sqs://",
        "sqs://key:secret@us-east-1",
        "sqs://us-east-1?nope=1",
        "sqs://us-east-1?prefix=a.b",
        "sqs://us-east-1?max_delay=901",
        "sqs://us-east-1?max_receive_count=0",
    ],
)
def test_bad_urls_refused(url: str) -> None:
    with pytest.raises(InvalidURL) as info:
        parse_url(url)
    assert "secret" not in str(info.value).replace("sqs://key:secret@", "")


@pytest.mark.parametrize(
    "body",
    [b"plain", "日本語 🎌".encode(), b"", b"\x00\x01", bytes(range(256)), b"\xff\xfe", b"\x0b"],
)
def test_bodies_round_trip_as_text_or_base64(body: bytes) -> None:
    text, encoding = encode_body(body)
    assert text  # SQS refuses an empty body
    assert decode_body(text, encoding) == body
    if body in (b"plain", "日本語 🎌".encode()):
        assert (text, encoding) == (body.decode(), "")  # readable in the console


def test_meta_round_trips_through_the_attribute() -> None:
    meta = Meta(
        id="m1",
        headers={"tasuki-job": "j", "x": "ü"},
        max_attempts=4,
        visibility_timeout=12.5,
        keep_id=60.0,
        enqueued_at=1.5,
        attempts_before=3,
        fence_before=7,
        unique_key="u",
        id_owner="o",
        encoding="b",
        reason="r",
        error=ErrorInfo("E", "m", "tb"),
        died_at=2.0,
        died_attempt=4,
    )
    message = {"MessageId": "sqs-id", "Body": "eA==", "MessageAttributes": attributes(meta)}
    back, others = received_meta(message)
    assert back == meta
    assert others == {}


def test_a_message_without_the_attribute_is_raw() -> None:
    message = {
        "MessageId": "sqs-id",
        "Body": '{"Records": []}',
        "Attributes": {"SentTimestamp": "1700000000000"},
        "MessageAttributes": {"theirs": {"DataType": "String", "StringValue": "v"}},
    }
    meta, others = received_meta(message)
    assert (meta.id, meta.raw, meta.headers, meta.enqueued_at) == ("sqs-id", True, {}, 1.7e9)
    assert others == {"theirs": {"DataType": "String", "StringValue": "v"}}


def test_queue_names() -> None:
    o = parse_url("sqs://us-east-1?prefix=p-")
    assert sqs_names(o, "orders") == ("p-orders", "p-orders-dead")
    assert sqs_names(o, "orders.fifo") == ("p-orders.fifo", "p-orders-dead.fifo")
    assert tasuki_name(o, "p-orders") == "orders"
    assert tasuki_name(o, "p-orders-dead") is None
    assert tasuki_name(o, "p-orders-dead.fifo") is None
    assert tasuki_name(o, "other") is None


def test_an_unreadable_tasuki_attribute_is_delivered_raw() -> None:
    for value in ("{not json", '{"no-id": 1}', '{"id": "x", "e": "b"}'):
        message = {
            "MessageId": "sqs-id",
            "Body": "!!not base64!!",
            "MessageAttributes": {"tasuki": {"DataType": "String", "StringValue": value}},
        }
        meta, others = received_meta(message)
        assert (meta.id, meta.raw) == ("sqs-id", True)
        assert "tasuki" in others  # kept as it was, for whoever reads the message next


def _take(id: str, token: str, count: int, vt: float, copy: str, fresh: bool = True) -> Take:
    return Take("q", id, token, copy, count, count, vt, fresh)


def test_sqlite_records_fence_and_refuse_stale_tokens(tmp_path: Path) -> None:
    from tasuki.backends.memory import MemoryBackend
    from tasuki.backends.sqs.fencing import SqliteFences

    fences = SqliteFences(MemoryBackend().locks, "p-", str(tmp_path / "locks.db"))
    # a first lease: no record, the copy first received just now: its first receive
    assert fences.take([_take("m", "t1", 3, 0.2, "s1")]) == [(3, 1)]
    assert fences.lapsed("q", "m")
    # SQS delivering the message again while the lease is live: refused, not counted
    assert fences.take([_take("m", "dup", 4, 30.0, "s1")]) == [None]
    time.sleep(0.25)
    # after the lease lapsed, a later lease whose receive count came back lower still
    # gets a higher number; its receives are the leases granted on the copy
    assert fences.take([_take("m", "t2", 2, 30.0, "s1")]) == [(4, 2)]
    assert fences.current([("q", "m", "t1"), ("q", "m", "t2")], 30.0) == [False, True]
    assert fences.settle([("q", "m", "t1")]) == [False]
    assert fences.settle([("q", "m", "t2")]) == [True]
    assert not fences.lapsed("q", "m")
    # released: the record keeps counting the copy's leases
    assert fences.take([_take("m", "t3", 6, 30.0, "s1")]) == [(6, 3)]
    # no record of a copy first received long ago: its receive count
    assert fences.take([_take("old", "t1", 5, 30.0, "s9", fresh=False)]) == [(5, 5)]
    # acked: the same SQS message delivered once more is refused, a re-sent copy is not
    assert fences.take([_take("n", "t1", 1, 30.0, "s2")]) == [(1, 1)]
    assert fences.settle([("q", "n", "t1")], acked=True) == [True]
    assert not fences.lapsed("q", "n")
    assert fences.take([_take("n", "late", 2, 30.0, "s2")]) == [None]
    assert fences.take([_take("n", "t3", 1, 30.0, "s3")]) == [(2, 1)]
    # the id window: a second claim of a live id fails; a finished one is kept `keep` s
    assert fences.claim_ids([("q", "a", "o1"), ("q", "a", "o2")]) == [True, False]
    fences.finish_ids("q", [("a", "o1", 60.0)])
    assert fences.claim_ids([("q", "a", "o3")]) == [False]
    fences.finish_ids("q", [("a", "", 0.0)])
    assert fences.claim_ids([("q", "a", "o4")]) == [True]
    fences.close()


def test_a_records_table_made_before_the_counts_gains_its_columns(tmp_path: Path) -> None:
    import sqlite3

    from tasuki.backends.memory import MemoryBackend
    from tasuki.backends.sqs.fencing import SqliteFences

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
    fences = SqliteFences(MemoryBackend().locks, "p-", path)
    # the old record counted no receives (and named no copy): the receive count stands
    assert fences.take([_take("m", "t1", 3, 30.0, "s1")]) == [(8, 3)]
    assert fences.take([_take("n", "t1", 2, 30.0, "s2")]) == [(2, 1)]
    fences.close()


def test_plain_lock_records_count_nothing_of_their_own() -> None:
    """On plain locks (a Redis Cluster, any other lock store) the numbers are SQS's."""
    from tasuki.backends.memory import MemoryBackend
    from tasuki.backends.sqs.fencing import LockFences

    fences = LockFences(MemoryBackend().locks, "p-")
    assert fences.take([_take("m", "t1", 3, 30.0, "s1")]) == [(3, 3)]
    assert fences.lapsed("q", "m")
    assert fences.settle([("q", "m", "t0"), ("q", "m", "t1")]) == [False, True]
    assert not fences.lapsed("q", "m")
