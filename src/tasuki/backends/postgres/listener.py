"""PostgreSQL wake-ups: one LISTEN session per process, on a thread of its own.

Every write that makes messages ready sends `pg_notify` in its transaction (delivered on
commit). The listener bumps a counter on each notification and wakes the leasers that
wait for it. If its session is lost, waits fall back to polling (logged once) while it
reconnects every second; behind pgBouncer without a direct `listen_url`, waits only poll.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import psycopg

log = logging.getLogger("tasuki.postgres")
# While the LISTEN session is down, waits poll at this interval.
FALLBACK_POLL = 0.25


class Listener:
    def __init__(
        self, conninfo: str, channel: str, application_name: str, *, polls_only: bool
    ) -> None:
        self.conninfo = conninfo
        self.channel = channel
        self.application_name = application_name
        self.polls_only = polls_only
        self._mutex = threading.Lock()
        self._closed = False
        # A counter bumped by the listener thread on every notification.
        self._changed = threading.Condition()
        self._version = 0
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._listening = False

    def hint(self) -> int:
        """The counter before a lease attempt (the session started if need be)."""
        if not self.polls_only:
            self._ensure_thread()
        return self._version

    def wait(self, timeout: float, hint: object) -> None:
        """Until a notification after `hint`, or `timeout` s (one poll while not listening)."""
        until = time.monotonic() + timeout
        with self._changed:
            while self._version == hint:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return
                if not self._listening or self.polls_only:
                    self._changed.wait(min(remaining, FALLBACK_POLL))
                    return
                self._changed.wait(remaining)

    def close(self) -> None:
        with self._mutex:
            self._closed = True
        self._bump()

    def _ensure_thread(self) -> None:
        """Start the listener thread once per process (a forked child starts its own)."""
        if (self._thread is not None and self._pid == os.getpid()) or self._closed:
            return
        with self._mutex:
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._listening = False
                self._changed = threading.Condition()
                self._thread = threading.Thread(
                    target=self._listen, name="tasuki-postgres-listen", daemon=True
                )
                self._thread.start()

    def _bump(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    def _listen(self) -> None:
        """Hold a LISTEN session; on loss, poll (logged) while reconnecting every second."""
        lost_logged = False
        while not self._closed:
            try:
                with psycopg.connect(
                    self.conninfo,
                    autocommit=True,
                    fallback_application_name=self.application_name,
                ) as conn:
                    conn.execute(f'LISTEN "{self.channel}"')
                    self._listening = True
                    if lost_logged:
                        log.warning("PostgreSQL notifications are back; polling stops")
                        lost_logged = False
                    self._bump()  # anything committed while we were away
                    while not self._closed:
                        for _ in conn.notifies(timeout=1.0):
                            self._bump()
            except Exception as exc:  # not only psycopg's: a dead thread would stall waiters
                if self._closed:
                    return
                self._listening = False
                self._bump()
                if not lost_logged:
                    log.warning(
                        "PostgreSQL notification session lost (%s); polling every %.2fs "
                        "until it reconnects",
                        exc,
                        FALLBACK_POLL,
                        exc_info=not isinstance(exc, psycopg.Error),
                    )
                    lost_logged = True
                time.sleep(1.0)
        self._listening = False
