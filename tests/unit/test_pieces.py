"""Small pieces: SQL files, messages, middleware chain, log formats."""

from __future__ import annotations

import logging

import orjson
import pytest

import tasuki
from tasuki.backends.sqlfiles import load_queries, parse_queries
from tasuki.core.message import ErrorInfo, Message
from tasuki.logs import JSONFormatter, PlainFormatter
from tasuki.middleware import (
    DedupGuard,
    Logging,
    Retries,
    Timeouts,
    TraceContext,
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
    assert {"insert_message", "lease", "ack", "extend", "release", "dead"} <= set(queries)


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
    assert [type(m) for m in chain] == [
        TraceContext,
        Logging,
        DedupGuard,
        Uniqueness,
        Retries,
        Timeouts,
    ]

    class Mine(Middleware):
        options = frozenset({"colour"})

    mine = Mine()
    chain.insert_before(Retries, mine)
    names = [type(m).__name__ for m in chain]
    assert names == [
        "TraceContext",
        "Logging",
        "DedupGuard",
        "Uniqueness",
        "Mine",
        "Retries",
        "Timeouts",
    ]
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


def test_delivered_message_is_the_same_value_as_one_made_by_hand() -> None:
    """`delivered` sets the slots by position: it must follow the dataclass's fields."""
    import dataclasses

    from tasuki.core.message import _FIELDS, Lease, delivered

    assert [f.name for f in dataclasses.fields(Message)] == [*_FIELDS, "lease", "max_attempts"]
    lease = Lease("t.1", 1, 30.0)
    made = delivered("id", "q", b"{}", {"h": "v"}, 2, 1.5, "job", (1,), {"k": 2}, lease, 5)
    assert made == Message("id", "q", b"{}", {"h": "v"}, 2, 1.5, "job", (1,), {"k": 2}, lease, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.id = "other"  # type: ignore[misc]


def test_pace_learns_which_jobs_run_inline() -> None:
    from tasuki.runtime.pace import FAST, QUALIFY, Pace

    app = tasuki.App("memory://")

    @app.job
    def quick() -> None: ...

    @app.job(timeout=5)
    def bounded() -> None: ...

    @app.job
    async def waits() -> None: ...

    pace = Pace()
    for job in (quick, bounded, waits):
        for _ in range(QUALIFY - 1):
            pace.record(job, FAST / 10)
        assert not pace.inline(job)  # not proven yet
        pace.record(job, FAST / 10)
    assert pace.inline(quick)
    assert not pace.inline(bounded)  # its timeout interrupts its thread: never the fetcher
    assert not pace.inline(waits)
    pace.record(quick, 0.5)  # one slow run
    assert not pace.inline(quick)
    runs = 0
    while not pace.inline(quick):
        pace.record(quick, FAST / 10)
        runs += 1
    assert 16 < runs < 200  # back after a few dozen fast runs
    assert not Pace(enabled=False).inline(quick)


def test_after_hooks_run_in_chain_order_with_generators() -> None:
    """`after(ctx, outcome)` runs at its middleware's place on the way out, and only for
    runs that got past that middleware on the way in."""
    from tasuki.middleware.base import Outcome

    app = tasuki.App("memory://")
    trail: list[str] = []

    class Gen(Middleware):
        def execute(self, ctx: tasuki.Context):  # type: ignore[no-untyped-def]
            trail.append("in:gen")
            outcome = yield
            trail.append(f"out:gen:{outcome.action}")

    class After(Middleware):
        def __init__(self, name: str, skip: bool = False) -> None:
            self.name, self.skip = name, skip

        def execute(self, ctx: tasuki.Context) -> None:
            trail.append(f"in:{self.name}")
            if self.skip and ctx.message.args[0] == "skip":
                raise tasuki.Skip("asked to")

        def after(self, ctx: tasuki.Context, outcome: Outcome) -> None:
            trail.append(f"out:{self.name}:{outcome.action}")
            if outcome.error is not None and outcome.action is None:
                outcome.decide("dead", reason="seen by " + self.name)

    app.middleware.append(After("a"))
    app.middleware.append(Gen())
    app.middleware.append(After("b", skip=True))

    @app.job
    def work(what: str) -> None:
        trail.append("job")
        if what == "fail":
            raise ValueError(what)

    for what in ("ok", "skip", "fail"):
        trail.clear()
        work.enqueue(what)
        app.worker(concurrency=1).run(until_idle=True, timeout=10)
        if what == "ok":
            assert trail == [
                "in:a",
                "in:gen",
                "in:b",
                "job",
                "out:b:ack",
                "out:gen:ack",
                "out:a:ack",
            ]
        elif what == "skip":
            assert trail == ["in:a", "in:gen", "in:b", "out:gen:skip", "out:a:skip"]
        else:
            assert trail == [
                "in:a",
                "in:gen",
                "in:b",
                "job",
                "out:b:None",
                "out:gen:dead",
                "out:a:dead",
            ]
    [dead] = app.dead_letters()
    assert dead.reason == "seen by b"


def test_a_settled_delivery_leaves_no_garbage_cycle() -> None:
    """Every delivery's objects are freed by reference counting when it is settled: a cycle
    per message would make the collector run every few hundred messages."""
    import gc

    from tasuki.core.context import Context
    from tasuki.runtime.heartbeat import Held

    app = tasuki.App("memory://")

    @app.job
    def tiny(n: int) -> None: ...

    tiny.enqueue_many([(n,) for n in range(300)])
    gc.collect()
    gc.disable()
    try:
        app.worker(concurrency=4).run(until_idle=True, timeout=30)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, Context | Held | Message)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert app.stats()["ready"] == 0
    assert leaked == []


def test_new_ids_are_time_ordered_version_7_uuids() -> None:
    """UUID layout, version 7: the millisecond they were made, then random bits; ids made
    later sort after (what keeps a batch's entries together in a SQL id index)."""
    import time
    import uuid

    from tasuki.core.message import new_id, new_ids

    before = time.time_ns() // 1_000_000
    ids = {new_id() for _ in range(500)} | set(new_ids(500))
    after = time.time_ns() // 1_000_000
    assert len(ids) == 1000
    for i in list(ids)[:50]:
        parsed = uuid.UUID(hex=i)
        assert (parsed.version, parsed.variant, parsed.hex) == (7, uuid.RFC_4122, i)
        assert before <= int(i[:12], 16) <= after
    first = new_ids(3)
    time.sleep(0.002)
    assert max(first) < min(new_ids(3))


def test_pace_sends_a_job_that_mostly_waits_back_to_the_pool_for_good() -> None:
    from tasuki.runtime.pace import FAST, JUDGE, QUALIFY, Pace

    app = tasuki.App("memory://")

    @app.job
    def computes() -> None: ...

    @app.job
    def waits() -> None: ...

    pace = Pace()
    for job in (computes, waits):
        for _ in range(QUALIFY):
            pace.record(job, FAST / 10)
        assert pace.inline(job)
    for n in range(3 * JUDGE):
        # One sample in eight interrupted by another thread: still a job that computes.
        pace.record_busy(computes, 20e-6, 2e-6 if n % JUDGE == 0 else 19e-6)
        pace.record_busy(waits, 100e-6, 10e-6)  # a network round trip, mostly waited for
    assert pace.inline(computes)
    assert not pace.waits(computes)
    assert pace.waits(waits)
    assert not pace.inline(waits)
    for _ in range(10 * QUALIFY):
        pace.record(waits, FAST / 10)
    assert not pace.inline(waits)  # fast, but it waits: the pool overlaps its waits
