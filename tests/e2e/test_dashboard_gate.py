"""The dashboard's gate over HTTP, in-process (the ASGI app, no browser): sessions that
end, wrong tokens slowed, CSRF tokens bound to their session, the headers on every
response, errors included, and a page offset out of range."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import tasuki
from tasuki.testing import FaultyBackend
from tasuki.web.app import MAX_OFFSET, create_app
from tasuki.web.headers import CONTENT_SECURITY_POLICY
from tasuki.web.sampler import Sampler
from tasuki.web.security import COOKIE
from tasuki.web.throttle import LoginThrottle

BASE = "http://127.0.0.1:8181"
TOKEN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
BROWSER = {"origin": BASE, "accept": "text/html"}


@pytest.fixture
def app() -> Iterator[tasuki.App]:
    app = tasuki.App("memory://")
    app.send("emails", b"{}")
    yield app
    app.close()


def client_for(app: tasuki.App, **options: object) -> TestClient:
    sampler = Sampler(app, every=60.0)
    return TestClient(
        create_app(app, sampler=sampler, **options),  # type: ignore[arg-type]
        base_url=BASE,
        raise_server_exceptions=False,
    )


def log_in(client: TestClient, token: str = TOKEN) -> str:
    """Logs in through the form; the session cookie it got."""
    response = client.post(
        "/login", data={"token": token, "next": "/"}, headers=BROWSER, follow_redirects=False
    )
    assert response.status_code == 303, response.text
    return response.cookies[COOKIE]


def use(client: TestClient, session: str) -> None:
    """From now on the client sends this session cookie, and no other."""
    client.cookies.clear()
    client.cookies.set(COOKIE, session)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found is not None and found.group(1), html
    return found.group(1)


def test_logout_ends_the_session_and_the_same_cookie_is_refused(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN) as client:
        first = log_in(client)
        client.cookies.clear()
        second = log_in(client)
        assert first != second and TOKEN not in first  # random ids, not the token
        use(client, first)
        page = client.get("/queues/emails")
        assert page.status_code == 200
        client.post("/logout", data={"csrf": csrf_of(page.text)}, headers=BROWSER)
        # The browser drops the cookie; one that kept it (or stole it) is refused too.
        use(client, first)
        assert client.get("/api/queues").status_code == 401
        refused = client.get("/queues/emails", headers={"accept": "text/html"})
        assert refused.url.path == "/login"
        use(client, second)  # another login is not ended by this logout
        assert client.get("/api/queues").status_code == 200


def test_a_session_ends_at_its_lifetime(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN, session_lifetime=0.5) as client:
        response = client.post(
            "/login", data={"token": TOKEN}, headers=BROWSER, follow_redirects=False
        )
        assert "Max-Age=0" not in response.headers["set-cookie"]
        assert client.get("/api/queues").status_code == 200
        time.sleep(0.6)
        assert client.get("/api/queues").status_code == 401


def test_the_csrf_token_belongs_to_the_session(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN) as client:
        login_page = client.get("/login")
        assert login_page.status_code == 200
        assert 'name="csrf"' not in login_page.text  # nothing handed out before a login
        mine = log_in(client)
        my_csrf = csrf_of(client.get("/queues/emails/confirm?action=purge").text)
        client.cookies.clear()
        log_in(client)  # another browser's session
        theirs = csrf_of(client.get("/queues/emails/confirm?action=purge").text)
        assert theirs != my_csrf
        # My CSRF token with their session cookie does nothing.
        purge = {"csrf": my_csrf, "confirm": "yes"}
        refused = client.post("/queues/emails/purge", data=purge, headers=BROWSER)
        assert refused.status_code == 403 and app.stats("emails")["ready"] == 1
        use(client, mine)
        done = client.post("/queues/emails/purge", data=purge, headers=BROWSER)
        assert done.status_code == 200 and app.stats("emails")["ready"] == 0


def test_wrong_tokens_are_slowed_per_address(app: tasuki.App) -> None:
    throttle = LoginThrottle(free=3, first_wait=30.0)
    guesser = client_for(app, token=TOKEN, throttle=throttle)
    with guesser:
        for guess in ("a", "b", "c"):
            assert guesser.post("/login", data={"token": guess}, headers=BROWSER).status_code == 401
        # Now not even the right token is checked from this address, by form or bearer.
        slowed = guesser.post("/login", data={"token": TOKEN}, headers=BROWSER)
        assert slowed.status_code == 429 and slowed.headers["retry-after"] in ("30", "29")
        assert "try again in" in slowed.text and COOKIE not in slowed.cookies
        bearer = guesser.get("/api/queues", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 429
    # Another address is not slowed by this one's guesses.
    other = TestClient(guesser.app, base_url=BASE, client=("203.0.113.9", 4000))
    assert other.get("/api/queues", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_wrong_bearer_tokens_count_too(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN, throttle=LoginThrottle(free=2, first_wait=30.0)) as client:
        for _ in range(2):
            wrong = client.get("/api/queues", headers={"authorization": "Bearer guess"})
            assert wrong.status_code == 401
        right = client.get("/api/queues", headers={"authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 429


def assert_secured(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["x-content-type-options"] == "nosniff", headers
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store"


def test_every_response_carries_the_security_headers(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN) as client:
        assert_secured(refused := client.get("/api/queues"))
        assert refused.status_code == 401
        log_in(client)
        for path, status in [
            ("/", 200),
            ("/queues/emails", 200),
            ("/no/such/page", 404),
            ("/queues/a{b}", 400),
            ("/queues/emails/confirm?action=nope", 400),
        ]:
            response = client.get(path)
            assert response.status_code == status, (path, response.text)
            assert_secured(response)
    with client_for(app) as open_client:  # without a token: the Host check's refusal
        assert_secured(rebound := open_client.get("/", headers={"host": "rebind.example"}))
        assert rebound.status_code == 421


def test_an_unexpected_error_is_a_500_with_the_headers_and_no_details(app: tasuki.App) -> None:
    faulty = FaultyBackend(app.backend)
    broken = tasuki.App("memory://", backend=faulty)
    with client_for(broken) as client:
        faulty.fail("stats", times=None, error=RuntimeError("secret detail"))
        response = client.get("/queues/emails")
    assert response.status_code == 500
    assert_secured(response)
    assert "secret detail" not in response.text and "Traceback" not in response.text


@pytest.mark.parametrize(
    ("offset", "status"),
    [
        ("", 200),
        ("0", 200),
        ("50", 200),
        (str(MAX_OFFSET), 200),
        (str(MAX_OFFSET + 1), 400),
        ("9" * 30, 400),  # past any engine's integers: was a 500
        ("9" * 5000, 400),
        ("-1", 400),
        ("abc", 400),
        ("١٢", 400),  # digits, but not ASCII ones
    ],
)
def test_a_page_offset_out_of_range_is_a_400(tmp_path: Path, offset: str, status: int) -> None:
    sqlite = tasuki.App(f"sqlite:///{tmp_path / 'offset.db'}")  # where a huge one failed
    with client_for(sqlite) as client:
        response = client.get("/queues/emails", params={"offset": offset})
    sqlite.close()
    assert response.status_code == status, response.text
    if status == 400:
        assert "offset must be a whole number" in response.text
        assert_secured(response)


def test_an_oversized_form_is_refused_before_the_token_is_read(app: tasuki.App) -> None:
    with client_for(app, token=TOKEN) as client:
        response = client.post(
            "/login",
            content=b"token=" + b"x" * 100_000,
            headers=BROWSER | {"content-type": "application/x-www-form-urlencoded"},
        )
    assert response.status_code == 400 and "more than" in response.text


def test_the_sampler_survives_an_unexpected_error(app: tasuki.App) -> None:
    faulty = FaultyBackend(app.backend)
    broken = tasuki.App("memory://", backend=faulty)
    faulty.fail("stats", times=2, error=RuntimeError("not a TasukiError"))
    sampler = Sampler(broken, every=0.1)
    sampler.start()
    try:
        deadline = time.monotonic() + 10
        while not sampler.samples("emails") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert faulty.injected["stats"] == 2
    assert sampler.samples("emails"), "the sampler stopped at the first unexpected error"
