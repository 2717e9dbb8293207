"""Who may use the dashboard, and which requests may change anything.

- **Binding**: only a loopback address without a token (`check_bind`).
- **Token**: with one, every request carries it, as `Authorization: Bearer TOKEN` (for
  scripts) or as the session cookie the login form sets (for browsers). The cookie holds
  an HMAC of the token, not the token.
- **Host**: without a token, the `Host` header must name the loopback, so a web page
  whose name resolves to 127.0.0.1 (DNS rebinding) cannot talk to the dashboard.
- **Changes** are POSTs only, refused when the browser says they come from another
  origin (`Origin`, else `Referer`), and carrying the form's CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

COOKIE = "tasuki_dashboard"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> str | None:
    """Why binding to `host` is refused, or None when it is allowed."""
    if token or is_loopback(host):
        return None
    return (
        f"refusing to serve the dashboard on {host} without a token: anyone who reaches "
        "the port could re-drive and purge queues. Give --token (or "
        "TASUKI_DASHBOARD_TOKEN), or bind to 127.0.0.1"
    )


def host_of(netloc: str) -> str:
    """`host` of `host[:port]` (IPv6 in brackets kept whole)."""
    if netloc.startswith("["):
        return netloc.split("]", 1)[0] + "]"
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


class Guard:
    """The dashboard's secrets: the token (if any) and the CSRF token of this process."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None
        self.csrf = secrets.token_urlsafe(32)
        self._session = (
            hmac.new(token.encode(), b"tasuki-dashboard-session", hashlib.sha256).hexdigest()
            if token
            else None
        )

    @property
    def session_cookie(self) -> str:
        assert self._session is not None
        return self._session

    def bearer_ok(self, authorization: str | None) -> bool:
        if self.token is None or not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token.encode()
        )

    def cookie_ok(self, cookie: str | None) -> bool:
        return (
            self._session is not None
            and cookie is not None
            and hmac.compare_digest(cookie.encode(), self._session.encode())
        )

    def token_ok(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

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
