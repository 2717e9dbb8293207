"""SIGTERM / SIGINT for deploys: the first asks for a graceful stop, the second exits now."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from tasuki import logs

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def graceful_signals(request_stop: Callable[[], None]) -> Iterator[None]:
    """Install the handlers for the duration of the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        name = signal.Signals(signum).name
        if received == 1:
            logs.logger.warning("%s received: stopping gracefully (send again to exit now)", name)
            request_stop()
        else:
            logs.logger.error("%s received again: exiting now; unfinished leases will lapse", name)
            os._exit(1)

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
