"""`sqs://REGION?endpoint_url=URL&prefix=P&locks=LOCK_URL` parsed into `SqsOptions`.

Credentials are never part of the URL: boto3's usual chain finds them (environment,
shared config, instance role), so nothing here can print them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from tasuki.backends.sqs.records.base import RecordLifetimes
from tasuki.backends.urls import query_options
from tasuki.errors import InvalidURL

# SQS's own limits (AWS documentation, "Amazon SQS quotas").
SQS_MAX_DELAY = 900.0  # DelaySeconds of one message
SQS_MAX_VISIBILITY = 43200.0  # 12 hours, counted from the message's first receive
SQS_MAX_WAIT = 20  # WaitTimeSeconds of one long poll
SQS_BATCH = 10  # entries per batch call and messages per ReceiveMessage
SQS_MAX_RETENTION = 1_209_600  # 14 days

# The lease and id records kept in the `locks=` store: a lease record outlives any lease
# (the 12-hour visibility limit, plus a margin); an id record lives as long as SQS keeps
# a message; an acked message's record refuses a late second delivery for 5 minutes.
RECORDS = RecordLifetimes(
    lease=SQS_MAX_VISIBILITY + 600.0, id=float(SQS_MAX_RETENTION), acked=300.0
)


def _positive(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _name_prefix(raw: str) -> str:
    if raw and not all(c.isalnum() or c in "-_" for c in raw):
        raise ValueError("SQS queue names allow letters, digits, '-' and '_' only")
    return raw


@dataclass(frozen=True, slots=True)
class SqsOptions:
    url: str
    region: str
    endpoint_url: str | None = None
    prefix: str = "tasuki-"
    locks: str | None = None
    # Longest delay sent in one go (the runtime hops past it). SQS allows 900 s; tests lower it.
    max_delay: float = SQS_MAX_DELAY
    max_receive_count: int = 1000


def parse_url(url: str) -> SqsOptions:
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqs":
        raise InvalidURL(f"not an sqs:// URL: {url!r}")
    region = parts.hostname or ""
    if not region or parts.username or parts.password:
        raise InvalidURL(
            f"invalid SQS URL {url!r}: expected sqs://REGION?endpoint_url=...&prefix=...&locks=..."
            " (credentials come from boto3's usual chain, never from the URL)"
        )
    options = query_options(
        url,
        {
            "endpoint_url": str,
            "prefix": _name_prefix,
            "locks": str,
            "max_delay": _positive,
            "max_receive_count": int,
        },
    )
    max_delay = float(options.get("max_delay", SQS_MAX_DELAY))  # type: ignore[arg-type]
    if max_delay > SQS_MAX_DELAY:
        raise InvalidURL(f"max_delay={max_delay} in {url!r} is over SQS's {SQS_MAX_DELAY:.0f} s")
    receives = int(options.get("max_receive_count", 1000))  # type: ignore[call-overload]
    if not 1 <= receives <= 1000:
        raise InvalidURL(f"max_receive_count in {url!r} must be 1..1000 (SQS's range)")
    return SqsOptions(
        url=url,
        region=region,
        endpoint_url=options.get("endpoint_url") or None,  # type: ignore[arg-type]
        prefix=str(options.get("prefix", "tasuki-")),
        locks=options.get("locks") or None,  # type: ignore[arg-type]
        max_delay=max_delay,
        max_receive_count=receives,
    )
