"""The dashboard's pages on every backend (no browser: the ASGI app in-process): the
counts it shows, and the reliability counts where the backend keeps them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import tasuki
from tasuki.backends.base import Delivery, Envelope, Settle
from tasuki.web import create_app
from tests.support.backends import CONTRACT, URL_FACTORIES


@pytest.fixture(params=CONTRACT)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return URL_FACTORIES[request.param](request, tmp_path)


def cell(html: str, name: str) -> str:
    found = re.search(rf'data-reliability="{name}">([^<]*)<', html)
    assert found is not None, name
    return found.group(1)


def test_pages_show_what_the_backend_counts(url: str) -> None:
    app = tasuki.App(url)
    backend = app.backend
    short = max(0.25, backend.capabilities.timer_resolution)
    backend.enqueue(
        [Envelope("dash", "lost", b"{}"), Envelope("dash", "waits", b"{}", delay=600.0)]
    )
    [first] = backend.lease("dash", 1, short)  # a worker that dies holding it
    time.sleep(short + 0.2)
    again: list[Delivery] = []
    deadline = time.monotonic() + 10
    while not again and time.monotonic() < deadline:
        again = backend.lease("dash", 1, 30.0, wait=1.0)
    assert [d.id for d in again] == ["lost"] and again[0].attempt == 2

    client = TestClient(create_app(app), base_url="http://127.0.0.1")
    with client:
        home = client.get("/")
        page = client.get("/queues/dash")
        api = client.get("/api/queues").json()
    assert home.status_code == page.status_code == 200
    assert 'data-queue="dash"' in home.text
    if backend.capabilities.reliability_counts:
        assert (cell(home.text, "redeliveries"), cell(home.text, "leases_lost")) == ("1", "1")
        assert cell(page.text, "expiry_to_start_count") == "1"
        assert api["dash"]["reliability"]["leases_lost"] == 1
        assert api["dash"]["reliability"]["lease_expiry_to_start"]["count"] == 1
    else:
        assert 'id="no-reliability"' in home.text
        assert 'id="reliability"' not in page.text
        assert "reliability" not in api["dash"]
    assert first.attempt == 1
    app.close()


def test_console_pages_answer_or_say_what_the_backend_lacks(url: str) -> None:
    """Each console page on each backend: its content where the backend can, the
    refusal's words where it cannot; never a 500."""
    app = tasuki.App(url)

    @app.job(name="bill", queue="billing")
    def bill(amount: int) -> None: ...

    message_id = bill.enqueue(5)
    caps = app.backend.capabilities
    client = TestClient(create_app(app), base_url="http://127.0.0.1")
    with client:
        for state, able in [
            ("ready", caps.browse_waiting),
            ("delayed", caps.browse_waiting),
            ("in_flight", caps.browsing),
            ("dead", caps.browsing),
        ]:
            page = client.get(f"/queues/billing/browse?state={state}")
            assert page.status_code == 200, (state, page.text)
            assert ('id="refused"' in page.text) is not able, state
        listing = client.get("/queues/billing/browse?state=ready&match=0%3D5").text
        if caps.browse_waiting:
            assert f'data-id="{message_id}"' in listing
        bulk = client.get("/queues/billing/bulk/cancel?state=ready&match=0%3D5")
        assert bulk.status_code == 200
        if caps.browse_waiting:
            assert '<span id="match-count">1</span>' in bulk.text
        for path, able in [
            ("/workers", caps.worker_registry),
            ("/queues/billing/jobs", caps.job_stats),
            ("/queues/billing/jobs/bill?window=15m", caps.job_stats),
        ]:
            page = client.get(path)
            assert page.status_code == 200, (path, page.text)
            assert ('id="refused"' in page.text) is not able, path
        queue_page = client.get("/queues/billing").text
        assert ('id="pause"' in queue_page) is caps.pause
    app.close()


def test_where_only_in_flight_and_dead_are_listed_the_browser_opens_on_them(url: str) -> None:
    """SQS (with a lock store) lists in-flight and dead messages only: the browser opens
    on in-flight ones, shows both with their job, and says why ready and delayed ones
    are not listed, naming the capability."""
    app = tasuki.App(url)
    caps = app.backend.capabilities
    if not caps.browsing or caps.browse_waiting:
        app.close()
        pytest.skip("lists every state, or none")

    @app.job(name="bill", queue="billing")
    def bill(amount: int) -> None: ...

    bill.enqueue(5)
    [leased] = app.backend.lease("billing", 1, 60.0)
    client = TestClient(create_app(app), base_url="http://127.0.0.1")
    with client:
        first = client.get("/queues/billing/browse").text
        assert f'data-id="{leased.id}"' in first and 'data-state="in_flight"' in first
        assert 'id="cancel-matching"' in first
        assert app.backend.settle([Settle.dead(leased.receipt, "broken")]) == [True]
        dead = client.get("/queues/billing/browse?state=dead").text
        assert f'data-id="{leased.id}"' in dead and 'id="retry-matching"' in dead
        for state in ("ready", "delayed"):
            page = client.get(f"/queues/billing/browse?state={state}")
            assert page.status_code == 200 and 'id="refused"' in page.text
            assert "browse_waiting" in page.text
    app.close()
