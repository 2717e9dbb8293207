"""The Python values a JSON job body carries beyond JSON's own, and those it refuses.

JSON has no date, no decimal and no UUID, and orjson would write a `datetime` or a
`UUID` as a plain string: the job would receive a `str` where the caller passed a
`datetime`, silently. Instead, `datetime`, `date`, `time`, `Decimal` and `UUID` travel
as a tagged object, `{"__tasuki__": "datetime", "value": "2026-12-01T09:30:00+00:00"}`,
and arrive as what was sent; an enum or a dataclass (which orjson would turn into its
value or a dict) is refused at enqueue, as sets and bytes are. The decoder only walks a
body that holds the tag, so a body of plain JSON decodes at orjson's speed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

TAG = "__tasuki__"
TAG_BYTES = b'"__tasuki__"'

_PLAIN = frozenset({str, int, float, bool, type(None)})

_ENCODE: dict[type, tuple[str, Callable[[Any], str]]] = {
    dt.datetime: ("datetime", dt.datetime.isoformat),
    dt.date: ("date", dt.date.isoformat),
    dt.time: ("time", dt.time.isoformat),
    Decimal: ("decimal", str),
    uuid.UUID: ("uuid", str),
}
_DECODE: dict[str, Callable[[str], Any]] = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "decimal": Decimal,
    "uuid": uuid.UUID,
}


def _carried(value: Any) -> bool:
    """Whether `value` holds anything `tagged` would change (no allocation: the common
    body of strings and numbers is looked at once)."""
    t = type(value)
    if t in _PLAIN:
        return False
    if t is list or t is tuple:
        items: Any = value
    elif t is dict:
        if TAG in value:
            return True
        items = value.values()
    else:
        return True
    # A loop, not any() over a generator: every enqueue walks its arguments, and the
    # generator's frames were a third of the walk's cost.
    for v in items:  # noqa: SIM110 (the loop is the point)
        if type(v) not in _PLAIN and _carried(v):
            return True
    return False


def tagged(value: Any) -> Any:
    """`value` with every carried type replaced by its tagged object. Raises TypeError
    for an enum, a dataclass, or a dict that uses the tag as a key."""
    if not _carried(value):
        return value
    return _tag(value)


def _tag(value: Any) -> Any:
    t = type(value)
    if t in _PLAIN:
        return value
    if t is list or t is tuple:
        return [_tag(v) for v in value]
    if t is dict:
        if TAG in value:
            raise TypeError(f"a dict key {TAG!r} is reserved for tagged values")
        return {k: _tag(v) for k, v in value.items()}
    encode = _ENCODE.get(t)
    if encode is not None:
        name, text = encode
        return {TAG: name, "value": text(value)}
    if isinstance(value, enum.Enum):
        raise TypeError(
            f"an enum member ({t.__name__}.{value.name}) would arrive as its bare value: "
            "pass .value, or .name"
        )
    if dataclasses.is_dataclass(value):
        raise TypeError(
            f"a dataclass ({t.__name__}) would arrive as a dict: pass dataclasses.asdict(...)"
        )
    return value  # orjson says what it makes of the rest (a set, bytes: refused)


def untagged(value: Any) -> Any:
    """The values `tagged` made, back as what they were."""
    t = type(value)
    if t is list:
        return [untagged(v) for v in value]
    if t is dict:
        name = value.get(TAG)
        if name is not None and len(value) == 2 and "value" in value:
            decode = _DECODE.get(name)
            if decode is None:
                raise ValueError(f"unknown tagged type {name!r}")
            return decode(value["value"])
        return {k: untagged(v) for k, v in value.items()}
    return value
