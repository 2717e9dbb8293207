"""The settler: how deliveries end (ack, release, dead), sent to the backend in batches.

Jobs finish one by one on many threads; the backend prefers few large calls. Every
settle goes through one queue and one thread that drains whatever has piled up and
sends it as one `Backend.settle` call, whatever the verdicts. Under light load a batch
is one message and is sent at once; under heavy load batches grow on their own. A
backend error is retried with backoff: a settle is never dropped while the worker lives
(if the lease lapses meanwhile, the message is simply delivered again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from typing import Any, NamedTuple, Protocol

from tasuki import logs
from tasuki.backends.base import Backend, Settle
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage
from tasuki.runtime.pulse import Pulse

MAX_BATCH = 1000
# After a small batch, wait this long for more: under load, fewer and larger round trips.
LINGER = 0.0005
SMALL = 32


class _HasFields(Protocol):
    @property
    def fields(self) -> dict[str, Any]: ...


class Pending(NamedTuple):
    """A settle on its way; `about` gives the log fields, computed only if one is logged."""

    settle: Settle
    about: _HasFields | dict[str, Any]


_STOP = object()


class Settler:
    def __init__(
        self,
        backend: Backend,
        on_released: Callable[[list[Settle]], None] | None = None,
    ):
        self._backend = backend
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._on_released = on_released
        self._pending = 0
        self._count = threading.Lock()  # a plain lock: put() runs once per message
        self._giving_up_at: float | None = None
        self._outage = Outage("settling messages")
        self.pulse = Pulse("settler")
        self._thread = threading.Thread(target=self._run, name="tasuki-settler", daemon=True)
        self._thread.start()

    def put(self, settle: Settle, about: _HasFields | dict[str, Any]) -> None:
        with self._count:
            self._pending += 1
        self._queue.put(Pending(settle, about))

    @property
    def pending(self) -> int:
        return self._pending

    def stop(self, timeout: float = 10.0) -> None:
        """Flush, giving up on backend errors after `timeout`, then end the thread."""
        self._giving_up_at = time.monotonic() + timeout
        self._queue.put(_STOP)
        self._thread.join(timeout + 1.0)

    def _run(self) -> None:
        stopping = False
        while True:
            with self.pulse.idle():
                first = self._queue.get()
            batch: list[Pending] = []
            if first is _STOP:
                stopping = True
            else:
                batch.append(first)
            lingered = stopping
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except Empty:
                    if lingered or len(batch) >= SMALL:
                        break
                    lingered = True
                    time.sleep(LINGER)
                    continue
                if item is _STOP:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._send(batch)
                with self._count:
                    self._pending -= len(batch)
            if stopping and self._queue.empty():
                return

    def _send(self, batch: list[Pending]) -> None:
        results = self._call(batch)
        if self._on_released is not None:
            returning = [
                p.settle
                for p, ok in zip(batch, results, strict=True)
                if ok and p.settle.verdict == "release"
            ]
            if returning:
                self._on_released(returning)

    def _call(self, items: Sequence[Pending]) -> list[bool]:
        """Send with retries; per item, whether the backend accepted it."""
        backoff = 0.05
        while True:
            try:
                results = self._backend.settle([p.settle for p in items])
                self._outage.worked()
                break
            except TasukiError as exc:
                if self._giving_up_at is not None and time.monotonic() > self._giving_up_at:
                    logs.logger.error(
                        "giving up on %d settles after backend errors: %s", len(items), exc
                    )
                    return [False] * len(items)
                self._outage.failed(exc, backoff)
                self.pulse.beat()
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        if logs.enabled("ack refused"):
            for item, ok in zip(items, results, strict=True):
                if not ok:
                    about = item.about
                    fields = about if isinstance(about, dict) else about.fields
                    logs.event("ack refused", **fields, action=item.settle.verdict)
        return results
