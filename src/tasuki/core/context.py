"""`tasuki.current()`: what a running job can learn about, and ask of, its delivery."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tasuki.core.records import Progress, Receipt
from tasuki.core.text import storable
from tasuki.errors import InvalidArgument, LeaseLost, TasukiError

if TYPE_CHECKING:
    from tasuki.core.job import Job
    from tasuki.core.locks import LockStore
    from tasuki.core.message import Message

_current: ContextVar[Context | None] = ContextVar("tasuki_context", default=None)
_EVENT_MUTEX = threading.Lock()
# The longest text `ctx.progress` takes: it is stored with the message and shown as is.
MAX_PROGRESS_TEXT = 256


class Context:
    """One delivery of one message, as seen from inside its handler and middleware.

    `should_stop` is set on graceful shutdown, on timeout, when the lease is lost and
    when the message is cancelled (then `cancelled` too); a long job checks it and raises
    `tasuki.Defer()` to hand the message back unharmed, or just returns once cancelled:
    nothing of a cancelled run is kept either way.
    """

    __slots__ = (
        "_asked",
        "_cancelled",
        "_extender",
        "_held_locks",
        "_locks",
        "_state",
        "_stop",
        "deadline",
        "job",
        "last_progress",
        "lease_lost",
        "lease_until",
        "message",
        "started_at",
        "stop_reason",
    )

    def __init__(
        self,
        message: Message,
        job: Job[..., Any] | None = None,
        extender: Callable[[float], bool] | None = None,
        locks: LockStore | None = None,
    ) -> None:
        self.message = message
        self.job = job
        self._locks = locks
        self._extender = extender
        self._stop: threading.Event | None = None
        self.stop_reason = ""
        self.lease_lost = False
        # The wall-clock time the lease lasts until at the earliest, as of the lease
        # keeper's last extension (None before one): when it asked, plus the length.
        self.lease_until: float | None = None
        self.deadline: float | None = None
        self.started_at = 0.0
        self._cancelled = False
        # Whether the job looked for a stop (`should_stop`, `wait_for_stop`, `cancelled`):
        # the lease keeper then looks for a cancel more often (`runtime/heartbeat.py`).
        self._asked = False
        # What the job last said of its progress; the keeper sends it with the next keep.
        self.last_progress: Progress | None = None
        # Made on first use, like the stop event: most deliveries never need them.
        self._state: dict[str, Any] | None = None
        self._held_locks: list[tuple[str, str]] | None = None

    @property
    def state(self) -> dict[str, Any]:
        """Scratch space that middleware shares with the job for this delivery."""
        if self._state is None:
            self._state = {}
        return self._state

    @property
    def locks(self) -> LockStore:
        """The lock service of dedup and uniqueness, handed in by the worker."""
        if self._locks is None:
            raise TasukiError("this delivery has no lock store")
        return self._locks

    @property
    def held_locks(self) -> list[tuple[str, str]]:
        """Locks the heartbeat renews with the lease (empty for most jobs)."""
        return self._held_locks or []

    @property
    def attempt(self) -> int:
        return self.message.attempt

    @property
    def fencing_token(self) -> int:
        """Grows with every lease of this message: refuse writes carrying an older one."""
        return self.message.fencing_token

    @property
    def receipt(self) -> Receipt:
        lease = self.message.lease
        return Receipt(self.message.queue, self.message.id, lease.token if lease else "")

    def _event(self) -> threading.Event:
        # Made on first use: most jobs never wait for a stop, and an Event costs a Condition.
        with _EVENT_MUTEX:
            if self._stop is None:
                self._stop = threading.Event()
            return self._stop

    @property
    def should_stop(self) -> bool:
        self._asked = True
        stop = self._stop
        return stop is not None and stop.is_set()

    @property
    def cancelled(self) -> bool:
        """The message was cancelled while this run held it (`app.cancel`): its lease is
        fenced out, so nothing this run returns or raises is kept, and it is never retried."""
        self._asked = True
        return self._cancelled

    @property
    def asked(self) -> bool:
        """Whether the job has looked for a stop (see `__init__`)."""
        return self._asked

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Sleep up to `timeout` seconds, waking early if the job is asked to stop."""
        self._asked = True
        return self._event().wait(timeout)

    def mark_cancelled(self) -> None:
        """The lease keeper learnt that the message was cancelled: its lease is gone too."""
        self._cancelled = True
        self.lease_lost = True
        self.request_stop("cancelled")

    def progress(self, fraction: float, text: str = "") -> None:
        """Say how far the job is: `fraction` from 0 to 1 and a short text, shown by
        `tasuki inspect` and the dashboard. It travels with the lease's next heartbeat,
        stored only while this run holds the lease (a stale run's progress is refused)."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise InvalidArgument(
                f"progress fraction must be a number from 0 to 1, got {fraction!r}"
            )
        if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
            raise InvalidArgument(f"progress fraction must be from 0 to 1, got {fraction!r}")
        if not isinstance(text, str) or len(text) > MAX_PROGRESS_TEXT:
            raise InvalidArgument(
                f"progress text must be a str of at most {MAX_PROGRESS_TEXT} chars, got "
                f"{type(text).__name__} {text!r:.60}"
            )
        if self._extender is None:
            raise TasukiError(
                "this delivery's progress cannot be reported here (no lease keeper looks "
                "after it: a process job, or a run already settled)"
            )
        self.last_progress = Progress(float(fraction), storable(text))

    def request_stop(self, reason: str) -> None:
        stop = self._event()
        if not stop.is_set():
            self.stop_reason = reason
            stop.set()

    def set_extender(self, extender: Callable[[float], bool] | None) -> None:
        """None once the delivery is settled: that also breaks the reference cycle with the
        lease keeper's record, so the delivery is freed at once instead of by the GC."""
        self._extender = extender

    def hold_lock(self, key: str, owner: str) -> None:
        """Have the heartbeat renew this lock with the lease, for as long as the job runs."""
        if self._held_locks is None:
            self._held_locks = []
        self._held_locks.append((key, owner))

    def drop_lock(self, key: str, owner: str) -> None:
        if self._held_locks and (key, owner) in self._held_locks:
            self._held_locks.remove((key, owner))

    def extend(self, seconds: float) -> None:
        """Push this delivery's lease expiry to `seconds` from now; LeaseLost if refused."""
        if self._extender is None:
            raise TasukiError("this delivery's lease cannot be extended here")
        if not self._extender(float(seconds)):
            what = "was cancelled" if self._cancelled else "was lost"
            raise LeaseLost(f"lease on message {self.message.id} {what}; stop work on it")


def current() -> Context:
    """The context of the job running in this thread or task."""
    ctx = _current.get()
    if ctx is None:
        raise TasukiError("tasuki.current() called outside a running job")
    return ctx


def get_current() -> Context | None:
    return _current.get()


def set_current(ctx: Context | None) -> Any:
    return _current.set(ctx)


def reset_current(token: Any) -> None:
    _current.reset(token)
