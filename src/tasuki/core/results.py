"""Results: a job's return value kept by the backend, and the three answers a caller gets.

A result is written once, by the settle of the message's current lease
(`Settle.effects.result`), so a zombie's late write is refused with its ack. Reading is
the caller's side: `job.result(id)`, `app.result(queue, id)`. The answers differ because
the caller's next step does: the value; `JobFailed` (the message was dead-lettered:
look at its error); `ResultTimeout` (still running or waiting: ask again later);
`ResultMissing` (nothing will ever come: an unknown id, a job that keeps no result, or a
result past its TTL) — answered at once, never after the timeout.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Protocol

import orjson

from tasuki.core.capabilities import DROP_IT, refusal
from tasuki.core.flowrecords import ResultRecord
from tasuki.core.reasons import ATTEMPTS_EXHAUSTED, LEASE_EXPIRED
from tasuki.errors import (
    InvalidArgument,
    JobFailed,
    ResultMissing,
    ResultTimeout,
    SerializationError,
)

# A stored reason code as a result's reader sees it (no attempt counts are kept with it).
_REASONS = {
    LEASE_EXPIRED: "its leases expired until no attempt was left",
    ATTEMPTS_EXHAUSTED: "no attempt was left",
}
# How long one wait of `result_async` blocks a thread of the default executor, at most:
# a cancelled await is noticed within this.
ASYNC_SLICE = 1.0


class ResultSource(Protocol):
    """The backend as results see it (`Backend.result`, `Backend.wait_result`)."""

    def result(self, queue: str, id: str) -> ResultRecord | None: ...

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None: ...


def check_keep_result(job: str, value: object, has_results: bool, scheme: str) -> float:
    """`@app.job(keep_result=SECONDS)`: how long the return value is kept; 0 = not kept."""
    if value is None or value == 0:
        return 0.0
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or not math.isfinite(value)
    ):
        raise InvalidArgument(
            f"job {job!r}: keep_result must be a finite number of seconds > 0, got {value!r}"
        )
    if not has_results:
        raise refusal(scheme, "results", f"keep job {job!r}'s result (keep_result=)", DROP_IT)
    return float(value)


def encode(job: str, value: Any) -> bytes:
    """The return value as the backend keeps it: JSON, or a clear error at the run's end."""
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        raise SerializationError(
            f"job {job!r} keeps its result, and its return value cannot be kept as JSON: {exc}"
        ) from exc


def answer(queue: str, id: str, record: ResultRecord | None) -> Any:
    """The caller's answer to a settled record; ResultMissing without one."""
    if record is None:
        raise ResultMissing(
            f"no result for message {id!r} on queue {queue!r}: unknown id, a job that keeps "
            "no result (keep_result=), or one kept past its time"
        )
    if record.state == "failed":
        raise JobFailed(queue, id, record.error, _REASONS.get(record.reason, record.reason))
    if record.state == "pending":
        raise ResultTimeout(f"message {id!r} on queue {queue!r} has no result yet")
    return orjson.loads(record.value or b"null")


def wait(source: ResultSource, queue: str, id: str, timeout: float | None) -> Any:
    """The result of message `id`, waiting up to `timeout` seconds (None: as long as it
    takes) by the backend's own notification where it has one."""
    first = source.result(queue, id)
    if first is None or first.state != "pending":
        return answer(queue, id, first)
    deadline = None if timeout is None else time.monotonic() + _timeout(timeout)
    while True:
        remaining = 3600.0 if deadline is None else deadline - time.monotonic()
        record = source.wait_result(queue, id, max(0.0, remaining))
        if record is None or record.state != "pending":
            return answer(queue, id, record)
        if deadline is not None and time.monotonic() >= deadline:
            raise ResultTimeout(
                f"message {id!r} on queue {queue!r} had no result within {timeout}s"
            )


async def wait_async(source: ResultSource, queue: str, id: str, timeout: float | None) -> Any:
    """`wait` for async callers: the blocking waits run in the default executor, one slice
    at a time, so the event loop stays free and a cancelled await stops waiting."""
    first = await asyncio.to_thread(source.result, queue, id)
    if first is None or first.state != "pending":
        return answer(queue, id, first)
    deadline = None if timeout is None else time.monotonic() + _timeout(timeout)
    while True:
        remaining = ASYNC_SLICE if deadline is None else deadline - time.monotonic()
        piece = max(0.0, min(ASYNC_SLICE, remaining))
        record = await asyncio.to_thread(source.wait_result, queue, id, piece)
        if record is None or record.state != "pending":
            return answer(queue, id, record)
        if deadline is not None and time.monotonic() >= deadline:
            raise ResultTimeout(
                f"message {id!r} on queue {queue!r} had no result within {timeout}s"
            )


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidArgument(f"timeout must be a number of seconds >= 0, got {value!r}")
    return float(value)
