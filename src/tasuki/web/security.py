"""Who may use the dashboard, and which requests may change anything.

- **Binding**: only a loopback address without a token; any other address needs a
  token of at least `MIN_TOKEN_LENGTH` characters (`check_bind`).
- **Token**: with one, every request carries it, as `Authorization: Bearer TOKEN` (for
  scripts) or as the session cookie the login form sets (for browsers). The cookie holds
  a random session id, not the token: the session lives in this process only and ends
  at logout, after `SESSION_IDLE` unused, at the end of its lifetime, or when the
  dashboard restarts (`Sessions`).
- **Guesses** of the token are slowed per client address (`LoginThrottle`): a few wrong
  ones are free, then each one more doubles the wait before the next is even checked.
- **Host**: without a token, the `Host` header must name the loopback, so a web page
  whose name resolves to 127.0.0.1 (DNS rebinding) cannot talk to the dashboard.
- **Changes** are POSTs only, refused when the browser says they come from another
  origin (`Origin`, else `Referer`), and carrying the CSRF token of the session that
  rendered the form (without a token nobody logs in: one CSRF token per process).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

COOKIE = "tasuki_dashboard"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
MIN_TOKEN_LENGTH = 16
MIN_TOKEN_DISTINCT = 5
SESSION_LIFETIME = 8 * 3600.0
SESSION_IDLE = 3600.0
MAX_SESSIONS = 1000
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


def client_key(address: str | None) -> str:
    """Whose guesses count together: the address, or for IPv6 its /64 (one host is
    usually given a whole /64, so counting single addresses would not slow it)."""
    if not address:
        return "?"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass
class Session:
    """One login: its CSRF token and when it ends."""

    csrf: str
    started: float
    used: float


class Sessions:
    """The logged-in browsers, by a random id the cookie carries (kept as its hash)."""

    def __init__(
        self,
        lifetime: float = SESSION_LIFETIME,
        idle: float = SESSION_IDLE,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime = lifetime
        self.idle = min(idle, lifetime)
        self._limit = limit
        self._clock = clock
        self._by_hash: dict[str, Session] = {}
        self._mutex = threading.Lock()

    def start(self) -> tuple[str, Session]:
        """A new session: the id for the cookie, and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(csrf=secrets.token_urlsafe(32), started=now, used=now)
        with self._mutex:
            self._prune(now)
            while len(self._by_hash) >= self._limit:  # the least recently used goes
                oldest = min(self._by_hash, key=lambda k: self._by_hash[k].used)
                del self._by_hash[oldest]
            self._by_hash[_digest(session_id)] = session
        return session_id, session

    def find(self, session_id: str | None) -> Session | None:
        """The live session of this id (and it counts as used now), or None."""
        if not session_id:
            return None
        now = self._clock()
        key = _digest(session_id)
        with self._mutex:
            session = self._by_hash.get(key)
            if session is None:
                return None
            if self._expired(session, now):
                del self._by_hash[key]
                return None
            session.used = now
            return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self._mutex:
                self._by_hash.pop(_digest(session_id), None)

    def __len__(self) -> int:
        with self._mutex:
            self._prune(self._clock())
            return len(self._by_hash)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.started >= self.lifetime or now - session.used >= self.idle

    def _prune(self, now: float) -> None:
        for key in [k for k, s in self._by_hash.items() if self._expired(s, now)]:
            del self._by_hash[key]


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    """Wrong tokens per client: `free` of them cost nothing, then each one more doubles
    the wait before that client's next attempt is checked at all (`first_wait`, twice
    that, ... up to `max_wait`). A client quiet for `forget_after` starts afresh. A right
    token does not clear the count: whoever shares an address with a guesser (a NAT, a
    proxy) would otherwise hand the guesser fresh free attempts."""

    def __init__(
        self,
        free: int = 5,
        first_wait: float = 1.0,
        max_wait: float = 300.0,
        forget_after: float = 3600.0,
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free = free
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.forget_after = max(forget_after, max_wait)
        self._limit = limit
        self._clock = clock
        self._failures: dict[str, _Failures] = {}
        self._mutex = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before `client` may try a token again (0: now)."""
        now = self._clock()
        with self._mutex:
            failures = self._current(client, now)
            if failures is None or failures.count < self.free:
                return 0.0
            doublings = min(failures.count - self.free, 64)  # a float, never an overflow
            delay = min(self.max_wait, self.first_wait * 2.0**doublings)
            return max(0.0, failures.last + delay - now)

    def failed(self, client: str) -> None:
        now = self._clock()
        with self._mutex:
            failures = self._current(client, now)
            if failures is None:
                if len(self._failures) >= self._limit:
                    self._forget(now)
                failures = self._failures[client] = _Failures(0, now)
            failures.count += 1
            failures.last = now

    def _current(self, client: str, now: float) -> _Failures | None:
        failures = self._failures.get(client)
        if failures is not None and now - failures.last >= self.forget_after:
            del self._failures[client]
            return None
        return failures

    def _forget(self, now: float) -> None:
        """Room for one more client: the quiet ones go, else the longest quiet."""
        quiet = [k for k, f in self._failures.items() if now - f.last >= self.forget_after]
        for key in quiet:
            del self._failures[key]
        if len(self._failures) >= self._limit:
            del self._failures[min(self._failures, key=lambda k: self._failures[k].last)]


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


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()
