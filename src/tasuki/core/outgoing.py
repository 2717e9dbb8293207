"""A message on its way in, before the backend sees it: still editable by client middleware."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tasuki.core.admission import limits_of
from tasuki.core.codec import Codec
from tasuki.core.envelope import Envelope, Limit
from tasuki.core.message import NOT_BEFORE_HEADER, Message
from tasuki.errors import MessageTooLarge

if TYPE_CHECKING:
    from tasuki.core.job import Job
    from tasuki.core.records import UniqueClaim


@dataclass(slots=True)
class Outgoing:
    """A message being enqueued, still editable by client middleware."""

    queue: str
    id: str
    job: Job[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    max_attempts: int = 10
    visibility_timeout: float | None = None
    keep_id: float = 0.0
    unique: UniqueClaim | None = None
    # The id the producer made for this draft (`new_id`), "" where the id was given. The
    # envelope says the id was made here only while the draft still carries it
    # (`Envelope.id_generated`), so a middleware that gives the message an id of its own
    # needs to say nothing.
    made_id: str = ""
    # 0 (lowest) to 9: the order of the lease (`Envelope.priority`).
    priority: int = 0


class Sealer:
    """Seals drafts into envelopes: encoded, signed, size-checked, with delay hops,
    priority and limits. The producer seals what it enqueues; a worker seals a flow
    step's successors the same way (`runtime/flows.py`)."""

    def __init__(self, codec: Codec, max_message_size: int, max_delay: float | None) -> None:
        self.codec = codec
        self.max_message_size = max_message_size
        self.max_delay = max_delay

    def seal(self, d: Outgoing) -> Envelope:
        codec = self.codec
        headers = d.headers  # the draft's own dict: copied only if something is added
        delay = d.delay
        if self.max_delay is not None and delay > self.max_delay:
            headers = {**headers, NOT_BEFORE_HEADER: repr(time.time() + delay)}
            delay = self.max_delay
        if d.body is None:
            name = d.job.name if d.job else "?"
            body = codec.encode_payload(name, d.args, d.kwargs)
            if codec.content_headers:
                headers = {**headers, **codec.content_headers}
        else:
            body = d.body
        if codec.signs:
            headers = dict(headers)
            codec.sign(d.queue, headers, body)
        size = len(body) + sum(len(k) + len(v) for k, v in headers.items())
        if size > self.max_message_size:
            what = f"job {d.job.name!r}" if d.job else f"queue {d.queue!r}"
            raise MessageTooLarge(
                f"message for {what} is {size:,} bytes; the limit is {self.max_message_size:,} "
                "bytes (pass large data by reference, e.g. a storage key)"
            )
        return Envelope(
            d.queue,
            d.id,
            body,
            headers,
            delay,
            d.max_attempts,
            d.visibility_timeout,
            d.keep_id,
            d.unique,
            priority=d.priority,
            limits=_limits(d, body, headers),
            keep_result=d.job.keep_result if d.job is not None else 0.0,
            id_generated=bool(d.made_id) and d.id == d.made_id,
        )


def _limits(d: Outgoing, body: bytes, headers: Mapping[str, str]) -> tuple[Limit, ...]:
    """The limits the message counts against, keyed from it as the worker will see it."""
    job = d.job
    if job is None or (job.rate_limit is None and job.concurrency_limit is None):
        return ()
    message = Message(
        id=d.id,
        queue=d.queue,
        body=body,
        headers=headers,
        job=None if job.consumer else job.name,
        args=d.args,
        kwargs=d.kwargs,
    )
    return limits_of(job, message)
