"""A job receives the type it was sent, or the enqueue is refused: never a silent change."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any

import pytest

import tasuki
from tasuki.errors import SerializationError

SENT: list[Any] = [
    dt.datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=dt.timezone(dt.timedelta(hours=9))),
    dt.datetime(2026, 12, 1, 9, 30),
    dt.date(2026, 12, 1),
    dt.time(23, 59, 1),
    Decimal("19.90"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


def test_dates_decimals_and_uuids_arrive_as_they_were_sent() -> None:
    app = tasuki.App("memory://")
    got: list[Any] = []

    @app.job
    def record(*values: Any, nested: dict[str, Any]) -> None:
        got.extend([values, nested])

    record.enqueue(*SENT, nested={"at": [SENT[0]], "price": SENT[4], "n": 1})
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    values, nested = got
    assert list(values) == SENT
    assert [type(v) for v in values] == [type(v) for v in SENT]
    assert values[0].utcoffset() == dt.timedelta(hours=9)
    assert nested == {"at": [SENT[0]], "price": Decimal("19.90"), "n": 1}


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (Color.RED, "pass .value"),
        (Point(1), "dataclasses.asdict"),
        ({1, 2}, "set"),
        (b"x", "bytes"),
        ({"__tasuki__": "uuid", "value": "x"}, "reserved"),
    ],
)
def test_a_type_that_would_change_is_refused_at_enqueue(value: Any, needle: str) -> None:
    app = tasuki.App("memory://")

    @app.job
    def take(v: Any) -> None: ...

    with pytest.raises(SerializationError, match=needle):
        take.enqueue(value)


def test_a_plain_body_stays_plain_json() -> None:
    codec = tasuki.App("memory://").codec
    assert codec.encode_payload("j", (1, "x", [1.5, None]), {"k": True}) == (
        b'{"args":[1,"x",[1.5,null]],"kwargs":{"k":true}}'
    )
