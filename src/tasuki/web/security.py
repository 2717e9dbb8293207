"""Who may use the dashboard, and which requests may change anything.

- **Binding**: only a loopback address without a token; any other address needs a
  token of at least `MIN_TOKEN_LENGTH` characters (`check_bind`).
- **Token**: with one, every request carries it, as `Authorization: Bearer TOKEN` (for
  scripts) or as the session cookie the login form sets (for browsers). The cookie holds
  a random session id, not the token (`sessions.py`).
- **Guesses** of the token are slowed per client address (`throttle.py`).
- **Host**: without a token, the `Host` header must name the loopback, so a web page
  whose name resolves to 127.0.0.1 (DNS rebinding) cannot talk to the dashboard.
- **Changes** are POSTs only, refused when the browser says they come from another
  origin (`Origin`, else `Referer`), and carrying the CSRF token of the session that
  rendered the form (without a token nobody logs in: one CSRF token per process).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

from tasuki.web.sessions import Session, Sessions
from tasuki.web.throttle import LoginThrottle

COOKIE = "tasuki_dashboard"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
MIN_TOKEN_LENGTH = 16
MIN_TOKEN_DISTINCT = 5
STRONG_TOKEN_HINT = "openssl rand -hex 24"


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_weakness(token: str) -> str | None:
    """Why `token` is too weak to guard a dashboard others can reach, or None.

    Length and variety only: a token that passes can still be a word someone guesses,
    so make it random (`openssl rand -hex 24`).
    """
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} character(s), fewer than {MIN_TOKEN_LENGTH}"
    if len(set(token)) < MIN_TOKEN_DISTINCT:
        return f"it repeats {len(set(token))} character(s)"
    return None


def check_bind(host: str, token: str | None) -> str | None:
    """Why binding to `host` is refused, or None when it is allowed."""
    if is_loopback(host):
        return None
    if not token:
        return (
            f"refusing to serve the dashboard on {host} without a token: anyone who "
            "reaches the port could re-drive and purge queues. Give --token-file (or "
            "TASUKI_DASHBOARD_TOKEN), or bind to 127.0.0.1"
        )
    weakness = token_weakness(token)
    if weakness:
        return (
            f"refusing to serve the dashboard on {host} with a weak token ({weakness}): "
            f"off the loopback the token must be at least {MIN_TOKEN_LENGTH} varied "
            f"characters, e.g. `{STRONG_TOKEN_HINT}`"
        )
    return None


def host_of(netloc: str) -> str:
    """`host` of `host[:port]` (IPv6 in brackets kept whole)."""
    if netloc.startswith("["):
        return netloc.split("]", 1)[0] + "]"
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


class Guard:
    """The dashboard's secrets: the token (if any), its sessions, and the guesses."""

    def __init__(
        self,
        token: str | None,
        *,
        sessions: Sessions | None = None,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.token = token or None
        self.sessions = sessions if sessions is not None else Sessions()
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self._open_csrf = secrets.token_urlsafe(32)

    def bearer_ok(self, authorization: str | None) -> bool:
        if self.token is None or not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(value.strip())

    def token_ok(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(
            given.encode("utf-8", "surrogateescape"), self.token.encode()
        )

    def csrf_for(self, session: Session | None) -> str | None:
        """The CSRF token a page rendered for `session` carries in its forms: the
        session's own; without a token, the process's; None when logged out."""
        if self.token is None:
            return self._open_csrf
        return session.csrf if session is not None else None

    def csrf_ok(self, given: str | None, session: Session | None) -> bool:
        expected = self.csrf_for(session)
        return (
            expected is not None
            and given is not None
            and hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())
        )

    def host_ok(self, host_header: str | None) -> bool:
        """Without a token, only requests addressed to the loopback by name or address."""
        if self.token is not None:
            return True
        return host_header is not None and is_loopback(host_of(host_header))


def same_origin(origin: str | None, referer: str | None, host_header: str | None) -> bool:
    """Whether a state-changing request comes from the dashboard's own pages.

    The browser's `Origin` (or, lacking it, `Referer`) must name the host the request
    was sent to. A proxy in front must pass the original `Host` on (see
    docs/operating.md). A request with neither header is refused: browsers send
    `Origin` with every POST, and scripts use the bearer token instead.
    """
    source = origin if origin and origin != "null" else referer
    if not source or not host_header:
        return False
    return urlsplit(source).netloc.lower() == host_header.lower()
