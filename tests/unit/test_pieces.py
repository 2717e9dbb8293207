"""Small pieces: SQL files, messages, middleware chain, log formats."""

from __future__ import annotations

import logging

import orjson
import pytest

import tasuki
from tasuki.backends.sqlfiles import load_queries, parse_queries
from tasuki.logs import JSONFormatter, PlainFormatter
from tasuki.message import ErrorInfo, Message
from tasuki.middleware import (
    DedupGuard,
    Logging,
    Retries,
    Timeouts,
    Uniqueness,
    default_middleware,
)
from tasuki.middleware.base import Middleware, MiddlewareChain


def test_parse_named_queries() -> None:
    text = "-- name: one\n-- a comment\nSELECT 1;\n\n-- name: two\nSELECT 2;\n"
    assert parse_queries(text) == {"one": "SELECT 1;", "two": "SELECT 2;"}
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")
    with pytest.raises(ValueError, match="empty"):
        parse_queries("-- name: a\n-- nothing\n")


def test_sqlite_queries_load() -> None:
    queries = load_queries("tasuki.backends.sqlite", "queries.sql")
    assert {"insert_message", "lease_rows", "ack", "extend", "release", "bury"} <= set(queries)


def test_message_json_and_error_text() -> None:
    m = Message(id="1", queue="q", body=b'{"a": 1}')
    assert m.json() == {"a": 1}
    assert m.fencing_token == 0
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        info = ErrorInfo.from_exception(exc)
    assert str(info) == "RuntimeError: boom"
    assert "Traceback" in info.traceback


def test_chain_operations() -> None:
    chain = MiddlewareChain(default_middleware())
    assert [type(m) for m in chain] == [Logging, DedupGuard, Uniqueness, Retries, Timeouts]

    class Mine(Middleware):
        options = frozenset({"colour"})

    mine = Mine()
    chain.insert_before(Retries, mine)
    names = [type(m).__name__ for m in chain]
    assert names == ["Logging", "DedupGuard", "Uniqueness", "Mine", "Retries", "Timeouts"]
    chain.remove(mine)
    chain.insert_after("Timeouts", mine)
    assert list(chain)[-1] is mine
    assert "colour" in chain.owned_options()
    with pytest.raises(LookupError):
        chain.remove("Nope")


def test_middleware_options_make_job_options_valid() -> None:
    class Colour(Middleware):
        options = frozenset({"colour"})

    app = tasuki.App("memory://")
    app.middleware.append(Colour())

    @app.job(colour="red")
    def painted() -> None: ...

    assert painted.extra == {"colour": "red"}


def _record(fields: dict[str, object]) -> logging.LogRecord:
    record = logging.LogRecord("tasuki", logging.INFO, __file__, 1, "finished", None, None)
    record.tasuki = fields
    return record


def test_log_formats() -> None:
    fields = {"queue": "q", "job": "j", "id": "abc", "attempt": 2, "duration": 0.25, "why": "a b"}
    plain = PlainFormatter().format(_record(fields))
    assert 'finished queue=q job=j id=abc attempt=2 duration=0.250 why="a b"' in plain
    doc = orjson.loads(JSONFormatter().format(_record(fields)))
    assert doc["event"] == "finished" and doc["id"] == "abc" and doc["attempt"] == 2
