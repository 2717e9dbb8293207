"""What results and workflows store in a backend, and what a settle changes with its ack.

The graph of a flow (what follows a step, which group slot it fills) is worked out in
Python once, when the flow is built (`core/flows.py`). A backend only carries out small,
generic operations, atomically with the ack and under its token check: keep a value,
fill a slot of a barrier, enqueue prepared messages, read a flow's cancelled flag. These
are the records it stores and the effects a settle carries. Values are JSON bytes the
backend never decodes: a barrier's value is the JSON array of its slots, made by
joining them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import orjson

from tasuki.core.message import FLOW_HEADER, ErrorInfo

if TYPE_CHECKING:
    from tasuki.core.envelope import Envelope

ResultState = Literal["pending", "ok", "failed"]
# How long a flow's record, barriers and values are kept unless it says otherwise: long
# enough to re-drive a failed step after a weekend.
FLOW_RETENTION = 7 * 86400.0


def error_json(error: ErrorInfo | None, reason: str = "") -> bytes:
    """A failed result's value: the last error (empty where the backend dead-lettered the
    message itself at lease time) and the dead letter's reason (a code or a sentence)."""
    if error is None:
        error = ErrorInfo("", "")
    return orjson.dumps(
        {
            "type": error.type,
            "message": error.message,
            "traceback": error.traceback,
            "reason": reason,
        }
    )


def error_from_json(data: bytes | str) -> ErrorInfo:
    doc = orjson.loads(data)
    return ErrorInfo(doc.get("type", ""), doc.get("message", ""), doc.get("traceback", ""))


def flow_of(headers: Mapping[str, str]) -> str | None:
    """The id of the flow a message is a step of, from its `tasuki-flow` header (None for
    a message of no flow, or a header that does not read as a plan)."""
    text = headers.get(FLOW_HEADER)
    if text is None:
        return None
    try:
        flow_id = orjson.loads(text)["f"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return None
    return flow_id if isinstance(flow_id, str) else None


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One message's result record (`Envelope.keep_result`).

    `pending` until the message settles; then `ok` with `value` the JSON of its return
    value, or `failed` with `value` the JSON of its last error and its dead letter's
    reason (`error_json`), kept until
    `expires_at` (epoch seconds of the backend's clock; None while pending).
    """

    state: ResultState
    value: bytes | None = None
    expires_at: float | None = None

    @property
    def error(self) -> ErrorInfo:
        """The last error of a `failed` record."""
        if self.state != "failed" or self.value is None:
            raise ValueError(f"a {self.state} result record holds no error")
        return error_from_json(self.value)

    @property
    def reason(self) -> str:
        """Why a `failed` record's message died (a reason code is rendered by the caller)."""
        if self.state != "failed" or self.value is None:
            return ""
        return str(orjson.loads(self.value).get("reason", ""))


class Fill(NamedTuple):
    """Write the current value into slot number `slot` of a barrier, if it is empty.

    The barrier (`flow`, `barrier`: the group's path) is complete once it holds `size`
    slots; its value is then the JSON array of the slots in index order, kept with it,
    and that array is the value the next fill of the same settle writes.
    """

    flow: str
    barrier: str
    slot: int
    size: int


@dataclass(frozen=True, slots=True)
class FlowFailure:
    """A flow's first failure: the step that was dead-lettered and its last error.

    What `app.flow(id).error` tells, and the argument an `on_failure` step receives.
    """

    flow_id: str
    step: str  # the step's path in the flow ("0", "1.2", ...)
    job: str
    queue: str
    message_id: str
    error: ErrorInfo
    at: float = 0.0

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "flow_id": self.flow_id,
                "step": self.step,
                "job": self.job,
                "queue": self.queue,
                "message_id": self.message_id,
                "error": orjson.loads(error_json(self.error)),
                "at": self.at,
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> FlowFailure:
        doc: dict[str, Any] = orjson.loads(data)
        error = doc.get("error") or {}
        return cls(
            flow_id=doc["flow_id"],
            step=doc["step"],
            job=doc.get("job", ""),
            queue=doc.get("queue", ""),
            message_id=doc.get("message_id", ""),
            error=ErrorInfo(
                error.get("type", ""), error.get("message", ""), error.get("traceback", "")
            ),
            at=float(doc.get("at", 0.0)),
        )


class Effects(NamedTuple):
    """What a settle changes with its ack (or its dead letter), in the same atomic step.

    In order, and only while the step's lease is current:
    1. `result`: the JSON return value, kept as the message's result record when it keeps
       one (`Envelope.keep_result`), and the value of the first fill.
    2. `failed` (dead verdict only): the flow's first failure is recorded (a later one
       changes nothing).
    3. Unless the flow `flow` is cancelled: each of `fills` in turn, going on to the next
       only if this one completed its set; then, if every fill completed its set (or
       there are none), `enqueue` (idempotent by their ids: a re-run adds nothing) and, if
       `final`, the current value becomes the flow's result.
    `ttl` is how long barriers, their slots and the flow's result are kept.
    """

    result: bytes | None = None
    flow: str | None = None
    fills: tuple[Fill, ...] = ()
    enqueue: tuple[Envelope, ...] = ()
    final: bool = False
    failed: FlowFailure | None = None
    ttl: float = FLOW_RETENTION


@dataclass(frozen=True, slots=True)
class FlowStep:
    """One step of a flow as recorded when it starts: where it runs and under which id."""

    path: str
    job: str
    queue: str
    message_id: str


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """What a backend keeps of one flow (`Backend.start_flow`, `Backend.flow`).

    Written once when the flow starts (`id` to `on_failure`); then `result` (the JSON of
    its final value), `failure` (its first failure) and `cancelled` change, each once.
    """

    id: str
    created_at: float
    retention: float
    steps: tuple[FlowStep, ...]
    on_failure: FlowStep | None = None
    result: bytes | None = None
    failure: FlowFailure | None = None
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def static_json(self) -> bytes:
        """The part written once, as the backend stores it (it never decodes it)."""
        return orjson.dumps(
            {
                "id": self.id,
                "created_at": self.created_at,
                "retention": self.retention,
                "steps": [[s.path, s.job, s.queue, s.message_id] for s in self.steps],
                "on_failure": None
                if self.on_failure is None
                else [
                    self.on_failure.path,
                    self.on_failure.job,
                    self.on_failure.queue,
                    self.on_failure.message_id,
                ],
                "extra": self.extra,
            }
        )

    @classmethod
    def from_parts(
        cls,
        static: bytes | str,
        result: bytes | None = None,
        failure: bytes | str | None = None,
        cancelled: bool = False,
    ) -> FlowRecord:
        """A record from what a backend stored: the static JSON and the three changes."""
        doc: dict[str, Any] = orjson.loads(static)
        on_failure = doc.get("on_failure")
        return cls(
            id=doc["id"],
            created_at=float(doc["created_at"]),
            retention=float(doc["retention"]),
            steps=tuple(FlowStep(*step) for step in doc["steps"]),
            on_failure=None if on_failure is None else FlowStep(*on_failure),
            result=None if result is None else bytes(result),
            failure=None if not failure else FlowFailure.from_json(failure),
            cancelled=bool(cancelled),
            extra=doc.get("extra") or {},
        )


def join_slots(slots: list[bytes]) -> bytes:
    """A complete barrier's value from its slots in index order (what backends do in
    their own language: this is the reference)."""
    return b"[" + b",".join(slots) + b"]"
