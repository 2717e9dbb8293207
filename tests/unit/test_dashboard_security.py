"""The dashboard's gatekeeping rules, without a browser (the browser test drives them too)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tasuki.backends.urls import redact as safe_url
from tasuki.cli.main import cli
from tasuki.web.app import _local_path
from tasuki.web.security import (
    MIN_TOKEN_LENGTH,
    Guard,
    check_bind,
    host_of,
    is_loopback,
    same_origin,
)
from tasuki.web.sessions import Sessions
from tasuki.web.throttle import LoginThrottle, client_key

STRONG = "9f2c1e7a5b3d4c6e8a0b1f2d"


class Clock:
    """Time that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("::", False),
        ("example.com", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert (check_bind(host, None) is None) is loopback
    assert check_bind(host, STRONG) is None
    assert (check_bind(host, "a") is None) is loopback  # any token on the loopback


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a", "1 character(s)"),
        ("s3cret", "6 character(s)"),
        ("x" * (MIN_TOKEN_LENGTH - 1), f"{MIN_TOKEN_LENGTH - 1} character(s)"),
        ("abababababababababab", "repeats 2 character(s)"),
    ],
)
def test_a_weak_token_is_refused_off_the_loopback(token: str, why: str) -> None:
    refusal = check_bind("0.0.0.0", token)
    assert refusal is not None and "weak token" in refusal and why in refusal
    assert "openssl rand" in refusal
    assert check_bind("127.0.0.1", token) is None


def test_a_weak_token_on_all_addresses_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        cli, ["dashboard", "--host", "0.0.0.0", "--token", "a", "--url", "memory://"]
    )
    assert result.exit_code == 2
    assert "weak token" in result.output and "at least 16" in result.output


def test_binding_elsewhere_without_a_token_is_refused() -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--host", "0.0.0.0", "--url", "memory://"])
    assert result.exit_code == 2
    assert "without a token" in result.output


def test_token_bearer_and_csrf_per_session() -> None:
    guard = Guard("tok")
    assert guard.bearer_ok("Bearer tok") and guard.bearer_ok("bearer tok")
    assert not guard.bearer_ok("Bearer tok2") and not guard.bearer_ok("Basic tok")
    assert not guard.bearer_ok(None) and not guard.bearer_ok("Bearer \udcff")
    assert Guard(None).bearer_ok("Bearer anything") is False
    one_id, one = guard.sessions.start()
    two_id, two = guard.sessions.start()
    assert len({one_id, two_id, "tok"}) == 3  # random ids, not the token nor from it
    assert guard.sessions.find(one_id) is one and guard.sessions.find("tok") is None
    # Each session's forms carry its own CSRF token, refused with any other session.
    assert guard.csrf_for(one) != guard.csrf_for(two)
    assert guard.csrf_ok(one.csrf, one) and not guard.csrf_ok(one.csrf, two)
    assert not guard.csrf_ok(one.csrf, None) and guard.csrf_for(None) is None
    assert not guard.csrf_ok(None, one) and not guard.csrf_ok("x", one)
    # Without a token nobody logs in: one CSRF token for the process.
    open_guard = Guard(None)
    csrf = open_guard.csrf_for(None)
    assert csrf and open_guard.csrf_ok(csrf, None) and not Guard(None).csrf_ok(csrf, None)


def test_sessions_end_at_logout_when_unused_and_at_their_lifetime() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=100.0, idle=30.0, clock=clock)
    ended, _ = sessions.start()
    sessions.end(ended)
    assert sessions.find(ended) is None  # logged out: the same cookie no longer works
    idle, _ = sessions.start()
    busy, _ = sessions.start()
    for _ in range(4):  # used every 20 s: alive; unused for 30 s: ended
        clock.now += 20
        assert sessions.find(busy) is not None
    assert sessions.find(idle) is None
    clock.now += 19.9  # 99.9 s after the login
    assert sessions.find(busy) is not None
    clock.now += 0.1
    assert sessions.find(busy) is None  # its lifetime is over, however busy
    assert len(sessions) == 0
    assert sessions.find(None) is None and sessions.find("") is None


def test_sessions_are_bounded() -> None:
    clock = Clock()
    sessions = Sessions(limit=3, clock=clock)
    ids = []
    for _ in range(4):
        clock.now += 1
        ids.append(sessions.start()[0])
        sessions.find(ids[0])  # the first stays in use
    assert len(sessions) == 3
    assert sessions.find(ids[0]) is not None and sessions.find(ids[1]) is None


