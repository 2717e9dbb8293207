"""Result waiters on Redis block on the message's notify list (BLMOVE) instead of
polling, counted by the server itself (INFO commandstats)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from tasuki.backends.base import Effects, Settle
from tasuki.backends.redis import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.core.flowrecords import ResultRecord
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import RedisServer
from tests.backends.script_calls import script_calls


@pytest.fixture
def backend(counted_redis: RedisServer) -> Iterator[RedisBackend]:
    # socket_timeout=2: a blocked read lasts at most 1 s before it reads again.
    url = f"{counted_redis.url()}?prefix=t-{uuid.uuid4().hex[:12]}:&socket_timeout=2"
    b = backend_from_url(url)
    assert isinstance(b, RedisBackend)
    yield b
    b.close()


def _calls(backend: RedisBackend, command: str) -> int:
    text = backend._command("INFO", "commandstats").decode()
    for line in text.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return int(line.split("calls=", 1)[1].split(",", 1)[0])
    return 0


def test_a_waiter_costs_one_read_per_blocked_second(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "w", keep_result=60.0)])
    scripts, blocks = script_calls(backend._command), _calls(backend, "blmove")
    started = time.monotonic()
    still = backend.wait_result("q", "w", 2.5)
    assert still is not None and still.state == "pending"
    assert 2.4 <= time.monotonic() - started < 3.5
    # Blocks of at most 1 s (socket_timeout / 2): three, each followed by one read.
    assert _calls(backend, "blmove") - blocks == 3
    assert script_calls(backend._command) - scripts == 4


def test_a_settle_wakes_every_waiter_at_once(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "w", keep_result=60.0)])
    [d] = backend.lease("q", 1, 30.0)
    got: list[tuple[float, ResultRecord | None]] = []

    def wait() -> None:
        found = backend.wait_result("q", "w", 10.0)
        got.append((time.monotonic(), found))

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.3)
    settled = time.monotonic()
    assert backend.settle([Settle.ack(d.receipt, Effects(result=b'"done"'))]) == [True]
    for t in waiters:
        t.join()
    assert [r.value for _, r in got if r is not None] == [b'"done"'] * 3
    # Woken by the settle, not by the end of a 1 s block.
    assert max(at for at, _ in got) - settled < 0.5


def test_acks_with_and_without_results_in_one_script_call(backend: RedisBackend) -> None:
    backend.enqueue([env("q", i, keep_result=60.0) for i in range(3)] + [env("q", "plain")])
    leased = sorted(backend.lease("q", 4, 30.0), key=lambda d: d.id)
    before = script_calls(backend._command)
    items = [
        Settle.ack(leased[0].receipt, Effects(result=b"[0]")),
        Settle.ack(leased[1].receipt),  # kept as null
        Settle.ack(leased[2].receipt, Effects(result=b"2")),
        Settle.ack(leased[3].receipt, Effects(result=b"3")),  # not kept
    ]
    assert backend.settle(items) == [True] * 4
    assert script_calls(backend._command) - before == 1
    values = [backend.result("q", i) for i in ("m0", "m1", "m2", "plain")]
    assert [v.value if v else None for v in values] == [b"[0]", b"null", b"2", None]


def test_a_result_nobody_waits_for_pushes_no_wake_up(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "alone", keep_result=60.0)])
    [d] = backend.lease("q", 1, 30.0)
    assert backend.settle([Settle.ack(d.receipt, Effects(result=b"1"))]) == [True]
    notify = backend.keys.queue("q").base + "n:alone"
    assert backend._command("EXISTS", notify) == 0
    kept = backend.result("q", "alone")
    assert kept is not None and (kept.state, kept.value) == ("ok", b"1")


def test_a_cancel_wakes_the_waiters_with_no_result(backend: RedisBackend) -> None:
    backend.enqueue([env("q", "c", keep_result=60.0)])
    got: list[tuple[float, ResultRecord | None]] = []

    def wait() -> None:
        found = backend.wait_result("q", "c", 10.0)
        got.append((time.monotonic(), found))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    cancelled = time.monotonic()
    assert backend.cancel("q", "c") == "removed"
    waiter.join()
    [(at, found)] = got
    assert found is None
    assert at - cancelled < 0.5  # not at the end of a 1 s block
