"""How a tasuki message travels in an SQS message.

The body is the message body itself, as text when it is valid UTF-8 made of the
characters SQS accepts, else base64. Everything else tasuki needs rides in ONE
String message attribute, `tasuki`, holding compact JSON (`Meta`): the id, the headers,
the per-message settings, the attempt and fencing bases of this copy and, on a dead
letter, its reason and last error. One attribute keeps
well inside SQS's limit of 10 attributes per message and leaves the others to the user.

A message without that attribute was not produced by tasuki (an S3 event notification,
another producer): it is delivered as-is, its SQS MessageId as its id.

The one mapping between the backend seam's records and SQS's: an `Envelope` becomes a
`Meta` (`stored`), a received message a `Delivery` (`delivery`) or a `DeadLetter`
(`dead_letter`).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import Delivery, Envelope, Limit

log = logging.getLogger("tasuki.sqs")

ATTRIBUTE = "tasuki"
# What SQS accepts in a body (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000+).
_REFUSED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
TEXT, BASE64, EMPTY = "", "b", "0"
_EMPTY_BODY = "-"  # SQS refuses an empty body


def encode_body(body: bytes) -> tuple[str, str]:
    """(SQS body, encoding tag)."""
    if not body:
        return _EMPTY_BODY, EMPTY
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), BASE64
    if _REFUSED.search(text):
        return base64.b64encode(body).decode("ascii"), BASE64
    return text, TEXT


def decode_body(raw: str, encoding: str) -> bytes:
    if encoding == BASE64:
        try:
            return base64.b64decode(raw, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"bad base64 body: {exc}") from exc
    if encoding == EMPTY:
        return b""
    return raw.encode("utf-8")


@dataclass(slots=True)
class Meta:
    """What the `tasuki` attribute carries (short keys: it counts against the size limit)."""

    id: str
    headers: dict[str, str] = field(default_factory=dict)
    max_attempts: int = 10
    visibility_timeout: float | None = None
    keep_id: float = 0.0
    # The producer made the id for this enqueue (`Envelope.id_generated`): no other
    # enqueue offers it, so another copy met after the ack is a second send (leasing.py).
    id_generated: bool = False
    # The message keeps a result record (in the lock store) this long after it settles.
    keep_result: float = 0.0
    enqueued_at: float = 0.0
    # Attempts and fencing numbers used by earlier copies of this message (a re-send
    # starts SQS's ApproximateReceiveCount again at 0).
    attempts_before: int = 0
    fence_before: int = 0
    unique_key: str | None = None
    id_owner: str = ""
    # The priority level (its SQS queue: queues.py), kept for re-sends and redrives.
    priority: int = 0
    # The rate and concurrency limits it counts against (admitted by limits.py).
    limits: tuple[Limit, ...] = ()
    encoding: str = TEXT
    # On a dead letter.
    reason: str = ""
    error: ErrorInfo | None = None
    died_at: float = 0.0
    died_attempt: int = 0
    # A message without the attribute (not produced by tasuki).
    raw: bool = False

    def dumps(self) -> str:
        doc: dict[str, Any] = {"id": self.id, "ma": self.max_attempts, "t": self.enqueued_at}
        if self.headers:
            doc["h"] = self.headers
        if self.visibility_timeout is not None:
            doc["vt"] = self.visibility_timeout
        if self.keep_id:
            doc["k"] = self.keep_id
        if self.id_generated:
            doc["g"] = 1
        if self.keep_result:
            doc["r"] = self.keep_result
        if self.attempts_before:
            doc["a"] = self.attempts_before
        if self.fence_before:
            doc["f"] = self.fence_before
        if self.unique_key is not None:
            doc["u"] = self.unique_key
        if self.id_owner:
            doc["n"] = self.id_owner
        if self.priority:
            doc["p"] = self.priority
        if self.limits:
            doc["l"] = [list(limit) for limit in self.limits]
        if self.encoding:
            doc["e"] = self.encoding
        if self.reason:
            doc["dr"] = self.reason
            doc["dt"] = self.died_at
            doc["da"] = self.died_attempt
        if self.error is not None:
            doc["de"] = [self.error.type, self.error.message, self.error.traceback]
        if self.raw:
            doc["raw"] = 1
        return orjson.dumps(doc).decode("utf-8")

    @classmethod
    def loads(cls, text: str) -> Meta:
        doc = orjson.loads(text)
        error = doc.get("de")
        return cls(
            id=doc["id"],
            headers=doc.get("h") or {},
            max_attempts=int(doc.get("ma", 10)),
            visibility_timeout=doc.get("vt"),
            keep_id=float(doc.get("k", 0.0)),
            id_generated=bool(doc.get("g", 0)),
            keep_result=float(doc.get("r", 0.0)),
            enqueued_at=float(doc.get("t", 0.0)),
            attempts_before=int(doc.get("a", 0)),
            fence_before=int(doc.get("f", 0)),
            unique_key=doc.get("u"),
            id_owner=doc.get("n", ""),
            priority=int(doc.get("p", 0)),
            limits=tuple(
                Limit(str(k), kind, int(n), float(per)) for k, kind, n, per in doc.get("l", ())
            ),
            encoding=doc.get("e", TEXT),
            reason=doc.get("dr", ""),
            error=ErrorInfo(error[0], error[1], error[2]) if error else None,
            died_at=float(doc.get("dt", 0.0)),
            died_attempt=int(doc.get("da", 0)),
            raw=bool(doc.get("raw", 0)),
        )


def attributes(meta: Meta, others: dict[str, Any] | None = None) -> dict[str, Any]:
    """MessageAttributes for SendMessage: the user's own (`others`) plus ours."""
    attrs = dict(others) if others else {}
    attrs[ATTRIBUTE] = {"DataType": "String", "StringValue": meta.dumps()}
    return attrs


