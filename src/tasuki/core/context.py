"""`tasuki.current()`: what a running job can learn about, and ask of, its delivery."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tasuki.core.records import Receipt
from tasuki.errors import LeaseLost, TasukiError

if TYPE_CHECKING:
    from tasuki.core.job import Job
    from tasuki.core.locks import LockStore
    from tasuki.core.message import Message

_current: ContextVar[Context | None] = ContextVar("tasuki_context", default=None)
_EVENT_MUTEX = threading.Lock()


class Context:
    """One delivery of one message, as seen from inside its handler and middleware.

    `should_stop` is set on graceful shutdown, on timeout and when the lease is lost; a
    long job checks it and raises `tasuki.Defer()` to hand the message back unharmed.
    """

    __slots__ = (
        "_extender",
        "_held_locks",
        "_locks",
        "_state",
        "_stop",
        "deadline",
        "job",
        "lease_lost",
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
        self.deadline: float | None = None
        self.started_at = 0.0
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
        stop = self._stop
        return stop is not None and stop.is_set()

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Sleep up to `timeout` seconds, waking early if the job is asked to stop."""
        return self._event().wait(timeout)

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
            raise LeaseLost(f"lease on message {self.message.id} was lost; stop work on it")


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
