"""The values that travel: messages as handlers see them, and dead letters as operators see them.

They are frozen so that a middleware cannot change what the next one, or the backend,
believes was delivered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from tasuki.core.text import storable
from tasuki.logs import job_traceback

JOB_HEADER = "tasuki-job"
CONTENT_TYPE_HEADER = "tasuki-content-type"
SIGNATURE_HEADER = "tasuki-signature"
# Epoch seconds before which a message must not run: a delay longer than the backend
# holds in one go travels in hops (see `tasuki.producer`).
NOT_BEFORE_HEADER = "tasuki-not-before"
# The FIFO message group of a message on an SQS `.fifo` queue (`middleware/groups.py`).
GROUP_HEADER = "tasuki-group"
# A workflow step's place in its flow and what its settle changes (`core/flows.py`).
FLOW_HEADER = "tasuki-flow"

# A random byte with the UUID version (7) in its high nibble, and with the variant's bits.
_VERSION_7 = bytes((b & 0x0F) | 0x70 for b in range(256))
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


def new_id() -> str:
    """A fresh message id: 32 hex digits in the layout of a UUID version 7 (RFC 9562), the
    Unix time in milliseconds, then 74 random bits.

    Time-ordered, so that the ids of messages enqueued together sit together in an
    index: a SQL backend's ack deletes a batch's entries from a few pages of its id
    index instead of one page per message (random ids made SQLite write 5 times the
    pages per message, and slowed it by half with a million messages waiting).
    Made from `os.urandom` directly: the uuid module costs a worker a hundredth of a
    second to import, for one call per enqueue.
    """
    tail = bytearray(os.urandom(10))
    tail[0] = _VERSION_7[tail[0]]
    tail[2] = _VARIANT[tail[2]]
    return f"{time.time_ns() // 1_000_000:012x}{tail.hex()}"


def new_ids(n: int) -> list[str]:
    """`n` fresh message ids (`new_id`) from one `os.urandom` call (a system call per id
    would be a tenth of a bulk enqueue's time)."""
    raw = bytearray(os.urandom(16 * n))
    # Byte by byte across all ids at once (extended slices): no Python loop per id.
    for at, byte in enumerate((time.time_ns() // 1_000_000).to_bytes(6, "big")):
        raw[at::16] = bytes((byte,)) * n
    raw[6::16] = raw[6::16].translate(_VERSION_7)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    text = raw.hex()
    return [text[at : at + 32] for at in range(0, 32 * n, 32)]


# Where a message stands, as `inspect` tells it (`MessageInfo.state`) and a flow reads its
# steps (`FlowRecords.step_states`).
MessageState = Literal["delayed", "ready", "in_flight", "dead", "finished", "cancelled", "unknown"]


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of a delivery: only `token` can settle the message while the lease is current.

    `fencing_token` only grows for a given message, so a store written by the handler can
    refuse writes from an older delivery.
    """

    token: str
    fencing_token: int
    visibility_timeout: float


@dataclass(frozen=True, slots=True)
class Message:
    """One message as delivered to a handler.

    For job messages `job`, `args` and `kwargs` are decoded from the body; for raw
    messages (`app.send`, `@app.consumer`) they are empty and `body` is all there is.
    """

    id: str
    queue: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    attempt: int = 0
    enqueued_at: float = 0.0
    job: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    lease: Lease | None = None
    max_attempts: int = 0

    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)

    def text(self, encoding: str = "utf-8") -> str:
        return self.body.decode(encoding)

    @property
    def fencing_token(self) -> int:
        return self.lease.fencing_token if self.lease else 0


_FIELDS = ("id", "queue", "body", "headers", "attempt", "enqueued_at", "job", "args", "kwargs")
_SET = tuple(getattr(Message, name).__set__ for name in (*_FIELDS, "lease", "max_attempts"))


def delivered(
    id: str,
    queue: str,
    body: bytes,
    headers: Mapping[str, str],
    attempt: int,
    enqueued_at: float,
    job: str | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    lease: Lease,
    max_attempts: int,
) -> Message:
    """A `Message` made by the worker for each delivery, at half the cost of `Message()`.

    The frozen dataclass's own `__init__` pays a global lookup and a generic
    `object.__setattr__` per field; at tens of thousands of messages a second that is a
    measurable share of the worker's time, so the slots are set directly.
    """
    m: Message = object.__new__(Message)
    s = _SET
    s[0](m, id)
    s[1](m, queue)
    s[2](m, body)
    s[3](m, headers)
    s[4](m, attempt)
    s[5](m, enqueued_at)
    s[6](m, job)
    s[7](m, args)
    s[8](m, kwargs)
    s[9](m, lease)
    s[10](m, max_attempts)
    return m


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The last error of a message, kept with its dead letter.

    `str()` starts with the type name so that a one-line log or table cell is enough to
    see what happened.
    """

    type: str
    message: str
    traceback: str = ""

    def __post_init__(self) -> None:
        # Whatever a job raised, its words reach the dead letter: made storable here.
        for name in ("type", "message", "traceback"):
            value = getattr(self, name)
            fixed = storable(value) if isinstance(value, str) else str(value)
            if fixed is not value:
                object.__setattr__(self, name, fixed)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @classmethod
    def from_exception(cls, error: BaseException) -> ErrorInfo:
        tb = job_traceback(error)
        return cls(type=type(error).__name__, message=str(error), traceback=tb)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that will not be retried, with everything needed to judge and re-drive it."""

    id: str
    queue: str
    body: bytes
    headers: Mapping[str, str]
    attempt: int
    reason: str
    error: ErrorInfo | None
    died_at: float
    enqueued_at: float

    @property
    def job(self) -> str | None:
        return self.headers.get(JOB_HEADER)

    def json(self) -> Any:
        return orjson.loads(self.body)
