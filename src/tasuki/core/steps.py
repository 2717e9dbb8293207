"""Durable steps (DESIGN §4c): the step log a run of a message keeps in its backend.

A step is named by its name and its occurrence in the run (the second `ctx.step("page")`
is occurrence 2). Its JSON result is recorded under the run's lease: a zombie's record is
refused, and every later run of the message gets the recorded value back instead of
running the step again. Sleeps and waits for a signal end the run (`Suspend`); they leave
records of their own, under reserved names, so that the next run goes on past them:

- `tasuki:sleep` — a sleep's wake-up time (epoch seconds);
- `tasuki:wait:<signal>` — a wait's deadline (epoch seconds, or null for none);
- `tasuki:signal:<signal>` — the payload of the signal that wait consumed;
- `tasuki:timeout:<signal>` — the wait timed out (`SignalTimeout` was raised).

The log is read from the backend once per run, on the first durable call, so a job that
takes no step costs nothing. `StepStore` is the backend as the log sees it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

import orjson

from tasuki.core.capabilities import Capabilities, refusal
from tasuki.core.records import Receipt, StepRecord, Taken, Wait, Waiting
from tasuki.errors import (
    Defer,
    InvalidArgument,
    LeaseLost,
    MessageTooLarge,
    SerializationError,
    SignalTimeout,
)

# How many step records one message may hold unless the App says otherwise.
DEFAULT_MAX_STEPS = 1000
RESERVED = "tasuki:"
SLEEP = "tasuki:sleep"
# How long `wait_for_signal` without a timeout waits: as good as forever.
NO_TIMEOUT = 10 * 365 * 86400.0
# A sleep or wait this close to its end goes on rather than taking another hop.
WAKE_SLACK = 0.05


class Suspend(Defer):
    """Raised by `ctx.sleep` and `ctx.wait_for_signal` to end the run: the worker
    releases the message without penalty until `delay` from now, waiting for `wait`.
    Internal: a job never raises it itself and must not swallow it."""

    def __init__(self, delay: float, wait: Wait) -> None:
        super().__init__(max(0.0, delay), reason="waiting" if wait.signal else "sleeping")
        self.wait = wait


class StepStore(Protocol):
    """The backend as the step log sees it (`Backend`'s durable block)."""

    def steps(self, queue: str, id: str) -> list[StepRecord]: ...

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool: ...

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken: ...

    def record_step_in_transaction(
        self, receipt: Receipt, work: Callable[[Any], StepRecord]
    ) -> StepRecord | None: ...


class Durable(NamedTuple):
    """What every run's step log shares: the store (None where the backend cannot keep
    steps), its limits, and what the backend can do."""

    store: StepStore | None
    max_steps: int = DEFAULT_MAX_STEPS
    max_size: int = 256 * 1024
    scheme: str = ""
    durable_steps: bool = False
    transactional_steps: bool = False
    # The longest delay the backend stores in one go: a longer sleep or wait hops (the
    # run wakes early, finds its wake-up time recorded, and suspends again).
    max_delay: float | None = None


def durable_for(
    store: StepStore,
    caps: Capabilities,
    scheme: str,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Durable:
    """What a worker's runs share, from its backend's capabilities."""
    return Durable(
        store if caps.durable_steps else None,
        max_steps,
        caps.max_message_size,
        scheme,
        caps.durable_steps,
        caps.transactional_steps,
        caps.max_delay,
    )


def check_max_steps(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"max_steps must be an int >= 1, got {value!r}")
    return value


class StepLog:
    """One run's view of its message's step log: what was recorded, and the occurrences
    this run has reached. Made on the first durable call of a run."""

    __slots__ = ("_counts", "_durable", "_on_lost", "_receipt", "_records", "waiting")

    def __init__(self, durable: Durable, receipt: Receipt, on_lost: Callable[[], None]) -> None:
        if not durable.durable_steps:
            raise refusal(durable.scheme, "durable_steps", "record durable steps")
        if durable.store is None:
            raise InvalidArgument(
                "this delivery cannot record steps (a process job, or a run without a worker)"
            )
        self._durable = durable
        self._receipt = receipt
        self._on_lost = on_lost
        self._records = {
            (r.name, r.occurrence): r for r in durable.store.steps(receipt.queue, receipt.id)
        }
        self._counts: dict[str, int] = {}
        # What this run suspended for, once it did (the finisher settles it so).
        self.waiting: Wait | None = None

    @property
    def store(self) -> StepStore:
        assert self._durable.store is not None
        return self._durable.store

    def next(self, name: str) -> int:
        n = self._counts.get(name, 0) + 1
        self._counts[name] = n
        return n

    def recorded(self, name: str, occurrence: int) -> StepRecord | None:
        return self._records.get((name, occurrence))

    def _room(self) -> None:
        limit = self._durable.max_steps
        if len(self._records) >= limit:
            raise InvalidArgument(
                f"message {self._receipt.id} holds {len(self._records)} step records, its "
                f"limit (max_steps={limit}); raise App(max_steps=...) or take fewer steps"
            )

    def encode(self, name: str, value: Any) -> bytes:
        try:
            data = orjson.dumps(value)
        except TypeError as exc:
            raise SerializationError(
                f"the result of step {name!r} cannot be recorded as JSON: {exc}"
            ) from exc
        if len(data) > self._durable.max_size:
            raise MessageTooLarge(
                f"the result of step {name!r} is {len(data)} bytes as JSON, over the "
                f"backend's message size limit of {self._durable.max_size} bytes"
            )
        return data

    def record(self, record: StepRecord) -> None:
        """Record under the lease; LeaseLost (and the run asked to stop) if refused."""
        self._room()
        if not self.store.record_step(self._receipt, record):
            self.lost(record.name)
        self._records[(record.name, record.occurrence)] = record

    def lost(self, name: str) -> None:
        self._on_lost()
        raise LeaseLost(
            f"step {name!r} of message {self._receipt.id} was not recorded: this run's "
            "lease is no longer current; stop work on it"
        )

    def check_transactional(self) -> None:
        if not self._durable.transactional_steps:
            raise refusal(
                self._durable.scheme, "transactional_steps", "run a step inside its transaction"
            )

    def in_transaction(
        self, name: str, occurrence: int, fn: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        self._room()

        def work(conn: Any) -> StepRecord:
            started, t0 = time.time(), time.perf_counter()
            value = fn(conn, *args, **kwargs)
            data = self.encode(name, value)
            return StepRecord(name, occurrence, data, started, time.perf_counter() - t0)

        done = self.store.record_step_in_transaction(self._receipt, work)
        if done is None:
            self.lost(name)
            raise AssertionError("unreachable")
        self._records[(name, occurrence)] = done
        return orjson.loads(done.result)

    def take(self, name: str, occurrence: int) -> bytes | None:
        self._room()
        taken = self.store.take_signal(self._receipt, name, occurrence)
        if not taken.held:
            self.lost(f"{RESERVED}signal:{name}")
        if taken.payload is not None:
            key = (f"{RESERVED}signal:{name}", occurrence)
            self._records[key] = StepRecord(key[0], occurrence, taken.payload, time.time(), 0.0)
        return taken.payload

    def suspend(self, delay: float, wait: Wait) -> Suspend:
        self.waiting = wait
        hop = self._durable.max_delay
        return Suspend(delay if hop is None else min(delay, hop), wait)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"a step's name must be a non-empty str, got {name!r}")
    if name.startswith(RESERVED):
        raise InvalidArgument(f"step names starting with {RESERVED!r} are reserved: {name!r}")
    return name


def check_seconds(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidArgument(f"{what} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def timed_out(name: str, timeout: float | None) -> SignalTimeout:
    return SignalTimeout(f"no signal {name!r} came within {timeout}s")


def describe_wait(waiting: Waiting | None, now: float) -> str:
    """`inspect`'s words for what a message waits for ("" when it waits for nothing); a
    wait without a timeout says no time."""
    if waiting is None:
        return ""
    endless = waiting.until - now > NO_TIMEOUT / 2
    until = "" if endless else f" until {_when(waiting.until)}"
    if waiting.signal:
        return f"waiting for signal {waiting.signal!r}{until}"
    return f"sleeping{until}"


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
