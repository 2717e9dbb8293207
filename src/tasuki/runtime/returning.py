"""The messages this worker handed back and expects to see again.

`run(until_idle=True)` ends when the queues look empty, but a backend's stats may not
count a message on its way back: SQS reports approximate numbers, and a retry released
with a short backoff can be missing from all of them for a moment. The worker knows
better than the stats: it released the message itself and knows when it is due. Until
then, plus a margin for the backend's timer resolution, the worker is not idle. A
message leased again (by this worker) is crossed off; one another worker took, or that
was purged, is forgotten once its margin has passed, and the stats decide again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

# How long after its due time a released message may take to be seen again.
MARGIN = 1.0


class Returning:
    """Released messages by (queue, id), with the monotonic time they are due back."""

    def __init__(self, timer_resolution: float = 0.0) -> None:
        self._margin = MARGIN + 2 * timer_resolution
        self._due: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def released(self, items: Iterable[tuple[str, str, float]]) -> None:
        """(queue, id, delay) of messages just handed back to the backend."""
        now = time.monotonic()
        with self._lock:
            for queue, msg_id, delay in items:
                self._due[(queue, msg_id)] = now + delay + self._margin

    def leased(self, keys: Iterable[tuple[str, str]]) -> None:
        if not self._due:  # the common case: nothing on its way back
            return
        with self._lock:
            for key in keys:
                self._due.pop(key, None)

    def expected(self) -> bool:
        """True while a released message may still come back."""
        if not self._due:
            return False
        now = time.monotonic()
        with self._lock:
            for key, due in list(self._due.items()):
                if due <= now:
                    del self._due[key]
            return bool(self._due)
