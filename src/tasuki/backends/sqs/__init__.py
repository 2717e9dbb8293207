"""The Amazon SQS backend: `sqs://REGION?endpoint_url=URL&prefix=P&locks=LOCK_URL`.

Options (all optional but the region): `endpoint_url` (an SQS-compatible server, e.g. a
local one for tests), `prefix` (SQS queue name prefix, default `tasuki-`), `locks` (a
lock store URL, `sqlite:///...` or `redis://...`, for fencing, the id window and
uniqueness), `max_delay` (longest delay sent in one go, default SQS's 900 s; the runtime
sends longer ones in hops), `max_receive_count` (the redrive policy backstop of new
queues, default 1000).
Credentials come from boto3's usual chain. The mapping and its limits: docs/sqs.md.
"""

from __future__ import annotations

from tasuki.backends.sqs.backend import SqsBackend
from tasuki.backends.sqs.options import SqsOptions, parse_url

__all__ = ["SqsBackend", "SqsOptions", "from_url"]


def from_url(url: str) -> SqsBackend:
    return SqsBackend(parse_url(url))
