"""The console on Redis (docs/redis.md, "The console"): what each listing walks, what a
worker's pause read costs, the job filter's bounded walk, the rollups' expiry, and the
registry and pauses kept apart from the queues' keys."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import orjson
import pytest

import tasuki
from tasuki.backends.base import Effects, Envelope, FlowFailure, Settle
from tasuki.backends.redis import RedisBackend, console
from tasuki.backends.urls import backend_from_url
from tasuki.core.console import JobTally, WorkerInfo
from tasuki.core.message import FLOW_HEADER, JOB_HEADER, ErrorInfo
from tasuki.errors import InvalidArgument
from tasuki.testing.contract.flows import _record
from tasuki.testing.servers import RedisServer


@pytest.fixture
def backend(counted_redis: RedisServer) -> Iterator[RedisBackend]:
    b = backend_from_url(f"{counted_redis.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def _job(queue: str, id: str, job: str, **fields: object) -> Envelope:
    return Envelope(queue, id, b"{}", headers={JOB_HEADER: job}, **fields)  # type: ignore[arg-type]


def test_a_workers_pause_read_is_one_command(backend: RedisBackend) -> None:
    backend.pause("q")
    before = backend._command("INFO", "commandstats")
    assert backend.paused() == {"q"}
    after = backend._command("INFO", "commandstats")
    assert _calls(after, "smembers") - _calls(before, "smembers") == 1


def _calls(info: bytes | str, command: str) -> int:
    text = info.decode() if isinstance(info, bytes) else info
    for line in text.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def test_a_job_filter_walks_a_bounded_stretch_and_goes_on_by_cursor(
    backend: RedisBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `JOB_WALK` messages of other jobs, a page ends short (even empty) with a
    cursor, and the listing goes on from there to the rare job's messages."""
    monkeypatch.setattr(console, "JOB_WALK", 10)
    backend.enqueue([_job("q", f"a{n:02}", "common") for n in range(25)])
    backend.enqueue([_job("q", "rare", "rare")])
    page = backend.browse("q", "ready", job="rare", limit=5)
    assert page.items == [] and page.cursor is not None
    pages = 1
    found = []
    while page.cursor is not None:
        page = backend.browse("q", "ready", job="rare", limit=5, cursor=page.cursor)
        found += [item.info.id for item in page.items]
        pages += 1
    assert found == ["rare"]
    assert pages == 3  # 10 + 10 walked past, then the last 5 and the rare one


def _bill(queue: str, id: str, *args: object, **kwargs: object) -> Envelope:
    body = orjson.dumps({"args": list(args), "kwargs": kwargs})
    return Envelope(queue, id, body, headers={JOB_HEADER: "bill"})