def attributes_size(attrs: dict[str, Any]) -> int:
    """Bytes SQS counts for message attributes: name + type + value of each."""
    total = 0
    for name, value in attrs.items():
        total += len(name.encode()) + len(value["DataType"].encode())
        if "StringValue" in value:
            total += len(value["StringValue"].encode())
        elif "BinaryValue" in value:
            total += len(value["BinaryValue"])
    return total


def received_meta(message: dict[str, Any]) -> tuple[Meta, dict[str, Any]]:
    """The message's Meta (made up for a raw one) and its other message attributes."""
    attrs = dict(message.get("MessageAttributes") or {})
    ours = attrs.pop(ATTRIBUTE, None)
    if ours is not None and "StringValue" in ours:
        try:
            meta = Meta.loads(ours["StringValue"])
            decode_body(message["Body"], meta.encoding)
            return meta, attrs
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning(
                "sqs: message %s has a %r attribute tasuki cannot read (%s): delivered raw",
                message.get("MessageId"),
                ATTRIBUTE,
                exc,
            )
            attrs[ATTRIBUTE] = ours
    sent = float(message.get("Attributes", {}).get("SentTimestamp", 0)) / 1000.0
    return Meta(id=message["MessageId"], enqueued_at=sent, raw=True), attrs


def stored(env: Envelope, now: float, id_owner: str) -> Meta:
    """What a new message carries in its `tasuki` attribute (its body is encoded apart)."""
    return Meta(
        id=env.id,
        headers=dict(env.headers),
        max_attempts=env.max_attempts,
        visibility_timeout=env.visibility_timeout,
        keep_id=env.keep_id,
        id_generated=env.id_generated,
        keep_result=env.keep_result,
        enqueued_at=now,
        id_owner=id_owner,
        priority=env.priority,
        limits=tuple(env.limits),
    )


def delivery(
    queue: str,
    message: dict[str, Any],
    meta: Meta,
    attempt: int,
    fence: int,
    vt: float,
    token: str | None = None,
) -> Delivery:
    """A received message as leased (`token`: its receipt handle tagged with its
    priority level, queues.level_token; the handle itself by default): its attempt and
    fencing number as counted."""
    return Delivery(
        queue=queue,
        id=meta.id,
        body=decode_body(message["Body"], meta.encoding),
        headers=meta.headers,
        attempt=attempt,
        max_attempts=meta.max_attempts,
        enqueued_at=meta.enqueued_at,
        token=message["ReceiptHandle"] if token is None else token,
        fencing_token=fence,
        visibility_timeout=vt,
    )


def dead_letter(queue: str, message: dict[str, Any], max_receive_count: int) -> DeadLetter:
    """A message received from a dead-letter queue: dead-lettered by tasuki (its reason
    in `tasuki`), or moved there by the queue's redrive policy."""
    meta, _ = received_meta(message)
    attrs = message.get("Attributes", {})
    if meta.reason:
        attempt, died_at = meta.died_attempt, meta.died_at
        reason = describe(meta.reason, attempt, meta.max_attempts)
    else:
        attempt = meta.attempts_before + int(attrs.get("ApproximateReceiveCount", 0))
        reason = (
            f"moved by the SQS redrive policy after {max_receive_count} receives (not by tasuki)"
        )
        died_at = float(attrs.get("SentTimestamp", 0)) / 1000.0
    return DeadLetter(
        id=meta.id,
        queue=queue,
        body=decode_body(message["Body"], meta.encoding),
        headers=meta.headers,
        attempt=attempt,
        reason=reason,
        error=meta.error,
        died_at=died_at,
        enqueued_at=meta.enqueued_at,
    )
