"""The settler: acks, releases and burials, sent to the backend in batches.

Jobs finish one by one on many threads; the backend prefers few large calls. Every
settlement goes through one queue and one thread that drains whatever has piled up and
sends it as one batch per kind. Under light load a batch is one message and is sent at
once; under heavy load batches grow on their own. A backend error is retried with
backoff: a settlement is never dropped while the worker lives (if the lease lapses
meanwhile, the message is simply delivered again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, Protocol

from tasuki import logs
from tasuki.backends.base import Backend, Bury, Receipt, Release
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage

MAX_BATCH = 1000
# After a small batch, wait this long for more: under load, fewer and larger round trips.
LINGER = 0.0005
SMALL = 32


class _HasFields(Protocol):
    @property
    def fields(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class Settlement:
    """One settlement; `about` gives the log fields, computed only if something is logged."""

    kind: str  # "ack" | "release" | "bury"
    receipt: Receipt
    about: _HasFields | dict[str, Any]
    delay: float = 0.0
    penalty: bool = True
    reason: str = ""
    error: Any = None


_STOP = object()


class Settler:
    def __init__(self, backend: Backend, on_refused: Callable[[Settlement], None] | None = None):
        self._backend = backend
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._on_refused = on_refused
        self._pending = 0
        self._count = threading.Lock()  # a plain lock: put() runs once per message
        self._giving_up_at: float | None = None
        self._outage = Outage("settling messages")
        self._thread = threading.Thread(target=self._run, name="tasuki-settler", daemon=True)
        self._thread.start()

    def put(self, item: Settlement) -> None:
        with self._count:
            self._pending += 1
        self._queue.put(item)

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
            first = self._queue.get()
            batch: list[Settlement] = []
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

    def _send(self, batch: list[Settlement]) -> None:
        acks = [s for s in batch if s.kind == "ack"]
        releases = [s for s in batch if s.kind == "release"]
        burials = [s for s in batch if s.kind == "bury"]
        if acks:
            self._call(acks, lambda: self._backend.ack([s.receipt for s in acks]))
        if releases:
            self._call(
                releases,
                lambda: self._backend.release(
                    [Release(s.receipt, s.delay, s.penalty, s.error or "") for s in releases]
                ),
            )
        if burials:
            self._call(
                burials,
                lambda: self._backend.bury([Bury(s.receipt, s.reason, s.error) for s in burials]),
            )

    def _call(self, items: Sequence[Settlement], send: Callable[[], list[bool]]) -> None:
        backoff = 0.05
        while True:
            try:
                results = send()
                self._outage.worked()
                break
            except TasukiError as exc:
                if self._giving_up_at is not None and time.monotonic() > self._giving_up_at:
                    logs.logger.error(
                        "giving up on %d settlements after backend errors: %s", len(items), exc
                    )
                    return
                self._outage.failed(exc, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        for item, ok in zip(items, results, strict=True):
            if not ok:
                if logs.enabled("ack refused"):
                    about = item.about
                    fields = about if isinstance(about, dict) else about.fields
                    logs.event("ack refused", **fields, action=item.kind)
                if self._on_refused is not None:
                    self._on_refused(item)