def test_a_match_is_filtered_in_the_script_within_a_bounded_walk(
    backend: RedisBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what may match comes back; past `MATCH_WALK` messages walked a page ends
    short with a cursor, and the listing goes on from there."""
    monkeypatch.setattr(console, "MATCH_WALK", 10)
    app = tasuki.App(backend=backend)
    backend.enqueue([_bill("q", f"a{n:02}", n, customer="other") for n in range(25)])
    backend.enqueue([_bill("q", "acme", 99, customer="acme")])
    page = backend.browse_matching("q", "ready", {"customer": "acme"}, limit=5)
    assert page is not None and page.items == [] and page.cursor is not None
    assert _every_match(app, {"customer": "acme"}) == ["acme"]
    assert _every_match(app, {"0": 99}) == ["acme"]
    assert _every_match(app, {"0": 3, "customer": "other"}) == ["a03"]


def _every_match(app: tasuki.App, match: dict[str, object]) -> list[str]:
    found: list[str] = []
    cursor = None
    for _ in range(20):
        page = app.messages("q", match=match, limit=5, cursor=cursor)
        found += [m.id for m in page.items]
        if page.cursor is None:
            return found
        cursor = page.cursor
    raise AssertionError("the listing did not end")


def test_a_match_the_script_cannot_compare_is_left_to_the_app(backend: RedisBackend) -> None:
    """0 and 1 equal False and True in Python, not in Lua; None, lists and objects are
    not compared there: those keys are checked by the app only, as on every backend."""
    assert console.match_rules({"a": "x", "b": 7, "c": 1, "d": True, "e": None}) == [
        ["a", "x", -1],
        ["b", 7, -1],
    ]
    app = tasuki.App(backend=backend)
    backend.enqueue([_bill("q", "t", flag=True, n=7), _bill("q", "f", flag=False, n=7)])
    assert [m.id for m in app.messages("q", match={"flag": 1, "n": 7}).items] == ["t"]
    assert [m.id for m in app.messages("q", match={"flag": True}).items] == ["t"]
    assert [m.id for m in app.messages("q", match={"n": 7.0}).items] == ["t", "f"]
    assert app.messages("q", match={"n": "7"}).items == []


def test_a_priority_message_is_ready_at_its_visible_time_in_either_zset(
    backend: RedisBackend,
) -> None:
    """A ready message of priority > 0 ranks ahead in `waiting`; one delayed waits in
    `delayed`: both listings merge the two ZSETs and show the visible time."""
    backend.enqueue([_job("q", "plain", "j"), _job("q", "high", "j", priority=5)])
    backend.enqueue([_job("q", "later", "j", priority=5, delay=600.0)])
    backend.enqueue([_job("q", "soon", "j", priority=5, delay=0.05)])
    time.sleep(0.2)  # due, still in `delayed`: no lease has moved it into `waiting` yet
    ready = backend.browse("q", "ready").items
    assert [i.info.id for i in ready] == ["high", "plain", "soon"]  # the two ZSETs merged
    assert [i.info.id for i in backend.browse("q", "ready", newest_first=True).items] == [
        "soon",
        "plain",
        "high",
    ]
    assert all(abs(i.info.visible_at - time.time()) < 5.0 for i in ready)  # type: ignore[operator]
    [later] = backend.browse("q", "delayed").items
    assert later.info.id == "later" and later.info.visible_at > time.time() + 500  # type: ignore[operator]


def test_rollups_expire_a_day_after_their_minute(backend: RedisBackend) -> None:
    now = time.time()
    minute = now - now % 60.0
    info = WorkerInfo("w1", "h", 1, "1", ("q",), 1, now)
    backend.announce(info, [JobTally("q", "a", minute, {"succeeded": 1})])
    key = f"{backend.keys.queue('q').base}js:{int(minute)}"
    ttl = backend._command("PTTL", key)
    assert 86400_000 < ttl <= 86400_000 + 120_000
    backend.announce(info, [JobTally("q", "a", minute - 2 * 86400.0, {"succeeded": 1})])
    assert (
        backend._command("EXISTS", f"{backend.keys.queue('q').base}js:{int(minute - 2 * 86400.0)}")
        == 0
    )


def test_a_cancel_of_a_dead_letter_drops_its_message(backend: RedisBackend) -> None:
    backend.enqueue([Envelope("q", "x", b"{}")])
    [d] = backend.lease("q", 1, 30.0)
    backend.settle([Settle.dead(d.receipt, "no")])
    assert backend.cancel_many("q", ["x"], "dead") == [True]
    assert backend._command("EXISTS", backend.keys.queue("q").base + "m:x") == 0
    assert backend.dead_letters("q") == []


@pytest.mark.parametrize("cursor", ["", "nope", "12", "x:id"])
def test_a_cursor_not_of_a_listing_is_refused(backend: RedisBackend, cursor: str) -> None:
    with pytest.raises(InvalidArgument, match="not a listing cursor"):
        backend.browse("q", "ready", cursor=cursor)


def test_retrying_the_dead_step_a_flow_failed_on_puts_the_flow_back_to_running(
    backend: RedisBackend,
) -> None:
    """As a redrive does (`redrive.lua`), in the same script: `retry_many(..., "dead")`
    clears the failure of the flow whose failure the message is, and only that one's."""
    flow_id = "rt"
    header = {FLOW_HEADER: orjson.dumps({"f": flow_id}).decode()}
    backend.start_flow(
        _record(flow_id, "q", "0.0", "0.1"),
        [
            Envelope("q", f"{flow_id}.0.{i}", b"{}", keep_id=3600.0, headers=header)
            for i in range(2)
        ],
    )
    error = ErrorInfo("ValueError", "bad", "tb")
    for member in sorted(backend.lease("q", 2, 30.0), key=lambda d: d.id):
        step = member.id.removeprefix(f"{flow_id}.")
        failure = FlowFailure(flow_id, step, "job", "q", member.id, error, time.time())
        effects = Effects(flow=flow_id, failed=failure)
        assert backend.settle([Settle.dead(member.receipt, "gave up", error, effects)]) == [True]
    assert backend.retry_many("q", [f"{flow_id}.0.1"], "dead") == [True]  # not the failure
    record = backend.flow(flow_id)
    assert record is not None and record.failure is not None
    assert backend.retry_many("q", [f"{flow_id}.0.0", "nobody"], "dead") == [True, False]
    record = backend.flow(flow_id)
    assert record is not None and (record.failure, record.result) == (None, None)
