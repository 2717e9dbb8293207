"""The Lua scripts of the records SQS keeps in a Redis lock store (`sqs/records/lua/`):
every record a script returns is read by the fields its header declares (`--- @reply
NAME: ...`), by name and in order, and each script runs on its own: no server needed."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest

from tasuki.backends.luafiles import lua_source, reply_fields
from tasuki.backends.redis import codec
from tasuki.backends.sqs.records import redis, redis_flows

PACKAGE = "tasuki.backends.sqs.records"
NAMES = sorted(
    p.name[:-4]
    for p in resources.files(PACKAGE).joinpath("lua").iterdir()
    if p.name.endswith(".lua")
)

# (script, record) -> the function that reads it
READERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("records_take", "granted"): redis.granted,
    ("records_steps", "step"): redis_flows.step,
}


@pytest.mark.parametrize(("script", "record"), sorted(READERS))
def test_each_record_is_read_by_the_fields_its_script_declares(script: str, record: str) -> None:
    declared = reply_fields(lua_source(PACKAGE, script))
    assert codec.fields_of(READERS[(script, record)]) == declared[record]


def test_every_declared_record_has_its_reader() -> None:
    assert len(NAMES) == 26  # 17, the 6 of durable steps (records_durable_*), 3 listings
    declared = {
        (name, record) for name in NAMES for record in reply_fields(lua_source(PACKAGE, name))
    }
    assert declared == set(READERS)


def test_every_script_loads_from_this_package() -> None:
    """The records' scripts are this package's: the Redis backend's own list holds none."""
    from tasuki.backends.redis import scripts

    assert not [n for n in scripts.NAMES if n.startswith("records_")]
    for name in NAMES:
        loaded = redis.script(name)
        assert loaded.source == lua_source(PACKAGE, name)
        assert "--- @include" not in loaded.source
