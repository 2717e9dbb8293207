"""A loop's sign of life, read by the worker's health checks (`runtime/health.py`).

Each of the worker's loops (fetchers, lease keeper, settler, scheduler, event loop) owns
one and beats it once a turn: two attribute writes, cheap enough for the fetcher's hot
path. A loop about to wait for work, which may take long, says so with `idle()`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Pulse:
    """One loop's sign of life: `beat()` every turn; `idle()` around a wait for work."""

    __slots__ = ("at", "name", "waiting")

    def __init__(self, name: str) -> None:
        self.name = name
        self.at = time.monotonic()
        self.waiting = False

    def beat(self) -> None:
        self.at = time.monotonic()
        self.waiting = False

    @contextlib.contextmanager
    def idle(self) -> Iterator[None]:
        """A wait for work, however long, is not a stuck loop."""
        self.at = time.monotonic()
        self.waiting = True
        try:
            yield
        finally:
            self.beat()
