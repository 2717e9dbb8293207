"""The values that travel: messages as handlers see them, and dead letters as operators see them.

They are frozen so that a middleware cannot change what the next one, or the backend,
believes was delivered.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

JOB_HEADER = "tasuki-job"
CONTENT_TYPE_HEADER = "tasuki-content-type"
SIGNATURE_HEADER = "tasuki-signature"


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


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The last error of a message, kept with its dead letter.

    `str()` starts with the type name so that a one-line log or table cell is enough to
    see what happened.
    """

    type: str
    message: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @classmethod
    def from_exception(cls, error: BaseException) -> ErrorInfo:
        tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
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
