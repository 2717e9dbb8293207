"""When one of the worker's loops cannot go on, the worker stops, with status 1.

Each loop (fetcher, settler, lease keeper, lock renewal, maintenance, scheduler) handles
what a turn may meet: an outage is retried, a bad item is found and settled on its own
(`blame.py`). An exception that still escapes a loop is a bug that leaves the loop dead,
and a worker whose settler or lease keeper is dead would go on leasing and running jobs
it can no longer settle or keep: every one of them run again a lease later. So the
escape is told here, once, with its traceback; `/readyz` goes red at once; the worker
stops fetching and shuts down (its leases lapse or are released), and `Worker.run`
raises `LoopFailed`, which ends `tasuki worker` with status 1 (the supervisor of
`--workers` starts it again). If that shutdown itself hangs, a worker that owns its
process (`handle_signals`) exits with status 1 after `EXIT_AFTER` seconds anyway.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from tasuki import logs
from tasuki.errors import TasukiError

EXIT_AFTER = 30.0


class LoopFailed(TasukiError):
    """One of the worker's loops could not go on: the worker stopped."""


class Fatal:
    """The first loop that could not go on, and who must hear of it."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._handlers: list[Callable[[str], None]] = []
        self._mutex = threading.Lock()

    def on_failure(self, handler: Callable[[str], None]) -> None:
        self._handlers.append(handler)

    def guard(self, name: str, body: Callable[[], None]) -> Callable[[], None]:
        """`body` as a thread's target: an exception escaping it stops the worker."""

        def run() -> None:
            try:
                body()
            except BaseException as exc:
                self.fail(name, exc)

        return run

    def fail(self, name: str, error: BaseException) -> None:
        reason = f"the {name} loop failed: {type(error).__name__}: {error}"
        with self._mutex:
            first = self.reason is None
            if first:
                self.reason = reason
        logs.logger.critical(
            "%s; the worker cannot go on and stops with status 1", reason, exc_info=error
        )
        if first:
            for handler in self._handlers:
                try:
                    handler(reason)
                except Exception:
                    logs.logger.exception("stopping after a failed loop failed too")


def exit_later(seconds: float = EXIT_AFTER) -> None:
    """Exit the process with status 1 in `seconds`, unless it ended before."""

    def last_resort() -> None:
        logs.logger.critical("the worker did not stop within %.0fs: exiting now", seconds)
        os._exit(1)

    timer = threading.Timer(seconds, last_resort)
    timer.daemon = True
    timer.start()
