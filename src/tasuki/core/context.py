"""`tasuki.current()`: what a running job can learn about, and ask of, its delivery."""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import orjson

from tasuki.core.records import Progress, Receipt, StepRecord, Wait
from tasuki.core.steps import (
    NO_TIMEOUT,
    SLEEP,
    WAKE_SLACK,
    Durable,
    StepLog,
    check_name,
    check_seconds,
    timed_out,
)
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
P = ParamSpec("P")
R = TypeVar("R")


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
        "_durable",
        "_extender",
        "_held_locks",
        "_locks",
        "_state",
        "_steps",
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
        durable: Durable | None = None,
    ) -> None:
        self.message = message
        self.job = job
        self._locks = locks
        self._extender = extender
        self._stop: threading.Event | None = None
        self.stop_reason = ""
        self.lease_lost = False
        # The wall-clock time the lease lasts until at the earliest: when it was asked
        # for (the lease, then each extension), plus its length; None if not known.
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
        # Durable steps: what every run's step log shares, and this run's log, read from
        # the backend on the first durable call (`core/steps.py`).
        self._durable = durable
        self._steps: StepLog | None = None

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

    # -- durable steps (DESIGN §4c, `core/steps.py`) -----------------------------------
    @property
    def waiting(self) -> Wait | None:
        """What this run suspended for (`sleep`, `wait_for_signal`), or None."""
        return None if self._steps is None else self._steps.waiting

    def _log(self) -> StepLog:
        if self._steps is None:
            durable = self._durable or Durable(None, durable_steps=True)
            self._steps = StepLog(durable, self.receipt, self._lost)
        return self._steps

    def _lost(self) -> None:
        self.lease_lost = True
        self.request_stop("lease lost")

    @overload
    def step(
        self,
        name: str,
        fn: Callable[P, Coroutine[Any, Any, R]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Coroutine[Any, Any, R]: ...

    @overload
    def step(self, name: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once for this message: its JSON result is recorded
        under the lease and returned; every later run of the message (a retry, after a
        crash, a redrive) gets the recorded value back without running `fn`. An async
        `fn` makes this an awaitable (`await ctx.step("x", fetch)`).

        The value returned is the recorded JSON, decoded, on the first run too, so every
        run sees the same value. LeaseLost if the record is refused (a zombie run).
        """
        check_name(name)
        log = self._log()
        occurrence = log.next(name)
        done = log.recorded(name, occurrence)
        if inspect.iscoroutinefunction(fn):
            return self._step_async(log, name, occurrence, done, fn, args, kwargs)
        if done is not None:
            return orjson.loads(done.result)
        self._check_held(name)
        started, t0 = time.time(), time.perf_counter()
        value = fn(*args, **kwargs)
        return self._keep(log, name, occurrence, value, started, time.perf_counter() - t0)

    async def _step_async(
        self,
        log: StepLog,
        name: str,
        occurrence: int,
        done: StepRecord | None,
        fn: Callable[..., Awaitable[Any]],
        args: Any,
        kwargs: Any,
    ) -> Any:
        if done is not None:
            return orjson.loads(done.result)
        self._check_held(name)
        started, t0 = time.time(), time.perf_counter()
        value = await fn(*args, **kwargs)
        duration = time.perf_counter() - t0
        return await asyncio.to_thread(self._keep, log, name, occurrence, value, started, duration)

    def confirm_held(self) -> bool:
        """Whether this run may still act as the message's holder. Where the lease may
        have lapsed (the worker was held up past `lease_until`, which counts from when
        the lease was asked for), the backend is asked: one round trip, only then; a
        refusal marks the lease lost."""
        lapsed = self.lease_until is not None and time.time() > self.lease_until
        if not self.lease_lost and lapsed and self._extender is not None:
            job, lease = self.job, self.message.lease
            if job is not None:
                self._extender(job.visibility_timeout)  # a refusal marks it lost
            elif lease is not None:
                self._extender(lease.visibility_timeout)
            lapsed = self.lease_until is not None and time.time() > self.lease_until
        if self.lease_lost or lapsed:
            self._lost()
            return False
        return True

    def _check_held(self, name: str) -> None:
        """Before a step runs: a run whose lease is lost does not start the step, which
        another worker may have run and recorded meanwhile (and, the message finished
        since, its records dropped: nothing would stop the step then)."""
        if not self.confirm_held():
            raise LeaseLost(
                f"step {name!r} not run: the lease of message {self.message.id} is lost"
            )

    @staticmethod
    def _keep(
        log: StepLog, name: str, occurrence: int, value: Any, started: float, duration: float
    ) -> Any:
        data = log.encode(name, value)
        log.record(StepRecord(name, occurrence, data, started, duration))
        return orjson.loads(data)

    def step_in_transaction(self, name: str, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run `fn(conn, *args, **kwargs)` inside the backend's transaction that records
        the step under the lease (SQLite, PostgreSQL: `transactional_steps`): its writes
        to that database happen exactly once. A stale lease rolls them back (LeaseLost)."""
        check_name(name)
        log = self._log()
        log.check_transactional()
        occurrence = log.next(name)
        done = log.recorded(name, occurrence)
        if done is not None:
            return orjson.loads(done.result)  # type: ignore[no-any-return]
        return log.in_transaction(name, occurrence, fn, args, kwargs)  # type: ignore[no-any-return]

    def sleep(self, seconds: float) -> None:
        """Sleep durably: the run ends here (the message is released without penalty,
        costing no attempt and holding no worker) and the job runs again after
        `seconds`, from the top, replaying its recorded steps and going on past this."""
        seconds = check_seconds("ctx.sleep's time", seconds)
        log = self._log()
        occurrence = log.next(SLEEP)
        done = log.recorded(SLEEP, occurrence)
        now = time.time()
        if done is None:
            wake = now + seconds
            log.record(StepRecord(SLEEP, occurrence, orjson.dumps(wake), now, 0.0))
        else:
            wake = float(orjson.loads(done.result))
        if wake - now > WAKE_SLACK:
            raise log.suspend(wake - now, Wait())

    def wait_for_signal(self, name: str, timeout: float | None = None) -> Any:
        """The payload of the signal `name` sent to this message (`app.signal`), consumed
        once. A signal sent earlier is kept for this wait; without one, the run ends here
        and the message waits, holding no worker, until the signal makes it ready (at
        once) or `timeout` passes: then `tasuki.errors.SignalTimeout` is raised here."""
        check_name(name)
        if timeout is not None:
            timeout = check_seconds("wait_for_signal's timeout", timeout)
        log = self._log()
        got, waited, ended = (
            f"tasuki:signal:{name}",
            f"tasuki:wait:{name}",
            f"tasuki:timeout:{name}",
        )
        occurrence = log.next(got)
        if (done := log.recorded(got, occurrence)) is not None:
            return orjson.loads(done.result)
        if log.recorded(ended, occurrence) is not None:
            raise timed_out(name, timeout)
        now = time.time()
        started = log.recorded(waited, occurrence)
        if started is None:
            deadline = now + (NO_TIMEOUT if timeout is None else timeout)
            log.record(StepRecord(waited, occurrence, orjson.dumps(deadline), now, 0.0))
        else:
            deadline = float(orjson.loads(started.result))
        payload = log.take(name, occurrence)
        if payload is not None:
            return orjson.loads(payload)
        if deadline - now > WAKE_SLACK:
            raise log.suspend(deadline - now, Wait(name))
        log.record(StepRecord(ended, occurrence, b"null", now, 0.0))
        raise timed_out(name, timeout)


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
