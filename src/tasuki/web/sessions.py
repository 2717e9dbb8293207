"""Dashboard logins: a random id per login, kept in this process only.

A session ends at logout, after `SESSION_IDLE` unused, `lifetime` after the login, or
when the dashboard restarts. The cookie carries the id; the table holds its SHA-256,
so a lookup by dict key reveals nothing of a valid id through its timing. Each session
has its own CSRF token, which the pages rendered for it put in their forms.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SESSION_LIFETIME = 8 * 3600.0
SESSION_IDLE = 3600.0
MAX_SESSIONS = 1000


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


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()
