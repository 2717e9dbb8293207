"""Between tasuki's records and the Redis scripts' arguments and replies, in one place:
the Redis backend's one codec, read as `codec.NAME` by whatever calls a script.

- `messages.py`, out: an `Envelope` becomes `enqueue.lua`'s fields of one message, a
  `Settle` `settle.lua`'s fields of one item (its workflow effects included), a `Keep`
  `keep.lua`'s.
- `replies.py`, in: each script that returns records declares their fields in its
  header, `--- @reply NAME: field field ...`, and each record is read by a reader whose
  positional parameters are those fields, by name, in that order: a `leased` record
  becomes a `Delivery`, a `dead_letter` a `DeadLetter`, `in_flight` and `message`
  records a `MessageInfo`; a result record a `ResultRecord`.
- `values.py`: single values, written and read the same way. Times in Redis are whole
  microseconds (TTLs milliseconds); here, seconds.
"""

from __future__ import annotations

from tasuki.backends.redis.codec.messages import (
    effects_args,
    enqueue_call,
    enqueued,
    keep_args,
    limits_json,
    message_fields,
    sections,
    settle_args,
    settle_keys,
)
from tasuki.backends.redis.codec.replies import (
    dead_letter,
    dead_letters,
    deliveries,
    fields_of,
    history,
    in_flight,
    leased,
    leases_in_flight,
    listed,
    message,
    message_info,
    records,
    result_record,
    stats,
    step,
    total,
    worker,
)
from tasuki.backends.redis.codec.values import (
    headers_json,
    headers_of,
    ms,
    progress_json,
    progress_of,
    us,
)

__all__ = [
    "dead_letter",
    "dead_letters",
    "deliveries",
    "effects_args",
    "enqueue_call",
    "enqueued",
    "fields_of",
    "headers_json",
    "headers_of",
    "history",
    "in_flight",
    "keep_args",
    "leased",
    "leases_in_flight",
    "limits_json",
    "listed",
    "message",
    "message_fields",
    "message_info",
    "ms",
    "progress_json",
    "progress_of",
    "records",
    "result_record",
    "sections",
    "settle_args",
    "settle_keys",
    "stats",
    "step",
    "total",
    "us",
    "worker",
]
