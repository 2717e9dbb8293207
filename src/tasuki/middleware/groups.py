"""`@app.job(group=...)`: the FIFO message group of a job's messages on `.fifo` SQS queues.

The App installs it with the first job that names a `group=` (or install it yourself,
where the chain should have it). `group=` is a string (every
message of the job in that group) or a callable given the call's args and kwargs (one
group per customer, say: `group=lambda args, kwargs: f"customer-{kwargs['customer']}"`).
It sets the `tasuki-group` header, which the SQS backend sends as `MessageGroupId`;
without it a job's messages form one group per job name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tasuki.core.message import GROUP_HEADER
from tasuki.core.records import Enqueued
from tasuki.errors import InvalidArgument
from tasuki.middleware.base import EnqueueNext, Middleware, Outgoing

Group = str | Callable[[tuple[Any, ...], Mapping[str, Any]], str]


class MessageGroups(Middleware):
    options = frozenset({"group"})

    def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
        for message in messages:
            job = message.job
            if job is None:
                continue
            group: Group | None = job.extra.get("group")
            if group is None or GROUP_HEADER in message.headers:
                continue
            value = group if isinstance(group, str) else group(message.args, message.kwargs)
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"group= of job {job.name!r} gave {value!r}, not a name")
            message.headers = {**message.headers, GROUP_HEADER: value}
        return call_next(messages)