def test_wrong_tokens_are_slowed_per_client() -> None:
    clock = Clock()
    throttle = LoginThrottle(free=3, first_wait=1.0, max_wait=8.0, forget_after=60.0, clock=clock)
    for _ in range(3):
        assert throttle.wait("a") == 0
        throttle.failed("a")
    waits = []
    for _ in range(6):  # each wrong token after the free ones doubles the wait, to a cap
        waits.append(throttle.wait("a"))
        clock.now += waits[-1]
        assert throttle.wait("a") == 0
        throttle.failed("a")
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert throttle.wait("b") == 0  # another client is not slowed
    clock.now += 5
    assert throttle.wait("a") == pytest.approx(3.0)
    clock.now += 60  # quiet for a while: afresh
    assert throttle.wait("a") == 0
    throttle.failed("a")
    assert throttle.wait("a") == 0


def test_the_throttle_never_overflows_and_stays_bounded() -> None:
    clock = Clock()
    throttle = LoginThrottle(free=1, max_wait=300.0, limit=2, clock=clock)
    for _ in range(2000):  # a guesser that keeps coming back: 2.0 ** 2000 would overflow
        clock.now += throttle.wait("a")
        throttle.failed("a")
    assert throttle.wait("a") == 300.0
    clock.now += 1
    throttle.failed("b")
    throttle.failed("c")  # full: the client quiet the longest is forgotten
    assert throttle.wait("a") == 0 and throttle.wait("b") > 0


def test_guesses_count_per_address_and_per_ipv6_network() -> None:
    assert client_key("203.0.113.7") == "203.0.113.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") != client_key("2001:db8:1:3::1")
    assert client_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert client_key(None) == "?" and client_key("testclient") == "testclient"


def test_without_a_token_only_loopback_host_names_are_served() -> None:
    open_guard = Guard(None)
    assert open_guard.host_ok("127.0.0.1:8181") and open_guard.host_ok("localhost:8181")
    assert open_guard.host_ok("[::1]:8181")
    assert not open_guard.host_ok("rebind.example:8181")  # DNS rebinding
    assert not open_guard.host_ok(None)
    assert Guard("t").host_ok("dashboard.example.com")
    assert host_of("[::1]:80") == "[::1]" and host_of("a:1") == "a" and host_of("::1") == "::1"


def test_same_origin() -> None:
    host = "127.0.0.1:8181"
    assert same_origin("http://127.0.0.1:8181", None, host)
    assert same_origin("https://127.0.0.1:8181", None, host)  # TLS ended by a proxy
    assert not same_origin("http://127.0.0.1:9999", None, host)
    assert not same_origin("http://evil.example", "http://127.0.0.1:8181/x", host)
    assert same_origin(None, "http://127.0.0.1:8181/queues/q", host)
    assert same_origin("null", "http://127.0.0.1:8181/queues/q", host)
    assert not same_origin(None, None, host)


def test_passwords_are_never_shown() -> None:
    assert safe_url("redis://:hunter2@cache:6379/0") == "redis://:***@cache:6379/0"
    assert (
        safe_url("postgresql://app:hunter2@db.internal/jobs?schema=t")
        == "postgresql://app:***@db.internal/jobs?schema=t"
    )
    assert safe_url("sqlite:///tasuki.db") == "sqlite:///tasuki.db"
    # Passwords in options: another URL's (the SQS lock store, PostgreSQL's LISTEN
    # session) and secret-looking ones; the other options stay as they were.
    assert (
        safe_url("sqs://eu-west-1?prefix=app-&locks=redis://:hunter2@cache:6379/1")
        == "sqs://eu-west-1?prefix=app-&locks=redis://:***@cache:6379/1"
    )
    shown = safe_url(
        "postgresql://app@db/jobs?password=hunter2&listen_url=postgresql://app:hunter3@db/jobs"
        "&sslmode=require"
    )
    assert "hunter" not in shown
    assert shown.startswith("postgresql://app@db/jobs?password=***&listen_url=")
    assert shown.endswith("&sslmode=require")
    assert "hunter" not in safe_url("redis://:hunter2@cache:notaport/0")


def test_login_redirects_stay_on_the_site() -> None:
    assert _local_path("/queues/a") == "/queues/a"
    for outside in (
        "//evil.example/x",
        "/\\evil.example",  # browsers read a backslash as a slash
        "/x\\y",
        "/\n//evil.example",
        "https://evil.example",
        "",
        None,
        "javascript:x",
    ):
        assert _local_path(outside) == "/"
