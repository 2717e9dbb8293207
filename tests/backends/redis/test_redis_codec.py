"""Every record a Redis script returns is read by the fields its header declares
(`--- @reply NAME: ...`), by name and in order: no server needed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tasuki.backends.luafiles import reply_fields
from tasuki.backends.redis import codec, scripts

# (script, record) -> the function that reads it
READERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("lease", "leased"): codec.leased("q", 30.0),
    ("dead_letters", "dead_letter"): codec.dead_letter("q"),
    ("dead_letter", "dead_letter"): codec.dead_letter("q"),
    ("in_flight", "in_flight"): codec.in_flight("q"),
    ("inspect", "message"): codec.message("q", "m", "waiting", 0.0, 0.0),
    ("stats", "stats"): codec.stats,
    ("steps", "step"): codec.step,
    ("browse", "listed"): codec.listed("q", "ready", 0.0),
    ("workers", "worker"): codec.worker,
    ("job_stats", "total"): codec.total,
}


@pytest.mark.parametrize(("script", "record"), sorted(READERS))
def test_each_record_is_read_by_the_fields_its_script_declares(script: str, record: str) -> None:
    declared = reply_fields(scripts.source(script))
    assert codec.fields_of(READERS[(script, record)]) == declared[record]


def test_every_declared_record_has_its_reader() -> None:
    declared = {
        (name, record) for name in scripts.NAMES for record in reply_fields(scripts.source(name))
    }
    assert declared == set(READERS)


def test_a_lease_reply_becomes_deliveries() -> None:
    reply = [-1, b"m1", b"body", b'{"h": "v"}', 2, 5, b"1700000000000000", b"n.7", 7, 0]
    reply += [b"m2", b"", b"{}", 1, 3, b"1700000000500000", b"n.1", 1, 2_000_000]
    first, second = codec.deliveries("q", reply, 30.0)
    assert first == ("q", "m1", b"body", {"h": "v"}, 2, 5, 1_700_000_000.0, "n.7", 7, 30.0)
    assert (second.id, second.headers, second.visibility_timeout) == ("m2", {}, 2.0)
    with pytest.raises(ValueError):
        codec.deliveries("q", reply[:-1], 30.0)  # a record cut short is an error
