"""One warning per outage, not one per retry.

A loop that talks to the backend (fetching, settling, extending leases) retries with
backoff while the backend is down. It says so once, at WARNING, when the first call
fails; the retries that fail after it are logged at DEBUG; the first call that works
again logs, at WARNING too, how long the outage lasted and how many calls failed. A
ten-second Redis restart is then two lines per loop, whatever the backoff.
"""

from __future__ import annotations

import logging
import threading
import time

from tasuki import logs


class Outage:
    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None
        self.failures = 0
        self._mutex = threading.Lock()

    def failed(self, exc: BaseException, retry_in: float | None = None) -> None:
        with self._mutex:
            first = self.since is None
            if first:
                self.since = time.monotonic()
            self.failures += 1
        retry = f", retrying in {retry_in:.1f}s" if retry_in is not None else ", will retry"
        level = logging.WARNING if first else logging.DEBUG
        if first:
            logs.logger.log(
                level, "%s failed%s (logged once until it works again): %s", self.what, retry, exc
            )
        else:
            logs.logger.log(level, "%s failed again%s: %s", self.what, retry, exc)

    def worked(self) -> None:
        if self.since is None:  # the hot path: one attribute read
            return
        with self._mutex:
            since, failures = self.since, self.failures
            self.since, self.failures = None, 0
        if since is not None:
            logs.logger.warning(
                "%s works again after %.1fs (%d failed calls)",
                self.what,
                time.monotonic() - since,
                failures,
            )
