"""A message on its way in: what a producer hands a backend, and what it answers.

Apart from `records.py` so that the records of results and workflows
(`core/flowrecords.py`), which carry messages to enqueue, and the settle records, which
carry those, import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class UniqueClaim(NamedTuple):
    """Take lock `key` for the message being enqueued, atomically with the enqueue.

    If a live holder exists the message is not stored; with `replace`, a holder that is
    still waiting gets the new body and headers.
    """

    key: str
    ttl: float
    replace: bool = False


LimitKind = Literal["rate", "concurrency"]


class Limit(NamedTuple):
    """A limit a message counts against, admitted by the backend at lease time.

    `key` is complete (the runtime made it from the job's `key=` callable, or the job's
    name, and the kind). "rate": at most `limit` leases start in any window of `per`
    seconds. "concurrency": at most `limit` live leases hold `key` at once (`per` unused).
    """

    key: str
    kind: LimitKind
    limit: int
    per: float = 0.0


class Envelope(NamedTuple):
    """A message on its way in, with the per-message settings the backend enforces.

    A named tuple, not a dataclass: bulk enqueue builds tens of thousands a second.
    `headers` must not be mutated (the default is shared). `priority` (0-9) orders the
    lease; `limits` are admitted at lease time; `keep_result` > 0 makes the backend keep
    a result record for the message (pending now, its outcome once settled, for that many
    seconds after). `id_generated`: the producer made the id for this enqueue
    (`core.message.new_id`), so no other enqueue offers it: any second copy of the
    message is a duplicate (SQS deletes one met after the ack: `backends/sqs/codec.py`).
    """

    queue: str
    id: str
    body: bytes
    headers: Mapping[str, str] = _NO_HEADERS
    delay: float = 0.0
    max_attempts: int = 10
    visibility_timeout: float | None = None
    keep_id: float = 0.0
    unique: UniqueClaim | None = None
    priority: int = 0
    limits: tuple[Limit, ...] = ()
    keep_result: float = 0.0
    id_generated: bool = False


EnqueueStatus = Literal["enqueued", "duplicate", "conflict", "replaced"]


class Enqueued(NamedTuple):
    """Result of one enqueue.

    `duplicate`: the id was already known (queued, in flight, dead, or finished within
    its window) and nothing changed. `conflict` / `replaced`: a unique claim met a live
    holder; `id` is then the holder's id, the message that will do the work.
    """

    id: str
    status: EnqueueStatus
