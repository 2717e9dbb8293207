"""The health answers as data (`runtime/health.py`) and their HTTP layer (`runtime/probes.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import tasuki
from tasuki.backends.urls import backend_from_url
from tasuki.errors import InvalidArgument
from tasuki.runtime.health import Check, Ping, Report, WorkerHealth, combine, liveness
from tasuki.runtime.probes import wsgi_app
from tasuki.runtime.pulse import Pulse
from tasuki.testing.faulty import FaultyBackend


def test_liveness_by_the_age_of_each_pulse() -> None:
    fresh, old, waiting = Pulse("fetcher q"), Pulse("lease keeper"), Pulse("settler")
    now = time.monotonic()
    old.at = now - 11
    with waiting.idle():
        waiting.at = now - 100  # waiting for work for a long time: fine
        report = liveness([fresh, old, waiting], stuck_after=10, now=now)
    assert not report.ok
    assert report.checks["fetcher q"].ok
    assert not report.checks["lease keeper"].ok
    assert "stuck (more than 10s)" in report.checks["lease keeper"].detail
    assert report.checks["settler"].ok and "waiting" in report.checks["settler"].detail
    assert not waiting.waiting  # the wait is over: the loop turns again
    assert liveness([fresh, old], stuck_after=10, now=now, stopping=True).ok  # letting jobs end


def test_reports_combine_for_a_supervisor() -> None:
    good = Report(True, {"settler": Check(True, "waiting")})
    bad = Report(False, {"lease keeper": Check(False, "stuck")})
    both = combine({"worker 1": good, "worker 2": bad})
    assert not both.ok
    assert set(both.checks) == {"worker 1 settler", "worker 2 lease keeper"}
    assert combine({"worker 1": good}).ok
    assert both.as_dict()["checks"]["worker 2 lease keeper"] == {"ok": False, "detail": "stuck"}


def test_ping_answers_within_its_time_even_when_the_backend_hangs(sqlite_url: str) -> None:
    backend = FaultyBackend(backend_from_url(sqlite_url))
    ping = Ping(backend, timeout=0.3)
    assert ping().ok
    backend.fail("ping", times=1)
    failed = ping()
    assert not failed.ok and "injected fault" in failed.detail
    backend.stall("ping", seconds=1.0, times=1)
    started = time.monotonic()
    assert ping().detail == "no answer within 0.3s"
    assert time.monotonic() - started < 0.9
    assert ping().detail == "the last ping still has no answer"  # one ping at a time
    time.sleep(1.0)
    assert ping().ok
    backend.close()


def call(app: Callable[..., Any], path: str) -> tuple[str, bytes]:
    seen: list[str] = []
    body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda s, h: seen.append(s)))
    return seen[0], body


def test_worker_health_over_wsgi(sqlite_url: str) -> None:
    app = tasuki.App(sqlite_url)

    @app.job()
    async def wait_a_bit() -> None:
        pass

    worker = app.worker(concurrency=2)
    health = WorkerHealth(worker, stuck_after=5)
    assert health.live().ok and not health.live().checks  # not started: nothing to watch
    wait_a_bit.enqueue()
    worker.run(until_idle=True)  # starts the event loop, then stops
    status, body = call(wsgi_app(health), "/livez")
    assert status == "200 OK"
    doc = orjson.loads(body)
    assert {"fetcher default", "lease keeper", "settler", "event loop"} <= set(doc["checks"])
    status, body = call(wsgi_app(health), "/readyz")
    assert status.startswith("503")  # a stopped worker does not take work
    assert orjson.loads(body)["checks"]["worker"] == {"ok": False, "detail": "stopping"}
    metrics = wsgi_app(health, fallback=lambda e, start: start("200 OK", []) or [b"metrics"])
    assert call(metrics, "/metrics") == ("200 OK", b"metrics")
    assert call(wsgi_app(health), "/metrics")[0] == "404 Not Found"
    app.close()


def test_stuck_after_must_be_positive(sqlite_url: str) -> None:
    app = tasuki.App(sqlite_url)
    with pytest.raises(InvalidArgument, match="stuck_after"):
        WorkerHealth(app.worker(), stuck_after=0)
    app.close()


def test_a_check_that_raises_answers_red_in_json() -> None:
    """A probe is never a bare 500: a check that raised is a red report saying why."""

    class Broken:
        def live(self) -> Report:
            raise RuntimeError("pulses changed while read")

        def ready(self) -> Report:
            return Report(True, {})

    status, body = call(wsgi_app(Broken()), "/livez")
    assert status.startswith("503")
    assert orjson.loads(body) == {
        "ok": False,
        "checks": {
            "probe": {
                "ok": False,
                "detail": "the check failed: RuntimeError('pulses changed while read')",
            }
        },
    }


def test_a_probe_while_the_worker_starts_sees_nothing_half_made(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probes are served before `start` returns: a probe in the middle of it (here,
    as the lease keeper is made) answers, it does not raise (it did: a bare 500)."""
    import tasuki.runtime.worker as worker_module

    app = tasuki.App(sqlite_url)

    @app.job()
    def noop() -> None:
        pass

    worker = app.worker(concurrency=1)
    health = WorkerHealth(worker, stuck_after=5)
    seen: list[Report] = []
    keeper = worker_module.LeaseKeeper

    def made_while_probed(*args: Any, **kwargs: Any) -> Any:
        seen.append(health.live())
        return keeper(*args, **kwargs)

    monkeypatch.setattr(worker_module, "LeaseKeeper", made_while_probed)
    worker.start()
    try:
        assert seen and seen[0].ok and not seen[0].checks
        assert "lease keeper" in health.live().checks
    finally:
        worker.stop(grace=1.0)
        app.close()
