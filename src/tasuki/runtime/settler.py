"""The settler: how deliveries end (ack, release, dead), sent to the backend in batches.

Jobs finish one by one on many threads; the backend prefers few large calls. Every
settle goes through one queue and one thread that drains whatever has piled up and
sends it as one `Backend.settle` call, whatever the verdicts. Under light load a batch
is one message and is sent at once; under heavy load batches grow on their own. An
outage is retried with backoff: a settle is never dropped while the worker lives (if the
lease lapses meanwhile, the message is simply delivered again). Any other failure is one
settle's: the batch is split until it is found (`blame.py`), the others land, and that
one goes to the dead letters with the reason it could not be settled (or, if even that
fails, is left to lapse and be delivered again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from typing import Any, NamedTuple, Protocol

from tasuki import logs
from tasuki.backends.base import Backend, Settle
from tasuki.core.message import ErrorInfo
from tasuki.errors import BackendUnavailable, TasukiError
from tasuki.runtime.blame import named, split_until_found
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.outage import Outage
from tasuki.runtime.pulse import Pulse

MAX_BATCH = 1000
# After a small batch, wait this long for more: under load, fewer and larger round trips.
LINGER = 0.0005
SMALL = 32
# A batch failing with a backend error (no outage) this many times running is split to
# find the settle to blame (`blame.py`); until then it is retried whole, like an outage.
PASSING = 5


class _HasFields(Protocol):
    @property
    def fields(self) -> dict[str, Any]: ...


class Pending(NamedTuple):
    """A settle on its way; `about` gives the log fields, computed only if one is logged."""

    settle: Settle
    about: _HasFields | dict[str, Any]
    # Told whether the settle landed as an ack (`Outcome.when_acked`).
    acked: Callable[[bool], None] | None = None


_STOP = object()


class Settler:
    def __init__(
        self,
        backend: Backend,
        on_released: Callable[[list[Settle]], None] | None = None,
        fatal: Fatal | None = None,
    ):
        self._backend = backend
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._on_released = on_released
        self._pending = 0
        self._count = threading.Lock()  # a plain lock: put() runs once per message
        self._giving_up_at: float | None = None
        self._blamed: set[int] = set()  # this batch's settles that `_blame` answered
        self._outage = Outage("settling messages")
        self.pulse = Pulse("settler")
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard("settler", self._run), name="tasuki-settler", daemon=True
        )
        self._thread.start()

    def put(
        self,
        settle: Settle,
        about: _HasFields | dict[str, Any],
        acked: Callable[[bool], None] | None = None,
    ) -> None:
        with self._count:
            self._pending += 1
        self._queue.put(Pending(settle, about, acked))

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
        self._blamed = set()
        results = self._call(batch)
        for p, ok in zip(batch, results, strict=True):
            if p.acked is not None:
                landed = ok and p.settle.verdict == "ack" and id(p) not in self._blamed
                try:
                    p.acked(landed)
                except Exception:
                    logs.logger.exception("what follows the ack of %s failed", p.settle.receipt.id)
        if self._on_released is not None:
            returning = [
                p.settle
                for p, ok in zip(batch, results, strict=True)
                if ok and p.settle.verdict == "release"
            ]
            if returning:
                try:
                    self._on_released(returning)
                except Exception:
                    logs.logger.exception("noting %d released messages failed", len(returning))

    def _call(self, items: Sequence[Pending]) -> list[bool]:
        """Send with retries; per item, whether the backend accepted it."""
        backoff = 0.05
        failures = 0
        while True:
            try:
                try:
                    results = self._settle(items)
                except BackendUnavailable:
                    raise
                except TasukiError as exc:
                    failures += 1
                    if failures < PASSING:  # a fault of this call, perhaps passing: again
                        self._outage.failed(exc, backoff)
                        self.pulse.beat()
                        time.sleep(backoff)
                        backoff = min(backoff * 2, 2.0)
                        continue
                    results = split_until_found(items, self._settle, self._blame, exc)
                except Exception as exc:  # a bug, or a value the engine refuses
                    results = split_until_found(items, self._settle, self._blame, exc)
                self._outage.worked()
                break
            except BackendUnavailable as exc:
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
                    logs.event("ack refused", **_fields(item), action=item.settle.verdict)
        return results

    def _settle(self, items: Sequence[Pending]) -> list[bool]:
        return self._backend.settle([p.settle for p in items])

    def _blame(self, item: Pending, error: Exception) -> bool:
        """The one settle the backend would not take: dead instead, with the reason."""
        settle = item.settle
        self._blamed.add(id(item))
        reason = f"could not be settled ({settle.verdict}): {named(error)}"
        logs.logger.error(
            "settling message %s failed: %s", settle.receipt.id, named(error), exc_info=error
        )
        logs.event("dead-lettered", **_fields(item), reason=reason)
        info = ErrorInfo(type(error).__name__, str(error))
        try:
            return self._backend.settle([Settle.dead(settle.receipt, reason, info)])[0]
        except Exception as again:
            logs.logger.error(
                "message %s cannot be settled at all (%s): it is delivered again when its "
                "lease lapses",
                settle.receipt.id,
                named(again),
            )
            return False


def _fields(item: Pending) -> dict[str, Any]:
    about = item.about
    return about if isinstance(about, dict) else about.fields
