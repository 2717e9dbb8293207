"""The dashboard's gatekeeping rules, without a browser (the browser test drives them too)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tasuki.backends.urls import redact as safe_url
from tasuki.cli.main import cli
from tasuki.web.app import _local_path
from tasuki.web.security import Guard, check_bind, host_of, is_loopback, same_origin


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
    assert check_bind(host, "token") is None


def test_binding_elsewhere_without_a_token_is_refused() -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--host", "0.0.0.0", "--url", "memory://"])
    assert result.exit_code == 2
    assert "without a token" in result.output


def test_token_bearer_cookie_and_csrf() -> None:
    guard = Guard("tok")
    assert guard.bearer_ok("Bearer tok") and guard.bearer_ok("bearer tok")
    assert not guard.bearer_ok("Bearer tok2") and not guard.bearer_ok("Basic tok")
    assert not guard.bearer_ok(None)
    assert guard.session_cookie != "tok"  # the cookie is not the token itself
    assert guard.cookie_ok(guard.session_cookie) and not guard.cookie_ok("tok")
    assert guard.csrf_ok(guard.csrf) and not guard.csrf_ok("x") and not guard.csrf_ok(None)
    assert Guard("tok").csrf != guard.csrf
    assert Guard(None).bearer_ok("Bearer anything") is False
    assert Guard(None).cookie_ok("anything") is False


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
    for outside in ("//evil.example/x", "https://evil.example", "", None, "javascript:x"):
        assert _local_path(outside) == "/"
