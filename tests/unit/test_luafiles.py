"""The Lua loader: `--- @include` fragments expanded once each, `--- @reply` lines read."""

from __future__ import annotations

from importlib import resources

import pytest

from tasuki.backends.luafiles import lua_source, reply_fields

RECORDS = "tasuki.backends.sqs.records"  # the lease records SQS keeps on Redis
PACKAGES = ("tasuki.backends.redis", RECORDS)


def _scripts(package: str) -> list[str]:
    folder = resources.files(package).joinpath("lua")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua"))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_script_expands_its_includes_once(package: str) -> None:
    names = _scripts(package)
    assert names
    for name in names:
        text = lua_source(package, name)
        assert "--- @include" not in text, name
        for line in text.splitlines():
            if line.startswith("local function "):
                assert text.count(line) == 1, (name, line)


def test_the_lease_record_scripts_share_one_record_parser() -> None:
    for name in (
        "records_take",
        "records_settle",
        "records_settle_steps",
        "records_steps",
        "records_renew",
        "records_keep",
        "records_cancel",
    ):
        raw = resources.files(RECORDS).joinpath("lua", f"{name}.lua").read_text()
        assert '--- @include "lease_record"' in raw and "string.match" not in raw
        assert lua_source(RECORDS, name).count("local function read_lease(") == 1


def test_an_unknown_script_fails() -> None:
    with pytest.raises(FileNotFoundError):
        lua_source("tasuki.backends.redis", "no_such_script")


def test_reply_declarations() -> None:
    text = "-- x\n--- @reply a: one two\n--- @reply b_c: three\n--- @replyx d: no\n"
    assert reply_fields(text) == {"a": ("one", "two"), "b_c": ("three",)}
