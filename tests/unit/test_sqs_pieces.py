"""The SQS backend's pure pieces: URL options, body encoding, the `tasuki` attribute,
the admission of limits over a lock store."""

from __future__ import annotations

import threading

import pytest

from tasuki.backends.base import Envelope
from tasuki.backends.memory.locks import MemoryLockStore
from tasuki.backends.sqs.codec import (
    Meta,
    attributes,
    dead_letter,
    decode_body,
    delivery,
    encode_body,
    received_meta,
    stored,
)
from tasuki.backends.sqs.levels import Levels
from tasuki.backends.sqs.limits import FORGET_AFTER, Admission
from tasuki.backends.sqs.options import parse_url
from tasuki.backends.sqs.queues import Queues, sqs_names, tasuki_name
from tasuki.core.message import ErrorInfo
from tasuki.core.records import Limit
from tasuki.errors import BackendUnavailable, InvalidURL
from tests.support.deps import need


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
        id_generated=True,
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


def test_a_message_from_before_the_generated_id_marker_reads_as_given() -> None:
    """An older message has no "g": its id is not taken for a generated one."""
    generated = stored(Envelope("q", "m1", b"x", id_generated=True), 1.5, "")
    assert '"g":1' in generated.dumps()
    older = Meta.loads(generated.dumps().replace(',"g":1', ""))
    assert (older.id_generated, Meta.loads(generated.dumps()).id_generated) == (False, True)
    assert '"g"' not in stored(Envelope("q", "m1", b"x"), 1.5, "").dumps()


def test_an_envelope_travels_to_a_delivery_and_a_dead_letter() -> None:
    """The codec's one mapping: envelope -> `tasuki` attribute -> Delivery / DeadLetter."""
    env = Envelope("q", "m1", b"\x00\xff", {"h": "v"}, max_attempts=3, keep_id=60.0)
    meta = stored(env, 1.5, "owner")
    body, meta.encoding = encode_body(env.body)
    message = {"MessageId": "s1", "ReceiptHandle": "r1", "Body": body}
    message["MessageAttributes"] = attributes(meta)
    back, _ = received_meta(message)
    d = delivery("q", message, back, attempt=2, fence=5, vt=30.0)
    assert d == ("q", "m1", b"\x00\xff", {"h": "v"}, 2, 3, 1.5, "r1", 5, 30.0)
    back.reason, back.died_at, back.died_attempt = "lease_expired", 9.0, 3
    dead = {**message, "MessageAttributes": attributes(back)}
    letter = dead_letter("q", dead, max_receive_count=1000)
    assert (letter.id, letter.body, letter.attempt) == ("m1", b"\x00\xff", 3)
    assert (letter.reason, letter.died_at, letter.enqueued_at) == (
        "lease expired 3 times",
        9.0,
        1.5,
    )
    moved = {**message, "Attributes": {"ApproximateReceiveCount": "4", "SentTimestamp": "2000"}}
    letter = dead_letter("q", moved, max_receive_count=4)
    assert (letter.attempt, letter.died_at) == (4, 2.0)
    assert letter.reason == "moved by the SQS redrive policy after 4 receives (not by tasuki)"


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


def test_admission_forgets_leases_that_lapse_unsettled() -> None:
    """A lease whose worker died is never settled: its slot lapses in the lock store, and
    the first admit after the lease lapsed drops it from what this process holds, which
    would otherwise grow by one entry per such lease."""
    now = [1000.0]
    locks = MemoryLockStore(threading.RLock())
    admission = Admission(locks, "t:")
    locks.clock = admission.clock = lambda: now[0]
    one = [Limit("k", "concurrency", 1)]
    assert admission.admit("a", one, 30.0, {}) is None
    assert admission.admit("b", one, 30.0, {}) is not None  # the one slot is a's
    now[0] += 20.0
    admission.extend("a", 30.0)  # live until 1050
    now[0] += 25.0
    assert admission.admit("c", one, 30.0, {}) is not None
    assert set(admission._held) == {"a"}  # extended: still live
    now[0] += 10.0  # a lapsed, never settled
    assert admission.admit("d", one, 30.0, {}) is None
    # Remembered a while, so that its keeper, late, is told it lapsed...
    assert not admission.extend("a", 30.0)
    assert set(admission._held) == {"a", "d"}
    now[0] += FORGET_AFTER  # ... then forgotten
    assert admission.admit("e", one, 30.0, {}) is None
    assert set(admission._held) == {"d", "e"}
    assert admission.free(["a"]) == []  # a late settle frees nothing


class _DownPaginator:
    def paginate(self, **kwargs: object) -> object:
        from botocore.exceptions import EndpointConnectionError

        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1/")


class _DownClient:
    def get_paginator(self, name: str) -> _DownPaginator:
        return _DownPaginator()


def test_listing_the_levels_while_the_server_is_down_is_an_outage() -> None:
    """A lease lists a queue's priority levels once a minute: the server down then is a
    BackendUnavailable like any other call's, and the next lease lists them again. (The
    botocore error went through as it was, and ended a worker's fetch thread.)"""
    need("botocore")
    options = parse_url("sqs://us-east-1?endpoint_url=http://127.0.0.1:1")
    levels = Levels(Queues(_DownClient(), options).levels)
    with pytest.raises(BackendUnavailable, match="unreachable"):
        levels.in_use("q")
    with pytest.raises(BackendUnavailable):  # not taken for listed until the next minute
        levels.in_use("q")
    with pytest.raises(BackendUnavailable, match="unreachable"):  # the same for queues()
        Queues(_DownClient(), options).urls("")
