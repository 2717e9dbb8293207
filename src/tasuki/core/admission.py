"""Admission a job is declared with: its priority and its limits (what decides when a
lease may take its message), checked once at
declaration and turned into what each message carries (`Envelope.priority`, `.limits`).

A limit's key is made here, at enqueue, from the job's `key=` callable on the Message:
`<kind>:<scope>` or `<kind>:<scope>:<user key>`, where the scope is the limit's `name`
or, by default, the job's name (with `%` and `:` escaped, so that no job name and key
can spell another's). Two jobs therefore share a limit only when they say so, by naming
it alike, and a rate limit never shares a key with a concurrency limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tasuki.core.capabilities import DROP_IT, Capabilities, require
from tasuki.core.message import Message
from tasuki.core.policies import (
    MAX_LIMIT_KEY,
    ConcurrencyLimit,
    KeyFunc,
    RateLimit,
    check_priority,
)
from tasuki.core.records import Limit, LimitKind
from tasuki.errors import ConfigurationError, InvalidArgument

if TYPE_CHECKING:
    from tasuki.core.job import Job

OPTIONS = frozenset({"priority", "rate_limit", "concurrency_limit"})

# A rate is admitted at lease time, in the backend, and the job starts a little later, on
# its worker (the lease's reply, the hand-off to a thread or process, the middleware): a
# batch that took 0.1 s longer to start than the next one put two windows' starts in
# one. `RateLimit(n, per=s)` promises at most n *starts* in any window of s seconds, so
# each admission holds its token for s plus this margin: starts then never crowd closer
# than the admissions did, as long as each starts within the margin of its admission.
START_MARGIN = 0.25


class AdmissionOptions(NamedTuple):
    priority: int = 0
    rate_limit: RateLimit | None = None
    concurrency_limit: ConcurrencyLimit | None = None


def admission_options(
    job: str, options: Mapping[str, Any], caps: Capabilities, scheme: str
) -> AdmissionOptions:
    """The job's admission options, validated; refused where the backend lacks them."""
    priority = check_priority(options.get("priority", 0))
    rate = options.get("rate_limit")
    if rate is not None and not isinstance(rate, RateLimit):
        raise InvalidArgument(f"rate_limit must be a tasuki.RateLimit or None, got {rate!r}")
    concurrency = options.get("concurrency_limit")
    if concurrency is not None and not isinstance(concurrency, ConcurrencyLimit):
        raise InvalidArgument(
            f"concurrency_limit must be a tasuki.ConcurrencyLimit or None, got {concurrency!r}"
        )
    for wanted, option, capability in (
        (priority != 0, "priority", "priorities"),
        (rate is not None, "rate_limit", "rate_limits"),
        (concurrency is not None, "concurrency_limit", "concurrency_limits"),
    ):
        if wanted:
            require(caps, scheme, capability, f"run job {job!r} with {option}=", DROP_IT)
    return AdmissionOptions(priority, rate, concurrency)


def check_aging(seconds: object) -> float:
    """`App(priority_aging=)`: seconds of waiting that count as one priority level."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise InvalidArgument(f"priority_aging must be a number of seconds > 0, got {seconds!r}")
    if seconds == float("inf"):
        raise InvalidArgument("priority_aging must be finite (a large number never ages)")
    return float(seconds)


def scope_of(job: str, name: str | None) -> str:
    """The part of a limit's key that says whose limit it is (see the module docstring)."""
    return _escape(job if name is None else name)


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def limits_of(job: Job[..., Any], message: Message) -> tuple[Limit, ...]:
    """The limits one message of `job` counts against, their keys made from `message`."""
    out: list[Limit] = []
    rate, concurrency = job.rate_limit, job.concurrency_limit
    if rate is not None:
        key = _key("rate", job, rate.name, rate.key, message)
        out.append(Limit(key, "rate", rate.n, rate.per + START_MARGIN))
    if concurrency is not None:
        key = _key("concurrency", job, concurrency.name, concurrency.key, message)
        out.append(Limit(key, "concurrency", concurrency.n))
    return tuple(out)


def _key(
    kind: LimitKind, job: Job[..., Any], name: str | None, key: KeyFunc | None, message: Message
) -> str:
    # The queue is part of the key: a limit's state lives beside its queue's messages, so
    # a backend admits in one atomic step even where queues live apart (Redis Cluster).
    base = f"{kind}:{_escape(message.queue)}:{scope_of(job.name, name)}"
    if key is None:
        return base
    try:
        user = key(message)
    except Exception as exc:
        raise InvalidArgument(
            f"the {kind} limit key of job {job.name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(user, str) or not user or len(user) > MAX_LIMIT_KEY:
        raise InvalidArgument(
            f"the {kind} limit key of job {job.name!r} must return a non-empty str of at most "
            f"{MAX_LIMIT_KEY} chars, got {user!r}"
        )
    return f"{base}:{user}"


def check_shared(job: str, wanted: AdmissionOptions, others: Iterable[Job[..., Any]]) -> None:
    """Jobs that share a named limit must agree on it: the backend holds one per key."""
    for other in others:
        for mine, theirs in (
            (wanted.rate_limit, other.rate_limit),
            (wanted.concurrency_limit, other.concurrency_limit),
        ):
            if mine is None or theirs is None or mine.name is None or mine.name != theirs.name:
                continue
            if _numbers(mine) != _numbers(theirs):
                raise ConfigurationError(
                    f"job {job!r} shares the limit named {mine.name!r} with job {other.name!r} "
                    f"but declares it otherwise ({_numbers(mine)} vs {_numbers(theirs)}); "
                    "give both the same numbers"
                )


def _numbers(limit: RateLimit | ConcurrencyLimit) -> str:
    if isinstance(limit, RateLimit):
        return f"{limit.n} per {limit.per:g}s"
    return f"{limit.n} at once"
