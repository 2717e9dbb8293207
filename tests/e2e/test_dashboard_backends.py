"""The dashboard's pages on every backend (no browser: the ASGI app in-process): the
counts it shows, and the reliability counts where the backend keeps them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import tasuki
from tasuki.backends.base import Delivery, Envelope
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
